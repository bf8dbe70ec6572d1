"""Shared constants and search spaces of the optimizer tests (fixtures are in conftest.py)."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))  # analytic_evaluator, optimize_procs, optimize_cli_runner

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
