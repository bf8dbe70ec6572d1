"""The water-filling against max-min allocations computed by hand."""

from __future__ import annotations

import numpy as np

from mvopt.flow.maxmin import max_min_rates
from mvopt.flow.paths import WEIGHT_ONE


def rates(caps: list[int], flows: list[list[int]], weights: list[list[int]] | None = None) -> list[int]:
    """Rates of flows crossing the given links (whole-rate weights unless given)."""
    ef = np.asarray([f for f, links in enumerate(flows) for _ in links], np.int64)
    el = np.asarray([link for links in flows for link in links], np.int64)
    ew = (np.full(el.size, WEIGHT_ONE, np.int64) if weights is None
          else np.asarray([w for ws in weights for w in ws], np.int64))
    cap = np.asarray(caps, np.int64) * WEIGHT_ONE
    return max_min_rates(np, len(flows), ef, el, ew, cap).tolist()


def test_two_flows_share_a_link_equally():
    assert rates([100], [[0], [0]]) == [50, 50]


def test_a_flow_alone_gets_its_narrowest_link():
    assert rates([400, 100, 400], [[0, 1, 2]]) == [100]


def test_parking_lot_chain():
    # one long flow over three equal links, one short flow on each: every flow gets half
    assert rates([100, 100, 100], [[0, 1, 2], [0], [1], [2]]) == [50, 50, 50, 50]
    # unequal links: the long flow is held to 5 by the first (shared with a), b takes the rest of the second
    assert rates([10, 20], [[0, 1], [0], [1]]) == [5, 5, 15]


def test_several_bottleneck_levels():
    # link 0 (cap 30) has three flows (10 each); flow 2 also crosses link 1 (cap 100) with flow 3,
    # which gets the 90 left; link 2 (cap 60) carries flows 3 and 4, so flow 3 is held to 30
    # there and flow 4 gets 30: levels 10 (link 0) and 30 (link 2)
    assert rates([30, 100, 60], [[0], [0], [0, 1], [1, 2], [2]]) == [10, 10, 10, 30, 30]


def test_shares_round_down_to_whole_units():
    assert rates([100], [[0], [0], [0]]) == [33, 33, 33]


def test_a_split_flow_counts_by_its_share_on_each_link():
    # flow 0 is split evenly over links 0 and 1 (half its rate on each), flow 1 uses link 0 only:
    # link 0 carries r0/2 + r1 <= 100, link 1 carries r0/2 <= 100; max-min: r0 = r1 = 66
    half = WEIGHT_ONE // 2
    assert rates([100, 100], [[0, 1], [0]], [[half, half], [WEIGHT_ONE]]) == [66, 66]
