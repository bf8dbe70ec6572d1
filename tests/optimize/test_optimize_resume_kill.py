"""Killing ``optimize`` mid-generation (SIGKILL) and resuming loses no trial and duplicates none."""

import collections
import signal

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from optimize_helpers import small_space_data
from optimize_procs import lines, run, start, wait_for
from mvopt.optimize.storage import make_storage


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_sigkill_mid_generation_then_resume(tmp_path, subprocess_env, kind):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(small_space_data(name="killme")))
    storage = f"sqlite:///{tmp_path / 'k.db'}" if kind == "sqlite" else str(tmp_path / "k.journal")
    common = [str(space), "--storage", storage, "--backend", "analytic_evaluator:make", "--sampler", "random",
              "-g", "4", "-q", "--artifacts", str(tmp_path / "art")]
    started = tmp_path / "started.log"
    env = {**subprocess_env, "MVOPT_TEST_EVAL_SLEEP": "1.5", "MVOPT_TEST_EVAL_STARTED": str(started)}
    proc = start(["optimize", *common, "-n", "40", "--seed", "1"], env)
    try:
        wait_for(lambda: len(lines(started)) >= 3, 60, "the third generation to start", [proc])
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    study = optuna.load_study(study_name="killme", storage=make_storage(storage, heartbeat_s=None))
    before = {t.number: t.values for t in study.get_trials(states=(TrialState.COMPLETE,))}
    killed = [t.number for t in study.get_trials(states=(TrialState.RUNNING,))]
    assert len(before) >= 8 and killed  # two generations told, the third cut mid-batch

    res = run(["optimize", *common, "--resume", "-n", "16"], subprocess_env)
    assert res.returncode == 0, res.stderr
    study = optuna.load_study(study_name="killme", storage=make_storage(storage, heartbeat_s=None))
    trials = study.get_trials()
    complete = [t for t in trials if t.state == TrialState.COMPLETE]
    assert not [t for t in trials if t.state in (TrialState.RUNNING, TrialState.WAITING)]
    assert len(complete) == len(before) + 16
    assert {t.number: t.values for t in complete if t.number in before} == before  # nothing lost
    failed = sorted(t.number for t in trials if t.state == TrialState.FAIL)
    assert failed == sorted(killed)
    retries = {t.system_attrs["failed_trial"]: t for t in complete if "failed_trial" in t.system_attrs}
    assert sorted(retries) == failed  # each killed trial retried once...
    by_number = {t.number: t for t in trials}
    assert all(retries[n].params == by_number[n].params for n in failed)  # ...with its own parameters
    simulated = [t.user_attrs["config_key"] for t in complete if "duplicate_of" not in t.user_attrs]
    assert len(simulated) == len(set(simulated))  # no configuration recorded twice as an original


@pytest.mark.slow
def test_sigterm_releases_running_trials(tmp_path, subprocess_env):
    space = tmp_path / "space.yaml"
    space.write_text(yaml.safe_dump(small_space_data(name="term")))
    storage = f"sqlite:///{tmp_path / 't.db'}"
    started = tmp_path / "started.log"
    env = {**subprocess_env, "MVOPT_TEST_EVAL_SLEEP": "2", "MVOPT_TEST_EVAL_STARTED": str(started)}
    proc = start(["optimize", str(space), "--storage", storage, "--backend", "analytic_evaluator:make",
                  "-g", "4", "-n", "8", "-q"], env)
    wait_for(lambda: len(lines(started)) >= 1, 60, "the first generation to start", [proc])
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 130
    study = optuna.load_study(study_name="term", storage=make_storage(storage, heartbeat_s=None))
    states = collections.Counter(t.state for t in study.get_trials())
    assert states == {TrialState.FAIL: 4, TrialState.WAITING: 4}  # released at once, queued for a resume
