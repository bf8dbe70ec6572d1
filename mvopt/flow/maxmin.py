"""Max-min fair rates by water-filling, for many flows of many experiments at once.

Every flow has entries (link, weight): its rate times weight / WEIGHT_ONE flows on that link.
Each round, a link's fair share is what is left of its capacity divided evenly among the flows
not yet fixed that cross it (by weight); a link whose share is the smallest among the links of
every flow crossing it is a bottleneck, and those flows are fixed at that share. This fixes at
least the flows of the smallest share of the batch each round, often many bottleneck levels at
once, and gives the same allocation as progressive filling: a link's share only grows as flows
elsewhere are fixed below it, so a flow fixed at a local minimum could never get more.
Experiments do not share links, so one call serves a whole batch.

Integers throughout (rates in RATE_UNIT_BPS, capacities in units x WEIGHT_ONE): shares round
down, at most one unit per flow below the exact fluid share.
"""

from __future__ import annotations

from types import ModuleType

from mvopt.flow.xp import segment_sum

__all__ = ["max_min_rates"]

INF = 2**62


def max_min_rates(xp: ModuleType, n_flow: int, entry_flow, entry_link, entry_weight, link_cap):
    """int64 rates of `n_flow` flows (indices 0..n_flow-1 in `entry_flow`) on links of
    capacities `link_cap` (units x WEIGHT_ONE, int64)."""
    n_link = int(link_cap.size)
    rate = xp.zeros(n_flow, xp.int64)
    left = link_cap.copy()
    weight = segment_sum(xp, entry_link, entry_weight, n_link)
    ef, el, ew = entry_flow, entry_link, entry_weight
    while ef.size:
        share = left[el] // weight[el]
        flow_min = xp.full(n_flow, INF, xp.int64)
        xp.minimum.at(flow_min, ef, share)
        entry_min = flow_min[ef]
        link_min = xp.full(n_link, INF, xp.int64)
        xp.minimum.at(link_min, el, entry_min)
        fixed = xp.zeros(n_flow, bool)
        fixed[ef[share == link_min[el]]] = True
        rate = xp.where(fixed, flow_min, rate)
        done = fixed[ef]
        left -= segment_sum(xp, el[done], ew[done] * entry_min[done], n_link)
        weight -= segment_sum(xp, el[done], ew[done], n_link)
        keep = ~done
        ef, el, ew = ef[keep], el[keep], ew[keep]
    return rate
