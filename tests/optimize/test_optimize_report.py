import dataclasses
import math

import optuna

from analytic_evaluator import AnalyticEvaluator
from optimize_helpers import small_space_data
from mvopt.optimize import Budget, GenerationLoop, create_or_resume, load_space, make_storage, write_report
from mvopt.optimize import plots as plots_module
from mvopt.optimize.artifacts import ARTIFACT_NAME
from mvopt.optimize.importance import describe_trials, importance_tables, within_observed_ranges
from mvopt.optimize.records import is_feasible_trial


def _study(url, data, sampler="random", n=40, artifact_dir=None):
    space = load_space(data)
    study = create_or_resume(make_storage(url), space, sampler=sampler, generation_size=8, seed=5)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=8, artifact_dir=artifact_dir).run(Budget(n_trials=n))
    return study


def _feasible(study):
    return [t for t in study.get_trials() if is_feasible_trial(t)]


def test_report_page_and_plots(sqlite_url, tmp_path):
    study = _study(sqlite_url, small_space_data(name="rep"))
    out = tmp_path / "report"
    said = []
    page = write_report(study, out, say=said.append).read_text()
    assert "Study rep" in page and "Best configurations" in page and "network.cc=" in page
    for name in ("history", "slice", "parallel", "contour", "breakdown"):   # Optuna's plots, and mvopt's breakdown
        assert (out / f"{name}.png").read_bytes()[:4] == b"\x89PNG" and f'src="{name}.png"' in page
    assert not (out / "pareto.png").exists()
    assert "logarithmic axis" in page
    assert said[0].startswith("computing parameter importances") and "drawing the optimisation history" in said


def test_history_has_a_log_axis(sqlite_url, tmp_path, monkeypatch):
    """Values spanning decades: the history's value axis is logarithmic, not linear from 0."""
    scales = []
    real = plots_module._save
    monkeypatch.setattr(plots_module, "_save", lambda axes, path, log_axis: (scales.append((path.name, log_axis)),
                                                                              real(axes, path, log_axis)))
    study = _study(sqlite_url, small_space_data(name="log"), n=16)
    write_report(study, tmp_path / "r")
    assert ("history.png", True) in scales and ("slice.png", True) in scales


def test_report_without_matplotlib_says_so(sqlite_url, tmp_path, monkeypatch):
    import mvopt.optimize.report as report
    monkeypatch.setattr(report, "have_matplotlib", lambda: False)
    study = _study(sqlite_url, small_space_data(name="nompl"), n=16)
    page = write_report(study, tmp_path / "r").read_text()
    assert "matplotlib is not installed" in page and not list((tmp_path / "r").glob("*.png"))


def test_importances_use_feasible_trials_only(sqlite_url):
    # collective.channels decides feasibility only (the evaluator ignores it): were the infeasible
    # trials (told with +inf) included, it would look like the most important parameter
    data = small_space_data(name="imp", constraints=["collective.channels <= 2"])
    data["parameters"]["collective.channels"] = {"low": 1, "high": 4}
    study = _study(sqlite_url, data, n=64)
    assert sum(math.isinf(t.values[0]) for t in study.get_trials()) >= 16
    [table] = importance_tables(_feasible(study), study.directions)
    imp = table.values
    assert set(imp) == {"network.cc", "network.lb", "network.ecn.kmin_kb", "collective.channels"}
    assert all(math.isfinite(v) for v in imp.values())
    assert imp["collective.channels"] < imp["network.cc"]  # was the most important one before ranges were narrowed
    narrowed = within_observed_ranges(_feasible(study), {"collective.channels"})
    assert {(d.low, d.high) for t in narrowed for n, d in t.distributions.items() if n == "collective.channels"} == {(1, 2)}


def test_conditional_parameters_get_tables_of_their_own(sqlite_url, tmp_path):
    """network.hpcc.eta exists only when cc is hpcc. Computed over the trials that have every
    parameter (the HPCC ones, where cc is constant), cc would look unimportant; it is the most
    important parameter over all trials, and eta is ranked among the HPCC trials, each table
    saying which trials it used."""
    data = small_space_data(name="cond", parameters={
        "network.cc": ["dcqcn", "hpcc", "dctcp"], "network.lb": ["ecmp", "spray"],
        "network.hpcc.eta": {"low": 0.8, "high": 0.98, "when": {"network.cc": "hpcc"}}})
    study = _study(sqlite_url, data, n=48)
    feasible = _feasible(study)
    everywhere, hpcc = importance_tables(feasible, study.directions)
    assert set(everywhere.values) == {"network.cc", "network.lb"} and everywhere.trials == tuple(t.number for t in feasible)
    assert max(everywhere.values, key=everywhere.values.get) == "network.cc"
    assert set(hpcc.values) == {"network.lb", "network.hpcc.eta"}
    assert hpcc.trials == tuple(t.number for t in feasible if t.params["network.cc"] == "hpcc")
    assert hpcc.label == f"the {len(hpcc.trials)} feasible trials with network.hpcc.eta (network.cc = hpcc)"
    page = write_report(study, tmp_path / "r").read_text()
    assert everywhere.label in page and hpcc.label in page and describe_trials(hpcc.trials) in page


def test_describe_trials_compresses_ranges():
    assert describe_trials([5, 0, 1, 2, 3, 9, 10]) == "0-3, 5, 9-10"
    assert describe_trials(list(range(0, 100, 2)), limit=2) == "0, 2, ... (48 more ranges)"


def test_a_breakdown_of_one_component_is_not_drawn(sqlite_url, tmp_path, monkeypatch):
    """A collective's breakdown is its makespan: the page says there is nothing to break down."""
    import analytic_evaluator
    real = analytic_evaluator.AnalyticEvaluator.evaluate

    def makespan_only(self, configs):
        return [dataclasses.replace(ev, breakdown={"makespan": ev.iteration_time_s}) if ev.feasible else ev
                for ev in real(self, configs)]
    monkeypatch.setattr(analytic_evaluator.AnalyticEvaluator, "evaluate", makespan_only)
    study = _study(sqlite_url, small_space_data(name="coll"), n=16)
    page = write_report(study, tmp_path / "r").read_text()
    assert "single component (makespan): nothing to break down" in page and not (tmp_path / "r" / "breakdown.png").exists()


def test_pareto_front_for_two_objectives(sqlite_url, tmp_path):
    data = small_space_data(name="two", parameters={"cluster.k": [4, 6], "network.cc": ["dcqcn", "hpcc", "dctcp"]},
                            prices={"switch": 1000}, objectives=["iteration_time", "cost"])
    study = _study(sqlite_url, data, sampler="nsga2", n=24)
    write_report(study, tmp_path / "r")
    assert (tmp_path / "r" / "pareto.png").exists()


def test_best_trials_carry_breakdown_artifact(sqlite_url, tmp_path):
    study = _study(sqlite_url, small_space_data(name="art"), n=24, artifact_dir=str(tmp_path / "art"))
    best = study.best_trial
    metas = optuna.artifacts.get_all_artifact_meta(best, storage=study._storage)
    assert [m.filename for m in metas] == [ARTIFACT_NAME]
    # only trials that improved the best so far carry one
    with_art = [t for t in study.get_trials() if optuna.artifacts.get_all_artifact_meta(t, storage=study._storage)]
    assert 1 <= len(with_art) < len(study.get_trials())


def test_report_on_empty_study(sqlite_url, tmp_path):
    space = load_space(small_space_data(name="empty"))
    study = create_or_resume(make_storage(sqlite_url), space, sampler="random")
    page = write_report(study, tmp_path / "r").read_text()
    assert "no trial has finished yet" in page


def test_report_into_a_path_that_is_a_file_names_it(sqlite_url, tmp_path):
    """`--out` naming an existing file: one message naming it, no traceback, the file untouched."""
    import pytest

    from mvopt.errors import InputFileError

    study = create_or_resume(make_storage(sqlite_url), load_space(small_space_data(name="f")), sampler="random")
    target = tmp_path / "afile"
    target.write_text("mine")
    with pytest.raises(InputFileError, match="afile: cannot be made a folder for the report"):
        write_report(study, target)
    assert target.read_text() == "mine"
