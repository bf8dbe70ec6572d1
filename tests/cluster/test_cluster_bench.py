"""The scale benchmark runs at toy size, and its report helper keeps other doc sections intact."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def _load_report():
    spec = importlib.util.spec_from_file_location("_report", REPO / "experiments" / "_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_update_section_replaces_only_its_section(tmp_path):
    report = _load_report()
    doc = tmp_path / "perf.md"
    report.update_section(doc, "topology", "first")            # creates the file
    assert doc.read_text() == "<!-- begin:topology -->\nfirst\n<!-- end:topology -->\n"
    doc.write_text("# Perf\n\n<!-- begin:engine -->\nE\n<!-- end:engine -->\n\n" + doc.read_text() + "tail\n")
    report.update_section(doc, "topology", "second\n| a |")
    report.update_section(doc, "new", "N")                     # appended
    text = doc.read_text()
    assert "<!-- begin:engine -->\nE\n<!-- end:engine -->" in text and "first" not in text
    assert "<!-- begin:topology -->\nsecond\n| a |\n<!-- end:topology -->\ntail\n" in text
    assert text.endswith("<!-- begin:new -->\nN\n<!-- end:new -->\n")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["perf.md"]


def test_benchmark_toy_size():
    out = subprocess.run([sys.executable, str(REPO / "experiments" / "bench_topology.py"), "--toy", "--no-write"],
                         capture_output=True, text=True, cwd=REPO, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "fat-tree k=8" in out.stdout and "(128 hosts, 80 switches, 384 links)" in out.stdout
