"""Per-flow paths as the HPCC ns-3 simulator routes them, and explicit per-flow paths.

The HPCC simulator (alibaba-edu/High-Precision-Congestion-Control,
``simulation/src/point-to-point/model/switch-node.cc``, ``SwitchNode::GetOutDev`` and
``EcmpHash``; routing tables from ``simulation/scratch/third.cc``, ``CalculateRoute``) routes a
packet at each switch by hashing 12 bytes, the little-endian words ``sip``, ``dip`` and
``sport | dport << 16``, with 32-bit MurmurHash3 (x86_32) seeded with the switch's node id; the
hash modulo the number of next hops indexes the switch's next-hop list toward ``dip``. That list
is in the order a breadth-first search from the destination host reaches the next hops: the
search visits a node's neighbours in the order of their objects' addresses (a map keyed by
pointer). Each switch object is one allocation of megabytes, which glibc maps on its own and
Linux places below the previous one, so a switch created later (a higher id) sits lower:
neighbours in descending node id. Only switches enter the search's queue, so hosts' places in
that order do not matter.

Paths here are lists of the switches' topology-file ids, from the source's switch to the
destination's. :func:`hpcc_flow_paths` computes them; :func:`read_hpcc_paths` reads a path file
and :func:`check_paths` refuses a path that is not one of the topology's.
"""

from __future__ import annotations

import os
from collections import deque
from typing import Sequence

import numpy as np

from mvopt.errors import ConfigError, InputFileError
from mvopt.files import read_text
from mvopt.io.hpcc import HpccFlow, _file_to_node, node_ip, sports

__all__ = ["murmur3_32", "hpcc_ecmp_hash", "hpcc_next_hops", "hpcc_flow_paths", "experiment_paths", "read_hpcc_paths",
           "check_paths"]

_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def murmur3_32(key: bytes, seed: int) -> int:
    """32-bit MurmurHash3 (x86_32) of `key` with `seed`."""
    h = seed & _M32
    n4 = len(key) // 4
    for i in range(n4):
        k = int.from_bytes(key[4 * i:4 * i + 4], "little")
        k = _rotl((k * 0xCC9E2D51) & _M32, 15) * 0x1B873593 & _M32
        h = _rotl(h ^ k, 13)
        h = (h * 5 + 0xE6546B64) & _M32
    tail = key[4 * n4:]
    if tail:
        k = int.from_bytes(tail, "little")
        h ^= _rotl((k * 0xCC9E2D51) & _M32, 15) * 0x1B873593 & _M32
    h ^= len(key)
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    return h ^ (h >> 16)


def hpcc_ecmp_hash(sip: int, dip: int, sport: int, dport: int, switch_id: int) -> int:
    """The HPCC simulator's ECMP hash of a data packet's 5-tuple at switch `switch_id` (file id)."""
    key = b"".join(int(w & _M32).to_bytes(4, "little") for w in (sip, dip, (sport & 0xFFFF) | (dport & 0xFFFF) << 16))
    return murmur3_32(key, switch_id)


def _adjacency(topo) -> tuple[list[list[int]], np.ndarray]:
    """Neighbours of each node by topology-file id, in the reference's order (module docstring),
    and whether each file id is a switch."""
    n = int(topo.n_node)
    ids = (getattr(topo, "parameters", None) or {}).get("file_node_ids")
    file_id = np.arange(n) if ids is None else np.asarray(ids, np.int64)
    port_lo = np.asarray(topo.node_port_offset, np.int64)
    peer = np.asarray(topo.port_peer_node, np.int64)
    is_switch = np.zeros(n, bool)
    is_switch[file_id[int(topo.n_host):]] = True
    nbrs: list[list[int]] = [[] for _ in range(n)]
    for v in range(n):
        nbrs[int(file_id[v])] = sorted({int(file_id[peer[p]]) for p in range(port_lo[v], port_lo[v + 1])}, reverse=True)
    return nbrs, is_switch


def hpcc_next_hops(topo, dst: int) -> dict[int, list[int]]:
    """Each switch's ordered next hops (file ids) toward host `dst` (file id), as the reference's
    breadth-first search from `dst` builds them."""
    nbrs, is_switch = _adjacency(topo)
    return _next_hops(nbrs, is_switch, dst)


def _next_hops(nbrs: list[list[int]], is_switch: np.ndarray, dst: int) -> dict[int, list[int]]:
    dist = {dst: 0}
    queue = deque([dst])
    out: dict[int, list[int]] = {}
    while queue:
        now = queue.popleft()
        for nxt in nbrs[now]:
            if nxt not in dist:
                dist[nxt] = dist[now] + 1
                if is_switch[nxt]:          # packets never pass through a host
                    queue.append(nxt)
            if dist[nxt] == dist[now] + 1 and is_switch[nxt]:
                out.setdefault(nxt, []).append(now)
    return out


def _walk(nbrs: list[list[int]], is_switch: np.ndarray, table: dict[int, list[int]], src: int, dst: int,
          key: tuple[int, int, int, int]) -> list[int]:
    """The switches a packet with hash key (sip, dip, sport, dport) passes from host src to host dst."""
    path: list[int] = []
    node = nbrs[src][0]                    # a host's one link
    while node != dst:
        hops = table.get(node)
        if not is_switch[node] or not hops or len(path) >= len(nbrs):
            raise ConfigError("cluster", f"no route from node {node} to host {dst}", show_value=False)
        path.append(node)
        node = hops[hpcc_ecmp_hash(*key, node) % len(hops)]
    return path


def hpcc_flow_paths(topo, flows: Sequence[HpccFlow]) -> list[tuple[list[int], list[int]]]:
    """Each flow's paths as the HPCC simulator routes them, (data, ACKs): the switches' file ids
    in order. An ACK carries the data's addresses and ports swapped (rdma-hw.cc, ReceiveUdp)."""
    nbrs, is_switch = _adjacency(topo)
    tables: dict[int, dict[int, list[int]]] = {}

    def table(dst: int) -> dict[int, list[int]]:
        if dst not in tables:
            tables[dst] = _next_hops(nbrs, is_switch, dst)
        return tables[dst]

    out = []
    for f, sport in zip(flows, sports(flows)):
        sip, dip = node_ip(f.src), node_ip(f.dst)
        out.append((_walk(nbrs, is_switch, table(f.dst), f.src, f.dst, (sip, dip, sport, f.dport)),
                    _walk(nbrs, is_switch, table(f.src), f.dst, f.src, (dip, sip, f.dport, sport))))
    return out


def experiment_paths(topo, flows: Sequence[HpccFlow], explicit: Sequence[Sequence[int]] | None = None
                     ) -> tuple[dict[int, list[int]], dict[int, list[int]] | None]:
    """Experiment.paths and ack_paths (mvopt node ids, by task id: flow i of the file is task i,
    :func:`add_hpcc_flows`) for the flows: `explicit` data paths (file ids; ACKs take them
    backwards), else the HPCC simulator's."""
    node_of = _file_to_node(topo)

    def ids(path: Sequence[int]) -> list[int]:
        return [int(node_of[v]) for v in path]

    if explicit is not None:
        return {i: ids(p) for i, p in enumerate(explicit)}, None
    both = hpcc_flow_paths(topo, flows)
    return {i: ids(d) for i, (d, _) in enumerate(both)}, {i: ids(a) for i, (_, a) in enumerate(both)}


def check_paths(topo, flows: Sequence[HpccFlow], paths: Sequence[Sequence[int]], file: str = "paths",
                lines: Sequence[int | None] | None = None) -> list[list[int]]:
    """`paths` (one list of switch file ids per flow) if each is a loop-free walk of the topology
    from the flow's source host to its destination host through switches; else InputFileError
    naming the flow, the path and what is wrong."""
    nbrs, is_switch = _adjacency(topo)
    if len(paths) != len(flows):
        raise InputFileError(file, None, f"holds {len(paths)} paths for {len(flows)} flows (one path per flow expected)")
    out = []
    for i, (f, p) in enumerate(zip(flows, paths)):
        line = lines[i] if lines is not None else None
        p = [int(v) for v in p]
        what = f"flow {i} ({f.src} -> {f.dst}): path {' '.join(map(str, p)) or '(empty)'}"
        for v in p:
            if not (0 <= v < len(nbrs) and is_switch[v]):
                raise InputFileError(file, line, f"{what}: {v} is not a switch id of the topology")
        if len(set(p)) != len(p):
            raise InputFileError(file, line, f"{what}: passes a switch twice")
        if not p:
            raise InputFileError(file, line, f"{what}: a flow passes at least one switch")
        walk = [f.src, *p, f.dst]
        for a, b in zip(walk, walk[1:]):
            if b not in nbrs[a]:
                raise InputFileError(file, line, f"{what}: no link between nodes {a} and {b}")
        out.append(p)
    return out


def read_hpcc_paths(path: str | os.PathLike, topo, flows: Sequence[HpccFlow]) -> list[list[int]]:
    """A path file: first line ``N`` (the number of flows), then one line per flow of the flow
    file, in its order, holding the switch ids (topology-file ids) its data passes in order.
    Every path is checked against the topology (:func:`check_paths`)."""
    file = str(path)
    rows = [(i + 1, ln.split()) for i, ln in enumerate(read_text(path).splitlines()) if ln.strip()]
    if not rows:
        raise InputFileError(file, None, "empty file")
    line, head = rows[0]
    if len(head) != 1 or not head[0].isdigit():
        raise InputFileError(file, line, f"expected the number of paths, got {' '.join(head)!r}")
    if int(head[0]) != len(rows) - 1:
        raise InputFileError(file, line, f"says {head[0]} paths but {len(rows) - 1} lines follow")
    paths = []
    for line, toks in rows[1:]:
        bad = next((t for t in toks if not t.isdigit()), None)
        if bad is not None:
            raise InputFileError(file, line, f"cannot parse switch id {bad!r} (an integer expected)")
        paths.append([int(t) for t in toks])
    return check_paths(topo, flows, paths, file, [ln for ln, _ in rows[1:]])
