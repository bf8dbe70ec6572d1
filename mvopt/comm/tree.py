"""NCCL's double binary tree all-reduce, decomposed into network flows; algorithm choice.

**Trees** (NCCL ``ncclGetBtree`` / ``ncclGetDtree``, src/graph/trees.cc): tree 0 is a binary tree
over ranks ``0..n-1`` built on their bit patterns (rank 0 is the root and has one child, the
largest power of two below ``n``; a rank whose lowest set bit is ``b`` has children
``rank - b/2`` and ``rank + b/2`` when they exist, with the right child pulled in while out of
range); tree 1 is its mirror ``r -> n-1-r`` when ``n`` is even, or tree 0 shifted by one rank
when ``n`` is odd, so that most leaves of one tree are inner nodes of the other.

**All-reduce on the trees**: each tree carries half of the buffer (and each of ``channels``
channels ``1/channels`` of that half); the half is cut into chunks of ``chunk_bytes``
(default: :data:`DEFAULT_TREE_CHUNKS` chunks). Reduce: a leaf sends chunk ``j`` to its parent;
an inner node sends chunk ``j`` up once it received chunk ``j`` from every child. Broadcast: the
root sends chunk ``j`` down once it received chunk ``j`` from every child; a node forwards chunk
``j`` to its children once it received it from its parent. Every dependency is on a flow that
finished at the node that sends next (no notification delay, docs/engine.md). Leaves release
their chunks ``chunk_gap_ps`` apart (zero-length ``delay`` tasks), as the ring does, so that the
pipeline keeps its order instead of sharing the NIC among all chunks at once.

NCCL runs trees only for all-reduce; :func:`add_tree_collective` runs other operations on the
ring (what NCCL does when asked for a tree it does not have).

**Choice** (``algorithm: auto``): :func:`choose_algorithm` compares closed forms,
ring ``2(n-1) a + 2(n-1)/n S/B`` and tree ``2 ceil(log2 n) a + 2 S/B`` (``a`` the per-step
latency, ``B`` the NIC bandwidth), and takes the smaller: trees for small messages at scale,
rings for large ones, which is the shape of NCCL's own tuning.
"""

from __future__ import annotations

import math
from typing import Mapping, Sequence

from mvopt.comm.collectives import add_collective, checked_ranks, split_bytes
from mvopt.errors import ConfigError
from mvopt.sizes import TASK_BYTES, check_size

__all__ = ["btree", "dtree", "add_tree_all_reduce", "add_tree_collective", "choose_algorithm",
           "ring_time_estimate", "tree_time_estimate", "DEFAULT_TREE_CHUNKS"]

DEFAULT_TREE_CHUNKS = 8


def btree(n: int, rank: int) -> tuple[int, list[int]]:
    """(parent, children) of ``rank`` in NCCL's binary tree over ``n`` ranks (parent -1: root)."""
    bit = 1
    while bit < n:
        if bit & rank:
            break
        bit <<= 1
    if rank == 0:
        return -1, ([bit >> 1] if n > 1 else [])
    up = (rank ^ bit) | (bit << 1)
    if up >= n:
        up = rank ^ bit
    lowbit = bit >> 1
    down0 = rank - lowbit if lowbit else -1
    down1 = rank + lowbit if lowbit else -1
    while down1 >= n:
        lowbit >>= 1
        down1 = rank + lowbit if lowbit else -1
    return up, [c for c in (down0, down1) if c >= 0]


def dtree(n: int) -> list[tuple[list[int], list[list[int]]]]:
    """NCCL's double binary tree: two (parents, children) pairs, indexed by rank."""
    t0p, t0c = zip(*(btree(n, r) for r in range(n))) if n else ((), ())
    p1: list[int] = []
    c1: list[list[int]] = []
    for r in range(n):
        if n % 2:   # shift by one
            u, ch = btree(n, (r - 1) % n)
            p1.append(-1 if u < 0 else (u + 1) % n)
            c1.append([(c + 1) % n for c in ch])
        else:       # mirror
            u, ch = btree(n, n - 1 - r)
            p1.append(-1 if u < 0 else n - 1 - u)
            c1.append([n - 1 - c for c in ch])
    return [(list(t0p), [list(c) for c in t0c]), (p1, c1)]


def _chunks(nbytes: int, chunk_bytes: int | None) -> list[int]:
    if nbytes <= 0:
        return []
    if chunk_bytes is None:
        return [c for c in split_bytes(nbytes, min(DEFAULT_TREE_CHUNKS, nbytes)) if c > 0]
    if chunk_bytes >= nbytes:
        return [nbytes]
    full, last = divmod(nbytes, chunk_bytes)
    return [chunk_bytes] * full + ([last] if last else [])


def add_tree_all_reduce(builder, hosts: Sequence[int], size_bytes: int, *, channels: int = 1,
                        chunk_bytes: int | None = None, chunk_gap_ps: int = 0,
                        after: Mapping[int, Sequence[int]] | None = None, category: str | None = None,
                        where: str = "collective") -> dict[int, list[int]]:
    """Append the flows of a double-binary-tree all-reduce of ``size_bytes`` per rank over
    ``hosts`` (in rank order) to ``builder``; returns, per host, the tasks whose completion means
    the all-reduce is complete there (they finish on that host)."""
    hosts = checked_ranks(hosts, channels, where)
    n = len(hosts)
    if n < 2:
        return {h: [] for h in hosts}
    if size_bytes < 2 * channels:
        raise ConfigError(f"{where}.bytes", f"must be at least 2 x channels ({2 * channels}) for the "
                          "double binary tree", size_bytes)
    share = -(-size_bytes // (2 * channels))
    chunks = len(_chunks(min(share, DEFAULT_TREE_CHUNKS), None)) if chunk_bytes is None else -(-share // chunk_bytes)
    check_size("its flows", 4 * (n - 1) * channels * chunks, TASK_BYTES,
               f"{where} (tree all-reduce of {size_bytes:,} B over {n} ranks, {channels} channel(s))")
    category = category or "all_reduce"
    after = {int(h): list(v) for h, v in (after or {}).items()}
    ready: dict[int, list[int]] = {}
    for h in hosts:
        deps = after.get(h, [])
        ready[h] = [builder.delay(h, 0, after=deps, category=category)] if len(deps) > 1 else list(deps)
    done: dict[int, list[int]] = {h: [] for h in hosts}
    halves = split_bytes(size_bytes, 2)
    for t, (parent, children) in enumerate(dtree(n)):
        root = parent.index(-1)
        # depth-first order from the root, so that children are visited after their parent
        order, stack = [], [root]
        while stack:
            v = stack.pop()
            order.append(v)
            stack.extend(children[v])
        for c, share in enumerate(split_bytes(halves[t], channels)):
            chunks = _chunks(share, chunk_bytes)
            up: dict[tuple[int, int], int] = {}       # (rank, chunk) -> flow rank -> parent
            for v in reversed(order):                 # leaves first
                for j, nbytes in enumerate(chunks):
                    deps = list(ready[hosts[v]])
                    if children[v]:
                        deps += [up[(ch, j)] for ch in children[v]]
                    elif j > 0 and chunk_gap_ps > 0:
                        deps.append(builder.delay(hosts[v], j * chunk_gap_ps, after=ready[hosts[v]],
                                                  category=category))
                    if parent[v] >= 0:
                        up[(v, j)] = builder.flow(hosts[v], hosts[parent[v]], nbytes, after=deps,
                                                  category=category)
            down: dict[tuple[int, int], int] = {}     # (rank, chunk) -> flow parent -> rank
            for v in order:
                for j, nbytes in enumerate(chunks):
                    if parent[v] < 0:
                        got = [up[(ch, j)] for ch in children[v]]
                        done[hosts[v]].extend(got)
                    else:
                        got = [down[(v, j)]]
                        done[hosts[v]].append(down[(v, j)])
                    for ch in children[v]:
                        down[(ch, j)] = builder.flow(hosts[v], hosts[ch], nbytes, after=got,
                                                     category=category)
    return done


def add_tree_collective(builder, op: str, hosts: Sequence[int], size_bytes: int, **kw) -> dict[int, list[int]]:
    """``op`` with the tree algorithm: the double binary tree for all-reduce, the ring otherwise
    (NCCL has trees for all-reduce only)."""
    if op == "all_reduce":
        return add_tree_all_reduce(builder, hosts, size_bytes, **kw)
    return add_collective(builder, op, hosts, size_bytes, **kw)


def ring_time_estimate(op: str, n: int, size_bytes: float, bw_bytes_per_s: float, step_latency_s: float) -> float:
    """Closed form of a ring collective on an idle network: steps x latency + bus bytes / B."""
    if n < 2:
        return 0.0
    steps = 2 * (n - 1) if op == "all_reduce" else n - 1
    return steps * step_latency_s + steps / n * size_bytes / bw_bytes_per_s


def tree_time_estimate(n: int, size_bytes: float, bw_bytes_per_s: float, step_latency_s: float) -> float:
    """Closed form of the double binary tree all-reduce: up and down the depth, 2 S / B."""
    if n < 2:
        return 0.0
    return 2 * math.ceil(math.log2(n)) * step_latency_s + 2 * size_bytes / bw_bytes_per_s


def choose_algorithm(algorithm: str, op: str, n: int, size_bytes: float, bw_bytes_per_s: float,
                     step_latency_s: float) -> str:
    """'ring' or 'tree' for a collective: ``algorithm`` unless it is 'auto' (then the faster
    closed form); tree only for all-reduce."""
    if op != "all_reduce":
        return "ring"
    if algorithm != "auto":
        return algorithm
    ring = ring_time_estimate(op, n, size_bytes, bw_bytes_per_s, step_latency_s)
    tree = tree_time_estimate(n, size_bytes, bw_bytes_per_s, step_latency_s)
    return "tree" if tree < ring else "ring"
