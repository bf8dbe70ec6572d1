"""experiments/bench_optimizer.py runs (no simulation, a few trials) and writes its JSON and table."""

from __future__ import annotations

import json
import sys

from optimize_helpers import REPO

sys.path.insert(0, str(REPO / "experiments"))
import bench_optimizer  # noqa: E402


def test_bench_optimizer_null_backend(tmp_path, capsys):
    assert bench_optimizer.main(["--backend", "null", "--generation", "6", "--generations", "2",
                                 "--out", str(tmp_path), "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "gen 0: 6 trials" in out and "gen 1: 6 trials" in out and "| gen | trials |" in out
    data = json.loads((tmp_path / "bench_optimizer_null.json").read_text())
    assert data["complete"] and data["writer"] == "rdb" and data["sampler"] == "nsga2" and len(data["rows"]) == 2
    for row in data["rows"]:
        assert row["trials"] == 6 and row["ask_s"] > 0 and row["ratio"] is None
        assert row["sampler_s"] + row["map_s"] + row["ask_storage_s"] <= row["ask_s"]
    assert (tmp_path / "bench_optimizer_null.md").read_text().startswith("### Backend `null`")


def test_bench_optimizer_errors_are_one_line(tmp_path, capsys):
    assert bench_optimizer.main(["--backend", "nosuch", "--generation", "2", "--generations", "1",
                                 "--out", str(tmp_path), "--no-write"]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("bench_optimizer: error: unknown evaluator backend 'nosuch'")
