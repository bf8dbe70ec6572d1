"""``mvopt bench`` end to end: the table, JSON rows, bad arguments."""

from __future__ import annotations

import json

import pytest

from mvopt import __main__ as cli_main


def test_bench_prints_json_rows(capsys) -> None:
    assert cli_main.main(["bench", "--backend", "cpu", "--batch", "1,2", "--cc", "none", "--mib", "0.25", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["batch"] for r in rows] == [1, 2] and all(r["status"] == "done" for r in rows)
    assert rows[1]["packet_hops"] == 2 * rows[0]["packet_hops"] > 0


@pytest.mark.parametrize("argv, message", [(["--batch", "0"], "expected positive integers, got '0'"),
                                           (["--cc", "cubic"], "must be none, dcqcn, hpcc, dctcp or timely, got 'cubic'"),
                                           (["--mib", "-1"], "--mib: must be a size in MiB of at least one byte, got '-1'"),
                                           (["--mib", "x"], "--mib: must be a size in MiB"),
                                           (["--mib", "inf"], "--mib: must be a size in MiB")])
def test_bench_refuses_bad_arguments(capsys, argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli_main.main(["bench", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err


def test_bench_runs_a_generation_of_a_shipped_space_beside_the_ceiling(capsys) -> None:
    """`mvopt bench --space NAME`: one generation of the space as the optimizer builds it (here
    one trial, for a second), reported with how far it got, then the k=4 rows."""
    import json

    from mvopt.__main__ import main

    assert main(["bench", "--backend", "cpu", "--space", "collective", "--n", "1", "--budget-s", "0.5",
                 "--batch", "1", "--cc", "none", "--mib", "0.0625", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (row,) = out["spaces"]
    assert row["space"] == "collective" and row["mode"] == "budget" and row["simulated"] == 1
    assert row["packet_hops"] > 0 and row["windows"] > 0 and row["simulated_ms_reached"]["max"] > 0
    assert out["k4"][0]["batch"] == 1 and out["k4"][0]["status"] == "done"


def test_bench_space_arguments_are_checked_before_anything_runs(capsys) -> None:
    from mvopt.__main__ import main

    assert main(["bench", "--space", "no-such-space"]) == 1
    assert "no such search space" in capsys.readouterr().err
    assert main(["bench", "--budget-s", "5"]) == 1
    assert "go with --space" in capsys.readouterr().err
