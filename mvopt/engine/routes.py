"""Dense switch routing tables for the kernels: per switch, one entry per destination host.

A topology's routes are ranges of destination hosts per switch (``CompiledTopology``: a switch
finds a destination's range by binary search, then its next-hop set). On a GPU each step of that
search is a dependent load, and a window's events wait on them. A dense table answers with one load, and two
for an ECMP set: entry ``(a << 8) | n`` of switch s and destination d holds the size n of the
next-hop set and, for one next hop, its port's index among the switch's ports, for several, the
first of them in the topology's part of ``rtab_nh`` (which holds such indices). Neither holds
anything specific to an experiment, so experiments of the same topology share one copy in a
batch (:func:`route_key`): a batch of 4,096 k=4 fat-trees reads one 1.6 KB table (1,280 + 320
bytes), which stays in the caches. A topology too large for a table (``DENSE_ROUTE_ENTRIES``)
keeps the search. Results do not depend on it: the kernels pick from the same ordered next-hop
sets with the same hash.
"""

from __future__ import annotations

import dataclasses
import hashlib
import weakref
from typing import Mapping, Sequence

import numpy as np

from mvopt.cluster.compiled import CompiledTopology
from mvopt.engine.params import Experiment
from mvopt.engine.tasks import FLOW
from mvopt.errors import ConfigError

__all__ = ["DENSE_ROUTE_ENTRIES", "FLOW_PATHS_MAX_FLOWS", "dense_routes", "down_epochs", "down_tables", "explicit_path_rows", "links_down",
           "flow_paths", "has_table", "pinned_egress", "pinned_ports", "route_key", "table_owners", "wants_paths"]

# The largest table (switches x hosts entries, 4 bytes each) built for one topology: 16 MiB.
DENSE_ROUTE_ENTRIES = 1 << 22
# The most flows of an experiment whose ECMP paths a batch holds (f_path: 32 bytes per flow, so
# 32 MiB at most): the many small experiments of a search, whose switches the paths shorten; a
# paper-scale training iteration (145 M flows: 4.6 GB and a minute of building) routes its
# packets itself.
FLOW_PATHS_MAX_FLOWS = 1 << 20
_SET_BITS = 8    # n: next hops per destination, below 2 ** 8; a: below 2 ** 23


def has_table(topo: CompiledTopology) -> bool:
    """Whether `topo` gets a dense table (not too large, next-hop sets within the entries' fields)."""
    sizes = np.diff(np.asarray(topo.nhset_offset, np.int64))
    return (0 < topo.n_switch * topo.n_host <= DENSE_ROUTE_ENTRIES and topo.nhset_port.size < 1 << (31 - _SET_BITS)
            and (not sizes.size or int(sizes.max()) < 1 << _SET_BITS))


def route_key(topo: CompiledTopology) -> bytes | None:
    """What the dense table of `topo` depends on (experiments with equal keys share it), or None
    if `topo` gets no table (too large, or next-hop sets beyond the entries' fields)."""
    if not has_table(topo):
        return None
    h = hashlib.blake2b(digest_size=20)
    h.update(np.array([topo.n_host, topo.n_node], np.int64).tobytes())
    for a in (topo.node_port_offset, topo.sw_route_offset, topo.route_dst_lo, topo.route_nhset,
              topo.nhset_offset, topo.nhset_port):
        h.update(np.ascontiguousarray(a).tobytes())
        h.update(b"|")
    return h.digest()


_EPOCHS: "weakref.WeakKeyDictionary[CompiledTopology, tuple[CompiledTopology, ...]]" = weakref.WeakKeyDictionary()
_EPOCH_TABLES: "weakref.WeakKeyDictionary[CompiledTopology, tuple]" = weakref.WeakKeyDictionary()


def links_down(topo) -> tuple[tuple[int, int, int], ...]:
    """``topo.link_down``: (time in ps, port, peer port) of each link going down, by time (a
    topology without the field, as the tests' stand-ins, has none)."""
    return getattr(topo, "link_down", ())


def down_epochs(topo: CompiledTopology) -> tuple[CompiledTopology, ...]:
    """For each link of ``topo.link_down`` (by time), ``topo`` routed without it and every earlier
    one: the same ports, the shortest paths of what remains (computed once per topology)."""
    if not links_down(topo):
        return ()
    if topo not in _EPOCHS:
        from mvopt.cluster.routing import compute_routes
        out, down = [], []
        for _, port, peer in topo.link_down:
            down += [port, peer]
            r = compute_routes(int(topo.n_host), topo.node_port_offset, topo.port_node, topo.port_peer_node,
                               topo.port_peer_port, down=np.asarray(down, np.int64))
            out.append(dataclasses.replace(topo, sw_route_offset=r.sw_route_offset, route_dst_lo=r.route_dst_lo,
                                           route_nhset=r.route_nhset, nhset_offset=r.nhset_offset,
                                           nhset_port=r.nhset_port, link_down=()))
        _EPOCHS[topo] = tuple(out)
    return _EPOCHS[topo]


def down_tables(topo: CompiledTopology) -> tuple[tuple[np.ndarray, np.ndarray], ...]:
    """:func:`dense_routes` of every :func:`down_epochs` topology (() without links going down).
    A topology too large for a dense table cannot have links going down: ConfigError."""
    if not links_down(topo):
        return ()
    if topo not in _EPOCH_TABLES:
        tables = []
        for t in (topo,) + down_epochs(topo):
            if not has_table(t):
                raise ConfigError("cluster.link_down", f"needs a topology whose routing fits a dense table (at most "
                                  f"{DENSE_ROUTE_ENTRIES:,} switches x hosts entries; this one has "
                                  f"{int(t.n_switch) * int(t.n_host):,})", show_value=False)
        _EPOCH_TABLES[topo] = tuple(dense_routes(t) for t in down_epochs(topo))  # type: ignore[misc]
    return _EPOCH_TABLES[topo]


def dense_routes(topo: CompiledTopology) -> tuple[np.ndarray, np.ndarray] | None:
    """(rtab, rtab_nh) of `topo`: rtab[s * n_host + d] = (a << 8) | n for switch s (node
    n_host + s) and destination host d, as the kernels' range search would find it (the last
    range starting at or before d; none: n = 0); rtab_nh: the next-hop sets as port indices
    within their switch, `a` indexing it where n > 1. None if `topo` gets no table."""
    if not has_table(topo):
        return None
    nh, ns = int(topo.n_host), int(topo.n_switch)
    off = np.asarray(topo.sw_route_offset, np.int64)
    dst_lo = np.asarray(topo.route_dst_lo, np.int64)
    sets = np.asarray(topo.route_nhset, np.int64)
    set_off = np.asarray(topo.nhset_offset, np.int64)
    set_port = np.asarray(topo.nhset_port, np.int64)
    port_lo = np.asarray(topo.node_port_offset, np.int64)
    sizes = np.diff(set_off)
    # each next-hop entry as an index among its switch's ports (a set belongs to the one switch
    # whose ranges use it)
    owner = np.full(set_off.size - 1, -1, np.int64)
    owner[sets] = np.repeat(np.arange(ns), np.diff(off)) + nh
    entry_owner = np.repeat(owner, sizes)
    rtab_nh = (set_port - port_lo[np.maximum(entry_owner, 0)]).astype(np.int32)
    used = entry_owner >= 0     # each set is one switch's own ports (routing.py builds them so)
    if (rtab_nh[used] < 0).any() or (rtab_nh[used] >= (port_lo[entry_owner[used] + 1] - port_lo[entry_owner[used]])).any():
        raise AssertionError("a next-hop set holds ports of another switch than the one routing by it")
    rtab = np.zeros((ns, nh), np.int32)
    dst = np.arange(nh)
    for s in range(ns):
        lo, hi = int(off[s]), int(off[s + 1])
        if hi == lo:
            continue            # no ranges: no route anywhere (n = 0)
        r = lo + np.maximum(np.searchsorted(dst_lo[lo:hi], dst, side="right") - 1, 0)
        k = sets[r]
        n = sizes[k]
        first = set_off[k]
        a = np.where(n == 1, set_port[np.minimum(first, set_port.size - 1)] - port_lo[nh + s], first)
        rtab[s] = np.where(n > 0, (a << _SET_BITS) | n, 0)
    return rtab.ravel(), rtab_nh


def table_owners(topologies: list[CompiledTopology], keys: list[bytes | None] | None = None) -> list[int | None]:
    """For each topology of a batch, the first one with its dense table (equal keys), whose
    experiment brings the table to the batch; None where there is no table."""
    keys = [route_key(t) for t in topologies] if keys is None else keys
    first: dict[bytes, int] = {}
    return [None if k is None else first.setdefault(k, i) for i, k in enumerate(keys)]


def wants_paths(topo: CompiledTopology, n_flow: int) -> bool:
    """Whether an experiment of `topo` with `n_flow` flows gets its flows' paths (f_path) in a
    batch: it has a dense table and at most FLOW_PATHS_MAX_FLOWS flows. A batch holds the paths
    of all its flows when one of its experiments wants them."""
    return has_table(topo) and n_flow <= FLOW_PATHS_MAX_FLOWS


def flow_paths(cols: dict[str, np.ndarray], spray: np.ndarray, npath: int,
               flows: np.ndarray | None = None) -> np.ndarray:
    """Every flow's ECMP path through a batch's dense tables: f_path's rows [n_flow, 2, npath],
    the egress port's index among the ports of the flow's i-th switch, the data way (from the
    source host to f_dst_local) and back (to f_src_local: ACKs, NACKs); -1 where the switch
    must route the packet itself (no dense table, no route, a path longer than `npath`
    switches, or the data way of an experiment that sprays: `spray` per experiment). The
    kernels' `route` on the same inputs, ahead of time: the same table entries, next-hop sets
    and hash (hash64(seed, TAG_ECMP, switch, flow, 0, 0), from node_hash), one hop at a time for
    all flows at once (the flow level walks the same way, compiled: mvopt/flow/walk.cpp).
    `flows`: only these flow rows (the result's rows, in their order)."""
    from mvopt.engine import schema
    from mvopt.engine.params import hash_from

    fl = np.arange(cols["f_local"].size) if flows is None else np.asarray(flows, np.int64)
    nf = fl.size
    out = np.full((nf, 2, npath), -1, np.int16)
    if not nf:
        return out
    f_local, f_src, f_dst = cols["f_local"][fl], cols["f_src_local"][fl], cols["f_dst_local"][fl]
    src = cols["task_src"][cols["f_task"][fl]]
    base = cols["exp_node_lo"][cols["node_exp"][src]]
    ecmp_prefix = cols["node_hash"].reshape(-1, schema.NHT)[:, schema.HT["ecmp"]].view(np.uint64)
    lost = np.zeros(nf, bool)     # the data way reached another host: no path back either
    port_lo, rtab, rtab_nh = cols["node_port_lo"], cols["rtab"], cols["rtab_nh"]
    for way, (start, dst) in enumerate(((f_src, f_dst), (f_dst, f_src))):
        host = base + start
        node = cols["port_node"][cols["port_peer"][port_lo[host]]]     # a host's one port leads to its switch
        live = np.flatnonzero((cols["node_is_host"][node] == 0) & ~lost)
        if way == 0:
            live = live[~spray[cols["node_exp"][node[live]]].astype(bool)]
        for hop in range(npath):
            v = node[live]
            row = cols["node_rtab"][v]
            if not (ok := row >= 0).all():             # (masks only where a row stops)
                live, v, row = live[ok], v[ok], row[ok]
            x = rtab[row + dst[live]].astype(np.int64)
            a, n = x >> _SET_BITS, x & ((1 << _SET_BITS) - 1)
            if not (keep := n > 0).all():
                live, v, a, n = live[keep], v[keep], a[keep], n[keep]
            k = a.copy()
            many = n > 1
            if many.any():
                h = hash_from(ecmp_prefix[v[many]], f_local[live[many]])
                un = n[many].astype(np.uint64)
                pick = np.where((un & (un - np.uint64(1))) == 0, h & (un - np.uint64(1)), h % un).astype(np.int64)
                k[many] = rtab_nh[a[many] + cols["node_rtnh"][v[many]] + pick]
            out[:, way, hop][live] = k
            nxt = cols["port_node"][cols["port_peer"][port_lo[v] + k]]
            onward = cols["node_is_host"][nxt] == 0
            # (defensive: a walk that reached another host than the destination keeps no path,
            # and on the data way neither does the way back, which would start elsewhere)
            ended = live[~onward]
            astray = ended[nxt[~onward] != base[ended] + dst[ended]]
            out[astray, way, :] = -1
            lost[astray] = True
            live = live[onward]
            node[live] = nxt[onward]
            if not live.size:
                break
    return out


def pinned_ports(topo: CompiledTopology, src: int, dst: int, switches: Sequence[int], where: str) -> list[int]:
    """The global egress port of each switch of an explicit path from host `src` to host `dst`
    (`switches`: node ids, in order), each the switch's last port to the next node (of parallel
    links, the one listed last, as the HPCC simulator keeps one interface per neighbour); ConfigError
    at `where` if the path is not a loop-free walk of the topology through switches."""
    port_lo = np.asarray(topo.node_port_offset, np.int64)
    peer = np.asarray(topo.port_peer_node, np.int64)
    n_host, n_node = int(topo.n_host), int(topo.n_node)
    if isinstance(switches, (str, bytes)) or not all(isinstance(v, (int, np.integer)) for v in switches):
        raise ConfigError(where, "a list of switch node ids", switches)
    path = [int(v) for v in switches]
    shown = " ".join(map(str, path)) or "(empty)"
    if not path:
        raise ConfigError(where, f"a path from host {src} to host {dst} passes at least one switch", shown)
    bad = next((v for v in path if not n_host <= v < n_node), None)
    if bad is not None:
        raise ConfigError(where, f"switch node ids {n_host}..{n_node - 1}; {bad} is not a switch", shown)
    if len(set(path)) != len(path):
        raise ConfigError(where, "a path passes each switch once", shown)
    if len(path) > _npath():
        raise ConfigError(where, f"a path of at most {_npath()} switches (the engine's per-flow path length)", shown)
    walk = [src, *path, dst]
    out = []
    for i, (a, b) in enumerate(zip(walk, walk[1:])):
        ports = np.flatnonzero(peer[port_lo[a]:port_lo[a + 1]] == b)
        if not ports.size:
            raise ConfigError(where, f"a walk of the topology from host {src} to host {dst}; nodes {a} and {b} "
                              "are not linked", shown)
        if i:
            out.append(int(port_lo[a] + ports[-1]))
    return out


def _npath() -> int:
    from mvopt.engine.schema import NPATH
    return NPATH


def pinned_egress(topo: CompiledTopology, task_src: np.ndarray, task_dst: np.ndarray, is_flow: np.ndarray,
                  paths: Mapping[int, Sequence[int]], ack_paths: Mapping[int, Sequence[int]] | None = None) -> np.ndarray:
    """f_path's rows for explicit per-flow paths: [n_task, 2, NPATH] int16, at each switch of the
    flow's data way (`paths[task]`: switch node ids from the source's switch on) and of its way
    back (`ack_paths[task]`, by default the data way reversed) the egress port's index among the
    switch's ports; -1 where a task has no explicit path (its switches hash) or past its path's end.
    ConfigError naming ``paths[task]`` for an id that is not a flow task or a path that is not one
    of the topology's."""
    n_task = int(task_src.size)
    out = np.full((n_task, 2, _npath()), -1, np.int16)
    port_lo = np.asarray(topo.node_port_offset, np.int64)
    port_node = np.asarray(topo.port_node, np.int64)
    for name, table in (("paths", paths), ("ack_paths", ack_paths or {})):
        for t in table:
            if not (isinstance(t, (int, np.integer)) and 0 <= t < n_task and is_flow[t]):
                raise ConfigError(f"{name}[{t!r}]", "keys are the ids of flow tasks", t)
    for t, data in paths.items():
        t = int(t)
        back = (ack_paths or {}).get(t, list(data)[::-1])
        src, dst = int(task_src[t]), int(task_dst[t])
        for way, (a, b, sw, name) in enumerate(((src, dst, data, "paths"), (dst, src, back, "ack_paths"))):
            ports = np.asarray(pinned_ports(topo, a, b, sw, f"{name}[{t}]"), np.int64)
            out[t, way, :ports.size] = ports - port_lo[port_node[ports]]
    if ack_paths:
        missing = sorted(set(map(int, ack_paths)) - set(map(int, paths)))
        if missing:
            raise ConfigError(f"ack_paths[{missing[0]}]", "an ACK path only for a flow with a data path (paths)",
                              list(ack_paths[missing[0]]))
    return out


def explicit_path_rows(exp: Experiment) -> np.ndarray | None:
    """The f_path rows of the experiment's explicit paths (:func:`pinned_egress`; None without
    any), once its configuration allows them (resolve) and its topology and flows fit the path
    table (a dense routing table, at most FLOW_PATHS_MAX_FLOWS flows); ConfigError otherwise."""
    exp.params      # resolve() checks the configuration's side first
    if not exp.paths:
        return None
    g = exp.tasks
    is_flow = g.kind == FLOW
    if not wants_paths(exp.topology, int(is_flow.sum())):
        raise ConfigError("paths", f"explicit paths need a topology with a dense routing table and at most "
                          f"{FLOW_PATHS_MAX_FLOWS:,} flows", show_value=False)
    return pinned_egress(exp.topology, g.src, g.dst, is_flow, exp.paths, exp.ack_paths)
