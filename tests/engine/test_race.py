"""The CPU's cores racing a worker: steering, who wins, and the results of a plain run either way."""

from __future__ import annotations

import pytest

from mvopt.engine import simulate
from mvopt.engine.sizing import batch_bytes, experiment_counts
from mvopt.engine.split import run_share
from mvopt.engine.workers import Worker
from mvopt.testing.scenarios import mixed_experiments

EXPS = mixed_experiments(9)


@pytest.fixture(autouse=True)
def _no_racer_threads_left():
    """A racer does not wait for a thread still getting its engine (race.CpuRacer.finish): such a
    thread stops once it has it. Each test here waits for them, so that none outlives its test."""
    yield
    import threading
    for t in threading.enumerate():
        if t.name.startswith("mvopt-cpu-racer"):
            t.join(60)


def test_steer_cancels_running_experiments_between_launches(backend) -> None:
    """A backend's steer cancels the experiments it names (status 'cancelled'); the others run on
    and give the results of a run without steering."""
    from mvopt.engine import build_batch, get_backend
    from mvopt.engine.batch import extract_results

    plain = simulate(EXPS, backend=backend, capacities="full")
    batch = build_batch(EXPS)
    calls: list = []

    def steer(status):
        calls.append(status.copy())
        return [1] if len(calls) == 1 else []

    iters = get_backend(backend).run(batch, steer=steer)
    res = extract_results(batch, iters)
    assert calls and res[1].status == "cancelled"
    assert all(a.same_as(b) for k, (a, b) in enumerate(zip(res, plain)) if k != 1)


def test_race_gives_the_results_of_a_plain_run(backend) -> None:
    """``gpu+cpu`` (and ``cpu+cpu``, a one-thread CPU worker): raced by the CPU racer; whoever wins
    each experiment, the results are those of a plain run, and none is lost or cancelled."""
    plain = simulate(EXPS, backend="cpu", capacities="full")
    worker = Worker("cpu", 0, 1) if backend == "cpu" else Worker("gpu", 0)
    raced, stats = run_share(worker, EXPS, race_cpu=True, race_threads=1)
    assert all(a.same_as(b) for a, b in zip(raced, plain))
    # who wins (and whether the racer finished anything at all) depends on timing: only the
    # bookkeeping is checked here; test_cpu_race_wins_where_the_worker_is_slow forces the racer to win
    assert 0 <= stats["cpu_won"] <= stats["cpu_runs"] and stats["cpu_abandoned"] >= 0
    spec = "cpu+cpu" if backend == "cpu" else "gpu:0+cpu"
    assert all(a.same_as(b) for a, b in zip(simulate(EXPS, backend=spec), plain))


def test_cpu_race_wins_where_the_worker_is_slow(monkeypatch) -> None:
    """When the worker cannot finish first (here it waits until the racer has every result, then
    its steer cancels them all), every result comes from the CPU racer: the plain run's."""
    import time

    from mvopt.engine import get_backend

    plain = simulate(EXPS, backend="cpu", capacities="full")
    worker_backend = get_backend("cpu", threads=1)
    real_run = worker_backend.run

    def slow_run(batch, **kw):
        status = batch.cols["exp_status"]
        t = time.perf_counter()
        while time.perf_counter() - t < 120:
            cancel = list(kw["steer"](status.copy()))
            if len(cancel) == status.size:
                status[cancel] = 6
                break
            time.sleep(0.01)
        return real_run(batch, **kw)

    monkeypatch.setattr(worker_backend, "run", slow_run)
    raced, stats = run_share(Worker("cpu", 0, 1), EXPS, race_cpu=True, race_threads=1)
    assert stats["cpu_won"] == len(EXPS)
    assert all(a.same_as(b) for a, b in zip(raced, plain))
    assert 0 < stats["cpu_ready_s"] and 0 < stats["cpu_busy_s"]    # the racer's thread got ready and ran


def test_racer_starts_once_the_workers_batch_is_built(monkeypatch) -> None:
    """The racer's threads would compete with the worker's batch building for the interpreter
    lock: none of them runs while the worker builds its first sub-batch."""
    import threading

    from mvopt.engine import split

    seen, at_run = [], []
    real_build, real_backend = split.build_batch, split._backend_for

    def racers() -> list[str]:
        return sorted(t.name for t in threading.enumerate() if t.name.startswith("mvopt-cpu-racer"))

    def build(*a, **kw):
        seen.append(racers())
        return real_build(*a, **kw)

    def backend_for(worker):                 # the worker's backend, noting the racers when it runs
        be = real_backend(worker)

        class Noting:
            def __getattr__(self, name):
                return getattr(be, name)

            def run(self, *a, **kw):
                at_run.append(racers())
                return be.run(*a, **kw)
        return Noting()

    plain = simulate(EXPS, backend="cpu", capacities="full")
    monkeypatch.setattr(split, "build_batch", build)
    monkeypatch.setattr(split, "_backend_for", backend_for)
    raced, stats = run_share(Worker("cpu", 0, 1), EXPS, race_cpu=True, race_threads=2)
    assert seen and seen[0] == []                                   # none while the worker builds
    assert at_run and at_run[0] == ["mvopt-cpu-racer-0", "mvopt-cpu-racer-1"]   # both when it runs
    assert all(a.same_as(b) for a, b in zip(raced, plain))


def test_racer_keeps_racing_an_experiment_that_ran_out_of_compact_slots_elsewhere() -> None:
    """The worker's compact run of an experiment ran out (status capacity): it runs there again
    with full slots, so the CPU must not drop it from the race; a finished or cancelled one it
    drops or keeps as before."""
    import numpy as np

    from mvopt.engine.race import CpuRacer

    racer = CpuRacer(EXPS[:4], threads=4)
    steer = racer.steer_for([0, 1, 2, 3])
    assert steer(np.array([5, 1, 6, 0], np.int32)) == []
    assert racer.ended_elsewhere == {1}
    jobs = [racer._next() for _ in range(4)]
    assert sorted(i for i, _ in jobs[:3]) == [0, 2, 3] and all(compact for _, compact in jobs[:3])
    assert jobs[3] is None


def test_race_with_compact_slots_running_out_gives_the_full_results() -> None:
    """The heaviest experiment runs out of compact slots on the worker and on the racer: either
    runs it again with full slots, and the result is the full run's."""
    from mvopt.testing.scenarios import fat_tree_incast

    exps = [fat_tree_incast(), *EXPS[:3]]
    plain = simulate(exps, backend="cpu", capacities="full")
    raced, stats = run_share(Worker("cpu", 0, 1), exps, capacities="compact", race_cpu=True, race_threads=1)
    assert all(a.same_as(b) for a, b in zip(raced, plain))
    assert stats["compact"] and [r.status for r in raced].count("capacity") == 0


def test_racer_leaves_experiments_too_large_for_host_memory_to_the_worker() -> None:
    """An experiment whose batch needs more than the racer's memory budget per thread is never
    taken by the CPU (the worker alone runs it); the others are, heaviest serial load first."""
    from mvopt.engine.race import CpuRacer, host_memory_available

    sizes = [batch_bytes(experiment_counts(e, compact=True)) for e in EXPS[:4]]
    budget = sorted(sizes)[1]                 # the two smallest fit (ties: maybe more)
    racer = CpuRacer(EXPS[:4], threads=1, memory_bytes=budget)
    jobs = [racer._next() for _ in range(5)]
    fit = [i for i, b in enumerate(sizes) if b <= budget]
    assert jobs[-1] is None and sorted(job[0] for job in jobs if job is not None) == fit and len(fit) < 4
    assert racer.stats["cpu_left_to_worker"] == 4 - len(fit)
    assert 0 < host_memory_available()
    # one that runs out of compact slots here is taken again with full ones only if those fit
    full = [batch_bytes(experiment_counts(e)) for e in EXPS[:4]]
    assert racer._full_fits == {i for i in fit if full[i] <= budget} and all(f >= c for f, c in zip(full, sizes))


def test_racer_gives_few_experiments_several_cores_each(monkeypatch) -> None:
    """A share of fewer experiments than the racer's cores: one thread per experiment, the cores
    divided among them (one experiment alone gets them all), with the plain run's results."""
    import threading

    from mvopt.engine import _cpu
    from mvopt.engine.race import CpuRacer

    assert CpuRacer(EXPS[:1], threads=4).n_workers == 1 and len(CpuRacer(EXPS[:1], threads=4).workers) == 1
    assert CpuRacer(EXPS[:2], threads=5).n_workers == 2 and CpuRacer(EXPS[:8], threads=4).n_workers == 4
    plain = simulate(EXPS[:1], backend="cpu", capacities="full")
    built: list = []               # (thread, threads) of every CPU backend made meanwhile
    real_init = _cpu.CpuBackend.__init__
    monkeypatch.setattr(_cpu.CpuBackend, "__init__", lambda self, *a, **kw: (
        built.append((threading.current_thread(), kw.get("threads"))), real_init(self, *a, **kw))[1])
    racer = CpuRacer(EXPS[:1], threads=2).start()      # no worker: the racer runs it to the end
    racer.workers[0].join(120)
    assert [n for t, n in built if t is racer.workers[0]] == [2] and racer.take(0).same_as(plain[0])


def test_racer_does_not_wait_for_a_thread_still_building_its_engine(monkeypatch) -> None:
    """On a cold start a racer thread compiles the CPU engine (about a minute): stopping the
    racer does not wait for it, since it holds no result; it stops once it has its engine."""
    import threading
    import time

    from mvopt.engine import _cpu
    from mvopt.engine.race import CpuRacer

    release = threading.Event()
    real_init = _cpu.CpuBackend.__init__

    def slow_init(self, *a, **kw):
        release.wait(30)            # "compiling" until released
        real_init(self, *a, **kw)

    monkeypatch.setattr(_cpu.CpuBackend, "__init__", slow_init)
    racer = CpuRacer(EXPS[:2], threads=1).start()
    try:
        t = time.perf_counter()
        assert racer.finish() is None and time.perf_counter() - t < 5
    finally:
        release.set()
    racer.workers[0].join(30)
    assert not racer.workers[0].is_alive() and racer.stats["cpu_runs"] == 0
