"""All-to-all over GPUs spread across servers, as NCCL runs it: NVLink inside a server, flows between.

:func:`add_all_to_all` appends one all-to-all over members ``i`` (GPU ``i`` on host ``hosts[i]``
of server ``servers[i]``) whose send blocks may differ: ``matrix[i][j]`` bytes go from member
``i`` to member ``j`` (the MoE token dispatch and combine are such exchanges; an even all-to-all
of an nccl-tests ``size`` has ``size / n`` in every block). The algorithms
(``collective.all_to_all``, declared in :data:`mvopt._cfg.algorithms.ALL_TO_ALL_ALGORITHMS`):

* ``concurrent``: every inter-server block is a flow, all released together once the sender is
  ready (one NCCL group of sends and receives with every peer in flight);
* ``pairwise``: NCCL's grouped send/recv on one point-to-point channel: each member sends to
  its peers one at a time in NCCL's round order (:func:`nccl_send_order`), a send waiting for the
  member's previous send; receives progress independently (NCCL runs sends and receives of a
  channel on separate warps), so no member waits for another's round. With NCCL's default
  channels the rounds of one group run at once, which is ``concurrent``;
* ``hierarchical`` (NCCL's PXN, "PCI x NVLink"): each member first hands over NVLink, to the
  GPU of its server on the destination's rail (same local index), everything bound for that
  rail; then every rail runs the pairwise exchange between servers (servers in NCCL's node
  order), member ``(a, j)`` sending member ``(b, j)`` the aggregate of server ``a``'s blocks for
  ``(b, j)``. Inter-server traffic stays on its rail and moves ``g`` times fewer, larger flows. It needs the same number
  of members on every server; otherwise the pairwise exchange runs.

Blocks between two members of one server go over NVLink in every algorithm: one intra-server
all-to-all step per member, a ``delay`` on its host lasting the intra-server model's all-to-all
time of ``g * b`` per rank (``g`` members of the server, ``b`` the largest block the member
sends or receives inside the server), which depends only on that member's own readiness (the
members of a server reach it together, as in :mod:`mvopt.comm.hierarchical`). Blocks of zero
bytes are skipped.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

import numpy as np

from mvopt._cfg.algorithms import ALL_TO_ALL_ALGORITHMS
from mvopt.comm.hierarchical import group_shape
from mvopt.errors import ConfigError

__all__ = ["add_all_to_all", "even_matrix", "skewed_matrix", "nccl_deltas", "nccl_send_order"]

IntraTime = Callable[[str, float, int], float]   # (collective, bytes per rank, gpus) -> seconds


def _ps(seconds: float) -> int:
    return int(round(float(seconds) * 1e12))


def even_matrix(n: int, size_bytes: int) -> np.ndarray:
    """Blocks of an nccl-tests all-to-all of ``size_bytes`` per rank: ``size / n`` to each rank
    (the first ones one byte larger when it does not divide), nothing to itself."""
    q, r = divmod(int(size_bytes), n)
    row = np.asarray([q + 1 if k < r else q for k in range(n)], np.int64)
    m = np.tile(row, (n, 1))
    np.fill_diagonal(m, 0)
    return m


def skewed_matrix(n: int, routed_bytes: float, skew: float) -> np.ndarray:
    """Blocks of a MoE token dispatch over ``n`` EP ranks that each route ``routed_bytes``
    (tokens x top-k x bytes per token): a share ``skew / n`` of every rank's routed tokens goes
    to rank 0 and ``(n - skew) / (n (n - 1))`` to each other rank (``skew`` = 1: uniform).
    Blocks to the sender itself stay local (diagonal 0). The combine is the transpose."""
    if n < 2:
        return np.zeros((n, n), np.int64)
    if not 1.0 <= skew <= n:
        raise ConfigError("workload.expert_skew", f"must be between 1 and the EP size ({n})", skew)
    share = np.full(n, (n - skew) / (n * (n - 1)))
    share[0] = skew / n
    m = np.rint(np.outer(np.full(n, float(routed_bytes)), share)).astype(np.int64)
    np.fill_diagonal(m, 0)
    return m


def nccl_deltas(n: int) -> list[int]:
    """NCCL's order of peer offsets ``0..n-1`` (its ``p2pSchedule``): the quadratic sequence
    ``(x^2 + x) / 2 mod 2^ceil(log2 n)``, offsets ``>= n`` dropped (16: 0, 1, 3, 6, 10, 15, 5, ...)."""
    p = 1
    while p < n:
        p *= 2
    out, delta, r = [], 0, 0
    while True:
        if delta < n:
            out.append(delta)
        r += 1
        delta = (delta + r) & (p - 1)
        if r == p:
            return out


def nccl_send_order(servers: Sequence[int]) -> list[list[int]]:
    """For every member, the members it sends to in NCCL's round order, itself first (round 0).

    With the same number of members on every server NCCL orders by server offset, then by local
    offset (member ``(s, l)`` sends in round ``(ds, dl)`` to ``(s + ds, l + dl)``, both offsets in
    :func:`nccl_deltas` order); otherwise it orders the members flat by rank offset."""
    n = len(servers)
    _, by_server = group_shape(list(servers))
    if len({len(x) for x in by_server}) != 1:
        return [[(i + d) % n for d in nccl_deltas(n)] for i in range(n)]
    k, g = len(by_server), len(by_server[0])
    where = {i: (s, l) for s, idx in enumerate(by_server) for l, i in enumerate(idx)}
    out = []
    for i in range(n):
        s, l = where[i]
        out.append([by_server[(s + ds) % k][(l + dl) % g] for ds in nccl_deltas(k) for dl in nccl_deltas(g)])
    return out


def add_all_to_all(builder, hosts: Sequence[int], servers: Sequence[int], matrix, *, algorithm: str,
                   intra: IntraTime, after: Mapping[int, Sequence[int]] | None = None,
                   category: str = "all_to_all", where: str = "collective") -> dict[int, list[int]]:
    """Append one all-to-all with blocks ``matrix[i][j]`` (bytes, member ``i`` to ``j``).

    ``after`` maps a member to the task ids that must finish before it sends; the result maps
    every member to the tasks whose completion means it has everything it receives (they finish
    on its host). ``intra`` gives intra-server collective times (seconds).
    """
    if algorithm not in ALL_TO_ALL_ALGORITHMS:
        raise ConfigError(f"{where}.all_to_all", f"must be one of {', '.join(ALL_TO_ALL_ALGORITHMS)}", algorithm)
    n = len(hosts)
    m = np.asarray(matrix, np.int64)
    if len(servers) != n or m.shape != (n, n):
        raise ValueError("hosts, servers and matrix disagree in size")
    if (m < 0).any():
        raise ValueError("all-to-all blocks must be >= 0 bytes")
    after = {int(k): list(v) for k, v in (after or {}).items()}
    done: dict[int, list[int]] = {i: [] for i in range(n)}
    if n < 2:
        return done
    order, by_server = group_shape(list(servers))
    local_of = {i: (s, k) for s, idx in enumerate(by_server) for k, i in enumerate(idx)}
    # one ready task per member, so that every flow it sends has one dependency
    ready: dict[int, list[int]] = {}
    for i in range(n):
        deps = after.get(i, [])
        ready[i] = [builder.delay(hosts[i], 0, after=deps, category=category)] if len(deps) > 1 else list(deps)
    counts = {len(x) for x in by_server}
    if algorithm == "hierarchical" and len(counts) == 1 and len(order) > 1:
        return _hierarchical(builder, hosts, by_server, m, intra, ready, category, done)
    same = np.asarray([[servers[i] == servers[j] for j in range(n)] for i in range(n)])
    # NVLink step of every member with server peers
    for idx in by_server:
        g = len(idx)
        if g < 2:
            continue
        sub = m[np.ix_(idx, idx)]
        for k, i in enumerate(idx):
            b = int(max(sub[k].max(), sub[:, k].max()))
            if b > 0:
                done[i].append(builder.delay(hosts[i], _ps(intra("all_to_all", g * b, g)), after=ready[i],
                                            category=category))
    if algorithm == "concurrent":
        for i in range(n):
            for j in range(n):
                if not same[i, j] and m[i, j] > 0:
                    done[j].append(builder.flow(hosts[i], hosts[j], int(m[i, j]), after=ready[i], category=category))
        return done
    _one_channel(builder, hosts, m, same, nccl_send_order(servers), ready, category, done)
    return done


def _one_channel(builder, hosts: Sequence[int], m: np.ndarray, same: np.ndarray, order: list[list[int]],
                 ready: dict[int, list[int]], category: str, done: dict[int, list[int]]) -> None:
    """The network sends of the pairwise exchange: member ``i`` sends to ``order[i]`` one at a
    time, each send after its previous one (blocks between ``same``-server members skipped)."""
    last: dict[int, int] = {}             # member -> its latest network send
    for r in range(len(order[0]) if order else 0):
        for i in range(len(hosts)):
            j = order[i][r]
            if j == i or same[i, j] or m[i, j] <= 0:
                continue
            deps = list(ready[i]) + ([last[i]] if i in last else [])
            last[i] = builder.flow(hosts[i], hosts[j], int(m[i, j]), after=deps, category=category)
            done[j].append(last[i])


def _hierarchical(builder, hosts: Sequence[int], by_server: list[list[int]], m: np.ndarray, intra: IntraTime,
                  ready: dict[int, list[int]], category: str, done: dict[int, list[int]]) -> dict[int, list[int]]:
    """PXN: NVLink to the destination's rail, then per rail pairwise between servers."""
    k, g = len(by_server), len(by_server[0])
    grid = np.asarray(by_server, np.int64)               # [server, local] -> member
    # blocks of member (a, i) by destination (b, j)
    blocks = m[grid.reshape(-1)][:, grid.reshape(-1)].reshape(k, g, k, g)
    # phase 1: (a, i) hands (a, j) everything for rail j (all servers, its own included)
    rail_load = blocks.sum(axis=2)                        # [a, i, j]
    phase1: dict[int, list[int]] = {}
    for a in range(k):
        for i in range(g):
            mem = int(grid[a, i])
            if g > 1:
                b = int(max(np.delete(rail_load[a, i], i).max(), np.delete(rail_load[a, :, i], i).max()))
                if b > 0:
                    t = builder.delay(hosts[mem], _ps(intra("all_to_all", g * b, g)), after=ready[mem],
                                      category=category)
                    phase1[mem] = [t]
                    done[mem].append(t)
                    continue
            phase1[mem] = list(ready[mem])
    # phase 2: rail j, server a -> server b carries the sum over i of blocks[a, i, b, j]
    agg = blocks.sum(axis=1)                              # [a, b, j]
    server_order = [[(a + d) % k for d in nccl_deltas(k)] for a in range(k)]
    for j in range(g):
        last: dict[int, int] = {}         # server -> its rail-j member's latest send
        for r in range(1, k):
            for a in range(k):
                b = server_order[a][r]
                nbytes = int(agg[a, b, j])
                if nbytes <= 0:
                    continue
                src, dst = int(grid[a, j]), int(grid[b, j])
                deps = phase1[src] + ([last[a]] if a in last else [])
                last[a] = builder.flow(hosts[src], hosts[dst], nbytes, after=deps, category=category)
                done[dst].append(last[a])
    return done
