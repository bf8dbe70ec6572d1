"""``mvopt simulate --from-study STORAGE --trial N``: a trial of a study, simulated again exactly.

A tiny study on the real CPU simulator (a two-flow task graph, so it takes seconds); every
trial's stored configuration, simulated again through the command, gives the same value.
"""

from __future__ import annotations

import json

import optuna
import pytest

from mvopt import __main__ as cli
from mvopt.optimize import Budget, GenerationLoop, create_or_resume, load_space, make_storage
from mvopt.optimize.evaluator import SimulatorEvaluator

SPACE = {
    "name": "tiny",
    "base": {"name": "tiny", "cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none"},
             "workload": {"kind": "tasks", "tasks": [{"id": "a", "src": 0, "dst": 5, "bytes": 20000},
                                                     {"id": "b", "src": 5, "dst": 9, "bytes": 20000, "after": ["a"]}]}},
    "parameters": {"network.cc": ["none", "dcqcn", "hpcc"], "network.lb": ["ecmp", "spray"]},
}


@pytest.fixture(scope="module")
def study_url(tmp_path_factory):
    url = f"sqlite:///{tmp_path_factory.mktemp('fs') / 'tiny.db'}"
    space = load_space(SPACE)
    study = create_or_resume(make_storage(url), space, sampler="grid", generation_size=3, seed=0)
    GenerationLoop(study, space, SimulatorEvaluator("cpu"), generation_size=3).run(Budget(n_trials=6))
    return url


def _simulate(argv, capsys) -> tuple[int, str, str]:
    try:
        rc = cli.main(["simulate", *argv])
    except SystemExit as e:
        rc = int(e.code)
    cap = capsys.readouterr()
    return rc, cap.out, cap.err


def test_every_trial_simulates_again_to_its_value(study_url, capsys):
    study = optuna.load_study(study_name="tiny", storage=study_url)
    trials = study.get_trials()
    assert len(trials) == 6 and all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    for t in trials:
        assert t.user_attrs["feasible"] and t.user_attrs["backend"] == "cpu"
        rc, out, err = _simulate(["--from-study", study_url, "--trial", str(t.number), "--json"], capsys)
        assert rc == 0, err
        exp = json.loads(out)["experiments"][0]
        assert exp["makespan_s"] == t.values[0]  # bit-identical: the stored config is the whole experiment
        assert f"trial {t.number} of study 'tiny'" in err and t.user_attrs["config_key"] in err


def test_from_study_errors(study_url, tmp_path, capsys):
    rc, _, err = _simulate(["--from-study", study_url, "--trial", "99"], capsys)
    assert rc == 1 and "has no trial 99" in err
    rc, _, err = _simulate(["--from-study", study_url, "--trial", "0", "--study", "nope"], capsys)
    assert rc == 1 and "no study named 'nope'" in err
    rc, _, err = _simulate(["--from-study", str(tmp_path / "missing.db"), "--trial", "0"], capsys)
    assert rc == 1 and "does not exist" in err and not (tmp_path / "missing.db").exists()
    rc, _, err = _simulate(["--from-study", study_url], capsys)
    assert rc == 2 and "go together" in err
