"""Several workers: spread by cost, in threads or processes; any split gives the results of one batch."""

from __future__ import annotations

import pytest

from mvopt.engine import simulate
from mvopt.engine.balance import balance, run_experiments
from mvopt.engine.sizing import batch_bytes, experiment_cost, experiment_counts
from mvopt.errors import MvoptError
from mvopt.testing.backends import available_backends
from mvopt.testing.scenarios import mixed_experiments

EXPS = mixed_experiments(9)


def test_balance_is_longest_first_and_deterministic() -> None:
    costs = [experiment_cost(e) for e in EXPS]
    shares = balance(costs, 3)
    assert sorted(i for s in shares for i in s) == list(range(len(EXPS)))
    loads = [sum(costs[i] for i in s) for s in shares]
    assert max(loads) - min(loads) <= max(costs)           # LPT: spread at most one job
    assert shares == balance(costs, 3)
    assert balance([5.0, 1.0, 1.0, 1.0, 1.0, 1.0], 2) == [[0], [1, 2, 3, 4, 5]]


@pytest.mark.parametrize("spec,processes", [("cpu:3", False), ("cpu:2", True), ("gpu:0,0", None)])
def test_workers_and_sub_batches_give_the_results_of_one_batch(spec: str, processes) -> None:
    if spec.startswith("gpu") and "gpu" not in available_backends():
        pytest.skip("no GPU")
    one = simulate(EXPS, backend="cpu")
    assert [r.name for r in one] == [e.name for e in EXPS]
    stats: dict = {}
    many = run_experiments(EXPS, spec, processes=processes, report=stats)
    assert sorted(s["experiments"] for s in stats.values()) == sorted(len(s) for s in balance(
        [experiment_cost(e) for e in EXPS], len(stats)))
    small_stats: dict = {}
    small = run_experiments(EXPS, spec, processes=processes, report=small_stats,
                            memory_bytes=int(1.5 * max(batch_bytes(experiment_counts(e)) for e in EXPS)))
    # the timeline: every sub-batch, in order, its experiments adding up to the worker's share
    for s in small_stats.values():
        line = s["timeline"]
        assert len(line) == s["sub_batches"] >= 1 and sum(b["experiments"] for b in line) == s["experiments"]
        assert all(b["build_s"] >= 0 and b["run_s"] >= 0 for b in line)
        assert all(a["start_s"] + a["build_s"] + a["run_s"] <= b["start_s"] + 1e-6 for a, b in zip(line, line[1:]))
        assert abs(sum(b["run_s"] for b in line) - s["run_s"]) < 1e-6
    for a, b, c in zip(one, many, small):
        assert a.same_as(b) and a.same_as(c), a.name


def test_worker_processes_send_their_results_through_shared_memory(monkeypatch) -> None:
    """Workers in processes (the GPUs' way) return their results through shared memory
    (mvopt/shmtransfer.py): the same results as one worker in this process."""
    import os

    from mvopt import shmtransfer
    from mvopt.procpool import drop_pool

    plain = simulate(EXPS, backend="cpu")
    monkeypatch.setenv("MVOPT_SHM_MIN_BYTES", "0")
    drop_pool("engine-workers", 2)          # fresh workers, which see the setting
    before = shmtransfer.RECEIVED["shared"]
    try:
        pooled = run_experiments(EXPS, "cpu:2", processes=True)
    finally:
        drop_pool("engine-workers", 2)
    assert all(a.same_as(b) for a, b in zip(plain, pooled))
    if os.path.isdir(shmtransfer.SHM_DIR):
        assert shmtransfer.RECEIVED["shared"] - before == 2


def test_a_worker_process_error_reaches_the_caller_with_its_message() -> None:
    with pytest.raises(MvoptError, match="alone needs"):
        run_experiments(EXPS, "cpu:2", processes=True, memory_bytes=1000)
