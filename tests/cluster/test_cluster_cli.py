"""``python -m mvopt topo``: table, JSON, --out, --config, and the error exit codes."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mvopt.__main__ import main
from mvopt.cluster import CompiledTopology, read_hpcc_topology

REPO = Path(__file__).resolve().parents[2]


def _run(capsys, *argv):
    rc = main(["topo", *argv])
    out, err = capsys.readouterr()
    return rc, out, err


def test_table(capsys):
    rc, out, err = _run(capsys, "fat_tree", "--k", "8")
    assert rc == 0 and err == ""
    rows = dict(re.split(r"\s{2,}", line, maxsplit=1) for line in out.splitlines())
    assert rows["hosts (NICs)"] == "128"
    assert rows["switches"].startswith("80  (tier 1: 32, tier 2: 32, tier 3: 16)")
    assert rows["links"].startswith("384")
    assert rows["bisection"].startswith("6400 Gb/s")
    assert rows["diameter"].startswith("6 hops")


def test_json_and_options(capsys):
    rc, out, _ = _run(capsys, "rail_optimized", "--servers", "8", "--servers-per-group", "4", "--gpus-per-server",
                      "4", "--link-gbps", "200,400", "--oversubscription", "2", "--json")
    s = json.loads(out)
    assert rc == 0 and s["hosts"] == 32 and s["switches_by_tier"] == {"1": 8, "2": 1}
    rc, out, _ = _run(capsys, "torus", "--torus-dims", "2x3x4", "--nics-per-server", "2", "--json")
    assert json.loads(out)["hosts"] == 48
    rc, out, _ = _run(capsys, "dragonfly", "--groups", "4", "--routers-per-group", "2", "--hosts-per-router", "3",
                      "--link-delay-ns", "100,200,5000", "--json")
    assert json.loads(out)["hosts"] == 24


def test_out_npz_and_txt(capsys, tmp_path):
    npz, txt = tmp_path / "t.npz", tmp_path / "t.txt"
    assert _run(capsys, "leaf_spine", "--leaves", "3", "--hosts-per-leaf", "2", "--out", str(npz))[0] == 0
    assert _run(capsys, "leaf_spine", "--leaves", "3", "--hosts-per-leaf", "2", "--out", str(txt))[0] == 0
    a, b = CompiledTopology.load(npz), read_hpcc_topology(txt)
    assert a.n_host == b.n_host == 6 and np.array_equal(a.port_peer_node, b.port_peer_node)
    rc, out, _ = _run(capsys, "file", "--file", str(txt), "--json")
    assert rc == 0 and json.loads(out)["links"] == a.n_link


def test_config_file_with_override(capsys, tmp_path):
    cfg = tmp_path / "exp.yaml"
    cfg.write_text("cluster:\n  topology: fat_tree\n  k: 4\n")
    assert json.loads(_run(capsys, "--config", str(cfg), "--json")[1])["hosts"] == 16
    assert json.loads(_run(capsys, "--config", str(cfg), "--k", "6", "--json")[1])["hosts"] == 54


@pytest.mark.parametrize("argv,message", [
    (["fat_tree", "--k", "5"], "mvopt topo: error: cluster.k: must be an even integer >= 2, got 5"),
    (["leaf_spine", "--leaves", "2", "--hosts-per-leaf", "4", "--oversubscription", "3"],
     "mvopt topo: error: cluster.oversubscription: must make the spine count"),
    (["leaf_spine", "--k", "4"], "mvopt topo: error: cluster.k: is not a parameter of topology 'leaf_spine'"),
    (["file", "--file", "/nonexistent/t.txt"], "mvopt topo: error: /nonexistent/t.txt: cannot be read"),
])
def test_bad_values_exit_1_with_one_line(capsys, argv, message):
    rc, out, err = _run(capsys, *argv)
    assert rc == 1 and out == ""
    assert err.startswith(message) and err.count("\n") == 1


@pytest.mark.parametrize("argv", [["fat_tree", "--bogus"], ["fat_tree", "--k", "x"], ["torus", "--torus-dims", "4xa"],
                                  ["mesh"], []])
def test_usage_errors_exit_2(capsys, argv):
    with pytest.raises(SystemExit) as e:
        main(["topo", *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("mvopt topo: error:") and err.count("\n") == 1


def test_entry_point_subprocess(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "mvopt", "topo", "fat_tree", "--k", "4", "--json"],
                        capture_output=True, text=True, cwd=REPO)
    assert ok.returncode == 0 and json.loads(ok.stdout)["switches"] == 20
    bad = subprocess.run([sys.executable, "-m", "mvopt", "topo", "fat_tree", "--k", "3"], capture_output=True, text=True,
                         cwd=REPO)
    assert bad.returncode == 1 and bad.stderr.strip().count("\n") == 0 and "cluster.k" in bad.stderr
