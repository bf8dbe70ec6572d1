"""TIMELY on a small version of its paper's incast (experiments/validate_timely.py; docs/validation.md,
"TIMELY on its paper's incast"): what the paper claims, checked on mvopt's engine.

The tolerances come from the claims, not from mvopt's figures: "near line-rate throughput"
(the paper's abstract) read as at least 90 % of the bottleneck in the steady window; an RTT held
below T_high (Algorithm 1 cuts the rate on every sample above it); and equal flows, started
together under the same rule, sharing the bottleneck (Jain's index at least 0.95, every flow
within about 20 % of the mean).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[2] / "experiments"
NEAR_LINE_RATE = 0.9
FAIR = 0.95


@pytest.fixture(scope="module")
def script():
    sys.path.insert(0, str(EXPERIMENTS))
    try:
        return importlib.import_module("validate_timely")
    finally:
        sys.path.remove(str(EXPERIMENTS))


@pytest.fixture(scope="module")
def four(script) -> dict:
    return script.run_incast(script.incast_config(4, 10_000_000))


def test_jain_index(script) -> None:
    assert script.jain([1.0, 1.0, 1.0, 1.0]) == 1.0
    assert script.jain([1.0, 0.0, 0.0, 0.0]) == pytest.approx(0.25)


def test_four_to_one_is_lossless_and_keeps_near_line_rate(four) -> None:
    assert four["drops"] == 0
    assert four["utilisation"] >= NEAR_LINE_RATE


def test_four_to_one_holds_the_rtt_below_t_high(script, four) -> None:
    t_high = script.incast_config(4).network.timely.t_high_us
    # after the initial burst (every sender at line rate until its first samples)
    assert four["rtt_max_us"] < t_high


def test_four_to_one_shares_fairly(four) -> None:
    assert four["jain"] >= FAIR


@pytest.mark.xfail(strict=True, reason="40 senders leave the bottleneck at ~80 %: synchronised gradient "
                   "cuts (docs/validation.md, 'TIMELY on its paper's incast')")
def test_forty_to_one_keeps_near_line_rate(script) -> None:
    f = script.run_incast(script.incast_config(40, 50_000_000))
    assert f["utilisation"] >= NEAR_LINE_RATE


def test_the_what_if_with_mvopts_sampling_is_the_engine(script) -> None:
    """The what-if runs the reference simulator; with mvopt's own sampling it gives the engine's
    figures exactly, so its other rows differ from the engine only by the sampling."""
    engine = script.run_incast(script.incast_config(4, 2_000_000))
    ref = script.segment_what_if(4, 2_000_000, None)
    assert {k: ref[k] for k in engine if k != "wall_s"} == {k: v for k, v in engine.items() if k != "wall_s"}
    assert ref["rule_t_low"] + ref["rule_cut"] + ref["rule_other"] > 0
    seg = script.segment_what_if(4, 2_000_000, 16)
    assert seg["drops"] == 0
    # one sample per 16 packets: fewer samples in a window at least as long
    assert seg["window_us"][1] - seg["window_us"][0] >= ref["window_us"][1] - ref["window_us"][0]
    assert (seg["rule_t_low"] + seg["rule_cut"] + seg["rule_other"]
            < ref["rule_t_low"] + ref["rule_cut"] + ref["rule_other"])


def test_the_script_renders_its_section(script, capsys) -> None:
    assert script.main(["--senders", "4", "--no-what-if", "--no-write"]) == 0
    out = capsys.readouterr().out
    assert "## TIMELY on its paper's incast" in out and "| 4 x 12.5 MB |" in out
