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


def test_the_table_of_backend_defaults_refuses_bad_rows_naming_the_field() -> None:
    """A changed row of the table (a test's, a measurement's) is checked when it is made: the
    message names the field, the value and what is allowed."""
    from dataclasses import replace

    from mvopt.engine.backend_defaults import CPU, GPU

    for row, field, bad, why in ((GPU, "group_block_threads", 250, "multiple of 32"), (GPU, "threads", 2048, "at most 1024"),
                                 (GPU, "group_slice_windows", 0, "positive"), (GPU, "launch", "coop", "auto, groups, graph"),
                                 (CPU, "steer_windows", -1, "positive")):
        with pytest.raises(ValueError, match=f"{field}.*= {bad!r}.*{why}"):
            replace(row, **{field: bad})


def test_the_launch_ablation_and_kernel_defines_are_checked_before_anything_runs(monkeypatch) -> None:
    """$MVOPT_GPU_LAUNCH (the megakernel-vs-launches ablation) and the kernel defines are checked
    when a backend is made, before CuPy is needed: one message naming the value and what is
    allowed. (Without a GPU the construction of a valid one stops at CuPy or the device.)"""
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine._gpu import GpuBackend, nvrtc_options
    from mvopt.errors import BackendUnavailable

    monkeypatch.setenv("MVOPT_GPU_LAUNCH", "async")
    with pytest.raises(BackendUnavailable, match="MVOPT_GPU_LAUNCH.*'async'.*auto, groups, graph"):
        GpuBackend()
    monkeypatch.setenv("MVOPT_GPU_LAUNCH", "graph")
    with pytest.raises(BackendUnavailable, match="kernel define MV_DIRECT"):
        GpuBackend(defines={"MV_DIRECT": 0})
    with pytest.raises(ValueError, match="MV_PUSH_LOCK=3.*0 to 2"):
        CpuBackend(defines={"MV_PUSH_LOCK": 3})
    with pytest.raises(ValueError, match="switch_schedule='ports'.*lanes, serial"):
        CpuBackend(switch_schedule="ports")
    assert "-DMV_PUSH_LOCK=1" in nvrtc_options({"MV_PUSH_LOCK": 1})
