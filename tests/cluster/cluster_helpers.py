"""Shared checks for the cluster tests: build from config dicts, verify routing against networkx."""

from __future__ import annotations

import itertools
from typing import Any

import networkx as nx
import numpy as np

from mvopt.cluster import CompiledTopology, build_topology
from mvopt.config import load_config


def cluster(**fields: Any):
    """A validated ClusterConfig from keyword fields."""
    return load_config({"cluster": fields}).cluster


def build(**fields: Any) -> CompiledTopology:
    return build_topology(cluster(**fields))


def check_structure(topo: CompiledTopology) -> None:
    """Every layout rule of the compiled arrays (docs/topologies.md, "compiled layout")."""
    assert topo.structure_problem() is None, topo.structure_problem()
    nh, ns = topo.n_host, topo.n_switch
    assert (topo.node_tier[:nh] == 0).all() and (topo.node_tier[nh:] >= 1).all()
    # host h has the single port h, to a switch, on a tier-0 link
    assert (topo.node_port_offset[:nh + 1] == np.arange(nh + 1)).all()
    assert (topo.port_peer_node[:nh] >= nh).all() and (topo.port_tier[:nh] == 0).all()
    assert (topo.port_tier[nh:][topo.port_peer_node[nh:] >= nh] >= 1).all()
    # both directions of a link have the same rate, delay, tier
    pp = topo.port_peer_port
    for col in (topo.port_rate_bps, topo.port_delay_ps, topo.port_tier):
        assert (col[pp] == col).all()
    # ranges: sorted, start at 0, one set per range, sets are sorted ports of the same switch
    for s in range(ns):
        lo, hi = topo.sw_route_offset[s], topo.sw_route_offset[s + 1]
        dst = topo.route_dst_lo[lo:hi]
        assert hi > lo and dst[0] == 0 and (np.diff(dst) > 0).all() and dst[-1] < nh
        sets = topo.route_nhset[lo:hi]
        assert (sets[1:] != sets[:-1]).all(), "consecutive ranges with the same set are merged"
        for k in np.unique(sets):
            ports = topo.nhset_port[topo.nhset_offset[k]:topo.nhset_offset[k + 1]]
            assert ports.size and (np.diff(ports) > 0).all()
            assert (topo.port_node[ports] == nh + s).all()
    # next-hop sets are deduplicated
    sets = {tuple(topo.nhset_port[topo.nhset_offset[k]:topo.nhset_offset[k + 1]]) for k in range(topo.n_nhset)}
    assert len(sets) == topo.n_nhset
    # servers and GPUs
    nics = nh // topo.n_server
    assert (topo.host_server == np.arange(nh) // nics).all()
    g = np.arange(topo.n_gpu)
    assert (topo.host_server[topo.gpu_host] == g // topo.gpus_per_server).all()


def check_routing(topo: CompiledTopology, max_pairs: int | None = None) -> None:
    """Next hops == exactly the neighbours one hop closer (networkx BFS), at every switch for
    every destination host; and the paths they span == nx.all_shortest_paths."""
    g = topo.to_networkx()
    nh = topo.n_host
    hosts = range(nh)
    diameter = 0
    for h in hosts:
        dist = nx.single_source_shortest_path_length(g, h)
        assert len(dist) == topo.n_node, "connected"
        diameter = max(diameter, max(dist[x] for x in hosts))
        for v in range(nh, topo.n_node):
            ports = np.arange(topo.node_port_offset[v], topo.node_port_offset[v + 1])
            expect = ports[[dist[int(topo.port_peer_node[p])] == dist[v] - 1 for p in ports]]
            got = topo.next_hop_ports(v, h)
            assert np.array_equal(np.sort(got), expect), (v, h, got, expect)
        for src in hosts:
            got = topo.next_hop_ports(src, h)
            assert list(got) == ([] if src == h else [src])
    assert topo.diameter_hops == diameter
    pairs = [(s, d) for s, d in itertools.permutations(hosts, 2)]
    if max_pairs is not None and len(pairs) > max_pairs:
        rng = np.random.default_rng(0)
        pairs = [pairs[i] for i in rng.choice(len(pairs), max_pairs, replace=False)]
    for s, d in pairs:
        assert _paths(topo, s, d) == {tuple(p) for p in nx.all_shortest_paths(g, s, d)}


def _paths(topo: CompiledTopology, src: int, dst: int) -> set[tuple[int, ...]]:
    """Every node path obtained by following the routing tables (fails on a loop)."""
    out: set[tuple[int, ...]] = set()
    stack = [(src,)]
    while stack:
        path = stack.pop()
        if path[-1] == dst:
            out.add(path)
            continue
        assert len(path) <= topo.n_node, "routing loop"
        for p in topo.next_hop_ports(path[-1], dst):
            stack.append(path + (int(topo.port_peer_node[p]),))
    return out
