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
    from mvopt.flow.compiled import pack_paths      # (compiled imports this module)

    g, topo, p = exp.tasks, exp.topology, exp.params
    flows = np.flatnonzero(g.kind == FLOW)
    src, dst = g.src[flows].astype(np.int64), g.dst[flows].astype(np.int64)
    ways = _ecmp_ports(exp, flows, src, dst, (ACK,) if p.lb_spray else (DATA, ACK))
    size = g.size_bytes[flows].astype(np.int64)
    npkt = p.flow_npkt[flows]
    ack_weight = np.round(WEIGHT_ONE * npkt * p.ack_bytes / (size + npkt * p.header)).astype(np.int64)
    if p.lb_spray:
        ack = _csr(ways[ACK][0], np.broadcast_to(ack_weight[:, None], ways[ACK][0].shape))
        return _merge(_sprayed(topo, src, dst), ack)
    return FlowPaths(*pack_paths(*ways[DATA], *ways[ACK], ack_weight))


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


def _ecmp_ports(exp: Experiment, flows: np.ndarray, src: np.ndarray, dst: np.ndarray,
                ways: tuple[int, ...]) -> dict[int, tuple[np.ndarray, np.ndarray]]:
    """Per way asked (DATA: src -> dst, ACK: dst -> src), [n_flow, links] port ids of each
    flow's ECMP path, -1 after its last link, and the links of each: through the dense tables by
    the compiled walk (:func:`mvopt.flow.compiled.ecmp_walk`, routes.flow_paths' walk), and by
    the reference's rule hop by hop where there is none or a walk does not reach the flow's end."""
    from mvopt.flow.compiled import ecmp_walk       # (compiled imports this module)

    topo = exp.topology
    off = np.asarray(topo.node_port_offset, np.int64)
    peer = np.asarray(topo.port_peer_node, np.int64)
    n_switch = int(topo.n_node - topo.n_host)
    diameter = int(getattr(topo, "diameter_hops", 0))        # 0: not known
    npath = min(n_switch, 2 * diameter + 2) if diameter > 0 else n_switch   # switches a walk covers
    tables = routes.dense_routes(topo) if isinstance(topo, CompiledTopology) and flows.size else None
    walked = {}
    if tables is not None:
        prefix = np.ascontiguousarray(hash_prefixes(exp.seed, (TAG_ECMP,), np.arange(int(topo.n_node)))[:, 0])
        lost = np.zeros(flows.size, np.int8)          # (a data way astray leaves no way back)
        for way in (DATA, ACK):
            start, end = (src, dst) if way == DATA else (dst, src)
            walked[way] = ecmp_walk(flows, start, end, int(topo.n_host), off, peer, prefix, tables, npath, lost)
    out = {}
    for way in ways:
        start, end = (src, dst) if way == DATA else (dst, src)
        if way in walked:
            ports, count, reached = walked[way]
        else:
            ports, count, reached = off[start][:, None], np.ones(flows.size, np.int64), peer[off[start]] == end
        rest = np.flatnonzero(~reached)               # no dense table, or not reached by its walk
        if rest.size:
            walks = [_walk(exp, int(flows[i]), int(start[i]), int(end[i])) for i in rest.tolist()]
            wide = max(ports.shape[1], max(len(w) for w in walks))
            ports = np.pad(ports, ((0, 0), (0, wide - ports.shape[1])), constant_values=-1)
            ports[rest] = -1
            for i, w in zip(rest.tolist(), walks):
                ports[i, :len(w)] = w
            count[rest] = [len(w) for w in walks]
        out[way] = ports, count
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
