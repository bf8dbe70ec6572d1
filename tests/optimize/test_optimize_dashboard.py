"""optuna-dashboard on the optimizer's SQLite file, through its WSGI app in-process."""

import io
import json
import wsgiref.util

import pytest

from analytic_evaluator import AnalyticEvaluator
from optimize_helpers import small_space_data
from mvopt.optimize import Budget, GenerationLoop, create_or_resume, load_space, make_storage

dashboard = pytest.importorskip("optuna_dashboard", reason="optuna-dashboard is not installed (pip install 'mvopt[dashboard]')")


def _get(app, path: str) -> dict:
    environ: dict = {"PATH_INFO": path.split("?")[0], "QUERY_STRING": path.partition("?")[2], "REQUEST_METHOD": "GET",
                     "wsgi.input": io.BytesIO()}
    wsgiref.util.setup_testing_defaults(environ)
    status: list = []
    body = b"".join(app(environ, lambda s, h, exc=None: status.append(s)))
    assert status[0].startswith("200"), (path, status, body[:200])
    return json.loads(body)


def test_dashboard_api_shows_study_trials_and_attributes(sqlite_url, tmp_path):
    space = load_space(small_space_data(name="dash"))
    study = create_or_resume(make_storage(sqlite_url), space, sampler="random", generation_size=4, seed=1)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4,
                   artifact_dir=str(tmp_path / "art")).run(Budget(n_trials=8))
    from optuna.artifacts import FileSystemArtifactStore
    app = dashboard.wsgi(sqlite_url, artifact_store=FileSystemArtifactStore(str(tmp_path / "art")))
    studies = _get(app, "/api/studies")["study_summaries"]
    assert [s["study_name"] for s in studies] == ["dash"]
    detail = _get(app, f"/api/studies/{studies[0]['study_id']}?after=0")
    trials = detail["trials"]
    assert len(trials) == 8
    keys = {a["key"] for a in trials[0]["user_attrs"]}
    assert {"config", "feasible", "reason", "breakdown", "backend", "mvopt_version"} <= keys
    assert any(t["artifacts"] for t in trials)  # the breakdown plot of a best-so-far trial
