"""Every builder's counts against closed forms; wiring details; per-tier link rates and delays."""

from __future__ import annotations

import math
from collections import Counter

import networkx as nx
import numpy as np
import pytest

from cluster_helpers import build, check_structure


def _tier_counts(topo) -> dict[int, int]:
    return dict(Counter(topo.node_tier[topo.n_host:].tolist()))


def _link_tiers(topo) -> dict[int, int]:
    return dict(Counter(topo.port_tier[topo.link_endpoints()[:, 0]].tolist()))


@pytest.mark.parametrize("k", [2, 4, 6, 8])
def test_fat_tree_counts(k):
    t = build(topology="fat_tree", k=k)
    assert t.n_host == k**3 // 4
    assert _tier_counts(t) == {1: k * k // 2, 2: k * k // 2, 3: k * k // 4}
    assert t.n_link == 3 * k**3 // 4 and _link_tiers(t) == {0: k**3 // 4, 1: k**3 // 4, 2: k**3 // 4}
    # every switch has radix k
    assert (np.diff(t.node_port_offset)[t.n_host:] == k).all()
    assert t.diameter_hops == 6
    check_structure(t)


def test_fat_tree_k8_figures():
    s = build(topology="fat_tree", k=8).summary()
    assert (s["hosts"], s["switches"], s["links"], s["switch_ports"]) == (128, 80, 384, 640)
    assert s["bisection_gbps"] == 128 / 2 * 100


def test_fat_tree_wiring():
    k, h = 4, 2
    t = build(topology="fat_tree", k=k)
    g = t.to_networkx()
    n = t.n_host
    edge, agg, core = n + np.arange(8), n + 8 + np.arange(8), n + 16 + np.arange(4)
    for e in range(8):   # hosts of edge e are e*h .. e*h+h-1
        assert sorted(x for x in g[edge[e]] if x < n) == [e * h, e * h + 1]
        assert sorted(x for x in g[edge[e]] if x >= n) == sorted(agg[(e // h) * h + np.arange(h)])
    for a in range(8):   # aggregation j of each pod: cores j*h .. j*h+h-1
        j = a % h
        assert sorted(x for x in g[agg[a]] if x in set(core)) == sorted(core[j * h + np.arange(h)])


@pytest.mark.parametrize("leaves,per_leaf,over,gbps,spines", [
    (4, 4, 1.0, [100.0], 4), (3, 8, 2.0, [100.0], 4), (5, 8, 1.0, [100.0, 400.0], 2), (2, 6, 1.5, [100.0], 4)])
def test_leaf_spine_counts(leaves, per_leaf, over, gbps, spines):
    t = build(topology="leaf_spine", leaves=leaves, hosts_per_leaf=per_leaf, oversubscription=over, link_gbps=gbps)
    assert t.n_host == leaves * per_leaf
    assert _tier_counts(t) == {1: leaves, 2: spines}
    assert t.n_link == leaves * per_leaf + leaves * spines
    g = t.to_networkx()
    for leaf in range(t.n_host, t.n_host + leaves):   # one link from every leaf to every spine
        assert sorted(x for x in g[leaf] if x >= t.n_host) == list(range(t.n_host + leaves, t.n_node))
    assert t.diameter_hops == 4
    check_structure(t)


def test_rail_two_tier_counts_and_wiring():
    servers, per_group, gpus = 8, 4, 4
    t = build(topology="rail_optimized", servers=servers, servers_per_group=per_group, gpus_per_server=gpus)
    groups, u = servers // per_group, per_group
    assert t.n_host == servers * gpus and t.n_server == servers
    assert _tier_counts(t) == {1: groups * gpus, 2: u}
    assert t.n_link == servers * gpus + groups * gpus * u
    leaf_of = t.port_peer_node[:t.n_host] - t.n_host
    for h in range(t.n_host):   # NIC i of server s -> rail leaf i of the server's group
        s, i = divmod(h, gpus)
        assert leaf_of[h] == (s // per_group) * gpus + i
    g = t.to_networkx()
    spines = set(range(t.n_host + groups * gpus, t.n_node))
    for leaf in range(t.n_host, t.n_host + groups * gpus):
        assert {x for x in g[leaf] if x >= t.n_host} == spines
    # GPU g of a server uses its NIC g (gpus == nics)
    assert (t.gpu_host == np.arange(servers * gpus)).all()
    check_structure(t)


def test_rail_three_tier_counts_and_wiring():
    servers, per_group, gpus, per_pod = 16, 2, 2, 2
    t = build(topology="rail_optimized", servers=servers, servers_per_group=per_group, gpus_per_server=gpus,
              tiers=3, groups_per_pod=per_pod, oversubscription=2.0)
    groups = servers // per_group
    pods = groups // per_pod
    u = per_group // 2                     # oversubscription 2
    pod_leaves = per_pod * gpus
    c = pod_leaves                         # equal rates: non-blocking pod spines
    assert _tier_counts(t) == {1: groups * gpus, 2: pods * u, 3: u * c}
    assert t.n_link == servers * gpus + groups * gpus * u + pods * u * c
    g = t.to_networkx()
    n = t.n_host
    leaves = n + np.arange(groups * gpus)
    spines = (n + groups * gpus + np.arange(pods * u)).reshape(pods, u)
    cores = (n + groups * gpus + pods * u + np.arange(u * c)).reshape(u, c)
    for i, leaf in enumerate(leaves):
        assert {x for x in g[leaf] if x >= n} == set(spines[i // pod_leaves])
    for p in range(pods):
        for j in range(u):
            assert {x for x in g[spines[p, j]] if x in set(cores.ravel())} == set(cores[j])
    assert t.diameter_hops == 6
    check_structure(t)


@pytest.mark.parametrize("dims,nics", [([4, 4], 1), ([3, 2, 5], 2), ([2, 2], 1), ([4, 4, 4], 1)])
def test_torus_counts(dims, nics):
    t = build(topology="torus", torus_dims=dims, nics_per_server=nics, gpus_per_server=2 * nics)
    n_router = math.prod(dims)
    assert t.n_host == n_router * nics and t.n_server == n_router and t.n_switch == n_router
    router_links = sum(n_router if d > 2 else n_router // 2 for d in dims)
    assert t.n_link == t.n_host + router_links
    g = t.to_networkx()
    assert nx.number_of_selfloops(g) == 0 and not g.is_multigraph()   # size-2 dims: one link
    assert t.diameter_hops == 2 + sum(d // 2 for d in dims)
    check_structure(t)


@pytest.mark.parametrize("groups,a,p,h", [(5, 2, 2, None), (9, 4, 1, None), (4, 2, 1, 3), (3, 3, 2, None)])
def test_dragonfly_counts(groups, a, p, h):
    kw = dict(topology="dragonfly", groups=groups, routers_per_group=a, hosts_per_router=p)
    if h is not None:
        kw["global_links_per_router"] = h
    t = build(**kw)
    h = h or -(-(groups - 1) // a)
    per_pair = a * h // (groups - 1)
    assert t.n_host == groups * a * p and t.n_switch == groups * a
    assert _link_tiers(t) == {0: t.n_host, 1: groups * a * (a - 1) // 2, 2: per_pair * groups * (groups - 1) // 2}
    # every pair of groups is connected, no router exceeds h global links
    ends = t.link_endpoints()[:, 0]
    glob = ends[t.port_tier[ends] == 2]
    ra, rb = t.port_node[glob] - t.n_host, t.port_peer_node[glob] - t.n_host
    pairs = Counter(tuple(sorted(x)) for x in zip((ra // a).tolist(), (rb // a).tolist()))
    assert set(pairs) == {(i, j) for i in range(groups) for j in range(i + 1, groups)}
    assert set(pairs.values()) == {per_pair}
    assert max(Counter(ra.tolist() + rb.tolist()).values()) <= h
    assert t.diameter_hops <= 5
    check_structure(t)


def test_tier_rates_and_delays():
    t = build(topology="fat_tree", k=4, link_gbps=[100, 200, 400], link_delay_ns=[500, 1000.5])
    ends = t.link_endpoints()[:, 0]
    for tier, (bps, ps) in {0: (100e9, 500_000), 1: (200e9, 1_000_500), 2: (400e9, 1_000_500)}.items():
        sel = ends[t.port_tier[ends] == tier]
        assert (t.port_rate_bps[sel] == bps).all() and (t.port_delay_ps[sel] == ps).all()
    d = build(topology="dragonfly", groups=3, routers_per_group=2, hosts_per_router=1, link_gbps=[100, 200, 50])
    glob = d.link_endpoints()[:, 0]
    assert (d.port_rate_bps[glob[d.port_tier[glob] == 2]] == 50e9).all()


def test_gpu_to_nic_maps():
    t = build(topology="leaf_spine", leaves=2, hosts_per_leaf=4, gpus_per_server=8, nics_per_server=2)
    assert t.n_server == 4 and t.n_gpu == 32
    # GPU g of a server uses NIC g*nics//gpus: GPUs 0-3 -> first NIC, 4-7 -> second
    assert t.gpu_host[:8].tolist() == [0, 0, 0, 0, 1, 1, 1, 1] and t.gpu_host[8:16].tolist() == [2] * 4 + [3] * 4
    more = build(topology="leaf_spine", leaves=2, hosts_per_leaf=4, gpus_per_server=2, nics_per_server=4)
    assert more.n_server == 2 and more.gpu_host.tolist() == [0, 2, 4, 6]   # first NIC of each GPU's share
