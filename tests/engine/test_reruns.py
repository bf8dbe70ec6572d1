"""On the CPU an experiment that runs out of compact packet slots runs again with full ones at
once, beside the rest of its sub-batch (mvopt/engine/reruns.py): same results, no waiting."""

from __future__ import annotations

from mvopt.engine import simulate
from mvopt.engine.split import run_share
from mvopt.engine.workers import Worker
from mvopt.testing.scenarios import fat_tree_flows, fat_tree_incast, mixed_experiments


def _long_neighbour():
    """One large flow, alone on its path: it fits its compact slots and runs long after its
    neighbours' ran out."""
    return fat_tree_flows([(0, 5)], 200_000_000)


def test_an_experiment_out_of_compact_slots_runs_again_before_its_sub_batch_ends() -> None:
    exps = [fat_tree_incast(), _long_neighbour(), fat_tree_incast(), mixed_experiments(1)[0]]
    full = simulate(exps, backend="cpu", capacities="full")
    got, stats = run_share(Worker("cpu", 0, 2), exps, capacities="compact")
    assert all(a.same_as(b) for a, b in zip(got, full))
    # both incasts ran out within their first windows, while the long neighbour ran for many more:
    # the first one handed over starts at once; the second too unless the neighbour ended before
    # the first rerun did (then it runs after, on every core)
    assert stats["rerun_early"] >= 1 and stats["rerun_early"] + stats["rerun_full"] == 2
    assert stats["sub_batches"] == 1 + (stats["rerun_full"] > 0)
    assert [r.status for r in got] == [r.status for r in full]
