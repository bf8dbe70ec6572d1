"""The pure-Python reference simulator: closed forms, scheduling rules, invariants, every CC."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mvopt.engine.params import TAG_ECMP, TR_SR, Experiment, hash64, ser_ps
from mvopt.engine.reference import (ACK as ACK_KIND, T_ALPHA, T_DECREASE, T_INCREASE, Dcqcn, Dctcp,
                                    FlowSender, Hpcc, IntHop, Packet, simulate_reference,
                                    simulate_reference_many)
from mvopt.engine.results import COUNTERS, ExperimentResult
from mvopt.engine.tasks import TaskGraphBuilder
from mvopt.testing.scenarios import dumbbell, experiment, incast, leaf_spine, line, ring, star

RATE = 100 * 10**9
D = 1_000_000                 # 1 us link delay in ps (the scenarios' default)
PAYLOAD, HEADER, ACK = 1000, 48, 60
T = ser_ps(PAYLOAD + HEADER, RATE)


def check_conservation(r: ExperimentResult) -> None:
    """Every data packet sent was delivered, dropped, discarded or is still in the network."""
    c, x = r.counters, r.extra
    assert set(c) == set(COUNTERS)
    assert c["data_packets_sent"] == (c["data_packets_delivered"] + c["data_packets_dropped"]
                                      + c["out_of_order_packets"] + x["data_packets_in_network"])
    assert c["data_bytes_sent"] == (c["data_bytes_delivered"] + c["data_bytes_dropped"]
                                    + x["out_of_order_bytes"] + x["data_bytes_in_network"])


def check_done(r: ExperimentResult, exp: Experiment | None = None) -> None:
    """Status done, and what 'done' implies about times and control traffic (`exp`: the
    experiment, when it may use selective repeat, which acknowledges every arrival)."""
    assert r.status == "done", r.diagnostic
    assert (r.task_start_ps >= 0).all() and (r.task_finish_ps >= r.task_start_ps).all()
    assert r.makespan_ps == r.task_finish_ps.max()
    flow_finish = r.task_finish_ps[r.flow_ids] - r.task_start_ps[r.flow_ids]
    assert (r.flow_fct_ps > flow_finish).all()          # the last ACK returns after the delivery
    c = r.counters
    if c["control_packets_dropped"] == 0:               # one ACK per in-order packet, all sent
        sr = exp is not None and exp.params.transport == TR_SR     # (sr: one ACK per arrival, no NACK)
        acks = c["data_packets_delivered"] + (c["out_of_order_packets"] if sr else c["nacks_sent"])
        assert c["control_packets_sent"] == acks + c["pfc_pauses"] + c["pfc_resumes"]
    check_conservation(r)


# ------------------------------------------------------------------------------------ closed forms


def last_delivery(n: int, hops: int, last_payload: int) -> int:
    """Delivery time of packet n-1 of a flow alone on ``hops`` equal-rate links, sent from 0.

    Packets leave back to back every T; each hop adds T + d. The short last packet (T_L) is
    held behind its full-size predecessor at every switch, so only its last hop is shorter.
    """
    t_last = ser_ps(last_payload + HEADER, RATE)
    if n == 1:
        return hops * (t_last + D)
    return (n - 1) * T + (hops - 1) * (T + D) + t_last + D


@pytest.mark.parametrize("switches", [0, 1, 3])
@pytest.mark.parametrize("size", [1000, 10_000, 10_500, 7_777])
def test_single_flow_closed_form(switches: int, size: int) -> None:
    hops = switches + 1
    g = TaskGraphBuilder()
    g.flow(0, 1, size, start_ps=3 * D)
    r = simulate_reference(experiment(line(switches), g, cc="none"))
    check_done(r)
    n = -(-size // PAYLOAD)
    delivery = last_delivery(n, hops, size - (n - 1) * PAYLOAD)
    ack_return = hops * (ser_ps(ACK, RATE) + D)
    assert r.task_start_ps.tolist() == [3 * D]
    assert r.task_finish_ps.tolist() == [3 * D + delivery]
    assert r.flow_fct_ps.tolist() == [delivery + ack_return]
    assert r.end_ps == 3 * D + delivery + ack_return
    c = r.counters
    assert c["data_packets_sent"] == c["data_packets_delivered"] == c["control_packets_sent"] == n
    assert c["data_bytes_delivered"] == size
    assert c["packet_hops"] == 2 * n * hops
    assert c["out_of_order_packets"] == c["data_packets_dropped"] == c["pfc_pauses"] == 0


def test_two_flows_share_a_bottleneck_round_robin() -> None:
    """Two line-rate senders into one port: the switch alternates them, one packet each per 2T."""
    n = 30
    g = TaskGraphBuilder()
    g.flow(0, 2, n * PAYLOAD)
    g.flow(1, 2, n * PAYLOAD)
    r = simulate_reference(experiment(star(3), g, cc="none"))
    check_done(r)
    # Both first packets reach the switch at T + d; host 0's ingress port has the lower index,
    # so the egress order is 0,1,0,1,...; egress packet j is delivered at 2d + (j + 2) T.
    assert r.task_finish_ps.tolist() == [2 * D + 2 * n * T, 2 * D + (2 * n + 1) * T]
    assert r.counters["pfc_pauses"] == 0
    # After the two arrivals at T + d + kT the egress queue holds k + 2 packets, then sends one.
    assert r.port_max_queue_bytes.max() == (n + 1) * (PAYLOAD + HEADER)


def test_task_dependencies_and_remote_notification() -> None:
    """Local predecessors notify at once, remote ones one window W (the min link delay) later."""
    W = D
    g = TaskGraphBuilder()
    a = g.delay(0, 5 * D)                                   # host 0
    f = g.flow(0, 1, 3000, after=[a])                       # local: starts when a ends
    b = g.delay(1, 2 * D, after=[f])                        # f finishes at its dst, host 1: local
    c = g.delay(0, D, after=[b])                            # remote
    d = g.delay(0, D, after=[f])                            # the flow finished on host 1: remote
    e = g.flow(1, 0, 1000, after=[a], start_ps=20 * D)      # start time dominates a's W
    z = g.delay(1, 0, after=[a, e])                         # e finishes at its dst, host 0: remote
    r = simulate_reference(experiment(line(1), g, cc="none"))
    check_done(r)
    start, finish = r.task_start_ps, r.task_finish_ps
    f_end = 5 * D + last_delivery(3, 2, PAYLOAD)
    assert (start[a], finish[a]) == (0, 5 * D)
    assert (start[f], finish[f]) == (5 * D, f_end)
    assert (start[b], finish[b]) == (f_end, f_end + 2 * D)
    assert (start[c], finish[c]) == (f_end + 2 * D + W, f_end + 3 * D + W)
    assert (start[d], finish[d]) == (f_end + W, f_end + D + W)
    assert (start[e], finish[e]) == (20 * D, 20 * D + last_delivery(1, 2, PAYLOAD))
    assert start[z] == finish[z] == finish[e] + W
    assert r.makespan_ps == max(finish)


def test_flow_successor_on_the_source_is_remote() -> None:
    g = TaskGraphBuilder()
    f = g.flow(0, 1, 2000)
    s = g.delay(0, D, after=[f])
    r = simulate_reference(experiment(line(1), g, cc="none"))
    assert r.task_start_ps[s] == r.task_finish_ps[f] + D


# ------------------------------------------------------------------------------------ PFC, drops, CC


def test_incast_with_pfc_pauses_and_is_lossless() -> None:
    r = simulate_reference(incast(8, 150_000, cc="none", buffer_mb=1.0))
    check_done(r)
    c = r.counters
    assert c["pfc_pauses"] > 0 and c["pfc_resumes"] > 0
    assert c["data_packets_dropped"] == 0 and c["data_packets_retransmitted"] == 0
    assert r.port_max_queue_bytes.max() <= 1.0 * 2**20


def test_lossy_incast_drops_and_recovers_by_nack_and_rto() -> None:
    r = simulate_reference(incast(6, 100_000, cc="none", pfc={"enabled": False}, buffer_mb=0.2))
    check_done(r)
    c = r.counters
    assert c["data_packets_dropped"] > 0 and c["pfc_pauses"] == 0
    assert c["nacks_sent"] > 0 and c["data_packets_retransmitted"] > 0 and c["timeouts"] > 0
    assert r.port_max_queue_bytes.max() <= 0.2 * 2**20


@pytest.mark.parametrize("cc", ["none", "dcqcn", "hpcc", "dctcp"])
def test_every_cc_completes_an_incast(cc: str) -> None:
    r = simulate_reference(incast(8, 200_000, cc=cc, buffer_mb=2.0))
    check_done(r)
    assert r.counters["data_packets_dropped"] == 0
    if cc in ("dcqcn", "dctcp"):
        assert r.counters["ecn_marks"] > 0


def test_congestion_control_changes_the_outcome() -> None:
    results = {cc: simulate_reference(incast(8, 200_000, cc=cc, buffer_mb=2.0)) for cc in ("none", "dcqcn", "hpcc")}
    assert results["dcqcn"].makespan_ps != results["none"].makespan_ps
    assert results["hpcc"].port_max_queue_bytes.max() < results["none"].port_max_queue_bytes.max()


def test_pfc_deadlock_is_reported_stuck() -> None:
    """A ring routed one way round with small buffers: a cyclic buffer dependency."""
    g = TaskGraphBuilder()
    for i in range(3):
        g.flow(i, (i + 2) % 3, 2_000_000)
    r = simulate_reference(experiment(ring(3), g, cc="none", buffer_mb=0.5, time_limit_ps=10**10))
    assert r.status == "stuck"
    assert "unfinished flows: 0 (0->2" in r.diagnostic and "paused ports: 0 (node 0)" in r.diagnostic
    assert (r.flow_fct_ps == -1).all()
    check_conservation(r)


def test_time_limit() -> None:
    g = TaskGraphBuilder()
    g.flow(0, 1, 100_000)
    r = simulate_reference(experiment(line(1), g, cc="none", time_limit_ps=5 * D))
    assert r.status == "timeout" and r.end_ps == 5 * D
    assert r.task_finish_ps.tolist() == [-1] and r.flow_fct_ps.tolist() == [-1]


# ------------------------------------------------------------------------------------ load balancing


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_ecmp_uses_the_hashed_next_hop(seed: int) -> None:
    topo = leaf_spine(n_leaf=2, n_spine=2, hosts_per_leaf=1)
    g = TaskGraphBuilder()
    g.flow(0, 1, 20_000)
    r = simulate_reference(experiment(topo, g, cc="none", seed=seed))
    check_done(r)
    leaf = 2
    uplinks = topo.next_hop_ports(leaf, 1)
    chosen = int(uplinks[hash64(seed, TAG_ECMP, leaf, 0) % len(uplinks)])
    used = [int(p) for p in uplinks if r.port_max_queue_bytes[p] > 0]
    assert used == [chosen]
    assert r.counters["out_of_order_packets"] == 0


def test_spraying_uses_every_path() -> None:
    topo = leaf_spine(n_leaf=2, n_spine=4, hosts_per_leaf=1)
    g = TaskGraphBuilder()
    g.flow(0, 1, 50_000)
    r = simulate_reference(experiment(topo, g, cc="none", lb="spray"))
    check_done(r)
    assert (r.port_max_queue_bytes[topo.next_hop_ports(2, 1)] > 0).all()


def test_fat_tree_all_ccs_and_load_balancers() -> None:
    from mvopt.cluster import build_topology
    from mvopt.config import load_config
    topo = build_topology(load_config({"cluster": {"topology": "fat_tree", "k": 4}}).cluster)
    g = TaskGraphBuilder()
    for i in range(topo.n_host):
        g.flow(i, (i + 5) % topo.n_host, 20_000)
    for cc, lb in [("dcqcn", "ecmp"), ("hpcc", "spray"), ("dctcp", "ecmp")]:
        exp = experiment(topo, g, cc=cc, lb=lb)
        check_done(simulate_reference(exp), exp)


# ------------------------------------------------------------------------------------ CC units


def one_flow(cc: str) -> tuple:
    exp = incast(1, 100_000, cc=cc)
    p = exp.params
    return p, FlowSender(0, 1, 0, 100_000, 0, p)


def test_dcqcn_first_cnp_then_timers() -> None:
    p, flow = one_flow("dcqcn")
    armed: dict[int, int] = {}
    cc = Dcqcn(p, float(flow.line), lambda kind, due: armed.__setitem__(kind, due))
    line = float(flow.line)
    cc.on_feedback(flow, Packet(ACK_KIND, ACK, seq=1, ce=True), 100)
    assert flow.rate == line and cc.alpha == 1.0 and not cc.cnp_alpha and cc.cnp_decrease
    assert armed == {T_ALPHA: 100 + p.dcqcn_alpha_ps, T_DECREASE: 100 + p.dcqcn_dec_ps}
    cc.on_timer(flow, T_ALPHA, armed[T_ALPHA])
    assert cc.alpha == 1 - p.dcqcn_g                        # no CNP since: decay
    t = armed[T_DECREASE]
    cc.on_timer(flow, T_DECREASE, t)                        # the first CNP's flag cuts the rate
    cut = line * (1 - cc.alpha / 2)
    assert flow.rate == cut and cc.target == line and armed[T_INCREASE] == t + p.dcqcn_inc_ps
    rates = []
    for _ in range(3):                                      # F = 1: fast recovery, AI, hyper
        cc.on_timer(flow, T_INCREASE, armed[T_INCREASE])
        rates.append((flow.rate, cc.target))
    assert rates[0] == ((cut + line) / 2, line)
    assert cc.stage == 3 and rates[2][1] == line            # the target stays capped at line rate


def test_dctcp_batches_and_cwr() -> None:
    p, flow = one_flow("dctcp")
    cc = Dctcp(p, float(flow.line))
    flow.snd_nxt = 10
    cc.on_feedback(flow, Packet(ACK_KIND, ACK, seq=1, ce=True), 0)    # first batch; ECN: cut, CWR
    assert cc.last_update_seq == 10 and cc.batch == 11 and cc.cwr and cc.high_seq == 10
    assert flow.rate == max(p.dctcp_min, flow.line * 0.5)
    flow.snd_nxt = 20
    cc.on_feedback(flow, Packet(ACK_KIND, ACK, seq=11), 0)             # new batch, leaves CWR, AI
    assert cc.alpha == (1 - p.dctcp_g) + p.dctcp_g * (1 / 11) and cc.batch == 20 - 11 + 1
    assert not cc.cwr and flow.rate == flow.line * 0.5 + p.dctcp_rai


def test_hpcc_first_feedback_records_and_commits_once_per_rtt() -> None:
    p, flow = one_flow("hpcc")
    cc = Hpcc(p, float(flow.line))
    hop = lambda ts, tx, q: (IntHop(ts, tx, q, RATE),)                 # noqa: E731
    flow.snd_nxt = 5
    cc.on_feedback(flow, Packet(ACK_KIND, ACK, seq=1, hops=hop(1000, 0, 0)), 0)
    assert cc.last_update_seq == 5 and flow.rate == flow.line
    # 2 * 1048 B in 10 ns at 100 Gb/s = 1.6768 utilisation, plus a standing queue: cut, commit
    flow.snd_nxt = 15
    cc.on_feedback(flow, Packet(ACK_KIND, ACK, seq=6, hops=hop(11_000, 2096, 50_000)), 0)
    assert flow.rate < flow.line and cc.rc == flow.rate and cc.stage == 0 and cc.last_update_seq == 15
    committed = cc.rc
    cc.on_feedback(flow, Packet(ACK_KIND, ACK, seq=7, hops=hop(21_000, 3144, 0)), 0)  # within the RTT
    assert flow.rate != committed and cc.rc == committed and cc.last_update_seq == 15
    fast = flow.rate
    cc.on_feedback(flow, Packet(ACK_KIND, ACK, seq=8, hops=hop(21_000, 3144, 0)), 0)  # tau = 0: unused
    assert flow.rate == fast and cc.rc == committed


def test_variable_window() -> None:
    _, flow = one_flow("hpcc")
    assert flow.win > 0
    flow.rate = flow.line / 4
    flow.snd_nxt = -(-flow.win // 4 // PAYLOAD)
    assert flow.window_bound() and (flow.snd_nxt - 1) * PAYLOAD < flow.win // 4


# ------------------------------------------------------------------------------------ determinism


def test_deterministic_and_independent_of_batch() -> None:
    exps = [incast(4, 50_000, cc="dcqcn", buffer_mb=1.0), incast(3, 30_000, cc="hpcc")]
    alone = [simulate_reference(e) for e in exps]
    together = simulate_reference_many(exps[::-1])[::-1]
    assert all(a.same_as(b) for a, b in zip(alone, together))


# ------------------------------------------------------------------------------------ random scenarios


@st.composite
def scenarios(draw: st.DrawFn):
    """A small topology, a few flows and delays with dependencies, any CC / LB / PFC / buffer."""
    kind = draw(st.sampled_from(["star", "dumbbell", "leaf_spine"]))
    topo = {"star": lambda: star(4), "dumbbell": lambda: dumbbell(2, 2, bottleneck_gbps=50),
            "leaf_spine": lambda: leaf_spine(2, 2, 2)}[kind]()
    hosts = st.integers(0, topo.n_host - 1)
    g = TaskGraphBuilder()
    ids: list[int] = []
    for _ in range(draw(st.integers(1, 6))):
        after = draw(st.lists(st.sampled_from(ids), max_size=2, unique=True)) if ids and draw(st.booleans()) else []
        if draw(st.integers(0, 4)) == 0:
            ids.append(g.delay(draw(hosts), draw(st.integers(0, 5 * D)), after=after))
            continue
        dst = draw(st.one_of(st.just(topo.n_host - 1), hosts))      # often an incast
        src = draw(hosts.filter(lambda h: h != dst))
        size = draw(st.one_of(st.sampled_from([1, 999, 1000, 1001, 60_000, 150_000]), st.integers(1, 150_000)))
        ids.append(g.flow(src, dst, size, after=after, start_ps=draw(st.integers(0, 3 * D))))
    pfc = draw(st.booleans())
    net = dict(cc=draw(st.sampled_from(["none", "dcqcn", "hpcc", "dctcp"])), lb=draw(st.sampled_from(["ecmp", "spray"])),
               pfc={"enabled": pfc}, buffer_mb=draw(st.sampled_from([0.05, 0.5, 2.0])))
    return experiment(topo, g, seed=draw(st.integers(0, 2**32)), time_limit_ps=10**11, **net), pfc, net["buffer_mb"]


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios())
def test_random_scenarios_keep_the_invariants(case) -> None:
    exp, pfc, buffer_mb = case
    r = simulate_reference(exp)
    check_done(r, exp)
    if pfc:
        assert r.counters["data_packets_dropped"] == 0
    if not pfc or buffer_mb >= 0.5:
        assert r.port_max_queue_bytes.max() <= buffer_mb * 2**20
    assert r.windows >= 1 and r.end_ps >= r.makespan_ps
    assert np.array_equal(r.flow_standalone_ps, exp.params.flow_standalone_ps[r.flow_ids])
