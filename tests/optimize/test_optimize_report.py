import math

import optuna

from analytic_evaluator import AnalyticEvaluator
from optimize_helpers import small_space_data
from mvopt.optimize import Budget, GenerationLoop, create_or_resume, load_space, make_storage, write_report
from mvopt.optimize import charts as charts_module
from mvopt.optimize.artifacts import ARTIFACT_NAME
from mvopt.optimize.records import is_feasible_trial
from mvopt.optimize.report import _within_observed_ranges, importances


def _study(url, data, sampler="random", n=40, artifact_dir=None):
    space = load_space(data)
    study = create_or_resume(make_storage(url), space, sampler=sampler, generation_size=8, seed=5)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=8, artifact_dir=artifact_dir).run(Budget(n_trials=n))
    return study


def test_report_page_and_plots(sqlite_url, tmp_path):
    study = _study(sqlite_url, small_space_data(name="rep"))
    out = tmp_path / "report"
    page = write_report(study, out).read_text()
    assert "Study rep" in page and "Best configurations" in page and "network.cc=" in page
    for name in ("history", "importance", "breakdown"):
        assert (out / f"{name}.svg").read_text().startswith("<svg")
    assert not (out / "pareto.svg").exists()
    if charts_module.have_matplotlib():
        assert (out / "history.png").read_bytes()[:4] == b"\x89PNG" and 'src="history.png"' in page


def test_report_without_matplotlib_embeds_svg(sqlite_url, tmp_path, monkeypatch):
    monkeypatch.setattr(charts_module, "have_matplotlib", lambda: False)
    import mvopt.optimize.report as report
    monkeypatch.setattr(report, "have_matplotlib", lambda: False)
    study = _study(sqlite_url, small_space_data(name="nompl"), n=16)
    page = write_report(study, tmp_path / "r").read_text()
    assert "<svg" in page and "matplotlib is not installed" in page and not list((tmp_path / "r").glob("*.png"))


def test_importances_use_feasible_trials_only(sqlite_url):
    # collective.channels decides feasibility only (the evaluator ignores it): were the infeasible
    # trials (told with +inf) included, it would look like the most important parameter
    data = small_space_data(name="imp", constraints=["collective.channels <= 2"])
    data["parameters"]["collective.channels"] = {"low": 1, "high": 4}
    study = _study(sqlite_url, data, n=64)
    assert sum(math.isinf(t.values[0]) for t in study.get_trials()) >= 16
    imp = importances(study)
    assert set(imp) == {"network.cc", "network.lb", "network.ecn.kmin_kb", "collective.channels"}
    assert all(math.isfinite(v) for v in imp.values())
    assert imp["collective.channels"] < imp["network.cc"]  # was the most important one before ranges were narrowed
    narrowed = _within_observed_ranges([t for t in study.get_trials() if is_feasible_trial(t)])
    assert {(d.low, d.high) for t in narrowed for n, d in t.distributions.items() if n == "collective.channels"} == {(1, 2)}


def test_pareto_front_for_two_objectives(sqlite_url, tmp_path):
    data = small_space_data(name="two", parameters={"cluster.k": [4, 6], "network.cc": ["dcqcn", "hpcc", "dctcp"]},
                            prices={"switch": 1000}, objectives=["iteration_time", "cost"])
    study = _study(sqlite_url, data, sampler="nsga2", n=24)
    write_report(study, tmp_path / "r")
    assert (tmp_path / "r" / "pareto.svg").exists()


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
    assert "no feasible trial yet" in page


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
