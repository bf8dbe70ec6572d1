"""The MoE validation script's data and configurations (experiments/validate_moe.py,
experiments/moe_published.yaml, docs/validation.md "Mixture of experts"): every row carries its
source, the derived iteration times follow Megatron-LM's FLOP formula by hand, and every
simulated row is a valid configuration that builds (without simulating it)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest
import yaml

from mvopt.engine.tasks import DELAY, FLOW

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(EXPERIMENTS))
    try:
        return importlib.import_module("validate_moe")
    finally:
        sys.path.remove(str(EXPERIMENTS))


def test_rows_name_their_sources(script) -> None:
    data = yaml.safe_load(script.DATA.read_text())
    for section in ("end_to_end", "not_simulated", "all_to_all"):
        assert data[section], section
        for row in data[section]:
            assert row["name"] and len(row["source"]) > 40, row["name"]
    assert all(row["why"] for row in data["not_simulated"])


def test_mixtral_time_from_published_tflops(script) -> None:
    """12 B s l h^2 [(1 + 8/32 + 4096/4096) + (14336/4096) 2 (3/2) + 32000 / (2 32 4096)] FLOPs
    for B = 256, s = 4096, l = 32, h = 4096, at 438 TFLOP/s on each of 64 GPUs."""
    data = yaml.safe_load(script.DATA.read_text())
    row = next(r for r in data["end_to_end"] if r["name"] == "mcore-v0.8-mixtral-8x7b")
    flops = 12 * 256 * 4096 * 32 * 4096 ** 2 * (2.25 + 10.5 + 32000 / (2 * 32 * 4096))
    assert script.megatron_flops(row["model"], 256) == pytest.approx(flops, rel=1e-12)
    assert script.measured_time_s(row) == pytest.approx(flops / (64 * 438e12), rel=1e-12)


def test_gpt_oss_time_from_published_tokens_per_second(script) -> None:
    """512 sequences of 4096 tokens at 5630 tokens/s on each of 64 GPUs."""
    data = yaml.safe_load(script.DATA.read_text())
    row = next(r for r in data["end_to_end"] if r["name"] == "mbridge-25.11-gpt-oss-120b")
    assert script.measured_time_s(row) == pytest.approx(512 * 4096 / (64 * 5630), rel=1e-12)


def test_gpt_oss_row_builds_with_its_precision(script) -> None:
    from mvopt.build import build

    data = yaml.safe_load(script.DATA.read_text())
    row = next(r for r in data["end_to_end"] if r["name"] == "mbridge-25.11-gpt-oss-120b")
    b = build(script.training_config(row, "flow"))
    assert b.config.workload.precision == "mixed_adam" and b.config.parallelism.dp == 16
    assert b.experiment.tasks.n > 0


def test_every_simulated_row_builds(script) -> None:
    from mvopt.build import build

    data = yaml.safe_load(script.DATA.read_text())
    for row in data["end_to_end"][:1]:          # the rows share one layout; building one is ~1 s
        b = build(script.training_config(row, "flow"))
        assert b.experiment.tasks.n > 0 and b.config.parallelism.dp == 16
    for row in data["all_to_all"]:
        for algo in script.A2A_ALGORITHMS:
            g = build(script.alltoall_config(row, row["points"][0]["size_bytes"], algo)).experiment.tasks
            n, gps = row["servers"] * row["gpus_per_server"], row["gpus_per_server"]
            # one NVLink all-to-all step per GPU with server peers, a flow per pair of GPUs in two servers
            assert int((g.kind == FLOW).sum()) == n * (n - gps)
            assert int((g.kind == DELAY).sum()) == (n if gps > 1 else 0)


def test_intra_server_reference_rows_and_diagnosis(script) -> None:
    """Each reference row names its source and gives the all-to-all and the all-gather at every
    size; the diagnosis prints their ratio at one size (254.69 / 253.59 for the NDm A100 v4 triple)
    or its median and range over a sweep, and is empty when no all-to-all row lies inside one
    server."""
    data = yaml.safe_load(script.DATA.read_text())
    refs = data["intra_server_reference"]
    assert refs
    for ref in refs:
        assert len(ref["source"]) > 40 and ref["points"], ref["name"]
        assert all({"all_gather", "all_to_all"} <= set(pt["busbw_GBps"]) for pt in ref["points"]), ref["name"]
    lines = script._intra_server_diagnosis([{"row": {"servers": 1}}], refs)
    ndmv4 = next(line for line in lines if "`ndmv4-1x8-a100`" in line)
    assert f"all-to-all / all-gather {254.69 / 253.59:.3f}" in ndmv4
    assert f"all-gather / all-reduce {253.59 / 231.45:.3f}" in ndmv4
    sweep = {"name": "s", "gpu": "G", "gpus": 8, "points": [
        {"size_bytes": 2**19, "busbw_GBps": {"all_gather": 1.0, "all_to_all": 9.0}},   # below 1 MiB: left out
        {"size_bytes": 2**20, "busbw_GBps": {"all_gather": 10.0, "all_to_all": 8.0}},
        {"size_bytes": 2**21, "busbw_GBps": {"all_gather": 10.0, "all_to_all": 9.0}},
        {"size_bytes": 2**22, "busbw_GBps": {"all_gather": 10.0, "all_to_all": 11.0}}]}
    line = script._ratio_line(sweep)
    assert "3 sizes from 1 to 4 MiB" in line and "median 0.900" in line
    assert "lowest 0.800 at 1 MiB" in line and "highest 1.100 at 4 MiB" in line
    assert script._intra_server_diagnosis([{"row": {"servers": 2}}], refs) == []


def test_cross_server_causes(script) -> None:
    """The schedule's share is the largest concurrent / pairwise gap; a row's size spread is
    the range of its errors (+9 % and +10 % against a measured 100: 1 point)."""
    row = {"name": "r"}
    cross = [{"row": row, "point": {"busbw_GBps": 100.0}, "concurrent": 109.0, "pairwise": 108.0},
             {"row": row, "point": {"busbw_GBps": 100.0}, "concurrent": 110.0, "pairwise": 110.0}]
    text = " ".join(script._cross_server_causes(cross))
    assert f"at most {(109 / 108 - 1) * 100:.1f} %" in text
    assert "`r` within 1.00 points" in text
