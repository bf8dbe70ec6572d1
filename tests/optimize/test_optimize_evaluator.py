import sys

import pytest

from analytic_evaluator import AnalyticEvaluator
from mvopt.errors import MvoptError
from mvopt.optimize.evaluator import Evaluation, Evaluator, SimulatorEvaluator, make_evaluator, register_evaluator


def test_evaluation_contract():
    assert Evaluation(True, iteration_time_s=1.0).ok
    assert not Evaluation.infeasible("oom").ok
    with pytest.raises(ValueError):
        Evaluation(True, status="crashed")
    with pytest.raises(ValueError):
        Evaluation(True, status="ok")  # no iteration time


def test_simulator_evaluator_loads_nothing_for_an_empty_batch(monkeypatch):
    monkeypatch.setitem(sys.modules, "mvopt.build", None)  # importing the simulator's side would fail
    assert SimulatorEvaluator("cpu").evaluate([]) == []


def test_simulator_evaluator_calls_build_evaluate_once_per_batch(monkeypatch):
    import mvopt.build
    calls = []
    monkeypatch.setattr(mvopt.build, "evaluate", lambda configs, backend, report: calls.append(
        (len(configs), backend)) or report.update({"cpu#0": {"sub_batches": 1}}) or [
        Evaluation(True, iteration_time_s=1.0) for _ in configs])
    from mvopt.config import load_config
    ev = SimulatorEvaluator("cpu:2")
    out = ev.evaluate([load_config(), load_config()])
    assert len(out) == 2 and calls == [(2, "cpu:2")]
    assert ev.last_report == {"cpu#0": {"sub_batches": 1}}     # the engine's figures of that batch
    monkeypatch.setattr(mvopt.build, "evaluate", lambda configs, backend, report: [])
    with pytest.raises(MvoptError, match="returned 0 results for 1"):
        SimulatorEvaluator("cpu").evaluate([load_config()])


def test_the_contract_is_the_neutral_modules():
    """The optimizer re-exports the contract of mvopt.evaluation; it does not define its own."""
    import mvopt.evaluation
    assert Evaluation is mvopt.evaluation.Evaluation and Evaluator is mvopt.evaluation.Evaluator


def test_registry():
    assert isinstance(make_evaluator("cpu"), SimulatorEvaluator)
    assert make_evaluator("cpu+cpu").backend == "cpu+cpu"        # a race (engine/race.py) is the simulator too
    register_evaluator("analytic-test", AnalyticEvaluator)
    assert make_evaluator("analytic-test").name == "analytic"
    assert isinstance(make_evaluator("analytic_evaluator:make"), Evaluator)
    with pytest.raises(MvoptError, match="unknown evaluator"):
        make_evaluator("tpu")
    with pytest.raises(MvoptError, match="cannot be imported"):
        make_evaluator("no_such_module:make")


def test_simulator_evaluator_reports_a_long_batch(monkeypatch):
    """The CLI sets on_progress: the simulator then reports how the batch advances (here after
    every chunk of 5 windows), as lines a person can read; results are unchanged."""
    from mvopt.config import load_config
    from mvopt.engine import backend_defaults, progress
    from mvopt.optimize.progress import ConsoleProgress

    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(backend_defaults, "CPU", backend_defaults.CpuDefaults(progress_windows=5))
    configs = [load_config(), load_config({"network": {"cc": "dctcp"}})]
    plain = SimulatorEvaluator("cpu").evaluate(configs)
    ev = SimulatorEvaluator("cpu")
    seen: list = []
    ev.on_progress = seen.append
    reported = ev.evaluate(configs)
    assert [r.iteration_time_s for r in reported] == [r.iteration_time_s for r in plain]
    assert seen and all(p.total == 2 for p in seen)
    line = ConsoleProgress.simulating_line(seen[-1])
    assert f"/2 experiments ended, window {seen[-1].windows:,}" in line
