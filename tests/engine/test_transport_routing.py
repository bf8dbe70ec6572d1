"""Selective repeat (network.transport: sr) and adaptive routing (network.lb: adaptive): the
engine against the reference simulator and the properties docs/engine.md states (every backend)."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
import pytest

from mvopt.engine import TaskGraphBuilder
from mvopt.engine.params import LB_ADAPTIVE, TR_GBN, TR_SR
from mvopt.engine.reference import simulate_reference
from mvopt.errors import ConfigError
from mvopt.testing import scenarios as sc

from engine_cases import TOPOLOGIES, PAYLOAD, assert_matches_reference, check_invariants, compiled, fat_tree, incast, run, task_graphs, topology


def test_transport_defaults_follow_the_load_balancer() -> None:
    """Per-packet routes reorder a flow, so they default to selective repeat; ECMP keeps go-back-N."""
    assert sc.network(lb="ecmp").resolved_transport == "gbn"
    assert sc.network(lb="spray").resolved_transport == "sr"
    assert sc.network(lb="adaptive").resolved_transport == "sr"
    assert sc.network(lb="spray", transport="gbn").resolved_transport == "gbn"
    with pytest.raises(ConfigError, match="network.transport"):
        sc.network(transport="tcp")


def _delivered_exactly_once(r, exp) -> None:
    sizes = exp.tasks.size_bytes[exp.tasks.kind == 0]
    assert r.counters["data_bytes_delivered"] == int(sizes.sum())
    assert r.counters["data_packets_delivered"] == int(exp.params.flow_npkt.sum())
    # every arrival is delivered once or discarded; the rest is still in the network
    c = r.counters
    arrived = c["data_packets_delivered"] + c["out_of_order_packets"]
    assert arrived + c["data_packets_dropped"] <= c["data_packets_sent"]


@st.composite
def lossy_sr_experiments(draw: st.DrawFn):
    name = draw(st.sampled_from(sorted(TOPOLOGIES)))
    topo = topology(name)
    g = draw(task_graphs(int(topo.n_host), 6, 120_000, 400_000))
    net = dict(cc=draw(st.sampled_from(["none", "dcqcn", "hpcc", "dctcp"])),
               lb=draw(st.sampled_from(["ecmp", "spray", "adaptive"])), transport="sr",
               pfc={"enabled": draw(st.sampled_from([False, False, True]))},
               rto_us=draw(st.sampled_from([30.0, 100.0])))
    # (a lossless switch of 0.02 MB can drop already: its headroom does not fit the buffer)
    net["buffer_mb"] = draw(st.sampled_from([0.02, 0.05, 0.1] if not net["pfc"]["enabled"] else [0.1, 0.3]))
    if draw(st.booleans()):
        net["switch_packet_slots"] = draw(st.sampled_from([20, 60]))
    return sc.experiment(topo, g, seed=draw(st.integers(0, 2**63 - 1)), name=name, **net)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(exp=lossy_sr_experiments())
def test_selective_repeat_delivers_every_byte_once_under_drops_and_reordering(exp) -> None:
    """Small buffers and few packet slots drop packets, per-packet routes reorder them: the engine
    equals the reference, keeps the invariants of every result, and delivers every flow's bytes
    exactly once."""
    (r,) = run("cpu", exp)
    ref = simulate_reference(exp)
    assert_matches_reference(r, exp, ref)
    check_invariants(exp, r)
    if r.status == "done":
        _delivered_exactly_once(r, exp)


def test_selective_repeat_repairs_drops_selectively(backend) -> None:
    """A lossy 8-to-1 incast into a small buffer: packets are dropped, and since nothing reorders on
    a star every hole is a loss: exactly the dropped packets are sent again (go-back-N also resends
    packets the receiver had, and discards), and every byte arrives exactly once."""
    sr, gbn = (incast("none", 200_000, pfc={"enabled": False}, buffer_mb=0.1, rto_us=50.0, transport=t)
               for t in ("sr", "gbn"))
    assert sr.params.transport == TR_SR and gbn.params.transport == TR_GBN
    r_sr, r_gbn = run(backend, sr, gbn)
    assert r_sr.status == r_gbn.status == "done"
    assert r_sr.counters["data_packets_dropped"] > 0 and r_gbn.counters["data_packets_dropped"] > 0
    assert r_sr.counters["data_packets_retransmitted"] == r_sr.counters["data_packets_dropped"]
    assert r_sr.counters["out_of_order_packets"] == r_sr.counters["nacks_sent"] == 0
    assert r_gbn.counters["out_of_order_packets"] > 0
    _delivered_exactly_once(r_sr, sr)
    assert_matches_reference(r_sr, sr)
    assert_matches_reference(r_gbn, gbn)


def ring_allreduce(n_host: int, chunk: int) -> TaskGraphBuilder:
    """A ring all-reduce over hosts 0..n-1: 2(n - 1) steps, host h sending a chunk to h + 1 at
    each step once its own previous send and the chunk from h - 1 of the previous step are done."""
    g = TaskGraphBuilder()
    prev = [None] * n_host
    for _ in range(2 * (n_host - 1)):
        cur = []
        for h in range(n_host):
            after = [t for t in (prev[h], prev[(h - 1) % n_host]) if t is not None]
            cur.append(g.flow(h, (h + 1) % n_host, chunk, after=after))
        prev = cur
    return g


@pytest.mark.parametrize("cc", ["none", "dcqcn", "hpcc"])
def test_spraying_with_selective_repeat_not_slower_than_ecmp_without_contention(backend, cc: str) -> None:
    """A ring all-reduce on a symmetric k=4 fat-tree: no two flows of a step share a link, so ECMP
    is contention-free; spraying under selective repeat takes equal-length paths and loses nothing."""
    topo = fat_tree()
    g = ring_allreduce(16, 64_000)
    ecmp, spray = (sc.experiment(topo, g, cc=cc, lb=lb, name=f"allreduce-{lb}") for lb in ("ecmp", "spray"))
    r_ecmp, r_spray = run(backend, ecmp, spray)
    assert r_ecmp.status == r_spray.status == "done"
    assert r_spray.counters["data_packets_retransmitted"] == 0
    assert r_spray.makespan_ps <= r_ecmp.makespan_ps


def congested_spine() -> sc.MiniTopology:
    """Hosts 0, 1 on leaf 4; hosts 2, 3 on leaf 5; spines 6 and 7. Host 1's traffic to host 3 may
    only take spine 6, whose uplink from leaf 4 runs at 25 Gb/s: that path is congested."""
    links = [(0, 4), (1, 4), (2, 5), (3, 5), (4, 6, 25), (4, 7), (5, 6), (5, 7)]
    return sc.MiniTopology(4, 4, links, routes={(4, 3): [6]})


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_adaptive_routing_avoids_a_congested_path(backend, seed: int) -> None:
    """Host 1 fills leaf 4's slow uplink to spine 6; host 0 sends to host 2, which both spines
    reach. Adaptive routing sends host 0's packets to the shorter queue, spine 7's, once spine 6's
    queue has built up; spraying sends half of them into it and finishes later."""
    topo = congested_spine()
    uplink = next(p for p in topo.ports_of(4) if int(topo.port_peer_node[p]) == 6)
    size = 400 * PAYLOAD

    def exp(lb: str):
        g = TaskGraphBuilder()
        g.flow(1, 3, size)
        g.flow(0, 2, size, start_ps=2_000_000)   # once the congested queue has formed
        return sc.experiment(compiled(topo), g, cc="none", lb=lb, seed=seed, name=lb)

    adaptive, spray = exp("adaptive"), exp("spray")
    assert adaptive.params.lb == LB_ADAPTIVE
    r_ad, r_sp = run(backend, adaptive, spray)
    assert r_ad.status == r_sp.status == "done"
    assert_matches_reference(r_ad, adaptive)
    background = 400 * (PAYLOAD + adaptive.params.header)
    # every packet host 0 sends through the slow uplink adds its wire bytes there
    probe_bytes = {lb: int(r.port_tx_bytes[uplink]) - background for lb, r in (("adaptive", r_ad), ("spray", r_sp))}
    assert probe_bytes["adaptive"] < 0.05 * size
    assert probe_bytes["spray"] > 0.3 * size
    fct = {lb: int(r.flow_fct_ps[1]) for lb, r in (("adaptive", r_ad), ("spray", r_sp))}
    assert fct["adaptive"] < fct["spray"]
    assert fct["adaptive"] <= 1.1 * int(adaptive.params.flow_standalone_ps[1])

