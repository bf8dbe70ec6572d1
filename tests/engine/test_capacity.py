"""Packet-slot capacities (mvopt/engine/capacity.py): full rings and pools hold the model's worst
case; compact ones are a first try, and an experiment that runs out of them runs again with full
ones, so the results never depend on which it got."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.cluster import build_topology
from mvopt.config import load_config
from mvopt.engine import TaskGraphBuilder, build_batch, get_backend, simulate
from mvopt.engine.batch import extract_results
from mvopt.engine.capacity import node_pool_slots, port_ring_capacities, ring_capacity
from mvopt.engine.params import Experiment, ser_ps
from mvopt.engine.sizing import batch_bytes, experiment_counts, slot_counts
from mvopt.engine.split import run_share
from mvopt.engine.workers import Worker
from mvopt.errors import MvoptError
from mvopt.testing.scenarios import fat_tree_flows, fat_tree_incast, mixed_experiments



def test_serialization_times_of_an_array_of_rates_are_the_exact_ones() -> None:
    """ser_ps_array (ring capacities, vectorised) is ser_ps, ceil(bytes * 8e12 / rate), for
    every rate: common ones, odd ones that do not divide 8e12, the slowest and the fastest."""
    from mvopt.engine.params import ser_ps_array

    rates = np.array([1, 7, 999_999_937, 10**9, 25 * 10**9, 100 * 10**9, 3 * 10**11 + 1, 800 * 10**9, 2**62],
                     np.int64)
    for nbytes in (1, 64, 1500, 9000, 32767):
        assert ser_ps_array(nbytes, rates).tolist() == [ser_ps(nbytes, int(r)) for r in rates]

def test_rings_are_powers_of_two_and_large_enough() -> None:
    rate = np.array([10**11, 4 * 10**11, 25 * 10**9, 3 * 10**9 + 7], np.int64)
    delay = np.array([1_000_000, 500_000, 2_000_000, 1_000_000], np.int64)
    cap = ring_capacity(rate, delay, 500_000, 1500, 64)
    need = np.array([(ser_ps(1500, int(r)) + int(d) + 2 * 500_000) // ser_ps(64, int(r)) + 4
                     for r, d in zip(rate, delay)])
    assert np.all(cap >= need) and np.all(cap < 2 * need)
    assert np.all(cap & (cap - 1) == 0)


def test_wire_rings_are_sized_for_the_smallest_packet_of_the_experiment() -> None:
    """Rings hold what a port can send back to back in ser + delay + 2 windows of its smallest
    packet: an ACK, a PFC frame, or a flow's last packet (header + remainder of its payload)."""
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}})
    topo = build_topology(cfg.cluster)

    def exp(size: int) -> Experiment:
        g = TaskGraphBuilder()
        g.flow(0, 5, size)
        return Experiment(topology=topo, network=cfg.network, tasks=g.build())

    net = cfg.network
    whole, tiny = exp(3 * net.payload_bytes), exp(3 * net.payload_bytes + 1)
    assert whole.params.min_wire_bytes == min(net.ack_bytes, net.pfc.frame_bytes)
    assert tiny.params.min_wire_bytes == net.header_bytes + 1
    assert (port_ring_capacities(topo, tiny.params) >= port_ring_capacities(topo, whole.params)).all()
    b = build_batch([tiny])
    rate = np.asarray(topo.port_rate_bps, np.int64)
    need = (ser_ps(net.payload_bytes + net.header_bytes, int(rate[0])) + int(topo.port_delay_ps[0])
            + 2 * tiny.params.window_ps) // ser_ps(net.header_bytes + 1, int(rate[0])) + 4
    assert b.cols["port_wire"][1] >= need


def _tiny_flows() -> Experiment:
    """One host starts 400 one-byte flows at once: header-sized packets back to back, far more
    on its wire than a compact ring (sized for full packets) holds."""
    return fat_tree_flows([(1, 2 + k % 13) for k in range(400)], 1)


def _deep_incast(**net) -> Experiment:
    """The last switch holds ~6,800 packets at its peak (PFC on), beyond its compact pool (an
    eighth of the 32 MB buffer: ~4,000)."""
    return fat_tree_incast(**net)


def test_compact_capacities_are_smaller_powers_of_two_and_hold_two_full_packets_per_transmission() -> None:
    exp = mixed_experiments(1)[0]
    topo, p = exp.topology, exp.params
    full, small = port_ring_capacities(topo, p), port_ring_capacities(topo, p, compact=True)
    assert (small <= full).all() and small.sum() < full.sum()
    assert np.all(small & (small - 1) == 0)
    rate = np.asarray(topo.port_rate_bps, np.int64)
    pkt = p.payload + p.header
    span = np.array([ser_ps(pkt, int(r)) for r in rate]) + np.asarray(topo.port_delay_ps) + 2 * p.window_ps
    assert (small >= 2 * (span // np.array([ser_ps(pkt, int(r)) for r in rate])) + 16).all()
    pools, small_pools = node_pool_slots(topo, p), node_pool_slots(topo, p, compact=True)
    nh = int(topo.n_host)
    assert (small_pools[:nh] == pools[:nh]).all()                # host control pools never shrink
    assert (small_pools[nh:] < pools[nh:]).all()
    assert experiment_counts(exp, compact=True)["n_slot"] == int(small.sum() + small_pools.sum())
    assert {**experiment_counts(exp), **slot_counts(exp, True)} == experiment_counts(exp, compact=True)
    assert batch_bytes(experiment_counts(exp, compact=True)) < batch_bytes(experiment_counts(exp))


def test_compact_batch_gives_the_full_batch_results(backend: str) -> None:
    exps = mixed_experiments(8)
    full = build_batch(exps)
    small = build_batch(exps, compact=True)
    assert small.counts["n_slot"] < full.counts["n_slot"]
    be = get_backend(backend)
    a = extract_results(full, be.run(full))
    b = extract_results(small, be.run(small))
    assert [r.status for r in a] == ["done"] * 8
    assert all(x.same_as(y) for x, y in zip(a, b))


@pytest.mark.parametrize("make, where", [(_deep_incast, "packet pools of nodes"), (_tiny_flows, "a wire ring")],
                         ids=["pool", "ring"])
def test_running_out_of_compact_slots_stops_the_experiment_and_a_full_rerun_gives_the_full_results(
        make, where: str, backend: str) -> None:
    exp = make()
    batch = build_batch([exp, mixed_experiments(1)[0]], compact=True)
    first = extract_results(batch, get_backend(backend).run(batch))
    assert first[0].status == "capacity" and "compact packet slots" in first[0].diagnostic
    assert where in first[0].diagnostic
    assert first[1].status == "done"          # its neighbour in the batch is not disturbed
    full, full_stats = run_share(Worker("cpu"), [exp], capacities="full")
    again, stats = run_share(Worker(backend), [exp, mixed_experiments(1)[0]], capacities="compact")
    assert full[0].status == "done" and full_stats["rerun_full"] == 0
    # the GPU runs it again after its sub-batch; the CPU at once, on a thread of its own, unless
    # its sub-batch ended first (mvopt/engine/reruns.py)
    assert stats["compact"] and stats["rerun_full"] + stats.get("rerun_early", 0) == 1
    assert stats["sub_batches"] == 1 + stats["rerun_full"]
    assert again[0].same_as(full[0])


def test_user_sized_switch_pools_are_a_model_parameter_and_never_compact() -> None:
    """network.switch_packet_slots: running out drops the packet (the model), not a retry."""
    from mvopt.engine.schema import EI
    exp = _deep_incast(switch_packet_slots=256)       # PFC on: the dropped flows never finish (stuck)
    topo, p = exp.topology, exp.params
    assert (node_pool_slots(topo, p) == node_pool_slots(topo, p, compact=True)).all()
    batch = build_batch([exp], compact=True)
    assert batch.cols["exp_i"][EI.index("compact_pools")] == 0      # one experiment: its row is exp_i
    full = simulate([exp], capacities="full")[0]
    (small,), stats = run_share(Worker("cpu"), [exp], capacities="compact")
    assert full.counters["data_packets_dropped"] > 0 and full.status == "stuck"
    assert stats["rerun_full"] == 0          # the drops were the model's, not a first try running out
    assert small.same_as(full)


def test_auto_uses_compact_slots_on_the_cpu_and_where_full_ones_need_more_than_one_batch() -> None:
    """`auto`: compact slots first on the CPU (faster there, docs/engine.md), and on a GPU only when
    full ones need more than one batch of its memory; `full` and `compact` as they say."""
    from mvopt.engine.split import compact_first

    assert compact_first("auto", Worker("cpu"), 1) and compact_first("auto", Worker("gpu"), 2)
    assert not compact_first("auto", Worker("gpu"), 1)
    assert not compact_first("full", Worker("cpu"), 3) and compact_first("compact", Worker("gpu"), 1)
    exps = mixed_experiments(6)
    one = max(batch_bytes(experiment_counts(e)) for e in exps)
    _, roomy = run_share(Worker("cpu"), exps, memory_bytes=10 * sum(batch_bytes(experiment_counts(e)) for e in exps))
    _, tight = run_share(Worker("cpu"), exps, memory_bytes=int(1.5 * one))
    _, full = run_share(Worker("cpu"), exps, memory_bytes=int(1.5 * one), capacities="full")
    assert roomy["compact"] and roomy["sub_batches"] == 1
    assert tight["compact"] and not full["compact"] and full["sub_batches"] > tight["sub_batches"]
    small_total = sum(batch_bytes(experiment_counts(e, compact=True)) for e in exps)
    assert tight["sub_batches"] <= -(-small_total // int(1.5 * one)) + 1


def test_capacity_status_of_a_full_batch_is_an_internal_error() -> None:
    """Full capacities cannot run out; if the kernels said so, the user sees an error, never a
    silent retry."""
    exps = mixed_experiments(2)
    batch = build_batch(exps)
    iters = get_backend("cpu").run(batch)
    batch.cols["exp_status"][0] = 5
    r = extract_results(batch, iters)
    assert r[0].status == "error" and "bug" in r[0].diagnostic and r[1].status == "done"


def test_unknown_capacity_mode_is_refused() -> None:
    with pytest.raises(MvoptError, match="capacities 'small'"):
        simulate(mixed_experiments(1), capacities="small")
