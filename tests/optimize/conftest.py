"""Fixtures of the optimizer tests: storages and the environment of CLI subprocesses."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import optuna
import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from optimize_helpers import HERE, REPO  # noqa: E402

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'study.db'}"


@pytest.fixture
def subprocess_env(tmp_path: Path) -> dict:
    """Environment for CLI subprocesses: the analytic evaluator importable, logs in tmp_path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(HERE), str(REPO)] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH") else []))
    env["MVOPT_TEST_EVAL_LOG"] = str(tmp_path / "evaluated.log")
    env.pop("MVOPT_TEST_EVAL_SLEEP", None)
    return env
