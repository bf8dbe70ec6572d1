"""Inter-server collectives decomposed into network flows (NCCL-style ring algorithms).

:func:`add_collective` appends the flows of one collective over a list of hosts (in ring order)
to a task-graph builder (the engine's :class:`~mvopt.engine.TaskGraphBuilder`, passed in: this
module does not import the engine); :func:`add_collective_workload` does it for the
``collective`` workload kind. Sizes follow nccl-tests: ``size_bytes`` is the per-rank buffer
(all-reduce: input = output; all-gather: the gathered output; reduce-scatter: the input;
all-to-all: the send buffer, ``size/n`` to each rank), so each ring step moves ``size/n``.

**Ring** (``n`` ranks, rank ``i`` sends to rank ``i+1 mod n``):

* reduce-scatter: ``n-1`` steps; at step ``s`` rank ``r`` sends piece ``(r-s) mod n``;
* all-gather: ``n-1`` steps; at step ``s`` rank ``r`` forwards piece ``(r-s) mod n``;
* all-reduce: reduce-scatter then all-gather, ``2(n-1)`` steps (all-gather step ``s`` sends
  piece ``(r+1-s) mod n``, the piece rank ``r`` finished reducing).

The send of step ``s+1`` by rank ``r`` waits for the flow *into* ``r`` of step ``s`` (from its
predecessor): a dependency local to host ``r``, so no notification delay (docs/engine.md).

**Channels** (``channels = C``): ``C`` parallel rings over the same host order, each carrying
``1/C`` of every piece (distinct flows, hence distinct ECMP hashes).

**Chunk pipelining** (``chunk_bytes``): each channel's share of a step is split into chunks of
``chunk_bytes`` (the last one shorter); chunk ``j`` of step ``s+1`` waits only for chunk ``j`` of
step ``s``. A rank releases the chunks of its first step one after another, ``chunk_gap_ps``
apart (the caller passes ``C`` x the chunk's serialization time at the NIC: zero-duration
``delay`` tasks of that length on the rank's host implement the spacing); later steps inherit
the spacing from the data dependencies, so the ring stays busy instead of idling one path
latency per step.

**All-to-all**: every ordered pair at once, ``size/n`` per pair (``1/C`` per channel flow);
``chunk_bytes`` does not apply (all flows start together).

Every flow a rank sends also waits for that rank's own ``after`` tasks (its data must be ready).
Byte counts that do not divide evenly are spread over the first parts (sizes differ by at most
one byte), so every collective moves exactly the bytes the algorithm moves.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from mvopt.errors import ConfigError
from mvopt.sizes import TASK_BYTES, check_size

__all__ = ["OPS", "add_collective", "add_collective_workload", "ring_steps", "split_bytes"]

OPS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


def split_bytes(total: int, parts: int) -> list[int]:
    """``total`` bytes in ``parts`` near-equal integer parts (the first ones one byte larger)."""
    q, r = divmod(int(total), int(parts))
    return [q + 1 if i < r else q for i in range(parts)]


def ring_steps(op: str, n: int) -> int:
    """Number of ring steps of ``op`` over ``n`` ranks."""
    if op == "all_reduce":
        return 2 * (n - 1)
    if op in ("all_gather", "reduce_scatter"):
        return n - 1
    raise ValueError(f"{op!r} is not a ring collective")


def _piece(op: str, n: int, rank: int, step: int) -> int:
    """Index of the piece rank ``rank`` sends at ring step ``step``."""
    if op == "all_reduce" and step >= n - 1:
        return (rank + 1 - (step - (n - 1))) % n
    return (rank - step) % n


def _chunks(nbytes: int, chunk_bytes: int | None) -> list[int]:
    if not chunk_bytes or chunk_bytes >= nbytes:
        return [nbytes]
    full, last = divmod(nbytes, chunk_bytes)
    return [chunk_bytes] * full + ([last] if last else [])


def checked_ranks(hosts: Sequence[int], channels: int, where: str) -> list[int]:
    """The participating hosts as ints, after checking they are distinct and channels >= 1."""
    hosts = [int(h) for h in hosts]
    if len(set(hosts)) != len(hosts):
        raise ConfigError(f"{where}.hosts", "must not list a host twice", hosts)
    if channels < 1:
        raise ConfigError(f"{where}.channels", "must be >= 1", channels)
    return hosts


def add_collective(builder, op: str, hosts: Sequence[int], size_bytes: int, *, channels: int = 1,
                   chunk_bytes: int | None = None, chunk_gap_ps: int = 0,
                   after: Mapping[int, Sequence[int]] | None = None, category: str | None = None,
                   where: str = "collective") -> dict[int, list[int]]:
    """Append the flows of one collective to ``builder``.

    ``hosts`` are the ranks' hosts in ring order (distinct); ``after`` maps a host to the task
    ids that must finish before that rank sends anything. Returns, per host, the ids of the
    tasks whose completion means the collective is complete at that host (the flows it receives
    in the last step, or all flows it receives for all-to-all); they finish on that host, so
    tasks depending on them there start without notification delay. Invalid arguments raise
    ConfigError with paths under ``where``.
    """
    if op not in OPS:
        raise ConfigError(f"{where}.op", f"must be one of {', '.join(OPS)}", op)
    hosts = checked_ranks(hosts, channels, where)
    n = len(hosts)
    if n < 2:
        return {h: [] for h in hosts}
    if size_bytes < n * channels:
        raise ConfigError(f"{where}.bytes", f"must be at least ranks x channels ({n} x {channels}) "
                          "so that every flow carries a byte", size_bytes)
    pieces_max = -(-size_bytes // n)
    chunks = 1 if not chunk_bytes else max(1, -(-(-(-pieces_max // channels)) // chunk_bytes))
    flows = n * (n - 1) * channels if op == "all_to_all" else n * ring_steps(op, n) * channels * chunks
    check_size("its flows", flows, TASK_BYTES, f"{where} ({op} of {size_bytes:,} B over {n} ranks, "
               f"{channels} channel(s){f', chunks of {chunk_bytes:,} B' if chunk_bytes else ''})")
    after = {int(h): list(v) for h, v in (after or {}).items()}
    category = category or op
    # A zero-duration delay per rank with several `after` tasks keeps one dependency per flow.
    ready: dict[int, list[int]] = {}
    for h in hosts:
        deps = after.get(h, [])
        if len(deps) > 1:
            ready[h] = [builder.delay(h, 0, after=deps, category=category)]
        else:
            ready[h] = list(deps)
    pieces = split_bytes(size_bytes, n)
    done: dict[int, list[int]] = {h: [] for h in hosts}

    if op == "all_to_all":
        for i, src in enumerate(hosts):
            for k, dst in enumerate(hosts):
                if k == i:
                    continue
                for part in split_bytes(pieces[k], channels):
                    t = builder.flow(src, dst, part, after=ready[src], category=category)
                    done[dst].append(t)
        return done

    if hasattr(builder, "flows") and (not chunk_bytes or chunk_bytes >= -(-max(pieces) // channels)):
        return _ring_in_bulk(builder, op, hosts, pieces, channels, ready, category)
    steps = ring_steps(op, n)
    # prev[c][j][rank] = id of the flow rank received at the previous step (channel c, chunk j)
    prev: list[list[list[int]]] | None = None
    for s in range(steps):
        cur: list[list[list[int]]] = [[] for _ in range(channels)]
        for c in range(channels):
            # chunk sizes of every rank at this step (pieces may differ by one byte)
            per_rank = [_chunks(split_bytes(pieces[_piece(op, n, r, s)], channels)[c], chunk_bytes)
                        for r in range(n)]
            n_chunks = max(len(x) for x in per_rank)
            cur[c] = [[-1] * n for _ in range(n_chunks)]
            for r in range(n):
                src, dst = hosts[r], hosts[(r + 1) % n]
                for j, nbytes in enumerate(per_rank[r]):
                    deps = list(ready[src])
                    if s > 0:
                        # what this rank received at the previous step, chunk by chunk
                        got = [row[(r - 1) % n] for row in prev[c] if row[(r - 1) % n] >= 0]
                        last = j == len(per_rank[r]) - 1
                        k = min(j, len(got) - 1)
                        deps.extend(got[k:] if last else [got[k]])
                    elif j > 0 and chunk_gap_ps > 0:
                        deps.append(builder.delay(src, j * chunk_gap_ps, after=ready[src], category=category))
                    cur[c][j][r] = builder.flow(src, dst, nbytes, after=deps, category=category)
        prev = cur
    for c in range(channels):
        for row in prev[c]:  # type: ignore[index]
            for r in range(n):
                if row[r] >= 0:
                    done[hosts[(r + 1) % n]].append(row[r])
    return done


def _ring_in_bulk(builder, op: str, hosts: list[int], pieces: list[int], channels: int,
                  ready: dict[int, list[int]], category: str) -> dict[int, list[int]]:
    """add_collective's ring without chunking, one bulk append per step and channel (the same
    tasks, ids and dependencies as the general loop; a 512-rank all-reduce's 523,264 flows in a
    fraction of the loop's time). Every rank has at most one `ready` task."""
    n = len(hosts)
    h = np.asarray(hosts, np.int64)
    src, dst = h, np.roll(h, -1)
    ranks = np.arange(n)
    has_ready = np.array([len(ready[x]) for x in hosts], np.int64)
    ready_id = np.array([ready[x][0] if ready[x] else -1 for x in hosts], np.int64)
    piece_bytes = np.asarray(pieces, np.int64)
    prev: list[np.ndarray] = []      # per channel: id of the flow each rank sent at the last step
    for s in range(ring_steps(op, n)):
        if op == "all_reduce" and s >= n - 1:
            piece = (ranks + 1 - (s - (n - 1))) % n
        else:
            piece = (ranks - s) % n
        q, rem = np.divmod(piece_bytes[piece], channels)
        cur = []
        for c in range(channels):
            # rank r waits for its own ready task, then for the flow into it at the last step
            # (sent by rank r - 1)
            got = np.roll(prev[c], 1) if s else np.full(n, -1, np.int64)
            deps = np.stack([ready_id, got], axis=1)
            take = np.stack([has_ready > 0, np.full(n, s > 0)], axis=1)
            first = builder.flows(src, dst, q + (c < rem), take.sum(axis=1), deps[take], category=category)
            cur.append(np.arange(first, first + n, dtype=np.int64))
        prev = cur
    done: dict[int, list[int]] = {x: [] for x in hosts}
    for c in range(channels):
        for r in range(n):
            done[hosts[(r + 1) % n]].append(int(prev[c][r]))
    return done


def add_collective_workload(builder, cfg, n_host: int, *, chunk_gap_ps: int = 0,
                            where: str = "collective") -> dict[int, list[int]]:
    """The ``collective`` workload: append the one collective described by ``cfg`` (a
    :class:`~mvopt.config.CollectiveConfig`) over ``cfg.hosts`` (default: all ``n_host`` hosts)
    to ``builder``; returns :func:`add_collective`'s completion tasks per host."""
    hosts = list(range(n_host)) if cfg.hosts is None else [int(h) for h in cfg.hosts]
    for i, h in enumerate(hosts):
        if not 0 <= h < n_host:
            raise ConfigError(f"{where}.hosts[{i}]", f"must be a host id in 0..{n_host - 1}", h)
    if len(hosts) < 2:
        raise ConfigError(f"{where}.hosts", "must list at least 2 hosts", hosts)
    if cfg.op != "all_to_all" and cfg.algorithm == "tree":
        raise ConfigError(f"{where}.algorithm", "must be 'ring' or 'auto' (ring) for the collective "
                          "workload; tree is not implemented yet", cfg.algorithm)
    if cfg.hierarchical:
        raise ConfigError(f"{where}.hierarchical", "is for training workloads (needs the intra-server "
                          "model); use false for the collective workload", cfg.hierarchical)
    return add_collective(builder, cfg.op, hosts, cfg.bytes, channels=cfg.channels, chunk_bytes=cfg.chunk_bytes,
                          chunk_gap_ps=chunk_gap_ps, where=where)
