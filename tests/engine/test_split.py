"""One worker's share: sub-batches that fit its memory, in order, with the results of one batch."""

from __future__ import annotations

import dataclasses

import pytest

from mvopt.engine import simulate
from mvopt.engine.backends import get_backend
from mvopt.engine.sizing import batch_bytes, experiment_counts
from mvopt.engine._gpu import launch_parts
from mvopt.engine.backend_defaults import GPU
from mvopt.engine.split import run_share, split_by_launch, split_by_memory
from mvopt.engine.workers import Worker
from mvopt.errors import MvoptError
from mvopt.testing.scenarios import mixed_experiments

EXPS = mixed_experiments(9)


def test_split_by_memory_keeps_order_and_the_limit() -> None:
    counts = [experiment_counts(e) for e in EXPS]
    one = max(batch_bytes(c) for c in counts)
    limit = int(1.2 * one)
    groups = split_by_memory(counts, limit)
    assert [i for g in groups for i in g] == list(range(len(EXPS)))
    for g in groups:
        assert batch_bytes({k: sum(counts[i][k] for i in g) for k in counts[0]}) <= limit
    assert len(groups) > 1
    assert split_by_memory(counts, None) == [list(range(len(EXPS)))]
    first_too_big = next(i for i, c in enumerate(counts) if batch_bytes(c) > one // 2)
    with pytest.raises(MvoptError, match=f"e{first_too_big} alone needs .* GiB, more than the"):
        split_by_memory(counts, one // 2, [e.name for e in EXPS])


def test_auto_runs_small_experiments_apart_from_the_lockstep_ones() -> None:
    """Under 'auto' the experiments that fit a groups block run as a sub-batch of their own, before
    the large ones, each part in the given order; a fixed launch mode keeps one part."""
    d = dataclasses.replace(GPU, auto_groups_nodes_max=128, group_threads_max=512)
    nodes = [36, 208, 128, 644, 84, 129]
    assert launch_parts(nodes, "auto", d) == [[0, 2, 4], [1, 3, 5]]
    assert launch_parts(nodes, "graph", d) == launch_parts(nodes, "groups", d) == [list(range(6))]
    assert launch_parts([300, 600], "auto", dataclasses.replace(d, auto_groups_nodes_max=1024)) == [[0], [1]]
    assert launch_parts([300], "auto", d) == [[0]] and launch_parts([], "auto", d) == []
    # within memory sub-batches: each cut by launch part, order kept
    assert split_by_launch([[0, 1, 2], [3, 4, 5]], nodes, lambda n: launch_parts(n, "auto", d)) == \
        [[0, 2], [1], [4], [3, 5]]


def test_a_share_cut_into_sub_batches_reports_each_one_in_order() -> None:
    cap = int(1.5 * max(batch_bytes(experiment_counts(e)) for e in EXPS))
    _, stats = run_share(Worker("cpu", 0, 1), EXPS, memory_bytes=cap, capacities="full")
    line = stats["timeline"]
    assert len(line) == stats["sub_batches"] > 1 and sum(b["experiments"] for b in line) == len(EXPS)
    assert not any(b["compact"] for b in line)
    assert all(a["start_s"] + a["build_s"] + a["run_s"] <= b["start_s"] + 1e-6 for a, b in zip(line, line[1:]))
    assert abs(sum(b["build_s"] for b in line) - stats["build_s"]) < 1e-6


def test_progress_reports_a_long_run_and_changes_nothing(backend, monkeypatch) -> None:
    """With a report after every launch (interval 0, short CPU chunks), a run cut into
    sub-batches reports counts that only grow, within the call's totals, and its results are
    those of a run without reports."""
    from mvopt.engine import backend_defaults, progress

    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(backend_defaults, "CPU", backend_defaults.CpuDefaults(progress_windows=10))
    if backend == "gpu":   # short launches, so that reports come while experiments run (the GPU's
        # backend is made once per process: its row is changed on the object)
        gpu = get_backend("gpu")
        monkeypatch.setattr(gpu, "defaults", dataclasses.replace(gpu.defaults, chunk_windows=2))
    memory = int(1.5 * max(batch_bytes(experiment_counts(e)) for e in EXPS))
    plain = simulate(EXPS, backend=backend, memory_bytes=memory, capacities="full")
    seen: list = []
    reported = simulate(EXPS, backend=backend, memory_bytes=memory, progress=seen.append, capacities="full")
    assert all(a.same_as(b) for a, b in zip(plain, reported))
    assert len({p.sub_batch for p in seen}) > 1 and all(p.sub_batches > 1 for p in seen)
    assert all(p.total == len(EXPS) and 0 <= p.done <= p.total and p.windows >= 0 for p in seen)
    keys = [(p.sub_batch, p.done, p.windows) for p in seen]
    assert keys == sorted(keys) and [p.elapsed_s for p in seen] == sorted(p.elapsed_s for p in seen)
    # the slowest running experiment's clock only moves forward within a sub-batch, and never past
    # the last end of the call
    last_end = max(r.end_ps for r in plain)
    for sub in {p.sub_batch for p in seen}:
        clocks = [p.simulated_ps for p in seen if p.sub_batch == sub and p.simulated_ps > 0]
        assert clocks == sorted(clocks) and all(0 < c <= last_end for c in clocks)
    assert any(p.simulated_ps > 0 for p in seen)


@pytest.mark.gpu
def test_a_share_split_by_launch_mode_gives_the_cpu_results(monkeypatch) -> None:
    """The GPU under 'auto' with a bound that cuts the share in two: a groups sub-batch, then a
    graph one; the results are the CPU's."""
    from mvopt.engine._gpu import gpu_available
    if not gpu_available():
        pytest.skip("needs a GPU")
    nodes = sorted(experiment_counts(e)["n_node"] for e in EXPS)
    gpu = get_backend("gpu")
    monkeypatch.setattr(gpu, "launch", "auto")
    monkeypatch.setattr(gpu, "defaults", dataclasses.replace(gpu.defaults, launch="auto",
                                                             auto_groups_nodes_max=nodes[len(nodes) // 2]))
    assert len(gpu.launch_parts(nodes)) == 2
    report: dict = {}
    got = simulate(EXPS, backend="gpu", capacities="full", report=report)
    want = simulate(EXPS, backend="cpu", capacities="full")
    assert all(a.same_as(b) for a, b in zip(got, want))
    assert next(iter(report.values()))["sub_batches"] == 2
