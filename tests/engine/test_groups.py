"""The GPU's groups launch mode, its plan (engine/groups.py): which experiments share a block and
which nodes each thread runs. Host code, tested without a GPU; that the plan leaves results
unchanged is tested on a GPU (test_gpu_launch.py)."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.engine import build_batch
from mvopt.engine._cpu import CpuBackend
from mvopt.engine.groups import GroupPlan, experiment_groups, node_loads, plan_groups, thread_bins
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


def _first_fit_decreasing(loads: list[float], cap: float, max_nodes: int) -> list[int]:
    """The reference: one experiment's nodes, heaviest first (ties: lower index), each onto the
    first thread with room."""
    threads: list[list[float]] = []
    out = [0] * len(loads)
    for i in sorted(range(len(loads)), key=lambda i: (-loads[i], i)):
        for b, held in enumerate(threads):
            if sum(held) + loads[i] <= cap and len(held) < max_nodes:
                held.append(loads[i])
                out[i] = b
                break
        else:
            threads.append([loads[i]])
            out[i] = len(threads) - 1
    return out


@pytest.mark.parametrize("seed", range(10))
def test_thread_bins_keep_every_thread_within_the_busiest_node(seed: int) -> None:
    """First-fit decreasing: every node on one thread of its experiment, no thread over (1 +
    slack) times the experiment's busiest node or over the most nodes, as the one-experiment
    reference places them."""
    rng = np.random.default_rng(seed)
    widths = rng.integers(1, 40, size=int(rng.integers(1, 30)))
    node_exp = np.repeat(np.arange(widths.size), widths)
    loads = rng.choice([0.0, 1.0, 5.0, 29.4, 44.0, 88.3], size=node_exp.size) + rng.random(node_exp.size)
    bin_of, bins = thread_bins(node_exp, loads, widths.size, max_nodes=3, slack=0.05)
    for e in range(widths.size):
        mine = np.flatnonzero(node_exp == e)
        cap = loads[mine].max() * 1.05
        assert set(bin_of[mine].tolist()) == set(range(int(bins[e])))
        per_bin = np.bincount(bin_of[mine], weights=loads[mine], minlength=int(bins[e]))
        count = np.bincount(bin_of[mine], minlength=int(bins[e]))
        assert (per_bin <= cap + 1e-9).all() and (count <= 3).all()
        assert bin_of[mine].tolist() == _first_fit_decreasing(loads[mine].tolist(), cap, 3)
    # equal loads: a node per thread
    bin_of, bins = thread_bins(np.zeros(5, np.int64), np.ones(5), 1)
    assert bins.tolist() == [5] and sorted(bin_of.tolist()) == list(range(5))


def _check_plan(cols: dict, plan: GroupPlan) -> None:
    """Every node in exactly one slot, of its experiment's group; a thread's slots filled from
    the first; a block's experiments consecutive."""
    n_node = cols["node_exp"].size
    filled = plan.slots[plan.slots >= 0]
    assert sorted(filled.tolist()) == list(range(n_node))
    group_of_exp = np.repeat(np.arange(plan.offsets.size - 1), np.diff(plan.offsets))
    for g in range(plan.offsets.size - 1):
        nodes = plan.slots[g][plan.slots[g] >= 0]
        assert (group_of_exp[cols["node_exp"][nodes]] == g).all()
    empty = plan.slots < 0
    assert (empty[:, :-1] <= empty[:, 1:]).all()        # a -1 only after a thread's last node


def test_the_plan_without_loads_is_a_node_per_thread_switches_first() -> None:
    """Before loads are known: thread t of a group runs one node, the group's switches first
    (the widest first), then its hosts."""
    cols = build_batch(mixed_experiments(9)).cols
    plan = plan_groups(cols, 64, 512)
    _check_plan(cols, plan)
    assert plan.nodes_per_thread == 1
    for g in range(plan.offsets.size - 1):
        part = plan.slots[g, 0][plan.slots[g, 0] >= 0]
        host = cols["node_is_host"][part]
        assert (np.diff(host.astype(int)) >= 0).all()          # switches, then hosts
        ports = (cols["node_port_hi"] - cols["node_port_lo"])[part][host == 0]
        assert (np.diff(ports) <= 0).all()                      # the widest switch first
    plain = plan_groups(cols, 64, 512, ordered=False)
    for g in range(plain.offsets.size - 1):
        part = plain.slots[g, 0][plain.slots[g, 0] >= 0]
        assert (np.diff(part) == 1).all()                       # in row order


def test_the_top_of_rack_switches_come_first() -> None:
    """Among switches of a width, those with more hosts on their ports first (a k=4 fat-tree's
    edge switches before its aggregation and core)."""
    from mvopt.bench import allreduce_config
    from mvopt.experiment import build_experiment

    cols = build_batch([build_experiment(allreduce_config("none", 2**20))] * 7).cols
    plan = plan_groups(cols, 128, 512)
    peer_host = cols["node_is_host"][cols["port_node"][cols["port_peer"]]]
    hosts_on = np.bincount(cols["port_node"], weights=peer_host, minlength=cols["node_is_host"].size)
    for g in range(plan.offsets.size - 1):
        part = plan.slots[g, 0][plan.slots[g, 0] >= 0]
        sw = part[cols["node_is_host"][part] == 0]
        assert (np.diff(hosts_on[sw]) <= 0).all() and hosts_on[sw[0]] == 2


def test_measured_loads_pack_light_nodes_onto_fewer_threads() -> None:
    """Workload (a) after 300 windows on the CPU: the loads come from the ports' ring tails; a
    top-of-rack switch keeps a thread of its own, lighter nodes share threads, a block holds
    more experiments, and the threads of a group start with the top-of-rack switches."""
    from mvopt.bench import allreduce_config
    from mvopt.experiment import build_experiment

    batch = build_batch([build_experiment(allreduce_config("none", 2**20))] * 12)
    CpuBackend().run(batch, max_iters=300)
    cols = batch.cols
    node_iter = np.full(cols["node_exp"].size, int(cols["exp_iter"][0]))
    loads = node_loads(cols["port_tx"], cols["port_node"], cols["port_peer"], node_iter)
    hosts_on = np.bincount(cols["port_node"], weights=cols["node_is_host"][cols["port_node"][cols["port_peer"]]],
                           minlength=cols["node_exp"].size)
    tor = (cols["node_is_host"] == 0) & (hosts_on == 2)
    assert loads[tor].min() > 2 * loads[cols["node_is_host"] == 1].max()     # what the packing is for
    plan = plan_groups(cols, 224, 512, loads)
    _check_plan(cols, plan)
    one = plan_groups(cols, 224, 512)
    assert np.diff(plan.offsets).max() > np.diff(one.offsets).max()          # more experiments a block
    assert plan.nodes_per_thread > 1
    for g in range(plan.offsets.size - 1):
        s = plan.slots[g]
        # a top-of-rack switch runs alone, and the threads with one start the block
        tor_threads = np.flatnonzero(tor[np.maximum(s[0], 0)] & (s[0] >= 0))
        assert (s[1:, tor_threads] < 0).all()
        assert tor_threads.tolist() == list(range(tor_threads.size))
