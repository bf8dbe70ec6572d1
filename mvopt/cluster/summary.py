"""What a topology amounts to: counts, bisection bandwidth, diameter, switch ports.

Definitions (docs/topologies.md repeats them):

- *links* count every cable once, host links included; *switch ports* = ports owned by switches.
- *diameter*: the longest shortest path between two hosts, in links (host links included).
- *bisection bandwidth* (Gb/s, one direction): the smallest total rate of links that must be cut
  to split the hosts into two equal halves. Closed forms where the structure gives one:
  Clos (fat-tree, leaf-spine, rail-optimised): the smallest over link tiers of half that tier's
  total capacity (a cut along leaf/pod boundaries achieves it; a tier above a single leaf or a
  single pod is not crossed and does not count); torus: the links cut by halving
  the largest dimension (2 x routers / d_max links, 1 x when d_max = 2); dragonfly: the global
  links between two halves of the groups (floor(g/2) x ceil(g/2) x links per pair of groups);
  each also bounded by half the host links' capacity. Other graphs (files, networkx): the
  minimum cut between hosts ``0..n/2-1`` and the rest (networkx max-flow), an upper bound on the
  true bisection that equals it when host ids follow locality; not computed above 5000 nodes.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from mvopt.cluster.compiled import CompiledTopology

__all__ = ["summarize", "bisection_bandwidth", "min_cut_bisection"]

MIN_CUT_MAX_NODES = 5000
_CLOS = ("fat_tree", "leaf_spine", "rail_optimized")


def _tier_capacity_gbps(topo: CompiledTopology) -> dict[int, float]:
    ends = topo.link_endpoints()[:, 0]
    tiers = topo.port_tier[ends]
    rates = topo.port_rate_bps[ends]
    return {int(t): float(rates[tiers == t].sum()) / 1e9 for t in np.unique(tiers)}


def min_cut_bisection(topo: CompiledTopology) -> float:
    """Minimum cut (Gb/s) between hosts ``0..n/2-1`` and the other hosts, by networkx max-flow."""
    import networkx as nx
    g = nx.DiGraph()
    ends = topo.link_endpoints()[:, 0]
    for a, b, r in zip(topo.port_node[ends].tolist(), topo.port_peer_node[ends].tolist(),
                       (topo.port_rate_bps[ends] / 1e9).tolist()):
        for u, v in ((a, b), (b, a)):
            cap = g.edges[u, v]["capacity"] + r if g.has_edge(u, v) else r
            g.add_edge(u, v, capacity=cap)
    half = topo.n_host // 2
    for h in range(topo.n_host):
        if h < half:
            g.add_edge("s", h)          # no capacity attribute = unbounded
        else:
            g.add_edge(h, "t")
    return float(nx.minimum_cut_value(g, "s", "t"))


def _clos_subtrees(topo: CompiledTopology, tier: int) -> int:
    """How many disjoint subtrees the hosts fall into below link tier ``tier`` of a Clos (leaves
    below tier 1, pods below tier 2); links of a tier matter for the bisection only if >= 2."""
    p = topo.parameters
    if tier == 1:
        return int((topo.node_tier == 1).sum())
    if topo.kind == "fat_tree":
        return p["k"]
    if topo.kind == "rail_optimized" and p.get("tiers") == 3:
        return p["servers"] // p["servers_per_group"] // p["groups_per_pod"]
    return 1


def bisection_bandwidth(topo: CompiledTopology) -> tuple[float | None, str]:
    """``(Gb/s or None, method)`` — see the module docstring for the definitions."""
    if topo.n_host < 2:
        return None, "undefined (fewer than 2 hosts)"
    cap = _tier_capacity_gbps(topo)
    host_half = cap.get(0, 0.0) / 2
    p = topo.parameters
    if topo.kind in _CLOS:
        tiers = [t for t in cap if t == 0 or _clos_subtrees(topo, t) >= 2]
        return min(cap[t] / 2 for t in tiers), "closed form (Clos): min over link tiers of half the tier capacity"
    if topo.kind == "torus":
        dims = list(p["torus_dims"])
        d_max = max(dims)
        n_router = math.prod(dims)
        cut_links = n_router // d_max * (2 if d_max > 2 else 1)
        rate = cap.get(1, 0.0) / max(1, int((topo.port_tier[topo.link_endpoints()[:, 0]] == 1).sum()))
        return min(cut_links * rate, host_half), "closed form (torus): links across the halved largest dimension"
    if topo.kind == "dragonfly":
        g, a, h = p["groups"], p["routers_per_group"], p["global_links_per_router"]
        per_pair = (a * h) // (g - 1)
        n_global = int((topo.port_tier[topo.link_endpoints()[:, 0]] == 2).sum())
        rate = cap.get(2, 0.0) / max(1, n_global)
        crossing = (g // 2) * (g - g // 2) * per_pair
        return min(crossing * rate, host_half), "closed form (dragonfly): global links between two halves of the groups"
    if topo.n_node <= MIN_CUT_MAX_NODES:
        return min_cut_bisection(topo), "min cut between hosts 0..n/2-1 and the rest (networkx max-flow)"
    return None, f"not computed (more than {MIN_CUT_MAX_NODES} nodes)"


def summarize(topo: CompiledTopology) -> dict[str, Any]:
    """Plain-data summary of a compiled topology (JSON-ready)."""
    sw_tier = topo.node_tier[topo.n_host:]
    ends = topo.link_endpoints()[:, 0]
    link_tier = topo.port_tier[ends]
    degree = np.diff(topo.node_port_offset)[topo.n_host:]
    bis, method = bisection_bandwidth(topo)
    return {
        "kind": topo.kind,
        "parameters": topo.parameters,
        "hosts": topo.n_host,
        "servers": topo.n_server,
        "gpus_per_server": topo.gpus_per_server,
        "nics_per_server": topo.n_host // topo.n_server,
        "gpus": topo.n_gpu,
        "switches": topo.n_switch,
        "switches_by_tier": {int(t): int((sw_tier == t).sum()) for t in np.unique(sw_tier)},
        "links": topo.n_link,
        "links_by_tier": {int(t): int((link_tier == t).sum()) for t in np.unique(link_tier)},
        "switch_ports": int(degree.sum()),
        "max_switch_radix": int(degree.max()) if degree.size else 0,
        "bisection_gbps": bis,
        "bisection_method": method,
        "diameter_hops": topo.diameter_hops,
        "routes": topo.n_route,
        "nhsets": topo.n_nhset,
    }
