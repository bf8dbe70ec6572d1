"""The flow-level model: paths, exact cases against the packet engine, batches, determinism."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mvopt.comm.collectives import add_collective
from mvopt.config import load_config
from mvopt.engine import Experiment, TaskGraphBuilder
from mvopt.engine import simulate as packet_simulate
from mvopt.errors import ConfigError
from mvopt.flow import simulate
from mvopt.flow.paths import WEIGHT_ONE, flow_paths
from mvopt.testing import scenarios as sc

PS_PER_BIT_AT_100G = 10        # 100 Gb/s: 10 ps per bit


def fat_tree_experiment(build, *, seed: int = 1, **net) -> Experiment:
    """A k=4 fat-tree (16 hosts, 100 Gb/s, 1 us links) running the tasks `build(builder)` adds."""
    from mvopt.cluster import build_topology
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none", **net}})
    g = TaskGraphBuilder()
    build(g)
    return Experiment(topology=build_topology(cfg.cluster), network=cfg.network, tasks=g.build(), seed=seed,
                      name="fat-tree")


def wire_bits(size: int, payload: int = 1000, header: int = 48) -> int:
    return (size + -(-size // payload) * header) * 8


# ------------------------------------------------------------------------------------ paths

def test_ecmp_paths_are_the_packet_engines():
    pairs = [(s, d) for s in range(16) for d in (3, 9, 14) if s != d]
    exp = sc.fat_tree_flows(pairs, 10_000)
    for seed in (1, 7):
        exp = Experiment(topology=exp.topology, network=exp.network, tasks=exp.tasks, seed=seed)
        p = flow_paths(exp)
        for f, (s, d) in enumerate(pairs):
            entries = slice(p.offset[f], p.offset[f + 1])
            data = p.is_data[entries]
            assert p.port[entries][data].tolist() == sc.ecmp_path(exp.topology, seed, f, s, d)
            # the ACKs come back hashed by the same flow id
            assert p.port[entries][~data].tolist() == sc.ecmp_path(exp.topology, seed, f, d, s)
        assert (p.weight[p.is_data] == WEIGHT_ONE).all()
        # one 60-byte ACK per 1,048 wire bytes of data (10 packets of 1,000 B)
        assert (p.weight[~p.is_data] == round(WEIGHT_ONE * 60 / 1048)).all()


@pytest.mark.parametrize("seed", [1, 6])
def test_ecmp_paths_through_the_tables_are_those_hop_by_hop(monkeypatch, seed: int):
    """The compiled walk through the dense tables (walk.cpp) gives every flow of every mixed
    experiment (fat-tree, leaf-spine, torus; ECMP and sprayed, whose ACKs it routes) the entries
    the reference's rule gives it hop by hop, as where a topology has no table."""
    from mvopt.engine import routes

    exps = [dataclasses.replace(e, seed=seed) for e in sc.mixed_experiments(9)]
    assert all(routes.dense_routes(e.topology) is not None for e in exps)
    walked = [flow_paths(e) for e in exps]
    monkeypatch.setattr(routes, "DENSE_ROUTE_ENTRIES", 0)
    assert all(routes.dense_routes(e.topology) is None for e in exps)
    for e, w in zip(exps, walked):
        hop_by_hop = flow_paths(e)
        for name in ("offset", "port", "weight", "is_data"):
            assert np.array_equal(getattr(w, name), getattr(hop_by_hop, name)), (e.name, name)


def test_spraying_splits_evenly_at_every_switch():
    exp = fat_tree_experiment(lambda g: g.flow(0, 15, 10_000), lb="spray")
    p = flow_paths(exp)
    port, weight = p.port[p.is_data], p.weight[p.is_data]
    owner = np.asarray(exp.topology.port_node)[port]
    # host -> edge -> 2 aggs -> 4 cores -> 2 aggs -> edge -> host: 1 + 2 + 4 + 4 + 2 + 1 entries
    assert port.size == 14
    # every level passes the whole rate on, each switch splitting its share evenly
    assert int(weight.sum()) == 6 * WEIGHT_ONE
    for node in np.unique(owner).tolist():
        w = weight[owner == node]
        assert (w == w[0]).all()
    # ACKs are not sprayed: one ECMP path back (6 links)
    assert int((~p.is_data).sum()) == 6


# ------------------------------------------------------------------------------------ exact cases

@pytest.mark.parametrize("dst", [1, 3, 15])
@pytest.mark.parametrize("size", [1_000_000, 1_234_567, 700])
def test_a_lone_flow_at_line_rate_matches_the_packet_engine(dst, size):
    exp = sc.fat_tree_flows([(0, dst)], size)
    (fl,), (pk,) = simulate([exp]), packet_simulate([exp])
    # the fluid answer is exact: bits at line rate, plus propagation and one packet per further hop
    assert fl.task_finish_ps.tolist() == pk.task_finish_ps.tolist()
    assert fl.flow_fct_ps.tolist() == pk.flow_fct_ps.tolist()


@pytest.mark.parametrize("payload", [1000, 4000])
def test_ring_all_reduce_without_contention_matches_the_packet_engine(payload):
    # hosts 0, 1 (edge 0) and 2, 3 (edge 1) of pod 0: every link direction carries one ring
    # flow's data and another's ACKs (which the flow level counts on the way back). Within 0.1 %:
    # the packet level interleaves the ACKs packet by packet, the fluid shares the link smoothly
    exp = fat_tree_experiment(lambda g: add_collective(g, "all_reduce", [0, 1, 2, 3], 8_000_000),
                              payload_bytes=payload)
    (fl,), (pk,) = simulate([exp]), packet_simulate([exp])
    assert fl.ok and pk.ok
    assert abs(fl.makespan_ps / pk.makespan_ps - 1) <= 1e-3


def test_two_flows_into_one_host_share_its_link():
    size = 1_000_000
    alone = simulate([fat_tree_experiment(lambda g: g.flow(1, 0, size))])[0]
    both = simulate([fat_tree_experiment(lambda g: (g.flow(1, 0, size), g.flow(1, 0, size)))])[0]
    # same path, half the rate each: the transfer takes twice as long
    extra = both.task_finish_ps - alone.task_finish_ps[0]
    assert extra.tolist() == [wire_bits(size) * PS_PER_BIT_AT_100G] * 2


def _colliding_pair(seed: int) -> tuple[tuple[int, int], tuple[int, int], bool]:
    """Two flows from different edge switches of pod 0 to pod 3 whose ECMP paths share a fabric
    link (True) or not (False), by the testing module's own walk of the hash."""
    from mvopt.cluster import build_topology
    topo = build_topology(load_config({"cluster": {"topology": "fat_tree", "k": 4}}).cluster)
    a = sc.ecmp_path(topo, seed, 0, 0, 12)
    b = sc.ecmp_path(topo, seed, 1, 2, 14)
    return (0, 12), (2, 14), bool(set(a) & set(b))


SEEDS = range(1, 9)


def test_the_seeds_give_both_collisions_and_disjoint_paths():
    assert {_colliding_pair(seed)[2] for seed in SEEDS} == {True, False}


@pytest.mark.parametrize("seed", SEEDS)
def test_ecmp_collisions_halve_the_rates(seed):
    (s0, d0), (s1, d1), collide = _colliding_pair(seed)
    size = 2_000_000
    pair = simulate([fat_tree_experiment(lambda g: (g.flow(s0, d0, size), g.flow(s1, d1, size)), seed=seed)])[0]
    alone = simulate([fat_tree_experiment(lambda g: g.flow(s0, d0, size), seed=seed)])[0]
    # flow 0 hashes alike in both graphs; sharing a link at half the rate doubles its transfer
    extra = int(pair.task_finish_ps[0] - alone.task_finish_ps[0])
    assert extra == (wire_bits(size) * PS_PER_BIT_AT_100G if collide else 0)


# ------------------------------------------------------------------------------------ batches

def test_an_experiments_result_does_not_depend_on_its_batch():
    exps = sc.mixed_experiments(9)
    alone = [simulate([e])[0] for e in exps]
    together = simulate(exps)
    reordered = simulate(exps[::-1])[::-1]
    for a, b, c in zip(alone, together, reordered):
        assert a.same_as(b) and a.same_as(c)
        assert a.windows == b.windows == c.windows


def test_results_are_deterministic():
    exps = sc.mixed_experiments(6)
    first, second = simulate(exps), simulate(exps)
    assert all(a.same_as(b) for a, b in zip(first, second))
    assert all(r.ok for r in first)


def test_a_result_has_the_packet_engines_shape():
    exp = sc.mixed_experiments(1)[0]
    (fl,), (pk,) = simulate([exp]), packet_simulate([exp])
    assert fl.extra["fidelity"] == "flow"
    for name in ("task_start_ps", "task_finish_ps", "flow_ids", "flow_fct_ps", "flow_standalone_ps",
                 "port_max_queue_bytes", "port_tx_bytes"):
        assert getattr(fl, name).shape == getattr(pk, name).shape, name
    assert fl.counters.keys() == pk.counters.keys()
    assert fl.counters["data_bytes_delivered"] == pk.counters["data_bytes_delivered"]
    # every wire byte of the data crosses each link of its path once
    assert int(fl.port_tx_bytes.sum()) > 0


def test_delay_tasks_and_dependencies_follow_the_engines_rule():
    # flow 0 -> 1, then on host 1 a delay (local: no notification), then host 2 starts a flow
    # after the delay (remote: one window later)
    def build(g):
        f = g.flow(0, 1, 100_000)
        d = g.delay(1, 5_000_000, after=[f])
        g.flow(2, 3, 100_000, after=[d])
    exp = fat_tree_experiment(build)
    r = simulate([exp])[0]
    window = exp.params.window_ps
    assert r.task_start_ps[1] == r.task_finish_ps[0]
    assert r.task_finish_ps[1] == r.task_start_ps[1] + 5_000_000
    assert r.task_start_ps[2] == r.task_finish_ps[1] + window


def test_the_time_limit_stops_an_experiment():
    exp = sc.fat_tree_flows([(0, 15)], 10_000_000)
    exp = Experiment(topology=exp.topology, network=exp.network, tasks=exp.tasks, time_limit_ps=100_000_000)
    r = simulate([exp])[0]
    assert r.status == "timeout" and r.end_ps == 100_000_000 and r.task_finish_ps.tolist() == [-1]
    assert r.diagnostic


def test_a_queue_monitor_is_refused_at_flow_level():
    exp = sc.experiment(sc.star(2), TaskGraphBuilder(), queue_monitor_ps=1000)
    with pytest.raises(ConfigError, match="queue_monitor_ns"):
        simulate([exp])
    with pytest.raises(ConfigError, match="queue_monitor_ns"):
        load_config({"simulation": {"fidelity": "flow", "queue_monitor_ns": 100}})


def test_fidelity_is_a_simulation_setting():
    assert load_config({}).simulation.fidelity == "packet"
    assert load_config({"simulation": {"fidelity": "flow"}}).simulation.fidelity == "flow"
    with pytest.raises(ConfigError, match="simulation.fidelity"):
        load_config({"simulation": {"fidelity": "fluid"}})


def test_an_empty_list_needs_no_backend():
    assert simulate([], backend="gpu") == []


@pytest.mark.gpu
def test_gpu_results_equal_cpu_results():
    pytest.importorskip("cupy")
    from mvopt.engine._gpu import gpu_available
    if not gpu_available():
        pytest.skip("no GPU")
    exps = sc.mixed_experiments(9) + [sc.fat_tree_incast()]
    cpu, gpu = simulate(exps, backend="cpu"), simulate(exps, backend="gpu")
    assert all(a.same_as(b) and a.windows == b.windows for a, b in zip(cpu, gpu))
