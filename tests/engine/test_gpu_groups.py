"""How the GPU's groups launch mode packs experiments into blocks (engine/_gpu.py,
experiment_groups): host code, tested without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.engine import build_batch
from mvopt.engine._gpu import experiment_groups
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


def test_the_tor_first_order_puts_the_switches_with_hosts_first() -> None:
    """node_order(groups=..., tor_first=True): within each group, a permutation of its rows with
    switches before hosts, the widest first, and among switches of a width those with more
    hosts on their ports first (a k=4 fat-tree's edge switches before its aggregation and core)."""
    from mvopt.bench import allreduce_config
    from mvopt.build import build_experiment

    exp = build_experiment(allreduce_config("none", 2**20))
    cols = build_batch([exp] * 7).cols
    offsets, _ = experiment_groups(cols["exp_node_hi"] - cols["exp_node_lo"], 128, 512)
    order = node_order(cols, widest_first=True, groups=offsets, tor_first=True)
    peer_host = cols["node_is_host"][cols["port_node"][cols["port_peer"]]]
    hosts_on = np.bincount(cols["port_node"], weights=peer_host, minlength=cols["node_is_host"].size)
    for g in range(len(offsets) - 1):
        lo, hi = int(cols["exp_node_lo"][offsets[g]]), int(cols["exp_node_hi"][offsets[g + 1] - 1])
        part = order[lo:hi]
        assert sorted(part.tolist()) == list(range(lo, hi))
        host = cols["node_is_host"][part]
        assert (np.diff(host.astype(int)) >= 0).all()
        sw = part[host == 0]
        assert (np.diff(hosts_on[sw]) <= 0).all() and hosts_on[sw[0]] == 2      # edge switches first


def test_the_block_size_setting_takes_multiples_of_32_and_names_the_variable(monkeypatch) -> None:
    """$MVOPT_GROUP_BLOCK (a benchmark's knob): unset gives the default, a multiple of 32 up to
    GROUP_THREADS_MAX is taken, anything else is refused with a message naming the variable,
    the value and what is allowed."""
    from mvopt.engine._gpu import GROUP_BLOCK_THREADS, GROUP_THREADS_MAX, group_block_setting
    from mvopt.errors import BackendUnavailable

    monkeypatch.delenv("MVOPT_GROUP_BLOCK", raising=False)
    assert group_block_setting() == GROUP_BLOCK_THREADS
    monkeypatch.setenv("MVOPT_GROUP_BLOCK", "224")
    assert group_block_setting() == 224
    for bad in ("250", "0", str(GROUP_THREADS_MAX + 32), "big", "-64"):
        monkeypatch.setenv("MVOPT_GROUP_BLOCK", bad)
        with pytest.raises(BackendUnavailable, match=f"MVOPT_GROUP_BLOCK='{bad}'.*multiple of 32"):
            group_block_setting()


def test_the_switch_lanes_setting_takes_0_or_2_and_names_the_variable(monkeypatch) -> None:
    """$MVOPT_SWITCH_LANES (a benchmark's knob): unset gives the default, 0 and 2 are taken,
    anything else is refused with a message naming the variable, the value and what is allowed."""
    from mvopt.engine._gpu import SWITCH_LANES, switch_lanes_setting
    from mvopt.errors import BackendUnavailable

    monkeypatch.delenv("MVOPT_SWITCH_LANES", raising=False)
    assert switch_lanes_setting() == SWITCH_LANES
    for good in (0, 2):
        monkeypatch.setenv("MVOPT_SWITCH_LANES", str(good))
        assert switch_lanes_setting() == good
    for bad in ("1", "3", "yes", "-2"):
        monkeypatch.setenv("MVOPT_SWITCH_LANES", bad)
        with pytest.raises(BackendUnavailable, match=f"MVOPT_SWITCH_LANES='{bad}'.*one of 0, 2"):
            switch_lanes_setting()
