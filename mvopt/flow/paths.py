"""Where each flow's bytes go: the links of its path with the share of its rate on each.

ECMP flows take the one path the packet engine's switches pick, computed by the engine's own
code (:func:`mvopt.engine.routes.flow_paths`: the dense routing tables and the hash
``hash64(seed, TAG_ECMP, switch, flow)``); a topology without dense tables, or a path longer than
that walk covers, takes the reference simulator's rule hop by hop (same next-hop sets, same
hash). Sprayed flows split evenly at every switch over its equal-cost next hops, which is what
per-packet spraying does on average.

A flow's ACKs (one of ``ack_bytes`` per data packet) load the way back, which ECMP routes as the
packet engine does whatever the data's load balancing: a flow at rate r puts
``r x ack_bytes x packets / wire bytes`` on each link of it. So a link that carries data one
way and another flow's ACKs the other (every link of a ring) is shared as at packet level.

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
DATA, ACK = 0, 1        # the two ways of routes.flow_paths


@dataclass(frozen=True)
class FlowPaths:
    """The links of every flow of one experiment, in task order of the flows (CSR): its data's
    entries, then its ACKs'."""

    offset: np.ndarray      # int64[n_flow + 1]: entries of flow i are [offset[i], offset[i+1])
    port: np.ndarray        # int64: the experiment's port id (a link direction) of each entry
    weight: np.ndarray      # int64: the share of the flow's rate on that port, of WEIGHT_ONE
    is_data: np.ndarray     # bool: a data entry (else an ACK entry)


def flow_paths(exp: Experiment) -> FlowPaths:
    """The paths of every flow of `exp` (its flow tasks in task order)."""
    g, topo, p = exp.tasks, exp.topology, exp.params
    flows = np.flatnonzero(g.kind == FLOW)
    src, dst = g.src[flows].astype(np.int64), g.dst[flows].astype(np.int64)
    ways = _ecmp_ports(exp, flows, src, dst, (ACK,) if p.lb_spray else (DATA, ACK))
    size = g.size_bytes[flows].astype(np.int64)
    npkt = p.flow_npkt[flows]
    ack_weight = np.round(WEIGHT_ONE * npkt * p.ack_bytes / (size + npkt * p.header)).astype(np.int64)
    if p.lb_spray:
        ack = _csr(ways[ACK], np.broadcast_to(ack_weight[:, None], ways[ACK].shape))
        return _merge(_sprayed(topo, src, dst), ack)
    # one matrix of every flow's data ports then its ACK ports: its entries >= 0, row by row, are
    # the flows' entries in order
    both = np.concatenate([ways[DATA], ways[ACK]], axis=1)
    used = both >= 0
    is_data = np.arange(both.shape[1]) < ways[DATA].shape[1]
    offset = np.zeros(flows.size + 1, np.int64)
    np.cumsum(used.sum(axis=1), out=offset[1:])
    weight = np.where(is_data, WEIGHT_ONE, ack_weight[:, None])
    return FlowPaths(offset, both[used].astype(np.int64), weight[used], np.broadcast_to(is_data, both.shape)[used])


def _csr(ports: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offset, port, weight) of a [flows, links] matrix padded with -1."""
    used = ports >= 0
    offset = np.zeros(ports.shape[0] + 1, np.int64)
    np.cumsum(used.sum(axis=1), out=offset[1:])
    return offset, ports[used], np.asarray(weights)[used]


def _merge(data: tuple, ack: tuple) -> FlowPaths:
    """Each flow's data entries followed by its ACK entries."""
    (d_off, d_port, d_w), (a_off, a_port, a_w) = data, ack
    n_data, n_ack = np.diff(d_off), np.diff(a_off)
    offset = d_off + a_off
    is_data = np.zeros(int(offset[-1]), bool)
    first = offset[:-1]
    is_data[np.repeat(first, n_data) + _within(n_data)] = True
    port = np.empty(is_data.size, np.int64)
    weight = np.empty(is_data.size, np.int64)
    port[is_data], weight[is_data] = d_port, d_w
    port[~is_data], weight[~is_data] = a_port, a_w
    return FlowPaths(offset, port, weight, is_data)


def _within(counts: np.ndarray) -> np.ndarray:
    """0, 1, ..., counts[i] - 1 for every i, concatenated."""
    total = int(counts.sum())
    return np.arange(total) - np.repeat(np.cumsum(counts) - counts, counts)


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


def _ecmp_ports(exp: Experiment, flows: np.ndarray, src: np.ndarray, dst: np.ndarray,
                ways: tuple[int, ...]) -> dict[int, np.ndarray]:
    """Per way asked (DATA: src -> dst, ACK: dst -> src), [n_flow, links] port ids of each
    flow's ECMP path, -1 after its last link."""
    topo = exp.topology
    off = np.asarray(topo.node_port_offset, np.int64)
    peer = np.asarray(topo.port_peer_node, np.int64)
    n_switch = int(topo.n_node - topo.n_host)
    diameter = int(getattr(topo, "diameter_hops", 0))        # 0: not known
    npath = min(n_switch, 2 * diameter + 2) if diameter > 0 else n_switch   # switches a walk covers
    cols = _route_columns(exp, flows, src, dst) if flows.size else None
    hops: list = []
    if cols is not None:
        routes.flow_paths(cols, np.zeros(1, np.int8), npath, hops=hops)
    width = 1 + max((h + 1 for _, h, _, _ in hops), default=0)     # columns the tables' walk fills
    out = {}
    for way in ways:
        start, end = (src, dst) if way == DATA else (dst, src)
        ports = np.full((flows.size, width), -1, np.int64)
        if not flows.size:
            out[way] = ports
            continue
        ports[:, 0] = off[start]
        last = ports[:, 0].copy()                      # each row's last port so far
        for w, h, rows, egress in hops:
            if w != way:
                continue
            if h < 0:                                  # a walk that went astray: walked again below
                ports[rows, 1:] = -1
                last[rows] = ports[rows, 0]
            else:
                ports[rows, h + 1] = egress
                last[rows] = egress
        node = peer[last]
        rest = np.flatnonzero(node != end)            # no dense table, or longer than the walk
        if rest.size:
            walks = [_walk(exp, int(flows[i]), int(start[i]), int(end[i])) for i in rest.tolist()]
            wide = max(ports.shape[1], max(len(w) for w in walks))
            ports = np.pad(ports, ((0, 0), (0, wide - ports.shape[1])), constant_values=-1)
            ports[rest] = -1
            for i, w in zip(rest.tolist(), walks):
                ports[i, :len(w)] = w
        out[way] = ports
    return out


def _walk(exp: Experiment, flow: int, start: int, end: int) -> list[int]:
    """One way of a flow, hop by hop, by the reference simulator's rule (its `_route`: data and
    ACKs hash alike)."""
    topo = exp.topology
    ports = [int(topo.node_port_offset[start])]
    node = int(topo.port_peer_node[ports[0]])
    while node != end:
        nh = topo.next_hop_ports(node, end)
        ports.append(int(nh[hash64(exp.seed, TAG_ECMP, node, flow) % len(nh)]))
        node = int(topo.port_peer_node[ports[-1]])
    return ports


def _sprayed(topo, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(offset, port, weight) of even splits over the equal-cost next hops, computed once per
    (source, destination)."""
    pairs, inv = np.unique(src * topo.n_host + dst, return_inverse=True)
    per_pair = [_split(topo, *divmod(int(k), int(topo.n_host))) for k in pairs.tolist()]
    counts = np.asarray([p.size for p, _ in per_pair], np.int64)[inv]
    offset = np.zeros(src.size + 1, np.int64)
    np.cumsum(counts, out=offset[1:])
    if not src.size:
        return offset, np.zeros(0, np.int64), np.zeros(0, np.int64)
    port = np.concatenate([per_pair[i][0] for i in inv.tolist()])
    weight = np.concatenate([per_pair[i][1] for i in inv.tolist()])
    return offset, port, weight


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
