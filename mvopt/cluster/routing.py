"""Shortest-path routing with every equal-cost next hop, compiled to destination-range tables.

Destinations are hosts, and a host's only link goes to its switch (its "leaf"), so a switch's
next hops towards host h are its next hops towards leaf(h) — except at the leaf itself, where the
next hop is the port down to h. The work is therefore one breadth-first search per *leaf* on the
switch graph, batched and vectorised with numpy:

1. for a batch of leaves, BFS distances ``D[leaf, switch]`` (flattened frontier expansion);
2. a switch-to-switch port ``p`` of switch s is a next hop towards leaf L iff
   ``D[L, peer(p)] == D[L, s] - 1``; per switch the next-hop set is a bit mask over its
   switch-facing ports (``ceil(degree / 64)`` 64-bit words), summed with ``np.add.reduceat``;
3. per switch the distinct masks over all leaves become next-hop sets (exact deduplication;
   sets of different switches are disjoint since ports belong to one switch), plus one singleton
   set per host for the last hop down from its leaf;
4. each switch's table over hosts ``0..n_host-1`` is run-length encoded into ranges
   ``[route_dst_lo[r], route_dst_lo[r+1])`` sharing one next-hop set; hosts are taken in runs of
   consecutive hosts with the same leaf, so the cost is O(switches x runs), not x hosts.

Memory is O(leaves x switches) words; time O(leaves x switch ports).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mvopt.errors import InfeasibleError

__all__ = ["RouteTables", "compute_routes", "bfs_distances"]

# Elements per batch of the (leaves x ports) work arrays; bounds peak memory (~100 MB).
_BATCH_ELEMENTS = 1 << 22
# The (leaves x mask words) and (switches x leaves) tables must fit in this many bytes.
MEMORY_LIMIT_BYTES = 8 << 30


@dataclass(frozen=True)
class RouteTables:
    """Compact routing of all switches (see docs/topologies.md, "compiled layout")."""

    sw_route_offset: np.ndarray   # int64[n_switch+1]
    route_dst_lo: np.ndarray      # int32[n_route]
    route_nhset: np.ndarray       # int32[n_route]
    nhset_offset: np.ndarray      # int64[n_nhset+1]
    nhset_port: np.ndarray        # int32 (global port ids, sorted within a set)
    diameter_hops: int            # longest shortest path between two hosts, in links


def bfs_distances(sources: np.ndarray, offset: np.ndarray, adj: np.ndarray, n: int) -> np.ndarray:
    """Hop distances from each source over a CSR graph: int32 ``[len(sources), n]``, -1 = unreachable."""
    b = sources.size
    dist = np.full(b * n, -1, np.int32)
    front = np.arange(b, dtype=np.int64) * n + sources
    dist[front] = 0
    deg = np.diff(offset)
    level = 0
    while front.size:
        node = front % n
        cnt = deg[node]
        total = int(cnt.sum())
        if total == 0:
            break
        ends = np.cumsum(cnt)
        idx = np.arange(total, dtype=np.int64) - np.repeat(ends - cnt - offset[node], cnt)
        nb = adj[idx] + np.repeat(front - node, cnt)
        nb = nb[dist[nb] < 0]
        level += 1
        dist[nb] = level
        front = np.flatnonzero(dist == level)
    return dist.reshape(b, n)


def compute_routes(n_host: int, node_port_offset: np.ndarray, port_node: np.ndarray,
                   port_peer_node: np.ndarray, port_peer_port: np.ndarray,
                   down: np.ndarray | None = None) -> RouteTables:
    """Routing tables of a connected network whose hosts each have one link to a switch.

    ``down``: switch-to-switch ports to leave out (links that are down; the rest must stay
    connected), so that the tables keep the network's port ids."""
    n_node = node_port_offset.size - 1
    n_sw = n_node - n_host
    n_port = port_node.size
    host_port = node_port_offset[:n_host]
    host_sw = port_peer_node[host_port].astype(np.int64) - n_host
    host_down = port_peer_port[host_port].astype(np.int64)
    assert n_host > 0 and (host_sw >= 0).all(), "every host needs its one link to a switch"

    # switch-to-switch ports, grouped by owning switch (ports are CSR by owner)
    sp = np.arange(node_port_offset[n_host], n_port, dtype=np.int64)
    ss_port = sp[port_peer_node[sp] >= n_host]
    if down is not None and len(down):
        ss_port = ss_port[~np.isin(ss_port, np.asarray(down, np.int64))]
    ss_owner = port_node[ss_port].astype(np.int64) - n_host
    ss_peer = port_peer_node[ss_port].astype(np.int64) - n_host
    ss_deg = np.bincount(ss_owner, minlength=n_sw)
    ss_off = np.zeros(n_sw + 1, np.int64)
    np.cumsum(ss_deg, out=ss_off[1:])
    local = np.arange(ss_port.size, dtype=np.int64) - ss_off[ss_owner]
    word_off = np.zeros(n_sw + 1, np.int64)
    np.cumsum((ss_deg + 63) // 64, out=word_off[1:])
    word_start = np.flatnonzero(local % 64 == 0)
    bit = np.left_shift(np.uint64(1), (local % 64).astype(np.uint64))

    # 1-2: next-hop masks M[leaf, word]
    leaves = np.unique(host_sw)
    need = leaves.size * (int(word_off[-1]) * 8 + n_sw * 4)
    if need > MEMORY_LIMIT_BYTES:
        raise InfeasibleError(f"routing tables for {leaves.size} leaf switches x {n_sw} switches need "
                              f"{need / 2**30:.1f} GiB (limit {MEMORY_LIMIT_BYTES / 2**30:.0f} GiB); "
                              "destination-based tables grow with leaves x switches")
    masks = np.zeros((leaves.size, int(word_off[-1])), np.uint64)
    batch = max(1, _BATCH_ELEMENTS // max(1, ss_port.size, n_sw))
    far = 0
    for b0 in range(0, leaves.size, batch):
        dist = bfs_distances(leaves[b0:b0 + batch], ss_off, ss_peer, n_sw)
        assert (dist >= 0).all(), "switch graph is disconnected"
        far = max(far, int(dist[:, leaves].max()))
        if ss_port.size:
            good = dist[:, ss_peer] == dist[:, ss_owner] - 1
            masks[b0:b0 + batch] = np.add.reduceat(np.where(good, bit, np.uint64(0)), word_start, axis=1)

    # 3: per-switch deduplication of the masks into next-hop sets
    nh = np.full((n_sw, leaves.size), -1, np.int32)   # set id per (switch, leaf); -1 = the leaf itself
    set_sizes: list[np.ndarray] = []
    set_ports: list[np.ndarray] = []
    n_set = 0
    for s in range(n_sw):
        w0, w1 = word_off[s], word_off[s + 1]
        if w0 == w1:
            continue
        if w1 - w0 == 1:
            uniq, inv = np.unique(masks[:, w0], return_inverse=True)
            uniq = uniq[:, None]
        else:
            uniq, inv = np.unique(masks[:, w0:w1], axis=0, return_inverse=True)
        empty = ~uniq.any(axis=1)
        ids = (np.cumsum(~empty) - 1 + n_set).astype(np.int32)
        ids[empty] = -1
        nh[s] = ids[inv.ravel()]
        full = np.ascontiguousarray(uniq[~empty].astype("<u8"))
        bits = np.unpackbits(full.view(np.uint8).reshape(full.shape[0], 8 * full.shape[1]), axis=1,
                             bitorder="little")
        row, pos = np.nonzero(bits)
        set_sizes.append(np.bincount(row, minlength=full.shape[0]))
        set_ports.append(ss_port[ss_off[s] + pos])
        n_set += full.shape[0]
    is_leaf = np.zeros(n_sw, bool)
    is_leaf[leaves] = True
    assert ((nh < 0).sum(axis=1) == is_leaf).all(), "a switch without a next hop towards a leaf"
    host_set0 = n_set  # set n_set + h = {the port from h's leaf down to h}
    sizes = np.concatenate(set_sizes + [np.ones(n_host, np.int64)])
    nhset_offset = np.zeros(sizes.size + 1, np.int64)
    np.cumsum(sizes, out=nhset_offset[1:])
    nhset_port = np.concatenate(set_ports + [host_down]).astype(np.int32)

    # 4: run-length encode each switch's table over runs of hosts with the same leaf
    cut = np.flatnonzero(host_sw[1:] != host_sw[:-1]) + 1
    run_lo = np.concatenate([[0], cut]).astype(np.int64)
    run_hi = np.concatenate([cut, [n_host]]).astype(np.int64)
    run_leaf = np.searchsorted(leaves, host_sw[run_lo])
    chunk = max(1, _BATCH_ELEMENTS // run_lo.size)
    out_sw, out_lo, out_set = [], [], []
    for s0 in range(0, n_sw, chunk):
        table = nh[s0:s0 + chunk][:, run_leaf]
        start = np.ones(table.shape, bool)
        start[:, 1:] = table[:, 1:] != table[:, :-1]
        row, col = np.nonzero(start)
        val = table[row, col]
        own = val < 0   # the switch is this run's leaf: one range per host, down its own port
        rep = np.where(own, run_hi[col] - run_lo[col], 1)
        first = np.cumsum(rep) - rep
        lo = np.repeat(run_lo[col], rep) + np.arange(int(rep.sum())) - np.repeat(first, rep)
        sets = np.repeat(val, rep).astype(np.int64)
        own_r = np.repeat(own, rep)
        sets[own_r] = host_set0 + lo[own_r]
        out_sw.append(np.repeat(row + s0, rep))
        out_lo.append(lo)
        out_set.append(sets)
    route_sw = np.concatenate(out_sw) if out_sw else np.zeros(0, np.int64)
    sw_route_offset = np.zeros(n_sw + 1, np.int64)
    np.cumsum(np.bincount(route_sw, minlength=n_sw), out=sw_route_offset[1:])
    return RouteTables(
        sw_route_offset=sw_route_offset,
        route_dst_lo=np.concatenate(out_lo).astype(np.int32),
        route_nhset=np.concatenate(out_set).astype(np.int32),
        nhset_offset=nhset_offset,
        nhset_port=nhset_port,
        diameter_hops=0 if n_host < 2 else far + 2,
    )
