"""The CPU backend's experiment-major run: the order its threads take experiments in."""

from __future__ import annotations

import numpy as np

from mvopt.engine import build_batch, simulate
from mvopt.engine import _cpu
from mvopt.engine.batch import extract_results
from mvopt.engine.sizing import experiment_cost
from mvopt.testing.scenarios import mixed_experiments


def test_threads_take_the_costliest_experiments_first() -> None:
    exps = mixed_experiments(7)
    order = _cpu.experiment_order(build_batch(exps))
    costs = [experiment_cost(e) for e in exps]
    assert sorted(order.tolist()) == list(range(len(exps)))
    assert [costs[i] for i in order] == sorted(costs, reverse=True)


def test_results_do_not_depend_on_the_order(monkeypatch) -> None:
    exps = mixed_experiments(7)
    first = simulate(exps, backend="cpu")
    monkeypatch.setattr(_cpu, "experiment_order", lambda batch: np.arange(len(batch.experiments))[::-1].copy())
    batch = build_batch(exps)
    again = extract_results(batch, _cpu.CpuBackend(threads=2).run(batch))
    assert all(a.same_as(b) for a, b in zip(first, again))
