"""Many experiments on several workers: spread by estimated cost, each worker runs its share.

Experiments are spread over the workers of a backend spec (:mod:`mvopt.engine.workers`) by
estimated cost (longest first onto the least-loaded worker); each runs its share
(:func:`mvopt.engine.split.run_share`); results come back in input order.
"""

from __future__ import annotations

import threading
from typing import Sequence

from mvopt.engine.params import Experiment
from mvopt.engine.progress import ProgressFn
from mvopt.engine.results import ExperimentResult
from mvopt.engine.sizing import experiment_cost
from mvopt.engine.split import run_share
from mvopt.engine.workers import Worker, parse_backend, races
from mvopt.errors import BackendUnavailable, MvoptError
from mvopt.procpool import drop_pool, get_pool

__all__ = ["balance", "run_experiments"]


def balance(costs: Sequence[float], n_workers: int) -> list[list[int]]:
    """Experiment indices per worker: largest cost first onto the least-loaded worker (ties: the
    lower worker), each worker's share in input order."""
    loads = [0.0] * n_workers
    share: list[list[int]] = [[] for _ in range(n_workers)]
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        w = min(range(n_workers), key=lambda k: (loads[k], k))
        share[w].append(i)
        loads[w] += costs[i]
    return [sorted(s) for s in share]


def _share_outcome(worker: Worker, exps: list, memory_bytes: int | None, capacities: str = "auto"):
    """run_share as (ok, value) for a worker thread or process: an exception comes back as a
    value (some of ours do not survive pickling with their arguments, so those travel as an
    MvoptError with their text)."""
    try:
        return True, run_share(worker, exps, memory_bytes, capacities=capacities)
    except BaseException as exc:
        import pickle
        try:
            pickle.loads(pickle.dumps(exc))
            return False, exc
        except Exception:
            return False, MvoptError(f"{type(exc).__name__}: {exc}")


def _share_outcome_packed(worker: Worker, exps: list, memory_bytes: int | None, capacities: str = "auto"):
    """_share_outcome in a worker process, its results sent back through shared memory
    (mvopt/shmtransfer.py: a training experiment's result holds every task's times)."""
    from mvopt.shmtransfer import pack
    return pack(_share_outcome(worker, exps, memory_bytes, capacities))


def run_experiments(experiments: Sequence[Experiment], backend: str = "cpu", memory_bytes: int | None = None,
                    report: dict | None = None, processes: bool | None = None,
                    progress: ProgressFn | None = None, capacities: str = "auto") -> list[ExperimentResult]:
    """Simulate `experiments` on the workers of `backend`; results in input order. `memory_bytes`
    caps one batch (default: a fraction of each GPU's free memory; no cap on the CPU). `report`,
    if given, receives per-worker figures (experiments, sub-batches, build / run / busy seconds).
    `progress` receives a BatchProgress now and then while a single worker runs (several
    workers report nothing until they end). `capacities`: packet-slot sizing (run_share).

    Several workers run at once: GPUs (by default) each in its own process, so that batch
    building and the host side of each GPU do not share one interpreter lock; CPU workers in
    threads of this process (the kernels release the lock), or in processes with `processes`."""
    exps = list(experiments)
    if not exps:
        return []
    workers = parse_backend(backend)
    race = races(backend)
    if not workers:
        raise BackendUnavailable(f"backend {backend!r} names no device")
    if race and len(workers) != 1:
        raise BackendUnavailable(f"backend {backend!r}: the CPU races one worker, this names {len(workers)}")
    if len(workers) == 1:
        results, stats = run_share(workers[0], exps, memory_bytes, progress, capacities, race_cpu=race)
        if report is not None:
            report[f"{workers[0]}#0"] = {**stats, "cost": 0.0}
        return results
    costs = [experiment_cost(e) for e in exps]
    shares = balance(costs, len(workers))
    use_processes = processes if processes is not None else workers[0].kind == "gpu"
    outcomes: list = [None] * len(workers)
    if use_processes:
        from concurrent.futures.process import BrokenProcessPool

        from mvopt.shmtransfer import sweep_stale, unpack_all
        sweep_stale()
        pool = get_pool("engine-workers", len(workers))
        try:
            futures = [pool.submit(_share_outcome_packed, workers[w], [exps[i] for i in shares[w]], memory_bytes,
                                   capacities) for w in range(len(workers))]
            outcomes = unpack_all(f.result() for f in futures)
        except BrokenProcessPool:
            drop_pool("engine-workers", len(workers))      # a worker process died: the next call starts fresh ones
            raise
    else:
        def work(w: int) -> None:
            outcomes[w] = _share_outcome(workers[w], [exps[i] for i in shares[w]], memory_bytes, capacities)
        threads = [threading.Thread(target=work, args=(w,), name=f"mvopt-worker-{w}") for w in range(len(workers))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    for ok, value in outcomes:
        if not ok:
            raise value
    results: list = [None] * len(exps)
    for w, (_, (share_results, stats)) in enumerate(outcomes):
        for i, r in zip(shares[w], share_results):
            results[i] = r
        if report is not None:
            report[f"{workers[w]}#{w}"] = {**stats, "cost": float(sum(costs[i] for i in shares[w]))}
    return results
