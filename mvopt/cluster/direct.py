"""Direct networks, one router per position: 2D/3D torus and dragonfly.

Routers are switches of tier 1 that hosts attach to. Torus links between neighbours are tier 1;
dragonfly local (intra-group) links are tier 1 and global (inter-group) links tier 2, so that
``link_gbps`` / ``link_delay_ns`` can give long global cables their own rate and delay.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mvopt.cluster.spec import NetworkSpec, SpecBuilder, config_parameters, tier_link_params
from mvopt.errors import ConfigError

__all__ = ["build_torus", "build_dragonfly", "dragonfly_global_links"]


def build_torus(cluster: Any) -> NetworkSpec:
    """Torus of ``torus_dims`` routers (row-major ids), one per server, each with
    ``nics_per_server`` hosts; wrap-around links, a single link in a dimension of size 2."""
    dims = tuple(cluster.torus_dims)
    nics = cluster.resolved_nics_per_server
    n_router = math.prod(dims)
    b = SpecBuilder(n_router * nics, tier_link_params(cluster))
    routers = b.add_switches(n_router, 1)
    b.attach_hosts(routers[np.arange(b.n_host) // nics])
    coords = np.indices(dims).reshape(len(dims), n_router)
    for d, size in enumerate(dims):
        src = np.flatnonzero(coords[d] == 0) if size == 2 else np.arange(n_router)
        nxt = coords[:, src].copy()
        nxt[d] = (nxt[d] + 1) % size
        b.connect(routers[src], routers[np.ravel_multi_index(tuple(nxt), dims)], 1)
    return b.build("torus", config_parameters(cluster), nics_per_server=nics,
                   gpus_per_server=cluster.gpus_per_server)


def dragonfly_global_links(groups: int, routers_per_group: int, per_router: int) -> tuple[np.ndarray, np.ndarray]:
    """Global links as (router a, router b) arrays of global router ids ``group*a + r``.

    Group i numbers its global ports ("slots") ``0 .. a*h-1``, slot q on router ``q // h``. Every
    pair of groups gets ``m = floor(a*h / (groups-1))`` links; copy c of the link between groups
    i < j uses slot ``c*(groups-1) + (j-1)`` of group i and slot ``c*(groups-1) + i`` of group j
    (each group's other groups in increasing order), so the slots of a group are used in order
    and ``a*h - m*(groups-1)`` stay free.
    """
    a, h = routers_per_group, per_router
    m = (a * h) // (groups - 1)
    i, j = np.triu_indices(groups, 1)
    c = np.arange(m)[:, None]
    slot_i = c * (groups - 1) + (j - 1)
    slot_j = c * (groups - 1) + i
    ra = i * a + slot_i // h
    rb = j * a + slot_j // h
    return ra.ravel(), rb.ravel()


def build_dragonfly(cluster: Any) -> NetworkSpec:
    """Dragonfly: ``groups`` groups of ``routers_per_group`` routers, all-to-all local links in a
    group, ``hosts_per_router`` hosts per router, global links spread over the routers so that
    every pair of groups is connected (see :func:`dragonfly_global_links`)."""
    g, a, p = cluster.groups, cluster.routers_per_group, cluster.hosts_per_router
    need = -(-(g - 1) // a)
    h = cluster.global_links_per_router if cluster.global_links_per_router is not None else need
    if h < need:
        raise ConfigError("cluster.global_links_per_router", f"must be >= {need} so that every pair of "
                          f"the {g} groups is connected (routers_per_group x global_links_per_router "
                          f">= groups - 1)", h)
    b = SpecBuilder(g * a * p, tier_link_params(cluster))
    routers = b.add_switches(g * a, 1)
    b.attach_hosts(routers[np.arange(b.n_host) // p])
    li, lj = np.triu_indices(a, 1)
    base = (np.arange(g) * a)[:, None]
    b.connect(routers[(base + li).ravel()], routers[(base + lj).ravel()], 1)
    ga, gb = dragonfly_global_links(g, a, h)
    b.connect(routers[ga], routers[gb], 2)
    params = config_parameters(cluster)
    params["global_links_per_router"] = h
    return b.build("dragonfly", params, nics_per_server=cluster.resolved_nics_per_server,
                   gpus_per_server=cluster.gpus_per_server)
