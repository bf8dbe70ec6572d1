"""Where each flow's bytes go: the links of its path with the share of its rate on each.

ECMP flows take the one path the packet engine's switches pick, computed by the engine's own
code (:func:`mvopt.engine.routes.flow_paths`: the dense routing tables and the hash
``hash64(seed, TAG_ECMP, switch, flow)``); a topology without dense tables, or a path longer than
that walk covers, takes the reference simulator's rule hop by hop (same next-hop sets, same
hash). Sprayed flows split evenly at every switch over its equal-cost next hops, which is what
per-packet spraying does on average.

A share is an integer out of :data:`WEIGHT_ONE` (the whole rate), so that link loads are sums of
integers: exact in any order, on the CPU and on a GPU alike.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mvopt.cluster.compiled import CompiledTopology
from mvopt.engine import routes
from mvopt.engine.params import TAG_ECMP, Experiment, hash64, hash_prefixes
from mvopt.engine.tasks import FLOW

__all__ = ["WEIGHT_ONE", "FlowPaths", "flow_paths"]

# a flow's whole rate on a link; divisible by every fan-out up to 16 and their products up to 16,
# so that spraying over such next-hop sets splits exactly (others leave a remainder of at most
# one unit per next hop, given to the first ones)
WEIGHT_ONE = 720720


@dataclass(frozen=True)
class FlowPaths:
    """The links of every flow of one experiment, in task order of the flows (CSR)."""

    offset: np.ndarray      # int64[n_flow + 1]: entries of flow i are [offset[i], offset[i+1])
    port: np.ndarray        # int64: the experiment's port id (a link direction) of each entry
    weight: np.ndarray      # int64: the flow's share of its rate on that port, of WEIGHT_ONE


def flow_paths(exp: Experiment) -> FlowPaths:
    """The paths of every flow of `exp` (its flow tasks in task order)."""
    g, topo = exp.tasks, exp.topology
    flows = np.flatnonzero(g.kind == FLOW)
    src, dst = g.src[flows].astype(np.int64), g.dst[flows].astype(np.int64)
    if exp.params.lb_spray:
        return _sprayed(topo, src, dst)
    ports = _ecmp_ports(exp, flows, src, dst)
    counts = (ports >= 0).sum(axis=1)
    offset = np.zeros(flows.size + 1, np.int64)
    np.cumsum(counts, out=offset[1:])
    port = ports[ports >= 0]
    return FlowPaths(offset, port, np.full(port.size, WEIGHT_ONE, np.int64))


def _route_columns(exp: Experiment, flows: np.ndarray, src: np.ndarray, dst: np.ndarray) -> dict | None:
    """The columns :func:`routes.flow_paths` reads, for one experiment alone (ids are local, as
    they are relative to the experiment's first node and port in a packet batch)."""
    topo = exp.topology
    tables = routes.dense_routes(topo) if isinstance(topo, CompiledTopology) else None
    if tables is None:
        return None
    from mvopt.engine.batch import HASH_TAGS

    nh, nn = int(topo.n_host), int(topo.n_node)
    is_host = np.arange(nn) < nh
    return {
        "f_local": flows.astype(np.int64), "f_src_local": src, "f_dst_local": dst,
        "f_task": np.arange(flows.size), "task_src": src,
        "exp_node_lo": np.zeros(1, np.int64), "node_exp": np.zeros(nn, np.int64),
        "node_hash": hash_prefixes(exp.seed, HASH_TAGS, np.arange(nn)).view(np.int64).ravel(),
        "node_port_lo": np.asarray(topo.node_port_offset[:-1], np.int64),
        "rtab": tables[0], "rtab_nh": tables[1],
        "node_rtab": np.where(is_host, -1, (np.arange(nn) - nh) * nh),
        "node_rtnh": np.zeros(nn, np.int64),
        "port_node": np.asarray(topo.port_node, np.int64), "port_peer": np.asarray(topo.port_peer_port, np.int64),
        "node_is_host": is_host.astype(np.int8),
    }


def _ecmp_ports(exp: Experiment, flows: np.ndarray, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """[n_flow, links] port ids of each flow's path, -1 after its last link."""
    topo = exp.topology
    off = np.asarray(topo.node_port_offset, np.int64)
    peer = np.asarray(topo.port_peer_node, np.int64)
    n_switch = int(topo.n_node - topo.n_host)
    diameter = int(getattr(topo, "diameter_hops", 0))        # 0: not known
    npath = min(n_switch, 2 * diameter + 2) if diameter > 0 else n_switch   # switches a walk covers
    out = np.full((flows.size, npath + 1), -1, np.int64)
    if not flows.size:
        return out
    out[:, 0] = off[src]
    node = peer[out[:, 0]]
    cols = _route_columns(exp, flows, src, dst)
    if cols is not None:
        egress = routes.flow_paths(cols, np.zeros(1, np.int8), npath)[:, 0, :].astype(np.int64)
        for h in range(npath):
            go = (egress[:, h] >= 0) & (node != dst)
            out[go, h + 1] = off[node[go]] + egress[go, h]
            node[go] = peer[out[go, h + 1]]
    rest = np.flatnonzero(node != dst)            # no dense table, or longer than the walk
    if rest.size:
        walks = [_walk(exp, int(flows[i]), int(src[i]), int(dst[i])) for i in rest.tolist()]
        width = max(out.shape[1], max(len(w) for w in walks))
        out = np.pad(out, ((0, 0), (0, width - out.shape[1])), constant_values=-1)
        out[rest] = -1
        for i, w in zip(rest.tolist(), walks):
            out[i, :len(w)] = w
    return out


def _walk(exp: Experiment, flow: int, src: int, dst: int) -> list[int]:
    """One flow's ports, hop by hop, by the reference simulator's rule (its `_route`)."""
    topo = exp.topology
    ports = [int(topo.node_port_offset[src])]
    node = int(topo.port_peer_node[ports[0]])
    while node != dst:
        nh = topo.next_hop_ports(node, dst)
        ports.append(int(nh[hash64(exp.seed, TAG_ECMP, node, flow) % len(nh)]))
        node = int(topo.port_peer_node[ports[-1]])
    return ports


def _sprayed(topo, src: np.ndarray, dst: np.ndarray) -> FlowPaths:
    """Even splits over the equal-cost next hops, computed once per (source, destination)."""
    pairs, inv = np.unique(src * topo.n_host + dst, return_inverse=True)
    per_pair = [_split(topo, *divmod(int(k), int(topo.n_host))) for k in pairs.tolist()]
    counts = np.asarray([p.size for p, _ in per_pair], np.int64)[inv]
    offset = np.zeros(src.size + 1, np.int64)
    np.cumsum(counts, out=offset[1:])
    port = np.concatenate([per_pair[i][0] for i in inv.tolist()]) if src.size else np.zeros(0, np.int64)
    weight = np.concatenate([per_pair[i][1] for i in inv.tolist()]) if src.size else np.zeros(0, np.int64)
    return FlowPaths(offset, port, weight)


def _split(topo, src: int, dst: int) -> tuple[np.ndarray, np.ndarray]:
    """(ports, weights) of the even split from `src` to `dst`: every node passes its share on
    over all its next hops towards `dst`, in equal parts."""
    first = int(topo.node_port_offset[src])
    load: dict[int, int] = {first: WEIGHT_ONE}
    at = {int(topo.port_peer_node[first]): WEIGHT_ONE}
    for _ in range(topo.n_node):
        nxt: dict[int, int] = {}
        for node, share in sorted(at.items()):
            if node == dst:
                continue
            nh = topo.next_hop_ports(node, dst)
            part, extra = divmod(share, len(nh))
            for j, p in enumerate(nh.tolist()):
                w = part + (j < extra)
                load[p] = load.get(p, 0) + w
                v = int(topo.port_peer_node[p])
                nxt[v] = nxt.get(v, 0) + w
        if set(nxt) <= {dst}:
            break
        at = nxt
    ports = np.asarray(sorted(load), np.int64)
    return ports, np.asarray([load[p] for p in ports.tolist()], np.int64)
