"""Scenarios and checks the engine's tests share (tests/engine/test_engine_*.py,
test_switch_windows.py): topologies, closed-form helpers, hypothesis strategies, the comparison
with the reference, the invariants.
"""

from __future__ import annotations

import dataclasses
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import strategies as st

from mvopt.cluster import CompiledTopology, build_topology
from mvopt.config import load_config
from mvopt.engine import COUNTERS, Experiment, ExperimentResult, TaskGraphBuilder, simulate
from mvopt.engine.params import TR_SR, ser_ps
from mvopt.engine.reference import simulate_reference
from mvopt.testing import scenarios as sc

RATE = 100 * 10**9
D = 1_000_000                      # 1 us: the default link delay, in ps
PAYLOAD, HEADER, ACK = 1000, 48, 60
T = ser_ps(PAYLOAD + HEADER, RATE)  # one full packet at 100 Gb/s: 83.84 ns
A_ACK = ser_ps(ACK, RATE)


@lru_cache(maxsize=None)
def cluster(**fields) -> CompiledTopology:
    """A topology from a ``cluster`` section (cached: topologies are immutable)."""
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    return build_topology(load_config({"cluster": fields}).cluster)


def fat_tree() -> CompiledTopology:
    return cluster(topology="fat_tree", k=4)


def compiled(mini: sc.MiniTopology) -> CompiledTopology:
    """The stand-in topology as the engine takes it (same node and port ids, same routes).

    ``MiniTopology`` has the reference's interface (``next_hop_ports``) but not the compiled
    routing arrays (``sw_route_offset`` ...) that ``build_batch`` reads, so the engine cannot run
    it as is: its routes are turned into range tables here.
    """
    n_host, n_node = mini.n_host, mini.n_node
    sets: dict[tuple[int, ...], int] = {}
    sw_off, dst_lo, nhset = [0], [], []
    for sw in range(n_host, n_node):
        prev = None
        for dst in range(n_host):
            k = sets.setdefault(tuple(int(p) for p in mini.next_hop_ports(sw, dst)), len(sets))
            if k != prev:
                dst_lo.append(dst)
                nhset.append(k)
                prev = k
        sw_off.append(len(dst_lo))
    keys = sorted(sets, key=sets.get)
    host_link = (mini.port_node < n_host) | (mini.port_peer_node < n_host)
    return CompiledTopology(
        kind="graph", parameters={"topology": "stand-in"}, n_host=n_host,
        node_tier=np.array([0] * n_host + [1] * (n_node - n_host), np.int8),
        node_port_offset=mini.node_port_offset, port_node=mini.port_node, port_peer_node=mini.port_peer_node,
        port_peer_port=mini.port_peer_port, port_rate_bps=mini.port_rate_bps, port_delay_ps=mini.port_delay_ps,
        port_tier=np.where(host_link, 0, 1).astype(np.int8), sw_route_offset=np.array(sw_off, np.int64),
        route_dst_lo=np.array(dst_lo, np.int32), route_nhset=np.array(nhset, np.int32),
        nhset_offset=np.cumsum([0] + [len(k) for k in keys]).astype(np.int64),
        nhset_port=np.array([p for k in keys for p in k], np.int32),
        host_server=np.arange(n_host, dtype=np.int32), gpu_host=np.arange(n_host, dtype=np.int32),
        n_server=n_host, gpus_per_server=1, diameter_hops=0)


def run(backend: str, *exps: Experiment) -> list[ExperimentResult]:
    return simulate(list(exps), backend=backend)


def run1(backend: str, exp: Experiment) -> ExperimentResult:
    (r,) = simulate([exp], backend=backend)
    return r


def flows(topo, pairs, size, cc: str = "none", **net) -> Experiment:
    """``(src, dst)`` flows of ``size`` bytes, all starting at 0."""
    g = TaskGraphBuilder()
    for s, d in pairs:
        g.flow(s, d, size)
    return sc.experiment(topo, g, cc=cc, **net)


def last_delivery(n: int, hops: int, last_payload: int, d: int = D) -> int:
    """Delivery of packet n-1 of a lone flow sent from 0 over ``hops`` equal 100 Gb/s links.

    Packets leave back to back every T and each hop adds T + d (store and forward). The short
    last packet (T_L) waits behind its full-size predecessor at every switch, so only its final
    hop is shorter: (n-1) T + (H-1)(T + d) + T_L + d. A single packet takes H (T_L + d).
    """
    t_last = ser_ps(last_payload + HEADER, RATE)
    if n == 1:
        return hops * (t_last + d)
    return (n - 1) * T + (hops - 1) * (T + d) + t_last + d


def route(topo, src: int, dst: int) -> list[tuple[int, int]]:
    """(rate, delay) of each hop of the first shortest path from host ``src`` to host ``dst``."""
    hops, port = [], int(topo.node_port_offset[src])
    while True:
        hops.append((int(topo.port_rate_bps[port]), int(topo.port_delay_ps[port])))
        node = int(topo.port_peer_node[port])
        if node == dst:
            return hops
        port = int(topo.next_hop_ports(node, dst)[0])


def ideal_fct(topo, p, flow: int, src: int, dst: int, size: int, multipath: bool = False) -> int:
    """FCT of the flow alone on an idle path at line rate (no CC slowdown): every packet through
    every hop store-and-forward, then the last ACK back on its own route (not counting a wait
    behind the previous ACK). A lower bound of the flow's FCT in any scenario. (Equal-cost
    paths of the topologies used here have the same rates and delays.) `multipath`: packets
    that may take different paths and be delivered out of order (selective repeat with per-packet
    routing) wait for each other only on the source's link."""
    hops = route(topo, src, dst)
    free = [0] * len(hops)
    t_send = arrive = 0
    for k in range(-(-size // p.payload)):
        b = min(p.payload, size - k * p.payload) + p.header
        t = t_send
        t_send += ser_ps(b, hops[0][0])
        for h, (rate, delay) in enumerate(hops):
            if multipath and h > 0:
                free[h] = 0
            t = max(t, free[h])
            free[h] = t + ser_ps(b, rate)
            t = free[h] + delay
        arrive = max(arrive, t)
    return arrive + sum(ser_ps(p.ack_bytes, r) + d for r, d in route(topo, dst, src))


# Small topologies: compiled ones (fat-tree, one with per-tier rates and delays, leaf-spine, torus,
# dragonfly) and stand-ins (a star, a dumbbell with a 50 Gb/s bottleneck, a two-switch line, a
# one-way ring that can deadlock under PFC).
TOPOLOGIES = {
    "fat_tree": lambda: fat_tree(),
    "fat_tree_tiers": lambda: cluster(topology="fat_tree", k=4, link_gbps=(100, 200, 400),
                                      link_delay_ns=(500, 1000, 1500)),
    "leaf_spine": lambda: cluster(topology="leaf_spine", leaves=3, hosts_per_leaf=2),
    "torus": lambda: cluster(topology="torus", torus_dims=(3, 3)),
    "dragonfly": lambda: cluster(topology="dragonfly", groups=3, routers_per_group=2, hosts_per_router=1),
    "star": lambda: compiled(sc.star(4)),
    "dumbbell": lambda: compiled(sc.dumbbell(2, 2, bottleneck_gbps=50)),
    "line": lambda: compiled(sc.line(2, delay_ns=700)),
    "ring": lambda: compiled(sc.ring(3)),
    # a switch wider than MV_TREE_PORTS: persisted caches and trees, windows port by port
    "star12": lambda: compiled(sc.star(12)),
}


@lru_cache(maxsize=None)
def topology(name: str):
    return TOPOLOGIES[name]()


def one_of_ranges(*ranges: tuple[int, int]) -> st.SearchStrategy[int]:
    """An integer from one of the ranges, the range picked first (so that large values are as
    likely as small ones: plain integers() favours small values)."""
    return st.sampled_from(ranges).flatmap(lambda r: st.integers(*r))


@st.composite
def task_graphs(draw: st.DrawFn, n_host: int, max_tasks: int = 6, max_bytes: int = 200_000,
                burst_bytes: int = 400_000):
    """1..max_tasks tasks: flows (1 B .. max_bytes, random start) and delays, some after earlier
    tasks (local and remote dependencies), destinations biased towards one host (incasts). A flow
    task may be a burst of flows from several sources at once (at most burst_bytes in all)."""
    g = TaskGraphBuilder()
    ids: list[int] = []
    incast_dst = draw(st.integers(0, n_host - 1))
    for _ in range(draw(st.sampled_from(range(1, max_tasks + 1)))):
        after = draw(st.lists(st.sampled_from(ids), max_size=3, unique=True)) if ids and draw(st.booleans()) else []
        start = draw(st.sampled_from([0, 0, 0, 500_000, D, 3 * D + 1]) | st.integers(0, 5 * D))
        if draw(st.sampled_from([True] + [False] * 4)):
            ids.append(g.delay(draw(st.integers(0, n_host - 1)),
                               draw(st.sampled_from([0, D]) | st.integers(0, 5 * D)), after=after, start_ps=start))
            continue
        dst = draw(st.sampled_from([incast_dst] * 2 + list(range(n_host))))
        size = draw(st.sampled_from([1, 47, 999, 1000, 1001, 4096, 60_000, max_bytes])
                    | one_of_ranges((1, 2_000), (2_000, 30_000), (30_000, max_bytes // 2), (max_bytes // 2, max_bytes)))
        others = [h for h in range(n_host) if h != dst]
        burst = draw(st.sampled_from([1, 1, 2, 4, len(others)]))      # several senders at once
        size = min(size, max(1, burst_bytes // burst))
        for src in draw(st.permutations(others))[:burst]:
            ids.append(g.flow(src, dst, size, after=after, start_ps=start))
    return g


@st.composite
def networks(draw: st.DrawFn) -> dict:
    """A ``network`` section: any CC, LB, PFC on/off, small buffers, random ECN and transport."""
    net: dict = dict(cc=draw(st.sampled_from(["none", "dcqcn", "hpcc", "dctcp"])),
                     lb=draw(st.sampled_from(["ecmp", "spray"])),
                     pfc={"enabled": draw(st.booleans())},
                     buffer_mb=draw(st.sampled_from([0.02, 0.05, 0.1, 0.3, 1.0, None])))
    if draw(st.sampled_from([True, False, False])):
        net["ecn"] = {"enabled": False}
    elif draw(st.booleans()):
        kmin = draw(st.sampled_from([0.0, 5.0, 20.0, 100.0]) | st.floats(0, 300, allow_nan=False))
        net["ecn"] = {"kmin_kb": kmin, "kmax_kb": kmin + draw(st.sampled_from([0.0, 10.0, 200.0])
                                                               | st.floats(0, 300, allow_nan=False)),
                      "pmax": draw(st.sampled_from([0.0, 0.2, 1.0]) | st.floats(0, 1, allow_nan=False))}
    if draw(st.booleans()):
        net["payload_bytes"] = draw(st.sampled_from([256, 1000, 4096]))
    if draw(st.booleans()):
        net["rto_us"] = draw(st.sampled_from([30.0, 100.0, 1000.0]))
        net["nack_interval_us"] = draw(st.sampled_from([0.0, 4.0, 500.0]))
    if draw(st.booleans()):
        net["window"] = draw(st.booleans())
        net["var_win"] = draw(st.booleans())
    if draw(st.sampled_from([True] + [False] * 5)):
        net["switch_packet_slots"] = draw(st.sampled_from([20, 60]))
    if net["cc"] == "dcqcn" and draw(st.booleans()):
        net["dcqcn"] = {"profile": "paper"}
    if draw(st.sampled_from([True, False, False])):   # ACK/NACKs as the HPCC simulator queues them
        net["switch_ack_queue"] = "data"
        net["pfc"]["pause_host_acks"] = draw(st.booleans())
    if net["cc"] == "hpcc" and draw(st.booleans()):   # INT as the HPCC simulator's switches record it
        net["hpcc"] = {"int_multi": draw(st.sampled_from([1, 4]))}
    return net


@st.composite
def experiments(draw: st.DrawFn, max_tasks: int = 6, max_bytes: int = 200_000,
                burst_bytes: int = 400_000) -> Experiment:
    name = draw(st.sampled_from(sorted(TOPOLOGIES)))
    topo = topology(name)
    g = draw(task_graphs(int(topo.n_host), max_tasks, max_bytes, burst_bytes))
    limit = draw(st.sampled_from([10**10] * 4 + [30 * D, 7 * D]))
    exp = sc.experiment(topo, g, seed=draw(st.integers(0, 2**63 - 1)), time_limit_ps=limit,
                        name=name, **draw(networks()))
    return dataclasses.replace(exp, **draw(monitors()))


@st.composite
def monitors(draw: st.DrawFn) -> dict:
    """Monitor settings of an Experiment: off half of the time; else a sampling period from 1 ps
    to several windows (some equal to event spacings: a full packet, a link delay), the link
    monitor or not, and a cap from 1 sample to more than most experiments need."""
    if draw(st.booleans()):
        return {}
    period = draw(st.sampled_from([D // 3, 250_000, 50_000, T, D, 7_777, 1]) | st.integers(1_000, 5 * D))
    return {"queue_monitor_ps": period, "link_monitor": draw(st.booleans()),
            "monitor_max_samples": draw(st.sampled_from([1000, 1000, 1000, 100, 7, 1]))}


def differences(r: ExperimentResult, ref: ExperimentResult) -> list[str]:
    """What differs between two results (everything ``same_as`` compares), for messages."""
    out = [f"{f}: {getattr(r, f)!r} vs {getattr(ref, f)!r}" for f in ("status", "end_ps", "makespan_ps")
           if getattr(r, f) != getattr(ref, f)]
    out += [f"{f}: {getattr(r, f)!r} vs {getattr(ref, f)!r}" for f in ("monitor_interval_ps", "monitor_samples_dropped")
            if getattr(r, f) != getattr(ref, f)]
    for f in ("task_start_ps", "task_finish_ps", "flow_fct_ps", "port_max_queue_bytes", "port_tx_bytes",
              "queue_samples", "link_tx_samples"):
        a, b = getattr(r, f), getattr(ref, f)
        if a is None or b is None:
            if (a is None) != (b is None):
                out.append(f"{f}: {'absent' if a is None else 'present'} vs {'absent' if b is None else 'present'}")
        elif a.shape != b.shape:
            out.append(f"{f}: shapes {a.shape} vs {b.shape}")
        elif not np.array_equal(a, b):
            i = np.argwhere(a != b)[:5]
            idx = tuple(i.T)
            out.append(f"{f}[{i.tolist()}]: {a[idx].tolist()} vs {b[idx].tolist()}")
    out += [f"{k}: {r.counters[k]} vs {ref.counters.get(k)}" for k in r.counters if r.counters[k] != ref.counters.get(k)]
    return out


def assert_matches_reference(r: ExperimentResult, exp: Experiment, ref: ExperimentResult | None = None) -> None:
    ref = ref if ref is not None else simulate_reference(exp)
    assert r.same_as(ref), f"{exp.name}: engine vs reference: " + "; ".join(differences(r, ref))
    assert r.windows == ref.windows, f"{exp.name}: {r.windows} windows vs {ref.windows} in the reference"
    c = r.counters
    in_network = (c["data_packets_sent"] - c["data_packets_delivered"] - c["data_packets_dropped"]
                  - c["out_of_order_packets"])
    assert in_network == ref.extra["data_packets_in_network"]


def ring_deadlock() -> Experiment:
    """Three hosts on a one-way ring of switches, each sending two hops round: a cyclic buffer
    dependency that PFC turns into a deadlock."""
    g = TaskGraphBuilder()
    for i in range(3):
        g.flow(i, (i + 2) % 3, 2_000_000)
    return sc.experiment(compiled(sc.ring(3)), g, cc="none", buffer_mb=0.5, time_limit_ps=10**10)


def queue_bound(exp: Experiment) -> np.ndarray:
    """Most data bytes one port's queue can hold: 0 at hosts (no data queue); at a switch its
    buffer when lossy (admission keeps all its queues <= buffer), and with PFC max(buffer,
    fixed) where fixed = its ingress headrooms + reserves: each ingress holds at most reserve +
    headroom + its share of shared_used, and shared_used never exceeds buffer - fixed."""
    topo, p = exp.topology, exp.params
    n_host = int(topo.n_host)
    off = np.asarray(topo.node_port_offset)
    bound = np.zeros(int(off[-1]), np.int64)
    for v in range(n_host, int(topo.n_node)):
        ports = np.arange(off[v], off[v + 1])
        buffer = int(p.sw_buffer[v - n_host])
        fixed = int(p.port_headroom[topo.port_peer_port[ports]].sum()) + p.sw_reserve * ports.size
        bound[ports] = max(buffer, fixed) if p.pfc else buffer
    return bound


def check_invariants(exp: Experiment, r: ExperimentResult) -> None:
    """What holds for every result (any status) and, when done, exactly."""
    g, p, c = exp.tasks, exp.params, r.counters
    assert set(c) == set(COUNTERS) and all(v >= 0 for v in c.values())
    assert r.status in ("done", "stuck", "timeout"), r.diagnostic
    fl = r.flow_ids
    npkt = int(p.flow_npkt[fl].sum())
    size = int(g.size_bytes[fl].sum())
    # Data accounting. Every send is a first send of its packet or a retransmission
    # (data_packets_retransmitted); every send is, at the end, delivered in order, dropped by a
    # switch, discarded by the receiver (out of order / duplicate) or still in the network.
    first_sends = c["data_packets_sent"] - c["data_packets_retransmitted"]
    in_network = c["data_packets_sent"] - c["data_packets_delivered"] - c["data_packets_dropped"] - c["out_of_order_packets"]
    assert 0 <= first_sends <= npkt and c["data_packets_delivered"] <= first_sends
    assert in_network >= 0
    assert c["data_bytes_delivered"] <= size
    assert c["data_bytes_sent"] >= c["data_bytes_delivered"] + c["data_bytes_dropped"]
    assert c["data_packets_dropped"] <= c["data_bytes_dropped"] <= p.payload * c["data_packets_dropped"]
    assert c["pfc_resumes"] <= c["pfc_pauses"] <= c["pfc_resumes"] + len(r.port_max_queue_bytes)
    assert c["nacks_sent"] <= c["out_of_order_packets"]
    if not p.pfc:
        assert c["pfc_pauses"] == 0
    elif exp.network.switch_packet_slots is None:
        # lossless: nothing dropped (small switch_packet_slots can still drop: slots run out)
        assert c["data_packets_dropped"] == c["control_packets_dropped"] == 0
        assert c["timeouts"] == 0
    if not p.ecn:
        assert c["ecn_marks"] == 0
    assert (r.port_max_queue_bytes <= queue_bound(exp)).all()
    assert r.windows >= 1
    check_monitors(exp, r)
    if r.status != "done":
        assert (r.flow_fct_ps == -1).any() or (r.task_finish_ps == -1).any()
        return
    # done: every packet delivered once in order; everything beyond is a retransmission that
    # was dropped, discarded or is still on its way
    assert first_sends == c["data_packets_delivered"] == npkt
    assert c["data_bytes_delivered"] == size
    assert c["data_packets_retransmitted"] == c["data_packets_dropped"] + c["out_of_order_packets"] + in_network
    sr = p.transport == TR_SR
    if c["control_packets_dropped"] == 0:      # one ACK per delivery, one NACK each, PFC frames
        acks = c["data_packets_delivered"] + (c["out_of_order_packets"] if sr else c["nacks_sent"])  # (sr: per arrival)
        assert c["control_packets_sent"] == acks + c["pfc_pauses"] + c["pfc_resumes"]
    assert r.makespan_ps == r.task_finish_ps.max() and r.end_ps >= r.makespan_ps
    # scheduling: start = max(earliest start, each predecessor's finish + notify) exactly;
    # notify 0 when the predecessor finished where the task starts, else the window W
    for t in range(g.n):
        ready = int(g.start_ps[t])
        for q in g.preds_of(t):
            notify = 0 if g.dst[q] == g.src[t] else p.window_ps
            ready = max(ready, int(r.task_finish_ps[q]) + notify)
        assert r.task_start_ps[t] == ready, f"task {t}"
        if g.kind[t] == 1:
            assert r.task_finish_ps[t] == ready + g.duration_ps[t], f"delay task {t}"
    # FCT: at least the idle-path ideal (flow_standalone_ps is not a lower bound, see below)
    for k, f in enumerate(fl):
        ideal = ideal_fct(exp.topology, p, int(f), int(g.src[f]), int(g.dst[f]), int(g.size_bytes[f]),
                          multipath=sr and p.lb_spray)
        assert r.flow_fct_ps[k] >= ideal, f"flow {f}"
        assert r.task_finish_ps[f] - r.task_start_ps[f] < r.flow_fct_ps[k]


def check_monitors(exp: Experiment, r: ExperimentResult) -> None:
    """Monitor samples: absent when off; else at most the cap per port, sampled queues within the
    maximum queue, hosts' queues empty, transmitted bytes growing up to the port's total."""
    if exp.queue_monitor_ps == 0:
        assert r.queue_samples is None and r.link_tx_samples is None
        assert r.monitor_interval_ps == r.monitor_samples_dropped == 0
        return
    q, n_host = r.queue_samples, int(exp.topology.n_host)
    n_port = len(r.port_max_queue_bytes)
    assert r.monitor_interval_ps == exp.queue_monitor_ps
    assert q.shape[0] == n_port and 1 <= q.shape[1] <= exp.monitor_max_samples
    assert r.monitor_samples_dropped >= 0 and (r.monitor_samples_dropped == 0 or q.shape[1] == exp.monitor_max_samples)
    assert q.shape[1] + r.monitor_samples_dropped == r.end_ps // exp.queue_monitor_ps + 1   # 0 .. end_ps
    assert (q[:, 0] == 0).all() and (q >= 0).all() and (q <= r.port_max_queue_bytes[:, None]).all()
    assert (q[np.asarray(exp.topology.port_node) < n_host] == 0).all()     # hosts have no data queue
    w = r.link_tx_samples
    if not exp.link_monitor:
        assert w is None
        return
    assert w.shape == q.shape and (w[:, 0] == 0).all()
    assert (np.diff(w, axis=1) >= 0).all() and (w[:, -1] <= r.port_tx_bytes).all()


def batch_mix() -> list[Experiment]:
    """Experiments of different topologies, CC, LB, PFC and outcomes (done, stuck, timeout)."""
    ft, ls = fat_tree(), topology("leaf_spine")
    perm = TaskGraphBuilder()
    for h in range(16):
        perm.flow(h, (h * 5 + 3) % 16, 40_000)
    inc = TaskGraphBuilder()
    for h in range(1, 6):
        inc.flow(h, 0, 80_000, start_ps=h * 1000)
    lossy = TaskGraphBuilder()
    for h in range(1, 4):
        lossy.flow(h, 0, 100_000)
    deps = TaskGraphBuilder()
    a = deps.delay(3, 2 * D)
    b = deps.flow(3, 4, 50_000, after=[a])
    deps.flow(4, 0, 20_000, after=[b])
    deps.flow(0, 3, 20_000, after=[b])
    timeout = TaskGraphBuilder()
    timeout.flow(0, 15, 500_000)
    return [sc.experiment(ft, perm, name="perm-dcqcn-spray", cc="dcqcn", lb="spray", seed=7),
            sc.experiment(ls, inc, name="incast-hpcc", cc="hpcc", buffer_mb=0.2, queue_monitor_ps=T,
                          link_monitor=True, monitor_max_samples=300),
            sc.experiment(compiled(sc.star(4)), lossy, name="lossy-dctcp", cc="dctcp",
                          pfc={"enabled": False}, buffer_mb=0.05, rto_us=50.0),
            sc.experiment(topology("torus"), deps, name="deps-none", cc="none"),
            dataclasses.replace(ring_deadlock(), name="deadlock"),
            sc.experiment(ft, timeout, name="timeout", cc="dcqcn", time_limit_ps=10 * D, queue_monitor_ps=D // 4)]


def same_everything(a: ExperimentResult, b: ExperimentResult) -> bool:
    return a.same_as(b) and a.windows == b.windows and a.diagnostic == b.diagnostic


def incast(cc: str, size: int, n: int = 8, **net) -> Experiment:
    """``n`` hosts of a star send ``size`` bytes each to host 0 (default network: PFC on, 32 MB)."""
    return flows(compiled(sc.star(n + 1)), [(s, 0) for s in range(1, n + 1)], size, cc=cc, **net)


def incast_figures(exp: Experiment, r: ExperimentResult) -> tuple[float, float]:
    """(bottleneck busy fraction, slowest over fastest flow throughput)."""
    p, g = exp.params, exp.tasks
    wire = int(g.size_bytes.sum() + p.flow_npkt.sum() * p.header)
    busy = ser_ps(wire, RATE) / r.makespan_ps
    thr = g.size_bytes[r.flow_ids] / (r.task_finish_ps[r.flow_ids] - r.task_start_ps[r.flow_ids])
    return busy, float(thr.min() / thr.max())


def spine_topology(uplink_gbps: float) -> CompiledTopology:
    """2 leaves x 4 hosts (100 Gb/s), 2 spines, leaf-spine links at ``uplink_gbps``."""
    links = [(h, 8 + h // 4) for h in range(8)] + [(leaf, spine, uplink_gbps) for leaf in (8, 9) for spine in (10, 11)]
    return compiled(sc.MiniTopology(8, 4, links))


def ecmp_load(topo, seed: int, pairs) -> dict[int, int]:
    """Flows per port under ECMP."""
    load: dict[int, int] = {}
    for f, (s, d) in enumerate(pairs):
        for port in sc.ecmp_path(topo, seed, f, s, d):
            load[port] = load.get(port, 0) + 1
    return load


def bad_task(build, task: int, why: str | None = None):
    marks = [pytest.mark.xfail(strict=True, reason=why)] if why else []
    return pytest.param(build, task, marks=marks)


def port_between(topo, a: int, b: int) -> int:
    """The port of node ``a`` on its link to node ``b``."""
    return int(np.nonzero((np.asarray(topo.port_node) == a) & (np.asarray(topo.port_peer_node) == b))[0][0])


def monitored_incast(senders: int = 4, n: int = 20, **mon) -> Experiment:
    """``senders`` hosts of a star send n packets each to host 0, links of D = 12 T, sampled every
    T: samples fall exactly on the switch's arrival and transmission times."""
    topo = compiled(sc.star(senders + 1, delay_ns=12 * T / 1000))
    return flows(topo, [(s, 0) for s in range(1, senders + 1)], n * PAYLOAD,
                 **{"queue_monitor_ps": T, "link_monitor": True, **mon})


def without_monitors(r: ExperimentResult) -> ExperimentResult:
    return dataclasses.replace(r, monitor_interval_ps=0, queue_samples=None, link_tx_samples=None,
                               monitor_samples_dropped=0)


def idle_gap_experiment() -> Experiment:
    """A flow, 40 windows of delay tasks on one host with the network idle, a flow back."""
    g = TaskGraphBuilder()
    g.flow(0, 5, 3000)
    prev = None
    for _ in range(40):
        prev = g.delay(0, D, after=[prev] if prev is not None else [])
    g.flow(5, 0, 3000, after=[prev])
    return sc.experiment(fat_tree(), g, cc="dcqcn")


def switch_pool_places(cols: dict, pkt: np.ndarray, v: int) -> dict[str, list[int]]:
    """Where switch v's drawn pool slots are between windows: its free list, its ports' own lists
    (port_pool), its ports' queues (control and data). Checks each list's shape on the way."""
    nxt = pkt["next"]

    def walk(head: int, tail: int = -1) -> list[int]:
        out = []
        while head >= 0:
            out.append(int(head))
            assert len(out) <= pkt.size, "a cycle"
            if head == tail:
                break
            head = int(nxt[head])
        return out

    lo, hi = int(cols["node_port_lo"][v]), int(cols["node_port_hi"][v])
    pools, q = cols["port_pool"].reshape(-1, 2), cols["port_q"].reshape(-1, 4)
    ports = [walk(int(pools[p, 0])) for p in range(lo, hi)]
    for p, slots in zip(range(lo, hi), ports):
        assert len(slots) == pools[p, 1], f"port {p}: its list holds {len(slots)} slots, its count says {pools[p, 1]}"
    return {"free": walk(int(cols["node_pool_free"][v])), "ports": sum(ports, []),
            "queues": sum((walk(int(q[p, k]), int(q[p, k + 2])) for p in range(lo, hi) for k in (0, 1)), [])}
