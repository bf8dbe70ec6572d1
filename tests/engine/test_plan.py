"""Memory planning, cost balancing and several workers: any split gives the results of one batch."""

from __future__ import annotations

import pytest

from mvopt.engine import build_batch, schema, simulate
from mvopt.engine.balance import balance, run_experiments
from mvopt.engine.sizing import batch_bytes, batch_counts, batch_route_counts, experiment_cost, experiment_counts
from mvopt.engine.split import run_share, split_by_memory
from mvopt.engine.workers import Worker, parse_backend
from mvopt.errors import BackendUnavailable, MvoptError
from mvopt.testing.backends import available_backends
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


def test_counts_and_bytes_are_exactly_what_the_batch_holds() -> None:
    """Exactly, with each topology's dense routing table and each distinct link class counted once
    (batch_route_counts); the planner's plain sum counts one per experiment and one class per
    port, an upper bound."""
    batch = build_batch(EXPS)
    counts = batch_route_counts(EXPS, [experiment_counts(e) for e in EXPS])
    summed = {k: sum(c[k] for c in counts) for k in schema.COUNTS}
    assert batch_counts(summed) == {k: v for k, v in batch.counts.items() if k in schema.COUNTS}
    assert 1 <= batch.counts["n_link"] < sum(experiment_counts(e)["n_link"] for e in EXPS) == batch.counts["n_port"]
    assert batch.counts["n_hop"] == batch.counts["n_flow"]    # HPCC in the mix: hop state for every flow
    assert batch.counts["n_fpath"] == batch.counts["n_flow"] and batch.counts["has_paths"] == 1
    no_hpcc = [e for e in EXPS if e.network.cc != "hpcc"]
    assert build_batch(no_hpcc).counts["n_hop"] == 1
    total = {k: sum(c[k] for c in counts) for k in counts[0]}
    assert batch_bytes(total) == batch.nbytes
    plain = {k: sum(experiment_counts(e)[k] for e in EXPS) for k in counts[0]}
    assert batch_bytes(plain) >= batch.nbytes


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


def test_balance_is_longest_first_and_deterministic() -> None:
    costs = [experiment_cost(e) for e in EXPS]
    shares = balance(costs, 3)
    assert sorted(i for s in shares for i in s) == list(range(len(EXPS)))
    loads = [sum(costs[i] for i in s) for s in shares]
    assert max(loads) - min(loads) <= max(costs)           # LPT: spread at most one job
    assert shares == balance(costs, 3)
    assert balance([5.0, 1.0, 1.0, 1.0, 1.0, 1.0], 2) == [[0], [1, 2, 3, 4, 5]]


def test_backend_specs() -> None:
    assert [str(w) for w in parse_backend("cpu")] == ["cpu"]
    assert len(parse_backend("cpu:3")) == 3
    with pytest.raises(BackendUnavailable, match="comma-separated integers"):
        parse_backend("cpu:x")
    with pytest.raises(BackendUnavailable, match="unknown backend"):
        parse_backend("tpu")
    if "gpu" not in available_backends():
        for spec in ("gpu", "gpu:0"):
            with pytest.raises(BackendUnavailable, match="no CUDA GPU found"):
                parse_backend(spec)


@pytest.mark.parametrize("spec,processes", [("cpu:3", False), ("cpu:2", True), ("gpu:0,0", None)])
def test_workers_and_sub_batches_give_the_results_of_one_batch(spec: str, processes) -> None:
    if spec.startswith("gpu") and "gpu" not in available_backends():
        pytest.skip("no GPU")
    one = simulate(EXPS, backend="cpu")
    assert [r.name for r in one] == [e.name for e in EXPS]
    stats: dict = {}
    many = run_experiments(EXPS, spec, processes=processes, report=stats)
    assert sorted(s["experiments"] for s in stats.values()) == sorted(len(s) for s in balance(
        [experiment_cost(e) for e in EXPS], len(stats)))
    small_stats: dict = {}
    small = run_experiments(EXPS, spec, processes=processes, report=small_stats,
                            memory_bytes=int(1.5 * max(batch_bytes(experiment_counts(e)) for e in EXPS)))
    # the timeline: every sub-batch, in order, its experiments adding up to the worker's share
    for s in small_stats.values():
        line = s["timeline"]
        assert len(line) == s["sub_batches"] >= 1 and sum(b["experiments"] for b in line) == s["experiments"]
        assert all(b["build_s"] >= 0 and b["run_s"] >= 0 for b in line)
        assert all(a["start_s"] + a["build_s"] + a["run_s"] <= b["start_s"] + 1e-6 for a, b in zip(line, line[1:]))
        assert abs(sum(b["run_s"] for b in line) - s["run_s"]) < 1e-6
    for a, b, c in zip(one, many, small):
        assert a.same_as(b) and a.same_as(c), a.name


def test_a_share_cut_into_sub_batches_reports_each_one_in_order() -> None:
    cap = int(1.5 * max(batch_bytes(experiment_counts(e)) for e in EXPS))
    _, stats = run_share(Worker("cpu", 0, 1), EXPS, memory_bytes=cap, capacities="full")
    line = stats["timeline"]
    assert len(line) == stats["sub_batches"] > 1 and sum(b["experiments"] for b in line) == len(EXPS)
    assert not any(b["compact"] for b in line)
    assert all(a["start_s"] + a["build_s"] + a["run_s"] <= b["start_s"] + 1e-6 for a, b in zip(line, line[1:]))
    assert abs(sum(b["build_s"] for b in line) - stats["build_s"]) < 1e-6


def test_worker_processes_send_their_results_through_shared_memory(monkeypatch) -> None:
    """Workers in processes (the GPUs' way) return their results through shared memory
    (mvopt/shmtransfer.py): the same results as one worker in this process."""
    import os

    from mvopt import shmtransfer
    from mvopt.procpool import drop_pool

    plain = simulate(EXPS, backend="cpu")
    monkeypatch.setenv("MVOPT_SHM_MIN_BYTES", "0")
    drop_pool("engine-workers", 2)          # fresh workers, which see the setting
    before = shmtransfer.RECEIVED["shared"]
    try:
        pooled = run_experiments(EXPS, "cpu:2", processes=True)
    finally:
        drop_pool("engine-workers", 2)
    assert all(a.same_as(b) for a, b in zip(plain, pooled))
    if os.path.isdir(shmtransfer.SHM_DIR):
        assert shmtransfer.RECEIVED["shared"] - before == 2


def test_a_worker_process_error_reaches_the_caller_with_its_message() -> None:
    with pytest.raises(MvoptError, match="alone needs"):
        run_experiments(EXPS, "cpu:2", processes=True, memory_bytes=1000)


def test_progress_reports_a_long_run_and_changes_nothing(backend, monkeypatch) -> None:
    """With a report after every launch (interval 0, short CPU chunks), a run cut into
    sub-batches reports counts that only grow, within the call's totals, and its results are
    those of a run without reports."""
    from mvopt.engine import _cpu, progress

    monkeypatch.setattr(progress, "PROGRESS_INTERVAL_S", 0.0)
    monkeypatch.setattr(_cpu, "PROGRESS_CHUNK", 50)
    memory = int(1.5 * max(batch_bytes(experiment_counts(e)) for e in EXPS))
    plain = simulate(EXPS, backend=backend, memory_bytes=memory, capacities="full")
    seen: list = []
    reported = simulate(EXPS, backend=backend, memory_bytes=memory, progress=seen.append, capacities="full")
    assert all(a.same_as(b) for a, b in zip(plain, reported))
    assert len({p.sub_batch for p in seen}) > 1 and all(p.sub_batches > 1 for p in seen)
    assert all(p.total == len(EXPS) and 0 <= p.done <= p.total and p.windows >= 0 for p in seen)
    keys = [(p.sub_batch, p.done, p.windows) for p in seen]
    assert keys == sorted(keys) and [p.elapsed_s for p in seen] == sorted(p.elapsed_s for p in seen)


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


def test_only_cpu_may_race_and_it_races_one_worker() -> None:
    with pytest.raises(MvoptError, match=r"only '\+cpu'.*not 'gpu'"):
        simulate(EXPS, backend="cpu+gpu")
    with pytest.raises(MvoptError, match="races one worker"):
        simulate(EXPS, backend="cpu:2+cpu")


def test_auto_races_one_gpu_with_the_cpu(monkeypatch) -> None:
    """``auto`` on a machine with one GPU: that GPU, raced by the CPU's cores; with two GPUs, both,
    not raced (the CPU races one worker); ``gpu`` alone never races; without a GPU, the CPU."""
    from mvopt.engine import _gpu, workers
    from mvopt.engine.workers import describe_backend, races

    monkeypatch.setattr(_gpu, "gpu_count", lambda: 1)
    monkeypatch.setattr(_gpu, "gpu_available", lambda: True)
    monkeypatch.setattr(workers, "usable_cores", lambda: 4)
    monkeypatch.setattr(workers, "_cpu_compiles", lambda: True)
    assert races("auto") and races("auto:0") and races("gpu:0+cpu")
    monkeypatch.setenv("MVOPT_AUTO_RACE", "0")                        # the opt-out
    assert not races("auto") and races("gpu:0+cpu")
    monkeypatch.delenv("MVOPT_AUTO_RACE")
    monkeypatch.setattr(workers, "_cpu_compiles", lambda: False)        # no C++ compiler: nothing to race with
    assert not races("auto")
    monkeypatch.setattr(workers, "_cpu_compiles", lambda: True)
    monkeypatch.setattr(workers, "usable_cores", lambda: 1)             # no spare core
    assert not races("auto")
    monkeypatch.setattr(workers, "usable_cores", lambda: 4)
    assert not races("gpu") and not races("gpu:0") and not races("cpu")
    assert describe_backend("auto") == "auto -> gpu (1 GPU: 0), raced by the CPU's cores on its slowest experiments"
    monkeypatch.setattr(_gpu, "gpu_count", lambda: 2)
    assert not races("auto") and describe_backend("auto") == "auto -> gpu (2 GPUs: 0,1)"
    monkeypatch.setattr(_gpu, "gpu_count", lambda: 0)
    monkeypatch.setattr(_gpu, "gpu_available", lambda: False)
    assert not races("auto") and describe_backend("auto") == "auto -> cpu"


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


def test_experiment_threads_keeps_small_experiments_on_one_thread() -> None:
    """Work per experiment runs in threads only for large experiments (on average), where NumPy
    releases the interpreter lock for most of it; small ones stay on one thread."""
    from types import SimpleNamespace

    from mvopt.engine.threads import experiment_threads, EXPERIMENT_THREADS_MIN_TASKS, THREAD_MAP_LIMIT

    def exps(*tasks: int) -> list:
        return [SimpleNamespace(tasks=SimpleNamespace(n=t)) for t in tasks]

    assert experiment_threads([]) == 1
    assert experiment_threads(exps(480, 480)) == 1
    assert experiment_threads(exps(EXPERIMENT_THREADS_MIN_TASKS)) == THREAD_MAP_LIMIT
    assert experiment_threads(exps(2 * EXPERIMENT_THREADS_MIN_TASKS, 10)) == THREAD_MAP_LIMIT
    assert experiment_threads(exps(EXPERIMENT_THREADS_MIN_TASKS - 1, 10)) == 1
