"""The end-to-end validation script's experiment configurations (experiments/validate_end_to_end.py,
docs/validation.md "End-to-end iteration time") stay valid configurations under its defaults, so
that the documented command regenerates its section."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


def test_every_published_row_builds_a_valid_configuration_with_the_script_defaults() -> None:
    sys.path.insert(0, str(EXPERIMENTS))
    try:
        e2e = importlib.import_module("validate_end_to_end")
    finally:
        sys.path.remove(str(EXPERIMENTS))
    from mvopt.workload import published_runs

    runs = published_runs()
    cases = [c for run in runs for c in e2e.row_cases(run, e2e.PAYLOAD)]       # (load_config validates each)
    cases += [c for run in runs for c in e2e.sensitivity_cases(run, e2e.PAYLOAD)]
    assert len(cases) >= len(runs)
    assert {c.cfg.network.payload_bytes for c in cases} == {e2e.PAYLOAD}
