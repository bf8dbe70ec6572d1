"""The SPME engine (every backend): closed forms, agreement with the reference, invariants,
behaviour, bad input.

Every test takes the ``backend`` fixture (tests/engine/conftest.py): the same body runs on the
CPU backend and, where CuPy sees a GPU, on the GPU backend. The reference simulator
(:mod:`mvopt.engine.reference`) is the oracle of the agreement tests.
"""

from __future__ import annotations

import dataclasses
import itertools
from functools import lru_cache

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mvopt.cluster import CompiledTopology, build_topology
from mvopt.config import load_config
from mvopt.engine import COUNTERS, Experiment, ExperimentResult, TaskGraphBuilder, simulate
from mvopt.engine.params import TAG_ECMP, hash64, ser_ps
from mvopt.engine.reference import simulate_reference
from mvopt.errors import ConfigError
from mvopt.testing import scenarios as sc

RATE = 100 * 10**9
D = 1_000_000                      # 1 us: the default link delay, in ps
PAYLOAD, HEADER, ACK = 1000, 48, 60
T = ser_ps(PAYLOAD + HEADER, RATE)  # one full packet at 100 Gb/s: 83.84 ns
A_ACK = ser_ps(ACK, RATE)


# ------------------------------------------------------------------------------------ helpers


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


def ecmp_path(topo, seed: int, flow: int, src: int, dst: int) -> list[int]:
    """Ports a flow's packets take under ECMP (as docs/engine.md hashes them)."""
    port = int(topo.node_port_offset[src])
    path = [port]
    node = int(topo.port_peer_node[port])
    while node != dst:
        nh = topo.next_hop_ports(node, dst)
        port = int(nh[hash64(seed, TAG_ECMP, node, flow) % len(nh)])
        path.append(port)
        node = int(topo.port_peer_node[port])
    return path


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


def ideal_fct(topo, p, flow: int, src: int, dst: int, size: int) -> int:
    """FCT of the flow alone on an idle path at line rate (no CC slowdown): every packet through
    every hop store-and-forward, then the last ACK back (not counting a wait behind the previous
    ACK). A lower bound of the flow's FCT in any scenario."""
    hops, port, node = [], int(topo.node_port_offset[src]), src
    while True:
        hops.append((int(topo.port_rate_bps[port]), int(topo.port_delay_ps[port])))
        node = int(topo.port_peer_node[port])
        if node == dst:
            break
        port = int(topo.next_hop_ports(node, dst)[0])
    n = -(-size // p.payload)
    free = [0] * len(hops)
    t_send = 0
    arrive = 0
    for k in range(n):
        b = min(p.payload, size - k * p.payload) + p.header
        t = t_send
        t_send += ser_ps(b, hops[0][0])
        for h, (rate, delay) in enumerate(hops):
            t = max(t, free[h])
            free[h] = t + ser_ps(b, rate)
            t = free[h] + delay
        arrive = t
    return arrive + sum(ser_ps(p.ack_bytes, r) + d for r, d in hops)


# ------------------------------------------------------------------------------------ 1. closed forms


@pytest.mark.parametrize("dst,hops", [(1, 2), (2, 4), (4, 6)], ids=["same-edge", "same-pod", "other-pod"])
@pytest.mark.parametrize("size", [1, 1000, 1001, 7_777, 64_000])
def test_single_flow_closed_form_on_a_fat_tree(backend, dst: int, hops: int, size: int) -> None:
    topo = fat_tree()
    start = 3 * D + 17
    g = TaskGraphBuilder()
    g.flow(0, dst, size, start_ps=start)
    exp = sc.experiment(topo, g, cc="none")
    r = run1(backend, exp)
    assert r.status == "done", r.diagnostic
    assert len(ecmp_path(topo, exp.seed, 0, 0, dst)) == hops
    n = -(-size // PAYLOAD)
    delivery = last_delivery(n, hops, size - (n - 1) * PAYLOAD)
    # The last ACK leaves the receiver's NIC at the delivery, unless the previous packet's ACK
    # (sent T_L earlier) still occupies it: a last packet shorter than an ACK (T_L < ser(ack)).
    t_last = ser_ps(size - (n - 1) * PAYLOAD + HEADER, RATE)
    ack_wait = max(0, A_ACK - t_last) if n > 1 else 0
    ack_return = ack_wait + hops * (A_ACK + D)
    assert r.task_start_ps.tolist() == [start]
    assert r.task_finish_ps.tolist() == [start + delivery]
    assert r.makespan_ps == start + delivery
    assert r.flow_fct_ps.tolist() == [delivery + ack_return]
    assert r.end_ps == start + delivery + ack_return
    c = r.counters
    assert c["data_packets_sent"] == c["data_packets_delivered"] == c["control_packets_sent"] == n
    assert c["data_bytes_sent"] == c["data_bytes_delivered"] == size
    assert c["packet_hops"] == 2 * n * hops
    assert sum(c[k] for k in ("out_of_order_packets", "data_packets_dropped", "data_packets_retransmitted",
                              "pfc_pauses", "timeouts", "nacks_sent")) == 0
    assert ideal_fct(topo, exp.params, 0, 0, dst, size) == delivery + hops * (A_ACK + D)


@pytest.mark.parametrize("sizes", [(40, 40), (25, 40), (40, 9)], ids=str)
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_two_flows_share_a_bottleneck_round_robin(backend, sizes, seed: int) -> None:
    """Hosts 0 and 1 (one edge switch) send to host 2 (same pod) at line rate, cc none.

    Derivation: both streams reach the first switch S where their paths share an egress port
    (edge 0 if ECMP picks the same aggregation switch for both, else edge 1), m hops from the
    sources, at the same instants m(T + d) + kT. S handles the two simultaneous arrivals in the
    order of its ingress port ids (A, the lower one, first), so its egress sends A0 B0 A1 B1 ...
    and, once the shorter flow is exhausted, the rest of the longer one; the egress never idles
    (one packet in per T per flow, one out per T). Stream packet j therefore leaves S at
    m(T + d) + jT and is delivered H - m hops later: H (T + d) + jT. The shorter flow's last
    packet is stream packet 2(n - 1) (A) or 2(n - 1) + 1 (B), the longer flow's the very last,
    nA + nB - 1. The egress queue peaks right after the last double arrival.
    """
    topo = fat_tree()
    na, nb = sizes
    g = TaskGraphBuilder()
    g.flow(0, 2, na * PAYLOAD)
    g.flow(1, 2, nb * PAYLOAD)
    exp = sc.experiment(topo, g, cc="none", seed=seed)
    r = run1(backend, exp)
    assert r.status == "done", r.diagnostic
    paths = [ecmp_path(topo, seed, f, f, 2) for f in (0, 1)]
    hops = len(paths[0])
    m = next(i for i, (p, q) in enumerate(zip(*paths)) if p == q)   # the shared egress, hop m
    ingress = [int(topo.port_peer_port[path[m - 1]]) for path in paths]
    first = 0 if ingress[0] < ingress[1] else 1                        # A
    n = [na, nb]
    # stream position of each flow's last packet
    short = min((0, 1), key=lambda f: (n[f], f != first))
    pos = [0, 0]
    if n[0] == n[1]:
        pos[first], pos[1 - first] = 2 * n[0] - 2, 2 * n[0] - 1
    else:
        pos[short] = 2 * (n[short] - 1) + (0 if short == first else 1)
        pos[1 - short] = na + nb - 1
    expect = [hops * (T + D) + pos[f] * T for f in (0, 1)]
    assert r.task_finish_ps.tolist() == expect
    assert r.makespan_ps == hops * (T + D) + (na + nb - 1) * T
    # egress queue at S after the k-th pair of arrivals (pushed before the dequeue): k + 2 packets
    assert r.port_max_queue_bytes[paths[0][m]] == (min(na, nb) + 1) * (PAYLOAD + HEADER)
    assert r.counters["data_packets_dropped"] == r.counters["pfc_pauses"] == 0
