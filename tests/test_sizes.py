"""Sizes are refused before they are built: what, how much, the limit and how to raise it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from mvopt.config import load_config
from mvopt.engine.tasks import TaskGraphBuilder
from mvopt.errors import ConfigError, InfeasibleError
from mvopt.sizes import LIMIT_ENV, check_size, memory_limit_bytes

ROOT = Path(__file__).resolve().parents[1]


def _run_limited(args: list[str], address_space_gib: float) -> subprocess.CompletedProcess:
    """`python -m mvopt ARGS` with its address space capped: a structure allocated before the
    check would fail with MemoryError instead of the message."""
    code = ("import resource, runpy, sys; "
            f"lim = int({address_space_gib} * 2**30); resource.setrlimit(resource.RLIMIT_AS, (lim, lim)); "
            f"sys.argv = ['mvopt'] + {args!r}; runpy.run_module('mvopt', run_name='__main__')")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop(LIMIT_ENV, None)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)


@pytest.mark.parametrize("k", ["2000", "1000000"])
def test_a_huge_fat_tree_is_refused_before_it_is_built(k: str) -> None:
    out = _run_limited(["topo", "fat_tree", "--k", k], address_space_gib=3)
    assert out.returncode == 1, out.stderr
    assert f"cluster.k = {k} (fat_tree): its hosts" in out.stderr
    assert "over the limit of 8 GiB" in out.stderr and LIMIT_ENV in out.stderr
    assert "MemoryError" not in out.stderr and "Traceback" not in out.stderr


def test_a_task_graph_over_the_limit_is_refused_before_its_columns(monkeypatch) -> None:
    monkeypatch.setenv(LIMIT_ENV, str(48 * 1000 / 2**30))      # room for 1,000 tasks
    g = TaskGraphBuilder()
    n = 600
    g.flows(np.zeros(n, np.int64), np.ones(n, np.int64), np.full(n, 10, np.int64), np.zeros(n, np.int64),
            np.zeros(0, np.int64))
    with pytest.raises(InfeasibleError, match=r"workload: its task graph's tasks \(1,200\).*MVOPT_MEMORY_LIMIT_GIB"):
        g.flows(np.zeros(n, np.int64), np.ones(n, np.int64), np.full(n, 10, np.int64), np.zeros(n, np.int64),
                np.zeros(0, np.int64))
    assert len(g) == n     # nothing of the refused bulk was added


def test_the_limit_is_read_from_the_environment(monkeypatch) -> None:
    monkeypatch.delenv(LIMIT_ENV, raising=False)
    assert memory_limit_bytes() == 8 * 2**30
    monkeypatch.setenv(LIMIT_ENV, "0.5")
    assert memory_limit_bytes() == 2**29
    check_size("things", 2**21, 256, "here")          # exactly the limit: allowed
    with pytest.raises(InfeasibleError, match="here: things"):
        check_size("things", 2**21 + 1, 256, "here")
    for bad in ("-1", "0", "lots", "inf"):
        monkeypatch.setenv(LIMIT_ENV, bad)
        with pytest.raises(ConfigError, match=LIMIT_ENV):
            memory_limit_bytes()


@pytest.mark.parametrize("value", [1e12, 1.5e9, 0.0, -3.0])
def test_a_time_limit_the_clocks_cannot_hold_is_a_configuration_error(value: float) -> None:
    with pytest.raises(ConfigError, match=r"simulation.time_limit_ms.*at most 1e\+09 ms"):
        load_config({"simulation": {"time_limit_ms": value}})
    assert load_config({"simulation": {"time_limit_ms": 1e9}}).simulation.time_limit_ms == 1e9


@pytest.mark.parametrize("collective", [
    {"op": "all_reduce", "bytes": 10**15, "chunk_bytes": 65536},                        # chunks
    {"op": "all_reduce", "bytes": 10**15, "algorithm": "tree", "chunk_bytes": 65536},   # a tree's chunks
])
def test_a_collective_too_large_is_refused_before_its_flows_are_built(collective) -> None:
    from mvopt.build import build

    data = {"cluster": {"topology": "fat_tree", "k": 4}, "workload": {"kind": "collective"},
            "collective": collective}
    with pytest.raises(InfeasibleError, match=r"collective \(.*\): its flows \(.*over the limit of 8 GiB"):
        build(load_config(data))


def test_a_ring_over_a_k64_fat_tree_is_refused_under_a_memory_cap(tmp_path) -> None:
    """65,536 ranks in one ring: 8.6 billion flows, refused from the configuration alone."""
    f = tmp_path / "k64.yaml"
    f.write_text("cluster: {topology: fat_tree, k: 64}\nworkload: {kind: collective}\n")
    out = _run_limited(["simulate", str(f)], address_space_gib=3)
    assert out.returncode == 1, out.stderr
    assert "its flows (8,589,803,520)" in out.stderr and "Traceback" not in out.stderr
