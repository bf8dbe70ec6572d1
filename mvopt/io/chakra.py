"""Chakra execution traces (the MLCommons format ASTRA-sim 2 runs): reader and task graph.

A workload is one ET file per rank, ``PREFIX.0.et``, ``PREFIX.1.et``, ... (ASTRA-sim's naming:
``--workload-configuration=PREFIX``), each a ``GlobalMetadata`` message then ``Node`` messages,
length-prefixed (:mod:`mvopt.io.chakra_proto`; gzip-compressed files are read too). Rank ``r``
runs on GPU ``r`` of the cluster.

**Nodes** (the attributes ASTRA-sim's feeder reads; an integer attribute may use any of the
protobuf integer kinds):

* ``COMP_NODE``: a delay on the rank's GPU of ``duration_micros``; without one, of ``num_ops``
  FLOPs at the GPU type's large-GEMM rate (the compute model's); with neither, zero time.
* ``COMM_COLL_NODE``: ``comm_type`` ALL_REDUCE, ALL_GATHER, REDUCE_SCATTER, ALL_TO_ALL or
  BROADCAST and ``comm_size`` (bytes per rank, as ASTRA-sim's text workloads mean them) over the
  communicator ``pg_name`` (absent, empty or ``"0"``: every rank of the trace; any other name:
  the ranks the communicator-group file lists for it, ASTRA-sim's ``--comm-group-configuration``
  JSON ``{"1": [0, 1], ...}``). The ``k``-th collective of a communicator in each member's file is
  one collective; members must agree on its type and size. Collectives run as the ``collective``
  section says (:class:`mvopt.io.groupcomm.GroupCollectives`); a broadcast is NCCL's ring from
  the communicator's first rank (:func:`mvopt.comm.broadcast.add_broadcast`).
* ``COMM_SEND_NODE`` (``comm_dst``, ``comm_size``, ``comm_tag`` default 0, ``comm_src`` if given
  must be the rank) and ``COMM_RECV_NODE`` (``comm_src``, ``comm_size``, ``comm_tag``,
  ``comm_dst`` if given the rank): the ``k``-th send from ``s`` to ``d`` with a tag and the
  ``k``-th receive at ``d`` from ``s`` with that tag are one transfer, a flow from ``s``'s NIC to
  ``d``'s (an NVLink transfer inside a server) that starts when the send's dependencies are done;
  the send completes with it, the receive when it and the receive's dependencies are done.
* ``INVALID_NODE``: no work, its dependencies pass through (as ASTRA-sim skips it).
* Refused, by file and node: ``MEM_LOAD_NODE``, ``MEM_STORE_NODE`` (remote memory),
  ``METADATA_NODE`` (PyTorch process-group records: give the communicators as a
  communicator-group file instead), unknown node types, the collectives REDUCE, GATHER, SCATTER,
  REDUCE_SCATTER_BLOCK and BARRIER (which ASTRA-sim does not simulate either), an
  ``involved_dim`` that leaves out a dimension, missing required attributes, and unmatched or
  inconsistent collectives and transfers.

**Dependencies**: a node starts once every node of its ``data_deps`` and ``ctrl_deps`` (in its
own file) has finished, as ASTRA-sim 2's feeder resolves both. Nodes run as soon as their
dependencies allow; a GPU's compute nodes are not serialised beyond that. A dependency on an id
the file does not hold, and matchings that wait on each other in a cycle, are refused.
``iterations`` > 1 repeats the trace, each rank starting the next pass when it has finished its
nodes of the previous one.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from mvopt.errors import InputFileError
from mvopt.files import read_bytes, read_text

__all__ = ["ChakraNode", "ChakraTrace", "read_chakra", "parse_chakra", "chakra_graph", "trace_files",
           "COLLECTIVES", "REFUSED_COLLECTIVES"]

# Chakra CollectiveCommType name -> mvopt collective
COLLECTIVES = {"ALL_REDUCE": "all_reduce", "ALL_GATHER": "all_gather", "REDUCE_SCATTER": "reduce_scatter",
               "ALL_TO_ALL": "all_to_all", "BROADCAST": "broadcast"}
REFUSED_COLLECTIVES = ("REDUCE", "GATHER", "SCATTER", "REDUCE_SCATTER_BLOCK", "BARRIER")
_INT_KINDS = ("int64_val", "int32_val", "uint64_val", "uint32_val", "sint64_val", "sint32_val", "fixed64_val",
              "fixed32_val", "sfixed64_val", "sfixed32_val")
_ALL = ""    # the communicator of every rank


@dataclass(frozen=True)
class ChakraNode:
    """One node of one rank's trace, validated."""

    id: int
    name: str
    kind: str                  # comp, coll, send, recv, invalid
    deps: tuple[int, ...]      # data_deps then ctrl_deps, duplicates removed
    duration_us: int = 0
    num_ops: int = 0
    op: str | None = None      # collective
    size: int = 0
    group: str = _ALL
    peer: int = -1             # send: destination rank; recv: source rank
    tag: int = 0


@dataclass(frozen=True)
class ChakraTrace:
    """Every rank's nodes in file order, and the communicators by name."""

    files: tuple[str, ...]
    ranks: tuple[tuple[ChakraNode, ...], ...]
    groups: dict

    @property
    def n(self) -> int:
        return len(self.ranks)


def trace_files(prefix: str | Path) -> list[Path]:
    """``PREFIX.0.et``, ``PREFIX.1.et``, ... as long as they exist (at least the first)."""
    prefix = str(prefix)
    files = []
    while Path(f"{prefix}.{len(files)}.et").is_file():
        files.append(Path(f"{prefix}.{len(files)}.et"))
    if not files:
        raise InputFileError(prefix, None, f"no Chakra trace {prefix}.0.et (a workload is one file per rank, "
                             "PREFIX.0.et, PREFIX.1.et, ...: give PREFIX)")
    return files


def _attrs(node, file: str) -> dict:
    out = {}
    for a in node.attr:
        kind = a.WhichOneof("value")
        out[a.name] = (kind, getattr(a, kind) if kind else None)
    return out


def _where(node) -> str:
    return f"node {node.id} {node.name!r}"


def _int_attr(attrs: dict, name: str, node, file: str, default: int | None = None) -> int:
    if name not in attrs:
        if default is None:
            raise InputFileError(file, None, f"{_where(node)}: missing the attribute {name!r}")
        return default
    kind, val = attrs[name]
    if kind not in _INT_KINDS:
        raise InputFileError(file, None, f"{_where(node)}: attribute {name!r} must be an integer, got {kind}")
    return int(val)


def parse_chakra(blobs: Sequence[bytes], files: Sequence[str], comm_groups: dict | None = None,
                 groups_file: str = "<comm groups>") -> ChakraTrace:
    """Validate the ET files' bytes (one per rank) into a :class:`ChakraTrace` (see the module
    docstring for what is mapped and what is refused)."""
    from mvopt.io.chakra_proto import messages, split_messages

    m = messages()
    ntype = {v: k for k, v in m.NodeType.items()}
    ctype = {v: k for k, v in m.CollectiveCommType.items()}
    n = len(blobs)
    groups: dict[str, tuple[int, ...]] = {_ALL: tuple(range(n))}
    for name, ranks in (comm_groups or {}).items():
        if not isinstance(ranks, list) or not ranks or not all(isinstance(r, int) and 0 <= r < n for r in ranks) \
                or len(set(ranks)) != len(ranks):
            raise InputFileError(groups_file, None, f"communicator {name!r} must list distinct ranks in 0..{n - 1} "
                                 f"(the trace has {n} files), got {ranks!r}")
        if str(name) != "0":
            groups[str(name)] = tuple(ranks)
    ranks_out = []
    for r, (blob, file) in enumerate(zip(blobs, files)):
        try:
            msgs = split_messages(blob)
        except (ValueError, OSError, EOFError) as e:
            raise InputFileError(file, None, f"not a Chakra ET file: {e}") from None
        if not msgs:
            raise InputFileError(file, None, "empty (expected a GlobalMetadata message, then nodes)")
        from google.protobuf.message import DecodeError
        try:
            m.GlobalMetadata().ParseFromString(msgs[0])
        except DecodeError as e:
            raise InputFileError(file, None, f"the first message is not a Chakra GlobalMetadata ({e})") from None
        nodes, seen = [], set()
        for k, body in enumerate(msgs[1:], start=1):
            node = m.Node()
            try:
                node.ParseFromString(body)
            except DecodeError as e:
                raise InputFileError(file, None, f"message {k} is not a Chakra Node ({e})") from None
            nodes.append(_node(node, r, n, file, ntype, ctype, groups, groups_file))
            if node.id in seen:
                raise InputFileError(file, None, f"{_where(node)}: node id {node.id} appears twice")
            seen.add(node.id)
        for nd in nodes:
            for d in nd.deps:
                if d not in seen:
                    raise InputFileError(file, None, f"node {nd.id} {nd.name!r}: depends on node {d}, which "
                                         "the file does not hold")
        ranks_out.append(tuple(nodes))
    return ChakraTrace(files=tuple(files), ranks=tuple(ranks_out), groups=groups)


def _node(node, rank: int, n: int, file: str, ntype: dict, ctype: dict, groups: dict, groups_file: str) -> ChakraNode:
    t = ntype.get(node.type)
    if t is None:
        raise InputFileError(file, None, f"{_where(node)}: unknown node type {node.type}")
    deps = tuple(dict.fromkeys(list(node.data_deps) + list(node.ctrl_deps)))
    base = dict(id=int(node.id), name=node.name, deps=deps)
    attrs = _attrs(node, file)
    if t == "COMP_NODE":
        return ChakraNode(kind="comp", duration_us=int(node.duration_micros),
                          num_ops=_int_attr(attrs, "num_ops", node, file, 0), **base)
    if t == "INVALID_NODE":
        return ChakraNode(kind="invalid", **base)
    if t in ("MEM_LOAD_NODE", "MEM_STORE_NODE", "METADATA_NODE"):
        why = ("remote-memory nodes are not modelled" if t != "METADATA_NODE" else
               "process-group metadata nodes are not read: give the communicators as workload.comm_groups")
        raise InputFileError(file, None, f"{_where(node)}: {t} is not supported ({why})")
    size = _int_attr(attrs, "comm_size", node, file)
    if size < 0:
        raise InputFileError(file, None, f"{_where(node)}: comm_size must be >= 0, got {size}")
    if t == "COMM_COLL_NODE":
        code = _int_attr(attrs, "comm_type", node, file)
        name = ctype.get(code)
        if name not in COLLECTIVES:
            what = name or f"comm_type {code}"
            raise InputFileError(file, None, f"{_where(node)}: collective {what} is not supported (supported: "
                                 f"{', '.join(COLLECTIVES)})")
        if "involved_dim" in attrs:
            kind, val = attrs["involved_dim"]
            if kind != "bool_list" or not all(val.values):
                raise InputFileError(file, None, f"{_where(node)}: involved_dim restricting a collective to some "
                                     "network dimensions is not supported (give the ranks as a communicator)")
        group = attrs.get("pg_name", (None, ""))[1] or _ALL
        group = _ALL if group == "0" else str(group)
        if group not in groups:
            raise InputFileError(file, None, f"{_where(node)}: communicator pg_name {group!r} is not in "
                                 f"{groups_file if len(groups) > 1 else 'workload.comm_groups (none given)'}")
        if rank not in groups[group]:
            raise InputFileError(file, None, f"{_where(node)}: rank {rank} is not a member of communicator "
                                 f"{group!r} {list(groups[group])}")
        return ChakraNode(kind="coll", op=COLLECTIVES[name], size=size, group=group, **base)
    tag = _int_attr(attrs, "comm_tag", node, file, 0)
    if t == "COMM_SEND_NODE":
        src, peer = _int_attr(attrs, "comm_src", node, file, rank), _int_attr(attrs, "comm_dst", node, file)
        me, kind = src, "send"
    else:
        peer, dst = _int_attr(attrs, "comm_src", node, file), _int_attr(attrs, "comm_dst", node, file, rank)
        me, kind = dst, "recv"
    if me != rank:
        raise InputFileError(file, None, f"{_where(node)}: a {kind} of rank {rank}'s file names rank {me} as its "
                             f"{'source' if kind == 'send' else 'destination'}")
    if not 0 <= peer < n or peer == rank:
        raise InputFileError(file, None, f"{_where(node)}: peer rank {peer} must be another rank in 0..{n - 1}")
    return ChakraNode(kind=kind, size=size, peer=peer, tag=tag, **base)


def read_chakra(prefix: str | Path, comm_groups: str | Path | None = None) -> ChakraTrace:
    """Read ``PREFIX.<rank>.et`` for every rank (and the communicator-group JSON file, if any)."""
    files = trace_files(prefix)
    groups = None
    gfile = str(comm_groups) if comm_groups is not None else "<comm groups>"
    if comm_groups is not None:
        try:
            groups = json.loads(read_text(comm_groups))
        except json.JSONDecodeError as e:
            raise InputFileError(gfile, e.lineno, f"not JSON: {e.msg}") from None
        if not isinstance(groups, dict):
            raise InputFileError(gfile, None, "must be a JSON object {\"communicator\": [ranks], ...}")
    return parse_chakra([read_bytes(f) for f in files], [str(f) for f in files], groups, gfile)


def _units(tr: ChakraTrace):
    """Group the nodes into units built together: a node alone, or a matched collective (one
    node per member). Returns (units, unit of (rank, index), the send matched to each receive)."""
    units: list[list[tuple[int, int]]] = []
    unit_of: dict[tuple[int, int], int] = {}
    colls: dict[tuple[str, int], list[int]] = {}          # (group, rank) -> node indices in order
    sends: dict[tuple[int, int, int], list[int]] = {}     # (src, dst, tag) -> send node indices at src
    recvs: dict[tuple[int, int, int], list[int]] = {}
    for r, nodes in enumerate(tr.ranks):
        for i, nd in enumerate(nodes):
            if nd.kind == "coll":
                colls.setdefault((nd.group, r), []).append(i)
                continue
            if nd.kind == "send":
                sends.setdefault((r, nd.peer, nd.tag), []).append(i)
            elif nd.kind == "recv":
                recvs.setdefault((nd.peer, r, nd.tag), []).append(i)
            unit_of[(r, i)] = len(units)
            units.append([(r, i)])
    for g, members in tr.groups.items():
        seqs = [colls.get((g, r), []) for r in members]
        if len({len(s) for s in seqs}) > 1:
            counts = ", ".join(f"rank {r}: {len(s)}" for r, s in zip(members, seqs))
            raise InputFileError(tr.files[members[0]], None, f"the members of communicator {g or 'of all ranks'!r} "
                                 f"issue different numbers of collectives ({counts})")
        for k in range(len(seqs[0]) if seqs else 0):
            first = tr.ranks[members[0]][seqs[0][k]]
            for r, s in zip(members, seqs):
                nd = tr.ranks[r][s[k]]
                if (nd.op, nd.size) != (first.op, first.size):
                    raise InputFileError(tr.files[r], None, f"node {nd.id} {nd.name!r}: collective {k} of its "
                                         f"communicator is {nd.op} of {nd.size} B here but {first.op} of "
                                         f"{first.size} B in {tr.files[members[0]]} (node {first.id})")
                unit_of[(r, s[k])] = len(units)
            units.append([(r, s[k]) for r, s in zip(members, seqs)])
    matched: dict[tuple[int, int], tuple[int, int]] = {}
    for key in sorted(set(sends) | set(recvs)):
        s, d, tag = key
        a, b = sends.get(key, []), recvs.get(key, [])
        if len(a) != len(b):
            raise InputFileError(tr.files[s if len(a) > len(b) else d], None, f"{len(a)} send(s) from rank {s} to "
                                 f"rank {d} with tag {tag} but {len(b)} matching receive(s)")
        for i, j in zip(a, b):
            if tr.ranks[s][i].size != tr.ranks[d][j].size:
                raise InputFileError(tr.files[d], None, f"node {tr.ranks[d][j].id}: receives "
                                     f"{tr.ranks[d][j].size} B but the matching send (node {tr.ranks[s][i].id} of "
                                     f"{tr.files[s]}) sends {tr.ranks[s][i].size} B")
            matched[(d, j)] = (s, i)
    return units, unit_of, matched


def _order(tr: ChakraTrace, units, unit_of, matched) -> list[int]:
    """Units in an order where every unit follows those its nodes depend on (a receive: also its send)."""
    index = [{nd.id: i for i, nd in enumerate(nodes)} for nodes in tr.ranks]
    preds = [set() for _ in units]
    for u, members in enumerate(units):
        for r, i in members:
            for d in tr.ranks[r][i].deps:
                p = unit_of[(r, index[r][d])]
                if p != u:
                    preds[u].add(p)
                else:
                    raise InputFileError(tr.files[r], None, f"node {tr.ranks[r][i].id}: depends on node {d}, which "
                                         "belongs to the same collective")
            if (r, i) in matched:
                preds[u].add(unit_of[matched[(r, i)]])
    succ = [[] for _ in units]
    for u, ps in enumerate(preds):
        for p in ps:
            succ[p].append(u)
    left = [len(p) for p in preds]
    ready = [u for u in range(len(units)) if not left[u]]
    heapq.heapify(ready)
    out = []
    while ready:
        u = heapq.heappop(ready)
        out.append(u)
        for v in succ[u]:
            left[v] -= 1
            if not left[v]:
                heapq.heappush(ready, v)
    if len(out) < len(units):
        u = min(v for v in range(len(units)) if left[v])
        r, i = units[u][0]
        raise InputFileError(tr.files[r], None, f"node {tr.ranks[r][i].id} {tr.ranks[r][i].name!r} can never start: "
                             "its dependencies, collectives and transfers wait on each other in a cycle (do the "
                             "ranks issue a communicator's collectives in the same order?)")
    return out


def chakra_graph(builder, tr: ChakraTrace, *, gpu_host: Sequence[int], gpus_per_server: int,
                 intra: Callable[[str, float, int], float], flop_s: Callable[[float], float],
                 iterations: int = 1, collective=None, nic_bytes_per_s: float = 12.5e9,
                 step_latency_s: float = 5e-6, chunk_gap_ps: int = 0, wire_factor: float | None = None) -> dict:
    """Append the trace's ``iterations`` passes to ``builder`` (hosts = NICs; rank ``r`` on GPU
    ``r``); ``flop_s(num_ops)`` is the time of a COMP node given by FLOPs. Returns counts and
    per-rank end task ids."""
    from mvopt.comm.broadcast import add_broadcast
    from mvopt.io.groupcomm import GroupCollectives

    n = tr.n
    if n > len(gpu_host):
        raise InputFileError(tr.files[0], None, f"the trace has {n} ranks but the cluster {len(gpu_host)} GPUs")
    host = [int(gpu_host[g]) for g in range(n)]
    server = [g // gpus_per_server for g in range(n)]
    coll = GroupCollectives(builder, host=host, server=server, intra=intra, collective=collective,
                            nic_bytes_per_s=nic_bytes_per_s, step_latency_s=step_latency_s,
                            chunk_gap_ps=chunk_gap_ps, wire_factor=wire_factor)
    units, unit_of, matched = _units(tr)
    order = _order(tr, units, unit_of, matched)
    index = [{nd.id: i for i, nd in enumerate(nodes)} for nodes in tr.ranks]
    used = [set() for _ in range(n)]
    for r, nodes in enumerate(tr.ranks):
        for nd in nodes:
            used[r].update(index[r][d] for d in nd.deps)
    sinks = [[i for i in range(len(nodes)) if i not in used[r]] for r, nodes in enumerate(tr.ranks)]
    n0 = len(builder)

    def join(r: int, ids: list[int]) -> list[int]:
        return [builder.delay(host[r], 0, after=ids, category="sync")] if len(ids) > 1 else ids

    start: list[list[int]] = [[] for _ in range(n)]
    counts = {"comp": 0, "coll": 0, "p2p": 0}
    for _ in range(iterations):
        end: dict[tuple[int, int], list[int]] = {}

        def deps(r: int, i: int) -> list[int]:
            nd = tr.ranks[r][i]
            if not nd.deps:
                return start[r]
            return join(r, [t for d in nd.deps for t in end[(r, index[r][d])]])

        for u in order:
            members = units[u]
            r, i = members[0]
            nd = tr.ranks[r][i]
            if nd.kind == "comp":
                secs = nd.duration_us * 1e-6 if nd.duration_us else (flop_s(nd.num_ops) if nd.num_ops else 0.0)
                end[(r, i)] = [builder.delay(host[r], int(round(secs * 1e12)), after=deps(r, i), category="compute")]
                counts["comp"] += 1
            elif nd.kind == "invalid":
                end[(r, i)] = deps(r, i)
            elif nd.kind == "coll":
                ranks = [m[0] for m in members]
                after = {k: deps(mr, mi) for k, (mr, mi) in enumerate(members)}
                if nd.op == "broadcast":
                    done = add_broadcast(builder, [host[g] for g in ranks], [server[g] for g in ranks], nd.size,
                                         intra=intra, after=after, category="comm")
                else:
                    done = coll.run(nd.op, ranks, nd.size, after, "comm") if nd.size > 0 and len(ranks) > 1 else {}
                for k, (mr, mi) in enumerate(members):
                    end[(mr, mi)] = join(mr, done[k]) if done.get(k) else after[k]
                counts["coll"] += 1
            elif nd.kind == "send":                 # the transfer, from the sender's readiness
                d = nd.peer
                if server[r] == server[d] or nd.size == 0:
                    ps = int(round(intra("send_recv", nd.size, 2) * 1e12)) if nd.size else 0
                    end[(r, i)] = [builder.delay(host[d], ps, after=deps(r, i), category="comm")]
                else:
                    end[(r, i)] = [builder.flow(host[r], host[d], nd.size, after=deps(r, i), category="comm")]
                counts["p2p"] += 1
            else:                                   # a receive: its transfer and its own dependencies
                end[(r, i)] = join(r, end[matched[(r, i)]] + deps(r, i))
        start = [join(r, [t for i in sinks[r] for t in end[(r, i)]]) for r in range(n)]
    return {"ranks": n, "tasks": len(builder) - n0, **counts, "end": {r: start[r] for r in range(n)}}
