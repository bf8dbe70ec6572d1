"""Routing on every kind against networkx: all equal-cost next hops, only shortest paths, no loops."""

from __future__ import annotations

import networkx as nx
import numpy as np
import pytest

from cluster_helpers import build, check_routing, check_structure
from mvopt.cluster import from_networkx, read_hpcc_topology, write_hpcc_topology

SMALL = {
    "fat_tree": dict(topology="fat_tree", k=4),
    "leaf_spine": dict(topology="leaf_spine", leaves=3, hosts_per_leaf=4, oversubscription=2.0),
    "leaf_spine_one_leaf": dict(topology="leaf_spine", leaves=1, hosts_per_leaf=4, oversubscription=4.0),
    # 70 spines: next-hop masks of the leaves span two 64-bit words
    "leaf_spine_wide": dict(topology="leaf_spine", leaves=3, hosts_per_leaf=70),
    "rail_2tier": dict(topology="rail_optimized", servers=6, servers_per_group=2, gpus_per_server=2),
    "rail_3tier": dict(topology="rail_optimized", servers=8, servers_per_group=2, gpus_per_server=2,
                       tiers=3, groups_per_pod=2),
    "torus_2d": dict(topology="torus", torus_dims=[4, 3], nics_per_server=2, gpus_per_server=2),
    "torus_3d": dict(topology="torus", torus_dims=[2, 3, 4]),
    "dragonfly": dict(topology="dragonfly", groups=5, routers_per_group=3, hosts_per_router=2),
    "dragonfly_parallel": dict(topology="dragonfly", groups=2, routers_per_group=1, hosts_per_router=2,
                               global_links_per_router=2),
}


@pytest.mark.parametrize("name", sorted(SMALL))
def test_routing_matches_networkx(name):
    topo = build(**SMALL[name])
    check_structure(topo)
    check_routing(topo, max_pairs=300)


def test_wide_switches_keep_every_next_hop():
    topo = build(**SMALL["leaf_spine_wide"])
    leaf0 = topo.n_host
    up = topo.next_hop_ports(leaf0, topo.n_host - 1)
    assert len(up) == 70 and set(topo.port_peer_node[up]) == set(range(topo.n_host + 3, topo.n_node))


@pytest.mark.parametrize("seed", range(6))
def test_routing_on_random_graphs(seed):
    """Random connected switch graphs (some parallel links, some switches without hosts)."""
    rng = np.random.default_rng(seed)
    n_sw = int(rng.integers(3, 12))
    g = nx.MultiGraph()
    tree = nx.random_labeled_tree(n_sw, seed=seed)
    extra = [tuple(rng.choice(n_sw, 2, replace=False)) for _ in range(int(rng.integers(0, 2 * n_sw)))]
    for u, v in list(tree.edges()) + extra:
        g.add_edge(f"s{u}", f"s{v}", rate=100, delay=1000)
    nx.set_node_attributes(g, "switch", "role")
    n_host = int(rng.integers(2, 16))
    for h in rng.permutation(n_host):
        g.add_node(f"h{h}", role="host")
        g.add_edge(f"h{h}", f"s{rng.integers(0, n_sw)}", rate=100, delay=1000)
    topo = from_networkx(g, gpus_per_server=1)
    check_structure(topo)
    check_routing(topo, max_pairs=200)


def test_parallel_links_are_all_next_hops():
    topo = build(**SMALL["dragonfly_parallel"])
    assert topo.to_networkx().is_multigraph()
    r0, r1 = topo.n_host, topo.n_host + 1
    down = topo.next_hop_ports(r0, 2)   # host 2 sits on router 1: both parallel global links
    assert len(down) == 2 and set(topo.port_peer_node[down]) == {r1}


def test_routing_on_a_file_topology(tmp_path):
    topo = build(**SMALL["rail_3tier"])
    path = tmp_path / "t.txt"
    write_hpcc_topology(topo, path)
    back = read_hpcc_topology(path, nics_per_server=2, gpus_per_server=2)
    check_structure(back)
    check_routing(back, max_pairs=100)
    # same graph, same next-hop neighbours everywhere
    assert nx.utils.graphs_equal(nx.Graph(topo.to_networkx()), nx.Graph(back.to_networkx()))
    for v in range(topo.n_host, topo.n_node):
        for h in range(topo.n_host):
            assert set(topo.port_peer_node[topo.next_hop_ports(v, h)]) == set(back.port_peer_node[back.next_hop_ports(v, h)])


def test_routing_on_an_irregular_graph():
    g = nx.Graph()
    switches = ["a", "b", "c", "d", "e"]
    for s in switches:
        g.add_node(s, role="switch")
    for u, v in [("a", "b"), ("b", "c"), ("c", "d"), ("d", "a"), ("a", "c"), ("d", "e")]:
        g.add_edge(u, v, rate=100, delay=1000)
    for i, s in enumerate(["a", "a", "b", "c", "e", "e", "d"]):
        g.add_node(f"h{i}", role="host")
        g.add_edge(f"h{i}", s, rate=25, delay=500)
    topo = from_networkx(g, gpus_per_server=1)
    assert topo.n_host == 7 and topo.n_switch == 5 and topo.kind == "graph"
    assert topo.parameters["node_labels"][:7] == [f"h{i}" for i in range(7)]
    assert (topo.port_rate_bps[:7] == 25e9).all() and (topo.port_delay_ps[:7] == 500_000).all()
    check_structure(topo)
    check_routing(topo)


def test_ranges_are_compact_for_contiguous_leaves():
    """Hosts under one leaf share routes: a fat-tree core switch has one range per pod."""
    k = 6
    topo = build(topology="fat_tree", k=k)
    core0 = topo.n_switch - k * k // 4
    lo, hi = topo.sw_route_offset[core0], topo.sw_route_offset[core0 + 1]
    assert hi - lo == k
    assert (topo.route_dst_lo[lo:hi] == np.arange(k) * k * k // 4).all()
    # an edge switch: its own k/2 hosts one by one, the rest in at most 2 ranges, all k/2 uplinks
    e = 1
    lo, hi = topo.sw_route_offset[e], topo.sw_route_offset[e + 1]
    assert hi - lo == k // 2 + 2
    assert len(topo.next_hop_ports(topo.n_host + e, topo.n_host - 1)) == k // 2


def test_next_hop_ports_rejects_bad_ids():
    topo = build(**SMALL["fat_tree"])
    with pytest.raises(ValueError):
        topo.next_hop_ports(0, topo.n_host)
    with pytest.raises(ValueError):
        topo.next_hop_ports(topo.n_node, 0)


def test_routing_refuses_tables_beyond_the_memory_limit(monkeypatch):
    from mvopt.cluster import routing
    from mvopt.errors import InfeasibleError
    monkeypatch.setattr(routing, "MEMORY_LIMIT_BYTES", 1000)
    with pytest.raises(InfeasibleError, match="routing tables for 16 leaf switches x 16 switches need"):
        build(topology="torus", torus_dims=[4, 4])
