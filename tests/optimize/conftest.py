"""Shared fixtures of the optimizer tests: a small space, storages, the analytic evaluator."""

from __future__ import annotations

import os
import sys
import warnings
from pathlib import Path

import optuna
import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path.insert(0, str(HERE))  # analytic_evaluator, run_command

optuna.logging.set_verbosity(optuna.logging.WARNING)
warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used")

BASE = {"cluster": {"topology": "fat_tree", "k": 4, "gpus_per_server": 1}, "workload": {"kind": "collective"}}


def small_space_data(**extra: object) -> dict:
    """A small space over cc, lb and ECN kmin (the analytic evaluator uses all three)."""
    data = {
        "name": "small",
        "base": BASE,
        "parameters": {
            "network.cc": ["dcqcn", "hpcc", "dctcp"],
            "network.lb": ["ecmp", "spray"],
            "network.ecn.kmin_kb": {"low": 10.0, "high": 400.0, "log": True},
        },
    }
    data.update(extra)
    return data


def grid_space_data() -> dict:
    """12 grid points (3 cc x 2 lb x 2 kmin), kmin 350 being infeasible for the evaluator."""
    return {
        "name": "grid",
        "base": BASE,
        "parameters": {
            "network.cc": ["dcqcn", "hpcc", "dctcp"],
            "network.lb": ["ecmp", "spray"],
            "network.ecn.kmin_kb": {"choices": [50.0, 350.0]},
        },
    }


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
