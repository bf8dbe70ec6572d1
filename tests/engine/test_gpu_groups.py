"""How the GPU's groups launch mode packs experiments into blocks (engine/_gpu.py,
experiment_groups): host code, tested without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.engine import build_batch
from mvopt.engine._gpu import experiment_groups, warp_groups
from mvopt.engine.batch import node_order
from mvopt.testing.scenarios import mixed_experiments


@pytest.mark.parametrize("seed", range(20))
def test_groups_cover_every_experiment_once_within_their_blocks(seed: int) -> None:
    rng = np.random.default_rng(seed)
    nodes = rng.integers(1, 300, size=int(rng.integers(1, 200)))
    offsets, threads = experiment_groups(nodes, 128, 512)
    assert threads % 32 == 0 and threads >= max(128, int(nodes.max()))
    assert offsets[0] == 0 and offsets[-1] == nodes.size and (np.diff(offsets) > 0).all()
    per_block = np.add.reduceat(nodes, offsets[:-1])
    assert (per_block <= threads).all()
    # greedy: the next experiment would not have fitted in the block before it
    assert (per_block[:-1] + nodes[offsets[1:-1]] > threads).all()


def test_small_experiments_share_a_block_and_large_ones_do_not_fit() -> None:
    offsets, threads = experiment_groups(np.full(10, 36), 128, 512)
    assert threads == 128 and offsets.tolist() == [0, 3, 6, 9, 10]
    offsets, threads = experiment_groups(np.array([36, 200, 36]), 128, 512)
    assert threads == 224 and offsets.tolist() == [0, 1, 2, 3]
    assert experiment_groups(np.array([36, 513]), 128, 512) is None


def test_the_order_within_groups_keeps_each_group_in_its_rows_switches_first() -> None:
    """node_order(groups=...): a permutation of each group's node rows (a block's threads),
    its switches first (the widest first), then its hosts."""
    batch = build_batch(mixed_experiments(9))
    cols = batch.cols
    offsets, _ = experiment_groups(cols["exp_node_hi"] - cols["exp_node_lo"], 64, 512)
    order = node_order(cols, widest_first=True, groups=offsets)
    assert sorted(order.tolist()) == list(range(int(batch.counts["n_node"])))
    for g in range(len(offsets) - 1):
        lo, hi = int(cols["exp_node_lo"][offsets[g]]), int(cols["exp_node_hi"][offsets[g + 1] - 1])
        part = order[lo:hi]
        assert part.min() == lo and part.max() == hi - 1
        host = cols["node_is_host"][part]
        assert (np.diff(host.astype(int)) >= 0).all()          # switches, then hosts
        ports = (cols["node_port_hi"] - cols["node_port_lo"])[part][host == 0]
        assert (np.diff(ports) <= 0).all()                      # the widest switch first


@pytest.mark.parametrize("seed", range(10))
def test_warp_groups_fill_a_warp_and_give_a_wide_experiment_its_own(seed: int) -> None:
    """warp_groups: consecutive experiments, at most 32 nodes per group, except an experiment of
    33-64 nodes, alone in its group; none beyond 64."""
    rng = np.random.default_rng(seed)
    nodes = rng.integers(1, 65, size=int(rng.integers(1, 100)))
    offsets = warp_groups(nodes)
    assert offsets[0] == 0 and offsets[-1] == nodes.size and (np.diff(offsets) > 0).all()
    per_group = np.add.reduceat(nodes, offsets[:-1])
    alone = np.diff(offsets) == 1
    assert ((per_group <= 32) | alone).all()
    assert (per_group[:-1] + nodes[offsets[1:-1]] > 32).all()    # greedy
    assert warp_groups(np.array([10, 65])) is None
    assert warp_groups(np.array([10, 20, 36, 5, 5])).tolist() == [0, 2, 3, 5]


def test_the_warp_order_pairs_the_lightest_nodes_on_the_lanes_that_run_two() -> None:
    """node_order(groups=..., lanes=32): a permutation of each group's rows; in a group of n > 32
    nodes, lane t < n - 32 runs rows t and t + 32, and those 2 (n - 32) rows hold the group's
    lightest nodes (hosts before switches, narrower switches before wider ones)."""
    batch = build_batch(mixed_experiments(9))
    cols = batch.cols
    offsets = warp_groups(cols["exp_node_hi"] - cols["exp_node_lo"])
    order = node_order(cols, widest_first=True, groups=offsets, lanes=32)
    assert sorted(order.tolist()) == list(range(int(batch.counts["n_node"])))
    weight = np.where(cols["node_is_host"] == 1, 0, 1 + cols["node_port_hi"] - cols["node_port_lo"])
    folded = 0
    for g in range(len(offsets) - 1):
        lo, hi = int(cols["exp_node_lo"][offsets[g]]), int(cols["exp_node_hi"][offsets[g + 1] - 1])
        part = order[lo:hi]
        assert part.min() == lo and part.max() == hi - 1
        extra = max(0, hi - lo - 32)
        if extra:
            folded += 1
            paired = np.concatenate([part[:extra], part[32:]])
            alone = part[extra:32]
            assert weight[paired].max() <= weight[alone].min()
    assert folded > 0      # (the mixed experiments include some of 33-64 nodes)
