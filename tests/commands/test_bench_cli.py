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
                                           (["--cc", "cubic"], "must be none, dcqcn, hpcc or dctcp, got 'cubic'"),
                                           (["--mib", "-1"], "--mib: must be a size in MiB of at least one byte, got '-1'"),
                                           (["--mib", "x"], "--mib: must be a size in MiB"),
                                           (["--mib", "inf"], "--mib: must be a size in MiB")])
def test_bench_refuses_bad_arguments(capsys, argv: list[str], message: str) -> None:
    with pytest.raises(SystemExit) as exit_:
        cli_main.main(["bench", *argv])
    assert exit_.value.code == 2 and message in capsys.readouterr().err
