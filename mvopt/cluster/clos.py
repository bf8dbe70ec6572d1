"""Clos topologies: k-ary fat-tree, 2-tier leaf-spine, rail-optimised (2 or 3 tiers).

All three are built from the same two steps of :class:`~mvopt.cluster.spec.SpecBuilder` — hosts
attached to first-tier switches, then complete bipartite wiring between consecutive switch layers
(per pod where there are pods) — and share :func:`uplinks_per_leaf`, the spine count that follows
from a leaf's downlinks, the tier rates and the oversubscription ratio. docs/topologies.md gives
the exact wiring and numbering of each.
"""

from __future__ import annotations

from fractions import Fraction
from typing import Any

import numpy as np

from mvopt.cluster.spec import NetworkSpec, SpecBuilder, config_parameters, tier_link_params
from mvopt.cluster.units import exact
from mvopt.errors import ConfigError

__all__ = ["build_fat_tree", "build_leaf_spine", "build_rail_optimized", "uplinks_per_leaf"]


def uplinks_per_leaf(down_links: int, cluster: Any) -> int:
    """Uplinks (= spines) per leaf: ``down_links * rate0 / (oversubscription * rate1)``.

    Raises ConfigError on ``cluster.oversubscription`` unless it is a whole number >= 1.
    """
    r0, r1 = exact(cluster.tier_gbps(0)), exact(cluster.tier_gbps(1))
    ratio = exact(cluster.oversubscription)
    n = Fraction(down_links) * r0 / (ratio * r1)
    if n.denominator != 1 or n < 1:
        raise ConfigError(
            "cluster.oversubscription",
            f"must make the spine count = leaf downlinks x link_gbps[0] / (oversubscription x "
            f"link_gbps[1]) a whole number >= 1 (here {down_links} x {float(r0):g} / "
            f"({float(ratio):g} x {float(r1):g}) = {float(n):.4g})", cluster.oversubscription)
    return int(n)


def _finish(b: SpecBuilder, cluster: Any, kind: str) -> NetworkSpec:
    return b.build(kind, config_parameters(cluster), nics_per_server=cluster.resolved_nics_per_server,
                   gpus_per_server=cluster.gpus_per_server)


def build_fat_tree(cluster: Any) -> NetworkSpec:
    """k-ary 3-tier fat-tree: k pods of k/2 edge + k/2 aggregation switches, (k/2)^2 cores.

    Edge switch i of pod p is ``p*k/2 + i`` among the edges and has hosts
    ``(p*k/2 + i)*k/2 ..``; aggregation switch j of every pod links to cores ``j*k/2 .. j*k/2+k/2-1``.
    """
    k = cluster.k
    h = k // 2
    n_host = k**3 // 4
    b = SpecBuilder(n_host, tier_link_params(cluster), where=f"cluster.k = {k} (fat_tree)")
    edge = b.add_switches(k * h, 1)
    agg = b.add_switches(k * h, 2)
    core = b.add_switches(h * h, 3)
    b.attach_hosts(edge[np.arange(n_host) // h])
    b.connect_complete(edge.reshape(k, h), agg.reshape(k, h), 1)
    b.connect(agg.reshape(k, h)[:, :, None], core.reshape(h, h)[None, :, :], 2)
    return _finish(b, cluster, "fat_tree")


def build_leaf_spine(cluster: Any) -> NetworkSpec:
    """2-tier Clos: ``leaves`` leaves of ``hosts_per_leaf`` hosts, every leaf linked once to every
    spine; spines = hosts_per_leaf x rate0 / (oversubscription x rate1)."""
    n_leaf, per_leaf = cluster.leaves, cluster.hosts_per_leaf
    n_spine = uplinks_per_leaf(per_leaf, cluster)
    b = SpecBuilder(n_leaf * per_leaf, tier_link_params(cluster))
    leaves = b.add_switches(n_leaf, 1)
    spines = b.add_switches(n_spine, 2)
    b.attach_hosts(leaves[np.arange(b.n_host) // per_leaf])
    b.connect_complete(leaves, spines, 1)
    return _finish(b, cluster, "leaf_spine")


def build_rail_optimized(cluster: Any) -> NetworkSpec:
    """Rail-optimised Clos (see docs/topologies.md for the exact wiring).

    Host ``s*G + i`` is NIC i of server s (G = gpus_per_server = NICs per server); server s is in
    rail group ``s // servers_per_group``, whose rail leaf i (leaf ``group*G + i``) takes NIC i of
    each of its servers. tiers=2: every leaf links once to each of the u spines (a 2-tier Clos).
    tiers=3: ``groups_per_pod`` consecutive groups form a pod with its own u spines (every leaf of
    the pod to every pod spine); pod spine j of every pod links to each core switch of plane j
    (planes of ``pod_leaves x rate1 / rate2`` cores, so pod spines are non-blocking).

    ``nics_per_server: 1`` describes rail 0 alone (for ``workload.rail_sample``): host s is NIC 0
    of server s and only the rail-0 leaves exist; spines and cores are those of the whole fabric
    (the cores per plane still count every rail's leaves), so rail 0's paths are unchanged.
    """
    n_server, per_group, g = cluster.servers, cluster.servers_per_group, cluster.gpus_per_server
    rails = cluster.resolved_nics_per_server          # g, or 1 for rail 0 alone
    n_group = n_server // per_group
    u = uplinks_per_leaf(per_group, cluster)
    b = SpecBuilder(n_server * rails, tier_link_params(cluster))
    leaves = b.add_switches(n_group * rails, 1)
    host = np.arange(b.n_host)
    b.attach_hosts(leaves[(host // rails // per_group) * rails + host % rails])
    if cluster.tiers == 2:
        spines = b.add_switches(u, 2)
        b.connect_complete(leaves, spines, 1)
        return _finish(b, cluster, "rail_optimized")
    per_pod = cluster.groups_per_pod
    if n_group % per_pod:
        raise ConfigError("cluster.groups_per_pod", f"must divide the number of rail groups "
                          f"(servers / servers_per_group = {n_group})", per_pod)
    n_pod = n_group // per_pod
    planes = Fraction(per_pod * g) * exact(cluster.tier_gbps(1)) / exact(cluster.tier_gbps(2))
    if planes.denominator != 1 or planes < 1:
        raise ConfigError("cluster.link_gbps", f"must make the core switches per plane = leaves per pod "
                          f"x link_gbps[1] / link_gbps[2] a whole number >= 1 (here {per_pod * g} x "
                          f"{cluster.tier_gbps(1):g} / {cluster.tier_gbps(2):g} = {float(planes):.4g})",
                          list(cluster.link_gbps))
    c = int(planes)
    spines = b.add_switches(n_pod * u, 2).reshape(n_pod, u)
    cores = b.add_switches(u * c, 3).reshape(u, c)
    b.connect_complete(leaves.reshape(n_pod, per_pod * rails), spines, 1)
    b.connect(spines[:, :, None], cores[None, :, :], 2)
    return _finish(b, cluster, "rail_optimized")
