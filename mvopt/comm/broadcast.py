"""Broadcast as NCCL's ring runs it: the root's buffer in pieces, each piece forwarded along the
ring of members in order (root = member 0), a member sending piece ``k`` once it has received
it and has sent piece ``k - 1``. Between two members of one server a hop is an NVLink transfer
(a ``delay`` of the intra-server send/recv time on the receiver's host), otherwise a flow.
"""

from __future__ import annotations

from typing import Callable, Mapping, Sequence

from mvopt.comm.collectives import split_bytes

__all__ = ["add_broadcast"]


def add_broadcast(builder, hosts: Sequence[int], servers: Sequence[int], size_bytes: int, *,
                  intra: Callable[[str, float, int], float], pieces: int | None = None,
                  after: Mapping[int, Sequence[int]] | None = None, category: str = "broadcast") -> dict[int, list[int]]:
    """Append a broadcast of ``size_bytes`` from member 0 over members ``i`` (host ``hosts[i]``,
    server ``servers[i]``) in ``pieces`` pieces (default: one per member). ``after`` and the result
    are keyed by member; a member is done when it has the last piece (the root: when it has sent it)."""
    n = len(hosts)
    after = {int(k): list(v) for k, v in (after or {}).items()}
    done: dict[int, list[int]] = {i: list(after.get(i, [])) for i in range(n)}
    if n < 2 or size_bytes <= 0:
        return done
    parts = [p for p in split_bytes(size_bytes, pieces or n) if p > 0]
    have: list[list[int]] = [list(after.get(0, []))] * len(parts)      # per piece: arrival at the current member
    for i in range(n - 1):
        sent_prev: list[int] = []
        arrived = []
        for k, nbytes in enumerate(parts):
            deps = have[k] + sent_prev + (list(after.get(i, [])) if i else [])
            if servers[i] == servers[i + 1]:
                t = builder.delay(hosts[i + 1], int(round(intra("send_recv", nbytes, 2) * 1e12)), after=deps,
                                  category=category)
            else:
                t = builder.flow(hosts[i], hosts[i + 1], nbytes, after=deps, category=category)
            sent_prev = [t]
            arrived.append([t])
        if i == 0:
            done[0] = sent_prev
        have = arrived
        done[i + 1] = arrived[-1] + list(after.get(i + 1, []))
    return done
