"""Many experiments on the host's cores: chunks on threads give each experiment the result it gets
alone, in input order, whatever the number of threads."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.errors import ConfigError
from mvopt.flow import simulate
from mvopt.flow.batch import build_flow_batch
from mvopt.flow.compiled import run_batch_compiled
from mvopt.flow.generation import CHUNK_TASKS, chunks, simulate_on_cores
from mvopt.flow.results import extract_results
from mvopt.testing import scenarios as sc
from tests.flow.test_compiled import random_traffic

FIELDS = ("status", "makespan_ps", "end_ps", "windows")
ARRAYS = ("task_start_ps", "task_finish_ps", "flow_fct_ps", "port_tx_bytes")


def assert_same(a, b) -> None:
    assert a.name == b.name
    for k in FIELDS:
        assert getattr(a, k) == getattr(b, k), k
    for k in ARRAYS:
        assert np.array_equal(getattr(a, k), getattr(b, k)), k


def experiments():
    return sc.mixed_experiments(5) + [random_traffic(s, lb) for s in (1, 2) for lb in ("ecmp", "spray")]


def test_chunks_cover_every_experiment_in_order():
    sizes = [10, 10, CHUNK_TASKS, 5, 5, 5, 3 * CHUNK_TASKS, 1]
    for threads in (1, 2, 16):
        parts = chunks(sizes, threads)
        assert [i for p in parts for i in p] == list(range(len(sizes)))
        assert all(len(p) == 1 or sum(sizes[i] for i in p) <= CHUNK_TASKS for p in parts)
    assert len(chunks([100] * 64, 16)) == 64     # small experiments: still one each per thread's quarter
    assert chunks([], 4) == []


@pytest.mark.parametrize("threads", [1, 3])
def test_threads_give_each_experiment_its_result_alone(threads):
    exps = experiments()
    got = simulate_on_cores(exps, threads=threads)
    for e, r in zip(exps, got, strict=True):
        batch = build_flow_batch([e])
        assert_same(extract_results(batch, run_batch_compiled(batch, threads=1))[0], r)


def test_simulate_on_the_cpu_spreads_over_threads():
    exps = experiments()
    for a, b in zip(simulate(exps, backend="cpu", threads=2), simulate(exps, backend="cpu", threads=1), strict=True):
        assert_same(a, b)


def test_an_experiment_the_flow_level_cannot_run_is_refused_before_any_runs():
    import dataclasses
    exps = experiments()
    bad = dataclasses.replace(exps[1], queue_monitor_ps=1000)
    with pytest.raises(ConfigError, match="queue_monitor"):
        simulate_on_cores([exps[0], bad], threads=2)


def test_worker_processes_give_each_experiment_its_result_alone(monkeypatch):
    import mvopt.flow.generation as gen
    from mvopt.shmtransfer import RECEIVED
    monkeypatch.setattr(gen, "PROCESS_MIN", 2)
    exps = experiments()
    before = sum(RECEIVED.values())
    in_workers = gen.simulate_on_cores(exps, threads=2)
    assert sum(RECEIVED.values()) - before == len(chunks([e.tasks.n for e in exps], 2))   # every chunk came back
    for a, b in zip(in_workers, gen.simulate_on_cores(exps, threads=1), strict=True):
        assert_same(a, b)
