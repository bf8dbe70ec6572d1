"""experiments/nightly.py at toy size: runs, reports, and is safe to run again."""

import subprocess
import sys

import optuna
import pytest

from optimize_helpers import REPO


def _nightly(args, env):
    return subprocess.run([sys.executable, str(REPO / "experiments" / "nightly.py"), *args], env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_nightly_twice_on_the_same_study(tmp_path, subprocess_env):
    db = f"sqlite:///{tmp_path / 'nightly.db'}"
    args = ["quickstart", "--storage", db, "--budget", "3s", "--backend", "analytic_evaluator:make",
            "--out", str(tmp_path / "report"), "-g", "4"]
    first = _nightly(args, subprocess_env)
    assert first.returncode == 0, first.stderr
    assert (tmp_path / "report" / "index.html").exists()
    n1 = len(optuna.load_study(study_name="quickstart", storage=db).trials)
    second = _nightly(args, subprocess_env)
    assert second.returncode == 0, second.stderr
    n2 = len(optuna.load_study(study_name="quickstart", storage=db).trials)
    assert n1 >= 4 and n2 > n1


def test_nightly_fails_on_errors(tmp_path, subprocess_env):
    res = _nightly(["no_such_space", "--storage", f"sqlite:///{tmp_path / 'n.db'}", "--budget", "1s"], subprocess_env)
    assert res.returncode == 1 and "no_such_space.yaml" in res.stderr
