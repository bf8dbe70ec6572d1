"""summary(): counts, bisection closed forms (checked against a networkx min cut), diameter."""

from __future__ import annotations

import pytest

from cluster_helpers import build
from mvopt.cluster import min_cut_bisection, read_hpcc_topology, write_hpcc_topology


@pytest.mark.parametrize("kw,expected", [
    (dict(topology="fat_tree", k=4), 16 / 2 * 100),
    (dict(topology="fat_tree", k=4, link_gbps=[100, 100, 50]), 16 / 2 * 50),
    (dict(topology="leaf_spine", leaves=4, hosts_per_leaf=4, oversubscription=2.0), 4 * 2 * 100 / 2),
    (dict(topology="rail_optimized", servers=4, servers_per_group=2, gpus_per_server=2), 8 * 100 / 2),
    (dict(topology="rail_optimized", servers=8, servers_per_group=2, gpus_per_server=2, tiers=3, groups_per_pod=2,
          oversubscription=2.0), 8 * 1 * 100 / 2),
    (dict(topology="leaf_spine", leaves=1, hosts_per_leaf=4, oversubscription=4.0), 4 / 2 * 100),
    (dict(topology="rail_optimized", servers=4, servers_per_group=2, gpus_per_server=2, tiers=3, groups_per_pod=2,
          link_gbps=[100, 100, 50]), 8 * 100 / 2),
    (dict(topology="fat_tree", k=2, link_gbps=[100, 100, 10]), 10),
    (dict(topology="torus", torus_dims=[4, 4], link_gbps=[400, 100]), 2 * 4 * 100),
    (dict(topology="torus", torus_dims=[2, 4], link_gbps=[400, 100]), 2 * 2 * 100),
    (dict(topology="torus", torus_dims=[2, 2], link_gbps=[400, 100]), 2 * 100),
    (dict(topology="dragonfly", groups=4, routers_per_group=2, hosts_per_router=2), 2 * 2 * 1 * 100),
    (dict(topology="dragonfly", groups=4, routers_per_group=3, hosts_per_router=4, link_gbps=[100, 100, 25]), 2 * 2 * 1 * 25),
])
def test_bisection_closed_forms_match_min_cut(kw, expected):
    topo = build(**kw)
    s = topo.summary()
    assert s["bisection_gbps"] == pytest.approx(expected)
    assert "closed form" in s["bisection_method"]
    assert min_cut_bisection(topo) == pytest.approx(expected)


def test_file_topology_uses_min_cut(tmp_path):
    path = tmp_path / "t.txt"
    write_hpcc_topology(build(topology="leaf_spine", leaves=4, hosts_per_leaf=4, oversubscription=2.0), path)
    s = read_hpcc_topology(path).summary()
    assert s["bisection_gbps"] == pytest.approx(400) and "min cut" in s["bisection_method"]


def test_tiny_networks():
    import networkx as nx
    from mvopt.cluster import from_networkx
    g = nx.star_graph(3)
    nx.set_node_attributes(g, "host", "role")
    g.nodes[0]["role"] = "switch"
    nx.set_edge_attributes(g, 100, "rate")
    nx.set_edge_attributes(g, 10, "delay")
    s = from_networkx(g, gpus_per_server=1).summary()
    assert (s["hosts"], s["switches"], s["diameter_hops"], s["bisection_gbps"]) == (3, 1, 2, 100)
    g.remove_nodes_from([2, 3])
    s = from_networkx(g, gpus_per_server=1).summary()
    assert (s["hosts"], s["diameter_hops"], s["bisection_gbps"]) == (1, 0, None)


def test_summary_counts():
    s = build(topology="rail_optimized", servers=4, servers_per_group=2, gpus_per_server=4).summary()
    assert (s["hosts"], s["servers"], s["gpus"], s["nics_per_server"], s["gpus_per_server"]) == (16, 4, 16, 4, 4)
    assert s["switches_by_tier"] == {1: 8, 2: 2} and s["switches"] == 10
    assert s["links_by_tier"] == {0: 16, 1: 16} and s["links"] == 32
    assert s["switch_ports"] == 16 + 2 * 16 and s["max_switch_radix"] == 8
    assert s["diameter_hops"] == 4
    assert s["routes"] > 0 and s["nhsets"] > 0
