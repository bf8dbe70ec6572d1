"""The batch layout: what the backends rely on (ring sizes, serialization shortcut, packet-slot
placement, which columns results are read from)."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.cluster import build_topology
from mvopt.config import load_config
from mvopt.engine import TaskGraphBuilder, build_batch, get_backend
from mvopt.engine.batch import RESULT_COLUMNS, extract_results, ps_per_byte, ring_capacity, scratch_nbytes
from mvopt.engine.params import Experiment, ser_ps
from mvopt.engine import schema


def _exp(cc: str, n: int = 6, size: int = 60_000, limit_ps: int = 10 * 10**12) -> Experiment:
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": cc}})
    g = TaskGraphBuilder()
    for i in range(n):
        g.flow(i, (i + 5) % 16, size + 1000 * i)
    return Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build(), name=cc,
                      time_limit_ps=limit_ps)


def test_rings_are_powers_of_two_and_large_enough() -> None:
    rate = np.array([10**11, 4 * 10**11, 25 * 10**9, 3 * 10**9 + 7], np.int64)
    delay = np.array([1_000_000, 500_000, 2_000_000, 1_000_000], np.int64)
    cap = ring_capacity(rate, delay, 500_000, 1500, 64)
    need = np.array([(ser_ps(1500, int(r)) + int(d) + 2 * 500_000) // ser_ps(64, int(r)) + 4
                     for r, d in zip(rate, delay)])
    assert np.all(cap >= need) and np.all(cap < 2 * need)
    assert np.all(cap & (cap - 1) == 0)


def test_serialization_by_multiplication_is_exact_where_used() -> None:
    rates = np.array([10**11, 2 * 10**11, 4 * 10**11, 25 * 10**9, 3 * 10**9 + 7, 56 * 10**9], np.int64)
    ppb = ps_per_byte(rates)
    for r, k in zip(rates, ppb):
        for b in (1, 64, 1500, 9000):
            if k:
                assert b * int(k) == ser_ps(b, int(r))
    assert ppb[4] == 0                        # 8e12 is not a multiple of 3,000,000,007 b/s


def test_int_records_only_for_hpcc_slots() -> None:
    mixed = build_batch([_exp("dcqcn"), _exp("hpcc"), _exp("none")])
    hpcc_only = build_batch([_exp("hpcc")])
    assert mixed.counts["n_int"] == hpcc_only.counts["n_int"]
    assert build_batch([_exp("dcqcn")]).counts["has_int"] == 0
    assert mixed.nbytes == sum(a.nbytes for a in mixed.cols.values()) + scratch_nbytes(mixed.counts)
    assert "pkt" not in mixed.cols       # scratch: each backend allocates it where the kernels run


def test_results_read_only_the_result_columns() -> None:
    """A backend copies back RESULT_COLUMNS only: garbling every other state column after the
    run must not change any result (including the diagnostics of unfinished experiments)."""
    exps = [_exp("dcqcn"), _exp("hpcc"), _exp("none", size=10**7, limit_ps=50 * 10**6)]   # the last times out
    batch = build_batch(exps)
    iters = get_backend("cpu").run(batch, chunk_iters=40)
    before = extract_results(batch, iters)
    for col in schema.COLUMNS:
        if col.doc.startswith("state") and col.name not in RESULT_COLUMNS:
            batch.cols[col.name][...] = np.frombuffer(np.random.default_rng(1).bytes(batch.cols[col.name].nbytes),
                                                      batch.cols[col.name].dtype).reshape(batch.cols[col.name].shape)
    after = extract_results(batch, iters)
    assert [r.status for r in before] == ["done", "done", "timeout"]
    assert all(a.same_as(b) and a.diagnostic == b.diagnostic for a, b in zip(before, after))


def test_zero_columns_are_zero_in_every_row() -> None:
    """The GPU sets `Batch.zero_columns` in place instead of copying them, so each must really be
    all zero (a column filled after it was built must not be listed)."""
    from mvopt.testing.scenarios import mixed_experiments

    batch = build_batch(mixed_experiments(5))
    assert {"f_cci", "f_ccd", "node_iter"} <= batch.zero_columns
    assert not {"node_pool_next", "node_pool_hi", "node_order", "port_q", "exp_acc_next",
                "task_finish_ps"} & batch.zero_columns
    for name in batch.zero_columns:
        assert not batch.cols[name].any(), name


def test_wire_rings_are_sized_for_the_smallest_packet_of_the_experiment() -> None:
    """Rings hold what a port can send back to back in ser + delay + 2 windows of its smallest
    packet: an ACK, a PFC frame, or a flow's last packet (header + remainder of its payload)."""
    from mvopt.engine.batch import port_ring_capacities

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


def test_packets_larger_than_the_record_allows_are_a_configuration_error() -> None:
    """The packet record keeps wire bytes in 16 bits: payload + header must stay <= 32767."""
    from mvopt.errors import ConfigError

    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"payload_bytes": 32767}})
    g = TaskGraphBuilder()
    g.flow(0, 5, 100_000)
    exp = Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build())
    with pytest.raises(ConfigError, match="network.payload_bytes"):
        exp.params
