"""The kernels' hand-written enums that mirror Python's tables are checked when they compile."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from mvopt.engine import schema, source


def _syntax_check(tmp_path, text: str) -> subprocess.CompletedProcess:
    cxx = shutil.which("g++") or shutil.which("c++")
    if cxx is None:
        pytest.skip("needs a C++ compiler")
    path = tmp_path / "kernels.cpp"
    path.write_text(text)
    return subprocess.run([cxx, "-std=c++17", "-fsyntax-only", "-w", str(path)], capture_output=True, text=True)


def test_the_kernels_compile_with_the_declared_slots(tmp_path) -> None:
    res = _syntax_check(tmp_path, source.kernel_source("cpu"))
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("table, slots, error", [
    ("EI", ("cc", "seed") + schema.EI[2:], "schema.EI does not list the EI_* enum of mv_common.cuh in order"),
    ("EI", schema.EI[:-1], "schema.EI does not list the EI_* enum of mv_common.cuh in order"),
    ("ED", schema.ED + ("new_slot",), "ED_NEW_SLOT")])
def test_a_slot_order_the_kernels_do_not_share_stops_the_build(tmp_path, monkeypatch, table, slots, error) -> None:
    """The batch builder writes an experiment's parameters in the order of schema.EI / schema.ED;
    kernels that read them in another order, miss one or lack one must not compile."""
    monkeypatch.setattr(schema, table, slots)
    res = _syntax_check(tmp_path, source.kernel_source("cpu"))
    assert res.returncode != 0 and error in res.stderr
