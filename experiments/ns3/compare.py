"""Run mvopt and ns-3 on the same scenarios and print a side-by-side table.

    python experiments/ns3/compare.py                  # every scenario, small sizes (~2 min on 2 cores)
    python experiments/ns3/compare.py --only exact     # the line-rate and routed scenarios only
    python experiments/ns3/compare.py --scale 4        # 4x the bytes
    python experiments/ns3/compare.py --write-docs     # also put the tables into docs/validation.md

Each scenario is an mvopt configuration (built with ``build_experiment(load_config(...))``); the
same topology (ports, rates, delays), routing tables, ECMP seed and task graph are written to a
text file that ``mvopt_ns3`` (experiments/ns3/mvopt_ns3.cc, compiled by build.py) simulates.

* **exact** (``cc: none``): single flows across 2, 4 and 6 hops of a k=4 fat-tree and a
  host-order ring all-reduce over every host of a k=4 and a k=8 fat-tree (one chunk of S/n per
  step, step t+1 sent when step t was received). Both simulators must give every flow the same
  start, last-byte delivery and last-ACK time, to the picosecond.
* **routed** (``cc: none``, exact too): data packets routed one by one (``lb: spray``,
  ``adaptive``, per flowlet) with selective repeat, PFC on and off, and a failed
  aggregation-core link; the retransmitted and discarded packet counts are compared as well.
* **contended** (mvopt ``cc: dctcp``, rate-based as RDMA NICs; ns-3 TCP with TcpDctcp and RED/ECN
  switch queues): an incast and a random permutation; total completion and FCT percentiles,
  with ECN mark counts and the bottleneck queue of both. See README.md for the model
  differences these numbers show.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import build as ns3build  # noqa: E402  (experiments/ns3/build.py)

from mvopt.build import build_experiment  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt._cfg.algorithms import LOAD_BALANCERS, TRANSPORTS  # noqa: E402
from mvopt.engine import FLOW, simulate  # noqa: E402
from mvopt.engine.routes import down_epochs, links_down  # noqa: E402

DOC = REPO / "docs" / "validation.md"
NET_EXACT = {"cc": "none", "lb": "ecmp", "payload_bytes": 1000, "header_bytes": 48, "ack_bytes": 60,
             "ecn": {"enabled": False}}


# ------------------------------------------------------------------------------------ scenarios


@dataclass
class Scenario:
    name: str
    mode: str                    # exact | tcp
    config: dict
    note: str = ""
    traced: tuple[int, ...] = ()  # tcp: ports whose queue is sampled (the bottleneck)
    extra: dict = field(default_factory=dict)


def fat_tree(k: int) -> dict:
    return {"topology": "fat_tree", "k": k, "link_gbps": [100], "link_delay_ns": [1000]}


def ring_config(k: int, step: int, net: dict, hosts: list[int] | None = None, failed=(), down=()) -> dict:
    """A ring all-reduce over every host of a k-ary fat-tree, one chunk of ``step`` bytes per step."""
    n = k**3 // 4
    coll = {"op": "all_reduce", "bytes": n * step, "channels": 1}
    if hosts is not None:
        coll["hosts"] = hosts
    cluster = fat_tree(k) | ({"failed_links": [list(x) for x in failed]} if failed else {}) \
        | ({"link_down": [list(x) for x in down]} if down else {})
    return {"name": f"ring{k}", "cluster": cluster, "network": net, "workload": {"kind": "collective"},
            "collective": coll}


def shuffled(k: int, seed: int = 1) -> list[int]:
    """Every host of a k-ary fat-tree in a random ring order: most ring neighbours are in other
    pods, so flows share links and a flow's packets routed one by one meet others' in queues."""
    return [int(h) for h in np.random.default_rng(seed).permutation(k**3 // 4)]


# per-packet routing: spraying and adaptive routing with selective repeat (their default
# transport); PFC is on by default, so reordering is never taken for loss
NET_SPRAY = NET_EXACT | {"lb": "spray", "transport": "sr"}
NET_ADAPTIVE = NET_EXACT | {"lb": "adaptive", "transport": "sr"}
NO_PFC = {"pfc": {"enabled": False}}
FAILED = ((2, 0),)     # tier 2 (aggregation-core), the first such link: failed from time 0


def exact_scenarios(scale: float) -> list[Scenario]:
    size = int(100_007 * scale)            # 101 packets, the last one short (7 B)
    out = []
    for dst, hops, where in ((1, 2, "same edge"), (2, 4, "same pod"), (4, 6, "other pod")):
        out.append(Scenario(
            f"single flow, {hops} hops", "exact",
            {"name": f"single{hops}", "cluster": fat_tree(4), "network": NET_EXACT,
             "workload": {"kind": "tasks", "tasks": [{"id": "f", "src": 0, "dst": dst, "bytes": size}]}},
            note=f"{size} B, host 0 -> {dst} ({where})"))
    for k, step in ((4, int(32_000 * scale)), (8, int(4_000 * scale))):
        n = k**3 // 4
        out.append(Scenario(
            f"ring all-reduce, k={k} fat-tree", "exact",
            {"name": f"ring{k}", "cluster": fat_tree(k), "network": NET_EXACT,
             "workload": {"kind": "collective"},
             "collective": {"op": "all_reduce", "bytes": n * step, "channels": 1}},
            note=f"{n} hosts, S = {n * step} B, {2 * (n - 1)} steps of {step} B"))
    return out


def routed_scenarios(scale: float) -> list[Scenario]:
    """Per-packet routing (spraying, adaptive) with selective repeat, and a failed link."""
    size = int(100_007 * scale)
    steps = {4: int(32_000 * scale), 8: int(4_000 * scale)}
    out = []
    for dst, hops in ((2, 4), (4, 6)):
        out.append(Scenario(
            f"spray + SR, single flow, {hops} hops", "exact",
            {"name": f"spray{hops}", "cluster": fat_tree(4), "network": NET_SPRAY,
             "workload": {"kind": "tasks", "tasks": [{"id": "f", "src": 0, "dst": dst, "bytes": size}]}},
            note=f"{size} B, host 0 -> {dst}"))

    def ring(label: str, k: int, net: dict, failed=(), note: str = "", down=()) -> None:
        n = k**3 // 4
        out.append(Scenario(
            f"{label}, ring k={k}", "exact", ring_config(k, steps[k], net, shuffled(k), failed, down),
            note=f"{n} hosts in a random ring order (seed 1), {2 * (n - 1)} steps of {steps[k]} B" + note))

    for k in (4, 8):
        ring("spray + SR", k, NET_SPRAY)
    ring("spray + SR, PFC off", 4, NET_SPRAY | NO_PFC, note="; reordering by 3 packets is taken for loss")
    for k in (4, 8):
        ring("adaptive + SR", k, NET_ADAPTIVE)
    ring("adaptive + SR, PFC off", 4, NET_ADAPTIVE | NO_PFC, note="; reordering by 3 packets is taken for loss")
    ring("adaptive per flowlet (gap 1 us) + SR", 4, NET_ADAPTIVE | {"flowlet_gap_ns": 1000})
    for k in (4, 8):
        ring("ECMP, failed agg-core link", k, NET_EXACT, FAILED, note="; link (tier 2, index 0) failed")
    ring("spray + SR, failed agg-core link", 4, NET_SPRAY, FAILED, note="; link (tier 2, index 0) failed")
    ring("ECMP, agg-core link down at t = 0", 4, NET_EXACT, note="; cluster.link_down [2, 0, 0]",
         down=((2, 0, 0),))
    return out


# the contended scenarios: DCTCP on both sides with mvopt's defaults (ECN step at K = kmin = kmax,
# g = 1/16); headers sized as ns-3 TCP without options (PPP 2 + IPv4 20 + TCP 20 = 42 B; a pure
# ACK is 42 B); PFC off (ns-3 has none)


def net_dctcp() -> dict:
    return {"cc": "dctcp", "lb": "ecmp", "payload_bytes": 1000, "header_bytes": 42, "ack_bytes": 42,
            "pfc": {"enabled": False}}


def contended_scenarios(scale: float, seed: int = 1) -> list[Scenario]:
    size = int(1_000_000 * scale)
    out = []
    senders = list(range(1, 16))
    tasks = [{"id": f"s{s}", "src": s, "dst": 0, "bytes": size} for s in senders]
    out.append(Scenario(
        "incast 15 -> 1, k=4 fat-tree", "tcp",
        {"name": "incast", "cluster": fat_tree(4), "network": net_dctcp(),
         "workload": {"kind": "tasks", "tasks": tasks}},
        note=f"hosts 1..15 send {size} B each to host 0 at t=0"))
    rng = np.random.default_rng(seed)
    n = 16
    while True:
        perm = rng.permutation(n)
        if not (perm == np.arange(n)).any():
            break
    tasks = [{"id": f"p{i}", "src": i, "dst": int(perm[i]), "bytes": size} for i in range(n)]
    out.append(Scenario(
        "permutation, k=4 fat-tree", "tcp",
        {"name": "permutation", "cluster": fat_tree(4), "network": net_dctcp(),
         "workload": {"kind": "tasks", "tasks": tasks}},
        note=f"every host sends {size} B to a distinct other host (random derangement, seed {seed})"))
    return out


# ------------------------------------------------------------------------------------ ns-3 side


def write_scenario(path: Path, exp, mode: str, traced: tuple[int, ...] = (), stock: int = 0,
                   data_first: bool = False, negative: str = "") -> None:
    topo, net, g, p = exp.topology, exp.network, exp.tasks, exp.params
    # links down from time 0 (cluster.link_down at 0): they keep their ports, routing avoids them
    down = links_down(topo)
    assert all(at == 0 for at, _, _ in down), "ns-3 side: links going down during the run are not reproduced"
    routing = down_epochs(topo)[-1] if down else topo
    assert not getattr(exp, "paths", None), "ns-3 side: explicit paths are not reproduced"
    lines = [f"mode {mode}", f"seed {exp.seed}", f"window_ps {p.window_ps}", f"stop_ps {exp.time_limit_ps}",
             f"net {net.payload_bytes} {net.header_bytes} {net.ack_bytes}",
             f"lb {LOAD_BALANCERS[p.lb]}", f"transport {TRANSPORTS[p.transport]}", f"pfc {int(p.pfc)}",
             f"flowlet_ps {p.flowlet_ps}"]
    if negative:
        lines.append(f"negative {negative}")
    if mode == "tcp":
        kmin, kmax = int(p.port_kmin.max()), int(p.port_kmax.max())
        assert kmin == kmax and (p.port_kmin == kmin).all(), "ns-3 side: one step threshold for every port"
        k = kmin
        buffer = int(p.sw_buffer.max())       # per port in ns-3 (mvopt: shared per switch)
        lines.append(f"tcp {k} {net.dctcp.g} {net.rto_us} {buffer} {WARMUP_PS} {stock}")
        for t in np.flatnonzero(g.kind == FLOW):
            # mvopt's window in segments: ns-3's initial cwnd and ssthresh (no slow start)
            lines.append(f"iw {t} {max(1, -(-int(p.flow_win_bytes[t]) // net.payload_bytes))}")
    if data_first:
        lines.append("data_first 1")
    lines.append(f"nodes {topo.n_host} {topo.n_node}")
    for q in range(topo.n_port):
        lines.append(f"port {q} {topo.port_node[q]} {topo.port_peer_node[q]} {topo.port_peer_port[q]} "
                     f"{topo.port_rate_bps[q]} {topo.port_delay_ps[q]}")
    for sw in range(topo.n_host, topo.n_node):
        for dst in range(topo.n_host):
            nh = routing.next_hop_ports(sw, dst)
            lines.append(f"route {sw} {dst} {len(nh)} " + " ".join(map(str, nh)))
    for t in range(g.n):
        preds = g.preds_of(t)
        lines.append(f"task {t} {0 if g.kind[t] == FLOW else 1} {g.src[t]} {g.dst[t]} {g.size_bytes[t]} "
                     f"{g.duration_ps[t]} {g.start_ps[t]} {len(preds)} " + " ".join(map(str, preds)))
    lines += [f"trace {q}" for q in traced]
    path.write_text("\n".join(lines) + "\n")


WARMUP_PS = 50_000_000   # tcp mode: connections are set up during 50 us before t = 0


@dataclass
class Ns3Result:
    start: np.ndarray
    finish: np.ndarray
    fct_end: np.ndarray
    counters: dict
    qtrace: dict
    qmax: dict
    wall_s: float
    events: int
    discards: np.ndarray      # exact mode: when the receivers discarded a duplicate data packet


def run_ns3(exp, mode: str, traced: tuple[int, ...] = (), binary: Path | None = None,
            keep: str | None = None, stock: int = 0, data_first: bool = False, negative: str = "") -> Ns3Result:
    binary = binary or ns3build.build()
    with tempfile.TemporaryDirectory(prefix="mvopt_ns3_") as tmp:
        path = Path(tmp) / "scenario.txt"
        write_scenario(path, exp, mode, traced, stock, data_first, negative)
        if keep:
            Path(keep).write_text(path.read_text())
        r = subprocess.run([str(binary), str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"mvopt_ns3 failed ({r.returncode}):\n{r.stderr[-3000:]}")
    n = exp.tasks.n
    start, finish, fct_end = (np.full(n, -1, np.int64) for _ in range(3))
    counters, qtrace, qmax, wall, events, discards = {}, {}, {}, 0.0, 0, []
    for line in r.stdout.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "task":
            t = int(f[1])
            start[t], finish[t], fct_end[t] = int(f[2]), int(f[3]), int(f[4])
        elif f[0] == "counter":
            counters[f[1]] = int(f[2])
        elif f[0] == "qtrace":
            qtrace.setdefault(int(f[1]), []).append((int(f[2]), int(f[3])))
        elif f[0] == "discard":
            discards.append(int(f[1]))
        elif f[0] == "qmax":
            qmax[int(f[1])] = int(f[2])
        elif f[0] == "done":
            wall, events = float(f[1]), int(f[2])
    return Ns3Result(start, finish, fct_end, counters, qtrace, qmax, wall, events, np.asarray(discards, np.int64))


# ------------------------------------------------------------------------------------ comparison


def fmt_us(ps: float) -> str:
    return f"{ps / 1e6:,.3f}"


COUNTED = ("data_packets_retransmitted", "out_of_order_packets")   # compared too


def last_window_end(exp, res) -> int:
    """The end of the window in which mvopt's run completed: its counters count what happens
    before it, and nothing after (docs/engine.md: the run stops at the end of that window, while
    ns-3 runs until no event is left). From the reference simulator (checked identical to the
    engine), replaying its window rule ``T <- max(T + W, next event)``."""
    from mvopt.engine.reference import ReferenceSimulator
    nexts: list[int] = []

    class Windows(ReferenceSimulator):
        def _next_event_time(self):
            t = super()._next_event_time()
            nexts.append(t)
            return t

    sim = Windows(exp)
    ref = sim.run()
    assert ref.same_as(res), "reference and engine disagree"
    T = 0
    for t in nexts:
        T = max(T + sim.W, t)
    return T + sim.W


def compare_exact(sc: Scenario, binary: Path, data_first: bool = False, negative: str = "") -> dict:
    exp = build_experiment(load_config(sc.config))
    t0 = time.perf_counter()
    res, = simulate([exp])
    mv_wall = time.perf_counter() - t0
    assert res.status == "done", res.diagnostic
    c = res.counters
    assert c["data_packets_dropped"] == 0 and c["pfc_pauses"] == 0, "exact scenarios must not congest"
    assert c["timeouts"] == 0, "exact scenarios: no retransmission timeout (the ns-3 side has none)"
    ns = run_ns3(exp, "exact", binary=binary, data_first=data_first, negative=negative)
    # duplicates still on their way when mvopt's run ends are never received there; ns-3 drains
    late = ns.discards[ns.discards > res.end_ps]
    cut = last_window_end(exp, res) if late.size else res.end_ps
    ns_counts = {"data_packets_retransmitted": int(ns.counters["data_packets_retransmitted"]),
                 "out_of_order_packets": int((ns.discards < cut).sum())}
    assert ns.counters["out_of_order_packets"] == ns.discards.size
    counts = {k: (int(c[k]), ns_counts[k]) for k in COUNTED}
    flows = res.flow_ids
    mv_fct_end = res.task_start_ps[flows] + res.flow_fct_ps
    d_start = np.abs(res.task_start_ps - ns.start)
    d_fin = np.abs(res.task_finish_ps - ns.finish)
    d_fct = np.abs(mv_fct_end - ns.fct_end[flows])
    exact = int(((d_fin[flows] == 0) & (d_fct == 0) & (d_start[flows] == 0)).sum())
    ns_q = np.zeros(exp.topology.n_port, np.int64)
    for port, b in ns.qmax.items():
        ns_q[port] = b
    switch = exp.topology.port_node >= exp.topology.n_host
    mv_q = np.where(switch, res.port_max_queue_bytes, 0)
    return {
        "scenario": sc.name, "note": sc.note, "flows": len(flows),
        "mv_makespan": int(res.makespan_ps), "ns_makespan": int(ns.finish.max()),
        "mv_end": int(mv_fct_end.max()), "ns_end": int(ns.fct_end[flows].max()),
        "max_d_start": int(d_start.max()), "max_d_finish": int(d_fin.max()), "max_d_fct": int(d_fct.max()),
        "exact": exact, "mv_wall": mv_wall, "ns_wall": ns.wall_s, "ns_events": ns.events,
        "q_equal": int((mv_q == ns_q)[switch].sum()), "q_ports": int(switch.sum()),
        "mv_maxq": int(mv_q.max()), "ns_maxq": int(ns_q.max()), "counts": counts,
        "late": int((ns.discards >= cut).sum()),
        "ok": exact == len(flows) and bool((mv_q == ns_q).all()) and all(a == b for a, b in counts.values()),
    }


def exact_table(rows: list[dict]) -> str:
    out = ["| scenario | flows | last byte delivered, mvopt (us) | ns-3 (us) | last ACK, mvopt (us) | ns-3 (us) "
           "| max abs diff start / delivery / last ACK (ps) | flows identical "
           "| largest switch queue, mvopt / ns-3 (B) | switch ports with equal max queue "
           "| packets retransmitted, mvopt / ns-3 | out-of-order packets discarded, mvopt / ns-3 "
           "| wall mvopt / ns-3 (s) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['scenario']} ({r['note']}) | {r['flows']} | {fmt_us(r['mv_makespan'])} | "
                   f"{fmt_us(r['ns_makespan'])} | {fmt_us(r['mv_end'])} | {fmt_us(r['ns_end'])} | "
                   f"{r['max_d_start']} / {r['max_d_finish']} / {r['max_d_fct']} | "
                   f"{r['exact']}/{r['flows']} | {r['mv_maxq']:,} / {r['ns_maxq']:,} | "
                   f"{r['q_equal']}/{r['q_ports']} | "
                   + " | ".join(f"{a:,} / {b:,}" for a, b in r["counts"].values())
                   + (f" (+ {r['late']:,} after mvopt's last window)" if r["late"] else "")
                   + f" | {r['mv_wall']:.1f} / {r['ns_wall']:.1f} |")
    return "\n".join(out)


def percentiles(x: np.ndarray) -> dict:
    return {q: float(np.percentile(x, q)) for q in (50, 95, 99)} | {"max": float(x.max())}


# ns-3 variants of the contended scenarios: STOCK bits of mvopt_ns3 (1: initial window 10 and slow
# start instead of mvopt's window; 2: ACKs share the FIFO / RED queue with data)
VARIANTS = {0: "ns-3, matched", 1: "+ slow start (IW 10)", 2: "+ ACKs in the data FIFO", 3: "ns-3 stock"}
SAMPLE_PS = 1_000_000       # queue samples every 1 us (both simulators)


WHAT_IF = "mvopt model, ECN at enqueue (what-if)"


def mvopt_queue_trace(exp, port: int, res, enqueue_marking: bool = False):
    """mvopt's data-queue length at ``port`` sampled every 1 us, and the run's result, from the
    reference simulator (docs/engine.md event by event; without ``enqueue_marking`` its results
    are checked identical to the engine's). ``enqueue_marking``: a what-if that is *not* an mvopt
    option, ECN step-marked on the queue an arriving data packet finds (as ns-3's RED) instead of
    on the bytes left behind at dequeue."""
    from mvopt.engine.reference import ReferenceSimulator
    p = exp.params
    if enqueue_marking:
        assert (p.port_kmin == p.port_kmax).all(), "the what-if implements step marking only"

    class Traced(ReferenceSimulator):
        def __init__(self, e) -> None:
            super().__init__(e)
            self.trace = [(0, 0)]
            if enqueue_marking:
                for q in self.ports:
                    if q.node >= self.n_host:
                        q.push_data = self._marking_push(q, q.push_data)

        def _marking_push(self, q, push):
            def marked(pkt) -> None:
                if q.data_bytes > int(p.port_kmax[q.id]) and not pkt.ce:
                    pkt.ce = True
                    self.counters["ecn_marks"] += 1
                push(pkt)
            return marked

        def _ecn_mark(self, q) -> bool:
            return False if enqueue_marking else super()._ecn_mark(q)

        def _switch_dequeue(self, sw, q):
            pkt = super()._switch_dequeue(sw, q)
            if q.id == port:
                self.trace.append((self.now, q.data_bytes))
            return pkt

        def _arrival(self, q, pkt) -> None:
            watched = self.ports[port]
            before = watched.data_bytes
            super()._arrival(q, pkt)
            if watched.data_bytes != before:
                self.trace.append((self.now, watched.data_bytes))

    sim = Traced(exp)
    ref = sim.run()
    assert ref.status == "done", ref.diagnostic
    if not enqueue_marking:
        assert ref.same_as(res), "reference and engine disagree"
    tr = np.asarray(sim.trace, np.int64)
    grid = np.arange(0, int(ref.end_ps) + SAMPLE_PS, SAMPLE_PS)
    i = np.searchsorted(tr[:, 0], grid, side="right") - 1
    return np.stack([grid, tr[i, 1]], axis=1), ref


def queue_stats(trace: np.ndarray, k: int) -> dict:
    if len(trace) == 0:
        return {"peak": 0, "peak_at": 0, "above_k_us": 0}
    j = int(np.argmax(trace[:, 1]))
    return {"peak": int(trace[j, 1]), "peak_at": int(trace[j, 0]),
            "above_k_us": int((trace[:, 1] > k).sum() * SAMPLE_PS // 10**6)}


def lone_flows(exp) -> np.ndarray:
    """Flows whose ECMP path (mvopt's hash, which mvopt_ns3 uses too) shares no link direction
    with another flow's data."""
    from mvopt.engine.params import TAG_ECMP, hash64
    topo, g = exp.topology, exp.tasks
    users: dict[int, list[int]] = {}
    flows = np.flatnonzero(g.kind == FLOW)
    for f in flows:
        port = int(topo.node_port_offset[g.src[f]])
        node = int(topo.port_peer_node[port])
        users.setdefault(port, []).append(int(f))
        while node != g.dst[f]:
            nh = topo.next_hop_ports(node, int(g.dst[f]))
            port = int(nh[hash64(exp.seed, TAG_ECMP, node, int(f)) % len(nh)])
            users.setdefault(port, []).append(int(f))
            node = int(topo.port_peer_node[port])
    shared = {f for u in users.values() if len(u) > 1 for f in u}
    return np.array([f for f in flows if f not in shared], np.int64)


def compare_tcp(sc: Scenario, binary: Path) -> dict:
    """mvopt vs ns-3 with matched settings and with ns-3's stock TCP settings put back."""
    exp = build_experiment(load_config(sc.config))
    topo = exp.topology
    k = int(exp.params.port_kmin.max())
    t0 = time.perf_counter()
    res, = simulate([exp])
    mv_wall = time.perf_counter() - t0
    assert res.status == "done", res.diagnostic
    switch_ports = np.flatnonzero(topo.port_node >= topo.n_host)
    hot = int(switch_ports[np.argmax(res.port_max_queue_bytes[switch_ports])])  # mvopt's bottleneck
    flows = res.flow_ids
    lone = lone_flows(exp)
    pos = {int(f): i for i, f in enumerate(flows)}
    mv_trace, _ = mvopt_queue_trace(exp, hot, res)
    mv_fct = res.flow_fct_ps.astype(float)
    row = {"scenario": sc.name, "note": sc.note, "flows": len(flows), "hot_port": hot, "k": k,
           "lone": len(lone),
           "hot_link": f"switch {topo.port_node[hot]} -> node {topo.port_peer_node[hot]}",
           "runs": {"mvopt": {"total": float(res.task_finish_ps[flows].max()), "fct": percentiles(mv_fct),
                              "lone_fct": float(mv_fct[[pos[f] for f in lone]].mean()) if len(lone) else 0.0,
                              "marks": int(res.counters["ecn_marks"]),
                              "drops": int(res.counters["data_packets_dropped"]),
                              "max_q": int(res.port_max_queue_bytes[switch_ports].max()),
                              "trace": mv_trace, **queue_stats(mv_trace, k), "wall": mv_wall}}}
    wi_trace, wi = mvopt_queue_trace(exp, hot, res, enqueue_marking=True)
    wi_fct = wi.flow_fct_ps.astype(float)
    row["runs"][WHAT_IF] = {"total": float(wi.task_finish_ps[flows].max()), "fct": percentiles(wi_fct),
                            "lone_fct": float(wi_fct[[pos[f] for f in lone]].mean()) if len(lone) else 0.0,
                            "marks": int(wi.counters["ecn_marks"]), "drops": int(wi.counters["data_packets_dropped"]),
                            "max_q": int(wi.port_max_queue_bytes[switch_ports].max()),
                            "trace": wi_trace, **queue_stats(wi_trace, k)}
    for stock, label in VARIANTS.items():
        ns = run_ns3(exp, "tcp", traced=(hot,), binary=binary, stock=stock)
        assert (ns.fct_end[flows] >= 0).all(), f"{sc.name} ({label}): ns-3 flows unfinished"
        fct = (ns.fct_end[flows] - ns.start[flows]).astype(float)
        trace = np.asarray(ns.qtrace.get(hot, []), np.int64).reshape(-1, 2)
        row["runs"][label] = {
            "total": float(ns.finish[flows].max()), "fct": percentiles(fct),
            "lone_fct": float(fct[[pos[f] for f in lone]].mean()) if len(lone) else 0.0,
            "marks": ns.counters.get("ecn_marks", 0), "drops": ns.counters.get("queue_disc_drops", 0),
            "max_q": max(ns.qmax.values(), default=0), "ack_band": ns.counters.get("ack_band_packets", 0),
            "trace": trace, **queue_stats(trace, k), "wall": ns.wall_s}
    return row


def tcp_table(rows: list[dict]) -> str:
    labels = ["mvopt"] + list(VARIANTS.values()) + [WHAT_IF]
    head = ("| scenario | metric | mvopt (RDMA DCTCP) | " + " | ".join(f"{v} | diff" for v in labels[1:]) + " |")
    out = [head, "|---|---|" + "---:|" * (2 * len(labels) - 1)]
    for r in rows:
        runs = r["runs"]
        metrics = [("total completion (us)", lambda x: x["total"], True),
                   ("FCT p50 (us)", lambda x: x["fct"][50], True),
                   ("FCT p95 (us)", lambda x: x["fct"][95], True),
                   ("FCT p99 (us)", lambda x: x["fct"][99], True),
                   ("FCT max (us)", lambda x: x["fct"]["max"], True)]
        if r["lone"]:
            metrics.append((f"mean FCT of the {r['lone']} flows sharing no link (us)", lambda x: x["lone_fct"], True))
        metrics += [("ECN marks (packets)", lambda x: x["marks"], False),
                    ("drops (packets)", lambda x: x["drops"], False),
                    (f"bottleneck ({r['hot_link']}): peak queue (KB)", lambda x: x["peak"] / 1e3, False),
                    ("bottleneck: time of the peak (us)", lambda x: x["peak_at"] / 1e6, False),
                    (f"bottleneck: time with queue > K = {r['k'] / 1e3:g} KB (us)", lambda x: x["above_k_us"], False),
                    ("max queue, any switch port (KB)", lambda x: x["max_q"] / 1e3, False)]
        for i, (name, get, rel) in enumerate(metrics):
            cells = []
            base = get(runs["mvopt"])
            for lab in labels:
                v = get(runs[lab])
                if rel:
                    cells.append(fmt_us(v))
                    if lab != "mvopt":
                        cells.append(f"{100 * (v / base - 1):+.1f} %" if base else "")
                else:
                    cells.append(f"{v:,.0f}" if abs(v) >= 100 or float(v).is_integer() else f"{v:,.1f}")
                    if lab != "mvopt":
                        cells.append("")
            title = f"{r['scenario']} ({r['note']})" if i == 0 else ""
            out.append(f"| {title} | {name} | " + " | ".join(cells) + " |")
    return "\n".join(out)


def trace_table(rows: list[dict], points_us=(5, 10, 20, 30, 50, 75, 100, 150, 200, 300, 500, 800, 1100)) -> str:
    """The bottleneck queue (KB) over time in every run: the evidence behind the differences."""
    labels = ["mvopt"] + list(VARIANTS.values()) + [WHAT_IF]
    out = ["| scenario | t (us) | " + " | ".join(labels) + " |", "|---|---:|" + "---:|" * len(labels)]
    for r in rows:
        end = max(run["trace"][-1, 0] if len(run["trace"]) else 0 for run in r["runs"].values()) / 1e6
        for i, t in enumerate(p for p in points_us if p <= end):
            cells = []
            for lab in labels:
                tr = r["runs"][lab]["trace"]
                j = np.searchsorted(tr[:, 0], t * 10**6, side="right") - 1 if len(tr) else -1
                cells.append(f"{tr[j, 1] / 1e3:,.0f}" if j >= 0 else "0")
            out.append(f"| {r['scenario'] if i == 0 else ''} | {t} | " + " | ".join(cells) + " |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("exact", "contended"), help="run one group of scenarios")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every byte count (default 1)")
    ap.add_argument("--write-docs", action="store_true", help="write the tables into docs/validation.md")
    args = ap.parse_args(argv)
    reason = ns3build.unavailable_reason()
    if reason:
        print(f"cannot run the ns-3 side: {reason}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    binary = ns3build.build()
    print(f"ns-3 scenario binary: {binary} ({time.perf_counter() - t0:.1f} s)", flush=True)
    sections = []
    ok = True
    if args.only in (None, "exact"):
        rows = run_exact(exact_scenarios(args.scale), binary)
        ok &= all(r["ok"] for r in rows)
        # negative control: ns-3 deliberately serving data before ACKs must disagree
        ring = next(sc for sc in exact_scenarios(args.scale) if sc.name.startswith("ring"))
        neg = compare_exact(ring, binary, data_first=True)
        control = (f"Negative control (shows that the comparison can fail): with ns-3 serving data before ACKs "
                   f"(not the model), {neg['flows'] - neg['exact']} of the {neg['flows']} flows of the "
                   f"{ring.name} differ, by up to {neg['max_d_finish'] / 1e6:.3f} us in delivery and "
                   f"{neg['max_d_fct'] / 1e6:.3f} us in the last ACK.")
        ok &= not neg["ok"]
        sections.append(("exact", exact_table(rows) + "\n\n" + control))
        print("\nLine rate (cc none): mvopt vs ns-3, every flow compared\n" + exact_table(rows) + "\n\n" + control
              + "\n", flush=True)
        rows = run_exact(routed_scenarios(args.scale), binary)
        ok &= all(r["ok"] for r in rows)
        controls, neg_ok = routed_controls(args.scale, binary)
        ok &= neg_ok
        sections.append(("routed", exact_table(rows) + "\n\n" + controls))
        print("\nPer-packet routing, selective repeat, a failed link (cc none): mvopt vs ns-3\n"
              + exact_table(rows) + "\n\n" + controls + "\n", flush=True)
    if args.only in (None, "contended"):
        rows = []
        for sc in contended_scenarios(args.scale):
            rows.append(compare_tcp(sc, binary))
            print(f"  {sc.name}: done", flush=True)
        sections.append(("contended", tcp_table(rows) + "\n\n" + contended_notes(rows) + "\n\n"
                          + CONTENDED_TRACE_TEXT + "\n\n" + trace_table(rows)))
        print("\nContended (DCTCP): mvopt vs ns-3\n" + tcp_table(rows) + "\n", flush=True)
        print("Bottleneck queue (KB) over time\n" + trace_table(rows) + "\n", flush=True)
        print(contended_notes(rows) + "\n", flush=True)
    if args.write_docs:
        write_docs(sections, args)
    return 0 if ok else 1


def run_exact(scenarios: list[Scenario], binary: Path) -> list[dict]:
    """compare_exact on every scenario, a progress line each."""
    rows = []
    for sc in scenarios:
        r = compare_exact(sc, binary)
        rows.append(r)
        print(f"  {sc.name}: {r['exact']}/{r['flows']} flows identical (max diff {r['max_d_finish']} ps "
              f"delivery, {r['max_d_fct']} ps last ACK; packet counts mvopt / ns-3: {r['counts']})", flush=True)
    return rows


def routed_controls(scale: float, binary: Path) -> tuple[str, bool]:
    """Negative controls of the routed scenarios (each must differ) and what the failed link
    changes in mvopt; the text for the docs and whether every control differed."""
    by_name = {sc.name: sc for sc in routed_scenarios(scale)}
    out, ok = [], True
    for name, negative, what in (
            ("spray + SR, ring k=4", "spray_seed", "spraying's hash taken with seed + 1"),
            ("adaptive + SR, ring k=4", "tie_last", "adaptive routing taking the last of equal queues "
             "(in cyclic order from spraying's choice) instead of the first"),
            ("adaptive + SR, ring k=4", "in_service", "adaptive routing counting the data packet in "
             "transmission in a port's queue"),
            ("adaptive + SR, ring k=4", "arrival_fifo", "packets arriving at a switch at the same instant "
             "routed in the order ns-3 scheduled their arrivals instead of by ingress port")):
        neg = compare_exact(by_name[name], binary, negative=negative)
        ok &= not neg["ok"]
        out.append(f"- {what}: {neg['flows'] - neg['exact']} of the {neg['flows']} flows of \"{name}\" differ, by "
                   f"up to {neg['max_d_finish'] / 1e6:.3f} us in delivery and {neg['max_d_fct'] / 1e6:.3f} us in "
                   f"the last ACK; {neg['q_ports'] - neg['q_equal']} switch ports differ in their largest queue.")
    for k in (4, 8):
        sc = by_name[f"ECMP, failed agg-core link, ring k={k}"]
        healthy = dict(sc.config, cluster=fat_tree(k))
        failed, = simulate([build_experiment(load_config(sc.config))])
        whole, = simulate([build_experiment(load_config(healthy))])
        out.append(f"- the failed link changes the result: mvopt's ECMP ring k={k} ends (last ACK) at "
                   f"{fmt_us(failed.end_ps)} us with it failed, {fmt_us(whole.end_ps)} us without (the hash "
                   f"picks among fewer next hops at some switches, so other flows collide).")
    return ("Negative controls (ns-3 deliberately off the model; each must differ):\n\n" + "\n".join(out), ok)


def write_docs(sections, args) -> None:
    sys.path.insert(0, str(REPO / "experiments"))
    from _report import provenance, update_section
    cmd = "python experiments/ns3/compare.py --write-docs" + (f" --only {args.only}" if args.only else "") \
        + (f" --scale {args.scale:g}" if args.scale != 1 else "")
    parts = ["## ns-3 cross-validation", "",
             "Harness: `experiments/ns3/` (README there: install, build, run). The same topology, "
             "routing tables, ECMP seed and task graph run in mvopt (CPU backend) and in mainline "
             "ns-3.44 (`pip install --no-deps ns3==3.44.post0`, scenario program "
             "`experiments/ns3/mvopt_ns3.cc`).", "", provenance(cmd), ""]
    for name, table in sections:
        if name == "exact":
            parts += ["### Line rate (`cc: none`): identical to the picosecond", "",
                      EXACT_TEXT, "", table, ""]
        elif name == "routed":
            parts += ["### Spraying, adaptive routing, selective repeat and a failed link (`cc: none`)", "",
                      ROUTED_TEXT, "", table, ""]
        else:
            parts += ["### Contended traffic (DCTCP): where the models differ by design", "",
                      CONTENDED_TEXT, "", table, ""]
    update_section(DOC, "ns3", "\n".join(parts))
    print(f"wrote {DOC.relative_to(REPO)} (section ns3)")


EXACT_TEXT = (
    "Settings: `cc: none`, ECMP, 1000 B payload + 48 B header, 60 B ACKs, 100 Gb/s and 1 us links. "
    "ns-3 side: PointToPoint links (store-and-forward; serialization exact at picosecond "
    "resolution), IPv4 + UDP, one datagram per packet sized so that its wire bytes (PPP 2 + IPv4 20 "
    "+ UDP 8 + 18 B app header + payload) are mvopt's, a 60 B ACK datagram per in-order packet, "
    "per-flow ECMP with mvopt's hash (the flow recovered from the UDP ports), strict priority for "
    "ACKs at every egress decided when the port frees (after every arrival at that instant), hosts "
    "serving their active flows round robin, and the task-dependency rule of docs/engine.md. "
    "Compared: every flow's start, last-byte delivery and the sender's receipt of the last ACK, and "
    "every switch port's largest data queue. In the ring, every host's NIC and the switch port into "
    "it carry data and ACKs at once, so the ACK priority and the instant of each decision matter.")
ROUTED_TEXT = """\
The same line-rate settings with data packets routed one by one (issue 34). The ns-3 program
routes with mvopt's rules (docs/engine.md, "Switch arrival"): `spray` takes the next hop
`hash(seed, switch, flow, seq, sends) mod n` (mvopt's splitmix64 chain; seq and sends travel in
the app header); `adaptive` takes the next hop whose data queue holds the fewest wire bytes at
the arrival (the packet in transmission excluded, arrivals of the same instant routed one after
another in ingress-port order, before any transmission of that instant), the first of equals in
cyclic order from spraying's choice, per flowlet with a 32-entry table when `flowlet_gap_ns` is
set; ACKs always per-flow ECMP. Hosts run mvopt's selective repeat (R = 512, D = 3): the receiver
delivers new packets out of order and answers *every* data packet with a 60 B ACK carrying the
cumulative point and the packet it acknowledges; the sender keeps mvopt's selectively acknowledged
set, `lost_hi` and `rtx_nxt`, retransmits holes before new packets, and with PFC off presumes a
hole lost once a packet 3 above it is acknowledged (with PFC on, the default, never: only the RTO
retransmits, and no RTO fires here). The rings use every host in a random order (seed 1), so
that most neighbours are in other pods and flows share links: sprayed packets of a flow meet
other flows' packets in queues and arrive out of order. With PFC on, no packet is retransmitted
in either simulator (checked: 0 / 0 below). With PFC off, reordering by three packets is taken
for loss, and both simulators retransmit the same packets (every one a duplicate the receiver
discards). One count differs by construction and is compared where both define it: mvopt stops at
the end of the window (`W`) in which the last ACK arrived, so duplicates still on their way are
never received; ns-3 runs until no event is left. The discards column counts ns-3's discards
before the end of mvopt's last window (from the reference simulator, checked identical to the
engine) and gives the later ones apart. The failed link (tier 2, index 0: the first
aggregation-core link, `cluster.failed_links`) is removed before routing, so the routing tables
written for ns-3 are mvopt's without it, exactly as for the healthy cases."""
CONTENDED_TEXT = """\
mvopt runs its rate-based DCTCP (as RDMA NICs do it; docs/engine.md) with its defaults (ECN step
at K = kmin = kmax, g = 1/16); ns-3 runs TCP with `TcpDctcp` (same g, α = 1 at start, an ACK per
segment, no timestamps, 1000 B segments so that packets are 1042 B on the wire in both, 42 B
ACKs), RED switch queues marking ECN at the same step K, no PFC (off in mvopt too). Connections
open during a 50 us warm-up and exchange one byte, so that the sender knows the receiver's
scaled window (a SYN's window is not scaled: the first flight would stop at 64 KB); handshakes
are not measured. The models differ by design in:

1. *transport*: mvopt starts a flow at line rate with a window of one base-RTT bandwidth-delay
   product (BDP), paces it, and cuts the *rate* by α/2 on an ECN echo once per window; TCP is
   ACK-clocked and cuts the *window*; stock ns-3 TCP also starts with 10 segments and slow start;
2. *marking point*: mvopt marks at dequeue on the bytes left behind; ns-3's RED marks at enqueue
   on the queue found by the arriving packet, so a mark reaches the sender one queueing delay
   later (25 us at K = 300 KB and 100 Gb/s), and the count is of arrivals, not departures;
3. *ACK priority*: mvopt serves ACKs first at every egress; stock ns-3 queues them FIFO with
   data, at switches and at host NICs.

The *matched* column gives ns-3 mvopt's settings where the models have a common knob (initial
cwnd = ssthresh = mvopt's window; receivers' ACKs marked IP TOS 0x10 and served from a
strict-priority band of a `PrioQueueDisc`); the next two columns put back one ns-3 default each,
the last one both. What remains in the matched column is the transport law and the marking
point; the last column, mvopt's model (its reference simulator) with ECN marked at enqueue, a
what-if that is not an mvopt option, measures the share of the marking point."""
CONTENDED_TRACE_TEXT = ("Queue at mvopt's bottleneck port over time (KB), sampled every 1 us in both simulators "
                        "(mvopt's from the reference simulator, whose results are checked identical to the "
                        "engine's):")


def contended_notes(rows: list[dict]) -> str:
    """What the contended table shows, with its numbers: every difference over 10 % explained."""
    from mvopt.engine.params import ser_ps
    per_us = 10**6 / ser_ps(1042, 100 * 10**9)       # departures per us at 100 Gb/s
    time_keys = [("total", None), ("fct", 50), ("fct", 95), ("fct", 99), ("fct", "max")]

    def worst(a: dict, b: dict) -> float:
        vals = [(b[k] if q is None else b[k][q]) / (a[k] if q is None else a[k][q]) - 1 for k, q in time_keys]
        return 100 * max(vals, key=abs)

    out = ["What the numbers show:", ""]
    for r in rows:
        runs = r["runs"]
        mv, nm = runs["mvopt"], runs[VARIANTS[0]]
        ss, ff, st = runs[VARIANTS[1]], runs[VARIANTS[2]], runs[VARIANTS[3]]
        line = (f"- **{r['scenario']}**: with matched settings every time metric is within "
                f"{abs(worst(mv, nm)):.1f} % of mvopt (largest: {worst(mv, nm):+.1f} %).")
        wi = runs[WHAT_IF]
        if r["lone"] == 0:   # incast
            line += (
                f" The bottleneck ({r['hot_link']}) is busy from the first round trip to the end in every "
                f"run, so total completion is set by the bytes, whatever the congestion control (stock "
                f"ns-3: {worst(mv, st):+.1f} % at worst). The queue traces coincide while the initial windows "
                f"drain into the bottleneck (first ~30 us); ns-3's then keeps growing for longer (peak "
                f"{nm['peak'] / 1e3:,.0f} KB at {nm['peak_at'] / 1e6:.0f} us vs {mv['peak'] / 1e3:,.0f} KB at "
                f"{mv['peak_at'] / 1e6:.0f} us) and stays above K longer ({nm['above_k_us']} vs "
                f"{mv['above_k_us']} us), hence more marks ({nm['marks']:,} vs {mv['marks']:,}). Part of this "
                f"is the marking point: a packet marked on arrival carries the signal only after waiting out "
                f"the queue. mvopt's own model with the marking moved to enqueue (the what-if column: the "
                f"reference simulator with that one change) goes {wi['peak'] / 1e3:,.0f} KB high, "
                f"{wi['above_k_us']} us above K, with {wi['marks']:,} marks: it covers "
                f"{100 * (wi['above_k_us'] - mv['above_k_us']) / max(nm['above_k_us'] - mv['above_k_us'], 1):.0f} % "
                f"of the gap in time above K and "
                f"{100 * (wi['peak'] - mv['peak']) / max(nm['peak'] - mv['peak'], 1):.0f} % of the gap in peak "
                f"queue. The rest is the transport law (an ACK-clocked TCP window against a paced rate with "
                f"a window; one segment per round trip of additive increase against R_AI; alpha = 0.94 "
                f"after the warm-up byte against 1), which the harness does not separate further. What is "
                f"counted differs too: mvopt marks departures, {mv['marks'] / max(mv['above_k_us'], 1):.1f} "
                f"per us above K (the line rate is {per_us:.1f} packets per us); ns-3 marks arrivals, "
                f"{nm['marks'] / max(nm['above_k_us'], 1):.1f} per us (while the queue grows, several input "
                f"links feed it). With slow start, senders ramp up over several round trips, so the queue "
                f"peaks lower ({ss['peak'] / 1e3:,.0f} KB) with fewer marks ({ss['marks']:,}).")
            if nm["fct"] == ff["fct"]:
                line += " ACK priority changes nothing here (identical columns): no port carries both ACKs and data."
        else:                # permutation
            line += (
                f" ECMP collisions put two flows on some links. mvopt's window bounds each shared queue at "
                f"about one BDP ({mv['max_q'] / 1e3:,.0f} KB < K = {r['k'] / 1e3:g} KB): no marks at all, as "
                f"in ns-3 matched ({nm['marks']:,} marks, {nm['max_q'] / 1e3:,.0f} KB). Slow start (IW 10) "
                f"costs {worst(mv, ss):+.1f} %: windows double each round trip until the shared queues "
                f"overshoot K ({ss['max_q'] / 1e3:,.0f} KB, {ss['marks']:,} marks, {ss['above_k_us']} us above "
                f"K at the bottleneck), then DCTCP, starting from α = 1, halves them and the links idle. ACKs "
                f"in the data FIFO cost the {r['lone']} flows that share no link "
                f"{100 * (ff['lone_fct'] / mv['lone_fct'] - 1):+.1f} % (mean FCT): every host both sends "
                f"and receives, and the ACKs it returns wait behind its own outgoing data in its NIC queue, "
                f"which slows the other flow's ACK clock. Stock ns-3 has both: "
                f"{worst(mv, st):+.1f} %.")
        out.append(line)
    return "\n".join(out)


if __name__ == "__main__":
    sys.exit(main())
