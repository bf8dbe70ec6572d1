"""The HPCC-simulator input files of the mvopt-vs-HPCC comparison (experiments/hpcc_ref/compare.py).

A scenario is a topology (k=8 fat-tree or 2:1 leaf-spine, 100 Gb/s links of 1 us), a flow list
and a congestion-control setting; :func:`write_run` writes the three files the HPCC simulator's
``third`` program and ``mvopt simulate --hpcc-*`` both read (topology.txt, flow.txt, config.txt,
plus the empty trace.txt ``third`` opens).

Congestion-control settings (:data:`SETTINGS`): the HPCC repository's ``simulation/run.py`` presets
``dcqcn``, ``hp`` and ``dctcp`` at ``--bw 100`` (their values as run.py computes them, Python 2
integer division), and its shipped ``simulation/mix/config.txt`` with CC_MODE 1, 3 or 8.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Topology", "Flow", "Scenario", "fat_tree", "leaf_spine", "incast", "permutation", "all_to_all",
           "ring", "mixed", "SETTINGS", "config_text", "write_run", "scenarios"]

KB = 1000
MB = 1000 * KB
LINK = "100Gbps 0.001ms 0"          # rate, delay, error rate of every link
START_S = 2.0                         # flows start at 2 s, as the HPCC repository's traffic generator
PG, DPORT = 3, 100                    # priority group and destination port of every flow (its mix/flow.txt)


@dataclass(frozen=True)
class Topology:
    """An HPCC topology.txt: hosts are nodes 0..n_host-1, switches the ids after them."""

    name: str
    n_host: int
    n_switch: int
    links: tuple[tuple[int, int], ...]
    hosts_per_tor: int

    def text(self) -> str:
        n = self.n_host + self.n_switch
        lines = [f"{n} {self.n_switch} {len(self.links)}",
                 " ".join(str(s) for s in range(self.n_host, n))]
        lines += [f"{a} {b} {LINK}" for a, b in self.links]
        return "\n".join(lines) + "\n"


def fat_tree(k: int = 8) -> Topology:
    """k-ary fat-tree: k^3/4 hosts, k^2/2 edge, k^2/2 aggregation and k^2/4 core switches."""
    half = k // 2
    n_host = k ** 3 // 4
    edge0, agg0 = n_host, n_host + k * half
    core0 = agg0 + k * half
    links = []
    for h in range(n_host):
        links.append((h, edge0 + h // half))
    for pod in range(k):
        for e in range(half):
            for a in range(half):
                links.append((edge0 + pod * half + e, agg0 + pod * half + a))
    for pod in range(k):
        for a in range(half):
            for c in range(half):
                links.append((agg0 + pod * half + a, core0 + a * half + c))
    return Topology(f"fat-tree k={k}", n_host, core0 + half * half - n_host, tuple(links), half)


def leaf_spine(leaves: int = 8, hosts_per_leaf: int = 16, spines: int = 8) -> Topology:
    """Two-tier leaf-spine; with equal link rates the oversubscription is hosts_per_leaf : spines."""
    n_host = leaves * hosts_per_leaf
    leaf0, spine0 = n_host, n_host + leaves
    links = [(h, leaf0 + h // hosts_per_leaf) for h in range(n_host)]
    links += [(leaf0 + lf, spine0 + s) for lf in range(leaves) for s in range(spines)]
    return Topology(f"leaf-spine {hosts_per_leaf // spines}:1" if hosts_per_leaf % spines == 0 else "leaf-spine",
                    n_host, leaves + spines, tuple(links), hosts_per_leaf)


# ------------------------------------------------------------------------------------ flows


@dataclass(frozen=True)
class Flow:
    src: int
    dst: int
    size_bytes: int
    start_s: float = START_S


def incast(topo: Topology, n_senders: int, size: int, seed: int = 1) -> list[Flow]:
    """n_senders -> host 0, the senders drawn at random among the other hosts; PFC does the rest."""
    senders = random.Random(seed).sample(range(1, topo.n_host), n_senders)
    return [Flow(s, 0, size) for s in senders]


def permutation(topo: Topology, size: int, seed: int = 1) -> list[Flow]:
    """Every host sends to another, each receives once (a random derangement)."""
    rng = random.Random(seed)
    hosts = list(range(topo.n_host))
    while True:
        dst = hosts[:]
        rng.shuffle(dst)
        if all(a != b for a, b in zip(hosts, dst)):
            return [Flow(a, b, size) for a, b in zip(hosts, dst)]


def _spread(topo: Topology, n: int) -> list[int]:
    """n hosts spread over the topology: one per top-of-rack switch first."""
    per = topo.hosts_per_tor
    order = sorted(range(topo.n_host), key=lambda h: (h % per, h // per))
    return order[:n]


def all_to_all(topo: Topology, n_hosts: int, size: int) -> list[Flow]:
    """Each of n_hosts (spread over the racks) sends `size` bytes to every other."""
    hosts = _spread(topo, n_hosts)
    return [Flow(a, b, size) for a in hosts for b in hosts if a != b]


def ring(topo: Topology, n_hosts: int, size: int, seed: int = 1) -> list[Flow]:
    """One step of a ring all-reduce over n_hosts in a random order (HPCC's flow files carry no
    dependencies, so the step's flows start together)."""
    hosts = random.Random(seed).sample(range(topo.n_host), n_hosts)
    return [Flow(a, hosts[(i + 1) % n_hosts], size) for i, a in enumerate(hosts)]


def mixed(topo: Topology, n_flows: int, lo: int, hi: int, spread_s: float, seed: int = 1) -> list[Flow]:
    """n_flows between random host pairs, sizes log-uniform in [lo, hi] bytes, starts uniform over
    `spread_s` seconds (rounded to the nanosecond)."""
    rng = random.Random(seed)
    flows = []
    for _ in range(n_flows):
        a, b = rng.sample(range(topo.n_host), 2)
        size = int(round(lo * (hi / lo) ** rng.random()))
        start = START_S + round(rng.uniform(0, spread_s) * 1e9) / 1e9
        flows.append(Flow(a, b, size, start))
    return sorted(flows, key=lambda f: f.start_s)      # third.cc reads flows in start order


def flow_text(flows: list[Flow]) -> str:
    lines = [str(len(flows))]
    lines += [f"{f.src} {f.dst} {PG} {DPORT} {f.size_bytes} {f.start_s:.9f}" for f in flows]
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------------ config.txt

_BW = 100                                        # run.py --bw
_COMMON = {                                      # run.py's template, values that no preset changes
    "ENABLE_QCN": "1", "USE_DYNAMIC_PFC_THRESHOLD": "1", "PACKET_PAYLOAD_SIZE": "1000",
    "SIMULATOR_STOP_TIME": "4.00", "CLAMP_TARGET_RATE": "0", "FAST_RECOVERY_TIMES": "1",
    "MIN_RATE": "1000Mb/s", "ERROR_RATE_PER_LINK": "0.0000", "L2_CHUNK_SIZE": "4000", "L2_ACK_INTERVAL": "1",
    "L2_BACK_TO_ZERO": "0", "GLOBAL_T": "1", "MI_THRESH": "0", "U_TARGET": "0.95", "MULTI_RATE": "0",
    "SAMPLE_FEEDBACK": "0", "PINT_LOG_BASE": "1.01", "PINT_PROB": "1.0", "RATE_BOUND": "1", "LINK_DOWN": "0 0 0",
    "ENABLE_TRACE": "0", "BUFFER_SIZE": str(16 * _BW // 50),
    "KMAX_MAP": f"2 {_BW * 10**9} {400 * _BW // 25} {_BW * 4 * 10**9} {400 * _BW * 4 // 25}",
    "KMIN_MAP": f"2 {_BW * 10**9} {100 * _BW // 25} {_BW * 4 * 10**9} {100 * _BW * 4 // 25}",
    "PMAX_MAP": f"2 {_BW * 10**9} 0.20 {_BW * 4 * 10**9} 0.20",
}
_DCQCN = {"CC_MODE": "1", "ALPHA_RESUME_INTERVAL": "1", "RATE_DECREASE_INTERVAL": "4", "RP_TIMER": "300",
          "EWMA_GAIN": "0.00390625", "RATE_AI": f"{5 * _BW // 25}Mb/s", "RATE_HAI": f"{50 * _BW // 25}Mb/s",
          "DCTCP_RATE_AI": "1000Mb/s", "HAS_WIN": "0", "VAR_WIN": "0", "FAST_REACT": "0", "INT_MULTI": "1",
          "ACK_HIGH_PRIO": "1"}
_HP = {"CC_MODE": "3", "ALPHA_RESUME_INTERVAL": "1", "RATE_DECREASE_INTERVAL": "4", "RP_TIMER": "300",
       "EWMA_GAIN": "0.00390625", "RATE_AI": f"{10 * _BW // 25}Mb/s", "RATE_HAI": f"{10 * _BW // 25}Mb/s",
       "DCTCP_RATE_AI": "1000Mb/s", "HAS_WIN": "1", "VAR_WIN": "1", "FAST_REACT": "1",
       "INT_MULTI": str(_BW // 25), "ACK_HIGH_PRIO": "0"}
_DCTCP = {"CC_MODE": "8", "ALPHA_RESUME_INTERVAL": "1", "RATE_DECREASE_INTERVAL": "4", "RP_TIMER": "300",
          "EWMA_GAIN": "0.0625", "RATE_AI": "10Mb/s", "RATE_HAI": "10Mb/s", "DCTCP_RATE_AI": "615Mb/s",
          "HAS_WIN": "1", "VAR_WIN": "1", "FAST_REACT": "0", "INT_MULTI": "1", "ACK_HIGH_PRIO": "0",
          "KMAX_MAP": f"2 {_BW * 10**9} {30 * _BW // 10} {_BW * 4 * 10**9} {30 * _BW * 4 // 10}",
          "KMIN_MAP": f"2 {_BW * 10**9} {30 * _BW // 10} {_BW * 4 * 10**9} {30 * _BW * 4 // 10}",
          "PMAX_MAP": f"2 {_BW * 10**9} 1.00 {_BW * 4 * 10**9} 1.00"}
# simulation/mix/config.txt of the HPCC repository (CC_MODE 3), its keys and values
_SHIPPED = {
    "ENABLE_QCN": "1", "USE_DYNAMIC_PFC_THRESHOLD": "1", "PACKET_PAYLOAD_SIZE": "1000", "SIMULATOR_STOP_TIME": "4.00",
    "CC_MODE": "3", "ALPHA_RESUME_INTERVAL": "1", "RATE_DECREASE_INTERVAL": "4", "CLAMP_TARGET_RATE": "0",
    "RP_TIMER": "900", "EWMA_GAIN": "0.00390625", "FAST_RECOVERY_TIMES": "1", "RATE_AI": "50Mb/s",
    "RATE_HAI": "100Mb/s", "MIN_RATE": "100Mb/s", "DCTCP_RATE_AI": "1000Mb/s", "ERROR_RATE_PER_LINK": "0.0000",
    "L2_CHUNK_SIZE": "4000", "L2_ACK_INTERVAL": "1", "L2_BACK_TO_ZERO": "0", "HAS_WIN": "1", "GLOBAL_T": "1",
    "VAR_WIN": "1", "FAST_REACT": "1", "U_TARGET": "0.95", "MI_THRESH": "0", "INT_MULTI": "1", "MULTI_RATE": "0",
    "SAMPLE_FEEDBACK": "0", "PINT_LOG_BASE": "1.05", "PINT_PROB": "1.0", "RATE_BOUND": "1", "ACK_HIGH_PRIO": "0",
    "LINK_DOWN": "0 0 0", "ENABLE_TRACE": "1",
    "KMAX_MAP": "3 25000000000 400 50000000000 800 100000000000 1600",
    "KMIN_MAP": "3 25000000000 100 50000000000 200 100000000000 400",
    "PMAX_MAP": "3 25000000000 0.2 50000000000 0.2 100000000000 0.2", "BUFFER_SIZE": "32",
}
# name -> config.txt keys (file keys are added by config_text)
SETTINGS: dict[str, dict[str, str]] = {
    "dcqcn": {**_COMMON, **_DCQCN},
    "hp": {**_COMMON, **_HP},
    "dctcp": {**_COMMON, **_DCTCP},
    "shipped-dcqcn": {**_SHIPPED, "CC_MODE": "1"},
    "shipped-hpcc": dict(_SHIPPED),
    "shipped-dctcp": {**_SHIPPED, "CC_MODE": "8"},
}


def config_text(setting: dict[str, str], folder: Path) -> str:
    """config.txt for the files of `folder` (absolute paths: ``third`` opens them from its cwd)."""
    files = {"TOPOLOGY_FILE": "topology.txt", "FLOW_FILE": "flow.txt", "TRACE_FILE": "trace.txt",
             "TRACE_OUTPUT_FILE": "mix.tr", "FCT_OUTPUT_FILE": "fct_ref.txt", "PFC_OUTPUT_FILE": "pfc.txt",
             "QLEN_MON_FILE": "qlen.txt"}
    keys = {k: str(folder / v) for k, v in files.items()}
    keys.update(setting)
    keys.setdefault("QLEN_MON_START", "2000000000")
    keys.setdefault("QLEN_MON_END", "2000000000")
    return "".join(f"{k} {v}\n" for k, v in keys.items())


# ------------------------------------------------------------------------------------ scenarios


@dataclass(frozen=True)
class Scenario:
    name: str               # e.g. "ft-incast31"
    topo: Topology
    flows: tuple[Flow, ...]
    note: str


def scenarios(scale: float = 1.0) -> list[Scenario]:
    """The comparison's flow scenarios; `scale` multiplies every flow size (1: the sizes of
    docs/validation.md)."""
    ft, ls = fat_tree(8), leaf_spine(8, 16, 8)
    one = leaf_spine(2, 4, 1)           # two racks through one spine: minimal cases

    def s(n: float) -> int:
        return max(1, int(n * scale))

    out = [
        Scenario("ft-incast31", ft, tuple(incast(ft, 31, s(500 * KB))), "31 -> 1, 500 KB each"),
        Scenario("ft-incast63", ft, tuple(incast(ft, 63, s(250 * KB), seed=2)), "63 -> 1, 250 KB each"),
        Scenario("ft-permutation", ft, tuple(permutation(ft, s(1 * MB))), "128 hosts, 1 MB each"),
        Scenario("ft-alltoall", ft, tuple(all_to_all(ft, 16, s(100 * KB))), "16 hosts (one per rack), 100 KB each"),
        Scenario("ft-ring", ft, tuple(ring(ft, 32, s(2 * MB))), "one step, 32 hosts in random order, 2 MB each"),
        Scenario("ft-mixed", ft, tuple(mixed(ft, 64, s(64 * KB), s(16 * MB), 200e-6)),
                 "64 flows, 64 KB..16 MB log-uniform, starts over 200 us"),
        Scenario("ls-incast31", ls, tuple(incast(ls, 31, s(500 * KB), seed=3)), "31 -> 1, 500 KB each"),
        Scenario("ls-permutation", ls, tuple(permutation(ls, s(1 * MB), seed=2)), "128 hosts, 1 MB each"),
        Scenario("ls-mixed", ls, tuple(mixed(ls, 64, s(64 * KB), s(16 * MB), 200e-6, seed=2)),
                 "64 flows, 64 KB..16 MB log-uniform, starts over 200 us"),
        Scenario("one-lone", one, (Flow(0, 4, s(1 * MB)),), "two racks of 4 hosts, one spine: one 1 MB flow"),
        Scenario("one-bidir", one, tuple(Flow(a, b, s(1 * MB)) for a, b in ((0, 4), (1, 5), (4, 0), (5, 1))),
                 "two racks of 4 hosts, one spine: two 1 MB flows each way through it"),
    ]
    return out


def write_run(folder: Path, sc: Scenario, setting: dict[str, str]) -> Path:
    """Write topology.txt, flow.txt, trace.txt and config.txt of one run into `folder`; returns
    the config's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "topology.txt").write_text(sc.topo.text())
    (folder / "flow.txt").write_text(flow_text(list(sc.flows)))
    (folder / "trace.txt").write_text("0\n")
    cfg = folder / "config.txt"
    cfg.write_text(config_text(setting, folder.resolve()))
    return cfg
