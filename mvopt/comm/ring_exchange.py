"""Ring exchange of equal blocks (ring attention's key/value rotation) as tasks of a part.

In step ``k`` (1 .. steps) member ``i`` forwards the block it received in step ``k - 1`` (its own
in step 1) to member ``i + 1``: a flow between NICs when the two are in different servers, an
NVLink transfer (intra-server model, a delay on the receiver) otherwise. A send waits for the
member's previous send and for the block it forwards.
"""

from __future__ import annotations

from typing import Callable



__all__ = ["add_ring_exchange"]

PS = 1e12


def add_ring_exchange(part, servers: list[int], nbytes: int, steps: int, *,
                      intra: Callable[[str, float, int], float], after: dict[int, list[int]],
                      category: str) -> dict[int, list[int]]:
    """Add ``steps`` ring steps of ``nbytes`` over the part's slots ``0 .. len(servers) - 1`` (in
    ring order; ``servers``: the server of each). ``after[i]``: what member ``i``'s first send
    waits for. Returns, per member, the tasks its completion waits for (its last send and the
    last block it received)."""
    n = len(servers)
    sent = {i: list(after[i]) for i in range(n)}        # member i's previous send (or its launch)
    have = {i: list(after[i]) for i in range(n)}        # the block member i forwards next
    for _ in range(steps):
        got = {}
        for i in range(n):
            j = (i + 1) % n
            deps = sorted(set(sent[i]) | set(have[i]))
            if servers[i] == servers[j]:
                x = part.delay(j, int(round(intra("send_recv", nbytes, 2) * PS)), after=deps, category=category)
            else:
                x = part.flow(i, j, nbytes, after=deps, category=category)
            sent[i] = [x]
            got[j] = [x]
        have = got
    return {i: sorted(set(sent[i]) | set(have[i])) for i in range(n)}
