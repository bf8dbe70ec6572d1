"""Dense switch routing tables (engine/routes.py): every entry is the topology's own answer, the
experiments of one topology share one table in a batch, and results do not depend on whether
switches route by table or by range search."""

from __future__ import annotations

import dataclasses

import pytest

from mvopt.cluster import CompiledTopology, build_topology
from mvopt.config import load_config
from mvopt.engine import build_batch, routes, simulate
from mvopt.testing.scenarios import ecmp_path, fat_tree_flows, mixed_experiments


def cluster(**fields) -> CompiledTopology:
    fields = {k: list(v) if isinstance(v, tuple) else v for k, v in fields.items()}
    return build_topology(load_config({"cluster": fields}).cluster)


TOPOLOGIES = {
    "fat_tree": dict(topology="fat_tree", k=4),
    "fat_tree_k8": dict(topology="fat_tree", k=8),
    "leaf_spine": dict(topology="leaf_spine", leaves=3, hosts_per_leaf=2),
    "rail_optimized": dict(topology="rail_optimized", servers=8, gpus_per_server=4, servers_per_group=4),
    "torus": dict(topology="torus", torus_dims=(3, 3)),
    "dragonfly": dict(topology="dragonfly", groups=3, routers_per_group=2, hosts_per_router=1),
}


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
def test_every_entry_is_the_topologys_next_hop_set(name: str) -> None:
    topo = cluster(**TOPOLOGIES[name])
    rtab, rtab_nh = routes.dense_routes(topo)
    nh = topo.n_host
    assert rtab.size == topo.n_switch * nh
    for s in range(topo.n_switch):
        v = nh + s
        lo = int(topo.node_port_offset[v])
        for d in range(nh):
            x = int(rtab[s * nh + d])
            a, n = x >> 8, x & 0xFF
            want = topo.next_hop_ports(v, d)
            got = [lo + a] if n == 1 else [lo + int(i) for i in rtab_nh[a:a + n]]
            assert got == want.tolist(), (name, v, d)


def test_experiments_of_one_topology_share_one_table() -> None:
    a = fat_tree_flows([(0, 5), (3, 12)], 200_000)
    b = dataclasses.replace(a, seed=7)                    # same topology, another seed
    other = [e for e in mixed_experiments(9) if routes.route_key(e.topology) not in (None, routes.route_key(a.topology))]
    batch = build_batch([a, b, a, other[0]])
    own = a.topology.n_switch * a.topology.n_host
    assert batch.counts["n_rtab"] == own + other[0].topology.n_switch * other[0].topology.n_host
    rows = batch.cols["node_rtab"]
    spans = batch.spans
    first = rows[spans[0].node_lo:spans[0].node_hi]
    for i in (1, 2):    # the same rows as the first experiment's
        assert (rows[spans[i].node_lo:spans[i].node_hi] == first).all()
    assert (first[:a.topology.n_host] == -1).all() and (first[a.topology.n_host:] >= 0).all()


def test_results_do_not_depend_on_the_tables(monkeypatch) -> None:
    exps = mixed_experiments(9)
    with_tables = simulate(exps, backend="cpu")
    monkeypatch.setattr(routes, "DENSE_ROUTE_ENTRIES", 0)     # every switch searches its ranges
    batch = build_batch(exps)
    assert (batch.cols["node_rtab"] == -1).all()
    without = simulate(exps, backend="cpu")
    assert all(x.same_as(y) for x, y in zip(with_tables, without))


def test_a_batch_mixing_topologies_with_and_without_tables(monkeypatch) -> None:
    """A topology too large for a table (here: the limit between a k=4 and a k=8 fat-tree) keeps
    the range search beside experiments that read a shared table: the results of a batch
    without tables."""
    small = fat_tree_flows([(0, 5), (3, 12)], 200_000)
    big_topo = cluster(**TOPOLOGIES["fat_tree_k8"])
    big = dataclasses.replace(small, topology=big_topo, name="k8")
    assert big_topo.n_switch * big_topo.n_host > 1000 > small.topology.n_switch * small.topology.n_host
    monkeypatch.setattr(routes, "DENSE_ROUTE_ENTRIES", 1000)
    exps = [small, big, small, big]
    batch = build_batch(exps)
    rows = batch.cols["node_rtab"]
    assert (rows[batch.spans[0].node_lo:batch.spans[0].node_hi] >= 0).any()
    assert (rows[batch.spans[1].node_lo:batch.spans[1].node_hi] == -1).all()
    mixed = simulate(exps, backend="cpu")
    monkeypatch.setattr(routes, "DENSE_ROUTE_ENTRIES", 0)
    without = simulate(exps, backend="cpu")
    assert all(x.same_as(y) for x, y in zip(mixed, without))


def ecmp_ports(topo: CompiledTopology, seed: int, flow: int, src: int, dst: int) -> list[int]:
    """The egress port's index among its switch's ports at each switch from host src to host dst
    under ECMP (scenarios.ecmp_path, without the host's own port)."""
    return [p - int(topo.node_port_offset[topo.port_node[p]]) for p in ecmp_path(topo, seed, flow, src, dst)[1:]]


@pytest.mark.parametrize("name", sorted(TOPOLOGIES))
@pytest.mark.parametrize("lb", ["ecmp", "spray"])
def test_flow_paths_are_the_ecmp_paths_both_ways(name: str, lb: str) -> None:
    """routes.flow_paths (f_path): for every flow, the egress ports of its ECMP path, the data
    way and back, as walking the topology's next-hop sets gives them; -1 beyond the path, and
    on the data way of an experiment that sprays (its switches hash every packet)."""
    from mvopt.engine.schema import NPATH

    topo = cluster(**TOPOLOGIES[name])
    hosts = min(int(topo.n_host), 6)
    pairs = [(s, d) for s in range(hosts) for d in range(hosts) if s != d]
    base = fat_tree_flows(pairs, 10_000)
    net = dataclasses.replace(base.network, lb=lb)
    exp = dataclasses.replace(base, topology=topo, network=net, seed=11)
    cols = build_batch([exp]).cols
    paths = cols["f_path"].reshape(-1, 2, NPATH)
    assert paths.shape[0] == len(pairs)
    known = 0
    for f in range(paths.shape[0]):
        flow, src, dst = (int(cols[k][f]) for k in ("f_local", "f_src_local", "f_dst_local"))
        for way, (a, b) in enumerate(((src, dst), (dst, src))):
            want = ecmp_ports(topo, exp.seed, flow, a, b)[:NPATH]
            got = paths[f, way].tolist()
            if way == 0 and lb == "spray":
                assert got == [-1] * NPATH
                continue
            assert got == want + [-1] * (NPATH - len(want)), (name, f, way)
            known += len(want)
    assert known > 0


def test_experiments_with_many_flows_route_their_packets_themselves(monkeypatch) -> None:
    """A batch whose experiments all have more flows than FLOW_PATHS_MAX_FLOWS holds no paths
    (one row, has_paths 0: a paper-scale iteration's 145 M flows would take 4.6 GB), and the
    planner counts it so; the results are those of a batch with paths."""
    from mvopt.engine.sizing import batch_bytes, batch_route_counts, experiment_counts

    exps = mixed_experiments(6)
    with_paths = simulate(exps, backend="cpu")
    monkeypatch.setattr(routes, "FLOW_PATHS_MAX_FLOWS", 0)
    batch = build_batch(exps)
    assert batch.counts["has_paths"] == 0 and batch.counts["n_fpath"] == 1
    counts = batch_route_counts(exps, [experiment_counts(e) for e in exps])
    assert all(c["n_fpath"] == 0 for c in counts)
    assert batch_bytes({k: sum(c[k] for c in counts) for k in counts[0]}) == batch.nbytes
    assert all(x.same_as(y) for x, y in zip(with_paths, simulate(exps, backend="cpu")))
