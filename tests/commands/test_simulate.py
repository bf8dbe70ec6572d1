"""``mvopt simulate`` end to end: YAML scenarios, HPCC inputs, exit codes, the examples."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from mvopt import __main__ as cli_main
from mvopt.commands import simulate as cmd
from mvopt.errors import MvoptError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"

SCENARIO = """\
name: tiny
cluster: {topology: fat_tree, k: 4}
network: {cc: none}
workload:
  kind: tasks
  tasks:
    - {id: a, src: 0, dst: 5, bytes: 20000}
    - {id: b, src: 5, dst: 9, bytes: 20000, after: [a]}
"""


def mvopt(argv: list[str]) -> int:
    """``python -m mvopt simulate ARGV``: through the CLI table once it lists simulate, else
    through the command's own parser with the same error handling as the CLI wrapper."""
    try:
        if "simulate" in cli_main.SUBCOMMANDS:
            return cli_main.main(["simulate", *argv])
        parser = argparse.ArgumentParser(prog="mvopt simulate")
        cmd.add_arguments(parser)
        try:
            return cmd.run(parser.parse_args(argv))
        except MvoptError as e:
            print(f"mvopt simulate: error: {e}", file=sys.stderr)
            return 1
    except SystemExit as e:       # usage errors (argparse)
        return int(e.code)


def _write(tmp_path, name, text):
    p = tmp_path / name
    p.write_text(text)
    return str(p)


def test_scenario_text(tmp_path, capsys):
    assert mvopt([_write(tmp_path, "s.yaml", SCENARIO)]) == 0
    out = capsys.readouterr().out
    assert "experiment tiny: done" in out and "makespan" in out and "FCT" in out and "p99" in out
    assert "data_packets_delivered      40" in out


def test_scenario_json_batch(tmp_path, capsys):
    a = _write(tmp_path, "a.yaml", SCENARIO)
    b = _write(tmp_path, "b.yaml", SCENARIO.replace("name: tiny", "name: other").replace("cc: none", "cc: hpcc"))
    assert mvopt([a, b, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    e1, e2 = data["experiments"]
    assert (e1["name"], e2["name"]) == ("tiny", "other") and data["backend"] == "cpu"
    assert e1["status"] == "done" and e1["flows"] == 2 and e1["flows_completed"] == 2
    assert e1["counters"]["data_bytes_delivered"] == 40000
    assert e1["makespan_s"] == e1["makespan_ps"] / 1e12 and set(e1["fct_ps"]) == {"p50", "p90", "p99", "max"}


def test_a_long_run_reports_progress_on_stderr_only(tmp_path, capsys, monkeypatch):
    """Every report interval (here: every chunk of 5 windows) a line on stderr; stdout keeps the
    JSON alone, unchanged."""
    from mvopt.engine import backend_defaults, progress

    path = _write(tmp_path, "s.yaml", SCENARIO)
    assert mvopt([path, "--json"]) == 0
    quiet = json.loads(capsys.readouterr().out)["experiments"]
    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(backend_defaults, "CPU", backend_defaults.CpuDefaults(progress_windows=5))
    assert mvopt([path, "--json"]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["experiments"] == quiet
    lines = out.err.splitlines()
    assert lines and all(line.startswith("mvopt simulate: 0/1 experiments ended, window ") for line in lines)


def test_monitors_in_json_and_text(tmp_path, capsys):
    """simulation.queue_monitor_ns / link_monitor: every sample in --json, a summary in text."""
    text = SCENARIO + "simulation: {queue_monitor_ns: 500, link_monitor: true, monitor_max_samples: 8}\n"
    path = _write(tmp_path, "m.yaml", text)
    assert mvopt([path, "--json"]) == 0
    e, = json.loads(capsys.readouterr().out)["experiments"]
    m = e["monitors"]
    n_port = len(m["ports"]["node"])
    assert m["interval_ps"] == 500_000 and m["samples"] == 8 and m["samples_dropped"] > 0
    assert len(m["queue_bytes"]) == len(m["link_tx_bytes"]) == n_port and len(m["queue_bytes"][0]) == 8
    assert m["link_tx_bytes"][0][1] > 0 and m["link_tx_bytes"][0][0] == 0    # host 0 sends from t = 0
    assert mvopt([path]) == 0
    out = capsys.readouterr().out
    assert "monitors      every 500 ns, 8 samples per port" in out and "busiest port" in out
    assert mvopt([_write(tmp_path, "s.yaml", SCENARIO), "--json"]) == 0
    assert "monitors" not in json.loads(capsys.readouterr().out)["experiments"][0]


def test_timeout_prints_diagnostic_and_exits_3(tmp_path, capsys):
    path = _write(tmp_path, "s.yaml", SCENARIO + "simulation: {time_limit_ms: 0.001}\n")
    assert mvopt([path]) == cmd.EXIT_UNFINISHED == 3
    cap = capsys.readouterr()
    assert "experiment tiny: timeout" in cap.out and "diagnostic" in cap.out and "unfinished flows" in cap.out
    assert "ended timeout" in cap.err


@pytest.mark.parametrize("text, match", [
    ("cluster: {topology: fat_tree, k: 5}\n", "cluster.k: must be an even integer"),
    ("cluster: [\n", "invalid YAML"),
    (SCENARIO.replace("dst: 9", "dst: 99"), "workload.tasks[1].dst"),
])
def test_bad_scenario_is_one_line_exit_1(tmp_path, capsys, text, match):
    assert mvopt([_write(tmp_path, "s.yaml", text)]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err and err.startswith("mvopt simulate: error:")


@pytest.mark.parametrize("argv", [[], ["x.yaml", "--hpcc-flows", "f.txt"], ["--hpcc-topology", "t.txt"]])
def test_usage_errors_exit_2(argv, capsys):
    assert mvopt(argv) == 2
    assert "error" in capsys.readouterr().err


def _hpcc_args(d, fct):
    return ["--hpcc-topology", str(d / "topology.txt"), "--hpcc-flows", str(d / "flow.txt"),
            "--hpcc-config", str(d / "config.txt"), "--fct-out", str(fct)]


def test_hpcc_example_end_to_end(tmp_path, capsys):
    fct = tmp_path / "fct.txt"
    assert mvopt(_hpcc_args(EXAMPLES / "hpcc", fct)) == 0
    cap = capsys.readouterr()
    lines = fct.read_text().splitlines()
    n_flows = int((EXAMPLES / "hpcc" / "flow.txt").read_text().split()[0])
    assert len(lines) == n_flows and f"wrote {n_flows} flow lines" in cap.out
    assert all(len(ln.split()) == 8 and len(ln.split()[0]) == 8 for ln in lines)
    assert lines[0].split()[:5] == ["0b000101", "0b000001", "10000", "100", "1000000"]
    assert "warning" not in cap.err


@pytest.mark.parametrize("bad_line, match", [("1 0 3 100 -1 2.0", "negative size"),
                                             ("1 42 3 100 10 2.0", "unknown node id 42"),
                                             ("1 0 3 100 10", "6 fields")])
def test_hpcc_bad_flows_leave_no_fct_file(tmp_path, capsys, bad_line, match):
    d = tmp_path / "in"
    shutil.copytree(EXAMPLES / "hpcc", d)
    (d / "flow.txt").write_text(f"2\n0 1 3 100 1000 2.0\n{bad_line}\n")
    fct = tmp_path / "fct.txt"
    assert mvopt(_hpcc_args(d, fct)) == 1
    err = capsys.readouterr().err
    assert f"{d / 'flow.txt'}:3: " in err and match in err
    assert not fct.exists()


def test_hpcc_bad_config_cc_mode(tmp_path, capsys):
    d = tmp_path / "in"
    shutil.copytree(EXAMPLES / "hpcc", d)
    (d / "config.txt").write_text("CC_MODE 7\n")
    assert mvopt(_hpcc_args(d, tmp_path / "fct.txt")) == 1
    assert f"{d / 'config.txt'}:1: CC_MODE 7 (TIMELY) is not supported" in capsys.readouterr().err
    assert not (tmp_path / "fct.txt").exists()


@pytest.mark.parametrize("name, shrink", [
    ("fat_tree_allreduce.yaml", {"collective": {"bytes": 256 * 1024, "chunk_bytes": 16 * 1024}}),
    ("incast_dependencies.yaml", {}),
])
def test_examples_at_toy_size(tmp_path, capsys, name, shrink):
    data = yaml.safe_load((EXAMPLES / name).read_text())
    for section, values in shrink.items():
        data[section].update(values)
    path = _write(tmp_path, name, yaml.safe_dump(data))
    assert mvopt([path, "--json"]) == 0
    e, = json.loads(capsys.readouterr().out)["experiments"]
    assert e["status"] == "done" and e["flows_completed"] == e["flows"] > 0


def test_race_cpu_needs_a_gpu(tmp_path, capsys):
    """--race-cpu: the CPU races a GPU; with the CPU backend there is nothing to race (one clear
    line, exit 1)."""
    assert mvopt([_write(tmp_path, "s.yaml", SCENARIO), "--race-cpu"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--race-cpu needs a GPU" in err


@pytest.mark.parametrize("extra, match", [
    (["--backend", "gpu", "--gpus", "abc"], "--gpus: expected comma-separated GPU indices, e.g. 0,1, got 'abc'"),
    (["--gpus", "0"], "--gpus needs --backend gpu or auto"),
])
def test_bad_gpu_lists_are_one_line_exit_1(tmp_path, capsys, extra, match):
    assert mvopt([_write(tmp_path, "s.yaml", SCENARIO), *extra]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and match in err


def test_foreign_or_empty_scenario_files_are_one_line_exit_1(tmp_path, capsys):
    binary = tmp_path / "bin.yaml"
    binary.write_bytes(b"\x7fELF" + bytes(range(200, 256)))
    empty = _write(tmp_path, "empty.yaml", "")
    for path, match in ((str(binary), "cannot be read (not UTF-8 text"), (empty, "the file is empty")):
        assert mvopt([path]) == 1
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and match in err, err
