"""One worker's share of experiments: sub-batches that fit its memory, run one after another.

Each worker cuts its share into sub-batches whose bytes (exact counts, :mod:`mvopt.engine.sizing`,
computed before anything is built) fit its memory and whose rows fit int32 indices, with compact
packet slots first where that pays (:mod:`mvopt.engine.capacity`), and runs them one after
another, raced by the CPU's cores when asked (:mod:`mvopt.engine.race`). Experiments are
independent and their results do not depend on the batch they share, so any split gives the same
results.
"""

from __future__ import annotations

import logging
from typing import Sequence

from mvopt.engine.backends import get_backend
from mvopt.engine.batch import build_batch, extract_results
from mvopt.engine.capacity import CAPACITY_MODES
from mvopt.engine.params import Experiment
from mvopt.engine.progress import ProgressFn, ProgressReporter
from mvopt.engine.race import CpuRacer
from mvopt.engine.reruns import EarlyReruns
from mvopt.engine.sizing import INT32_LIMIT, batch_bytes, experiment_counts, slot_counts
from mvopt.engine.threads import experiment_threads, thread_map
from mvopt.engine.workers import Worker
from mvopt.errors import MvoptError
from mvopt.procpool import usable_cores

__all__ = ["split_by_memory", "split_by_launch", "compact_first", "run_share"]

_log = logging.getLogger("mvopt.engine")


def _add(a: dict[str, int], b: dict[str, int]) -> dict[str, int]:
    return {k: a.get(k, 0) + b[k] for k in b}


def split_by_memory(counts: Sequence[dict[str, int]], memory_bytes: int | None,
                    names: Sequence[str] | None = None) -> list[list[int]]:
    """Cut experiments (given by their counts, in order) into consecutive sub-batches whose bytes
    stay within `memory_bytes` (None: no limit) and whose row counts fit int32 indices."""
    groups: list[list[int]] = []
    cur: list[int] = []
    acc: dict[str, int] = {}
    for i, c in enumerate(counts):
        alone = batch_bytes(c)
        if memory_bytes is not None and alone > memory_bytes:
            name = names[i] if names else f"experiment {i}"
            raise MvoptError(f"{name} alone needs {alone / 2**30:.2f} GiB, more than the "
                             f"{memory_bytes / 2**30:.2f} GiB available to one batch on this worker")
        nxt = _add(acc, c)
        over = (memory_bytes is not None and batch_bytes(nxt) > memory_bytes) or max(nxt.values()) > INT32_LIMIT
        if cur and over:
            groups.append(cur)
            cur, nxt = [], dict(c)
        cur.append(i)
        acc = nxt
    if cur:
        groups.append(cur)
    return groups


def split_by_launch(groups: list[list[int]], nodes: Sequence[int], parts) -> list[list[int]]:
    """Each sub-batch cut further into the backend's launch parts (`parts(node_counts)`, e.g.
    GpuBackend.launch_parts: the experiments that run at their own pace first, then those that run
    in lockstep), keeping the experiments' order within a part."""
    out: list[list[int]] = []
    for g in groups:
        out.extend([g[j] for j in part] for part in parts([nodes[k] for k in g]))
    return out


def _backend_for(worker: Worker):
    return get_backend(worker.kind, device=worker.device, threads=worker.threads)


def compact_first(capacities: str, worker: Worker, batches_at_full: int) -> bool:
    """Whether a worker's share starts with compact packet slots (`capacities` as in run_share;
    `batches_at_full`: the sub-batches it would need with full ones)."""
    if capacities == "auto":
        return worker.kind == "cpu" or batches_at_full > 1
    return capacities == "compact"


def run_share(worker: Worker, exps: Sequence[Experiment], memory_bytes: int | None = None,
              progress: ProgressFn | None = None, capacities: str = "auto",
              race_cpu: bool = False, race_threads: int | None = None) -> tuple[list, dict]:
    """One worker's job: cut its experiments into sub-batches that fit its memory, build and run
    them one after another. Returns the results (in the given order) and the worker's figures.
    `progress` receives a BatchProgress every PROGRESS_INTERVAL_S seconds of a run.

    `capacities` (:mod:`mvopt.engine.capacity`): ``full`` packet slots for every experiment;
    ``compact`` ones first, and the experiments that run out of them again with full ones (a
    sub-batch of their own; the results are those of a full run); ``auto`` = compact on the CPU
    (a smaller working set and fewer fresh pages to fault in: faster even counting the reruns,
    docs/engine.md "Packet slots") and on a GPU when the experiments at full capacities do not
    fit one batch, else full.

    `race_cpu`: the CPU's cores (`race_threads`, default all but one) run the same experiments
    meanwhile, heaviest serial load first, and whichever finishes one first provides its result
    (:mod:`mvopt.engine.race`; identical either way)."""
    import time
    if capacities not in CAPACITY_MODES:
        raise MvoptError(f"capacities {capacities!r}: expected one of {', '.join(CAPACITY_MODES)}")
    t_call = time.perf_counter()
    be = _backend_for(worker)
    cap = memory_bytes if memory_bytes is not None else be.batch_memory_limit()
    names = [e.name for e in exps]
    full_counts = thread_map(experiment_counts, exps, experiment_threads(exps))
    groups = split_by_memory(full_counts, cap, names)
    compact = compact_first(capacities, worker, len(groups))
    compact_counts = [{**c, **slot_counts(e, True)} for c, e in zip(full_counts, exps)] if compact else None
    if compact:
        groups = split_by_memory(compact_counts, cap, names)
    nodes = [c["n_node"] for c in full_counts]
    groups = split_by_launch(groups, nodes, be.launch_parts)
    reporter = ProgressReporter(progress, len(exps), len(groups)) if progress is not None else None
    results: list = [None] * len(exps)
    t0 = time.perf_counter()
    # timeline: each sub-batch's size, slots, start (s after the call began), build and run seconds
    # plan_s: the backend, the memory planning and the counts, before the first sub-batch;
    # compile_s: the kernels (GPU: compiled or loaded on the backend's first batch);
    # extract_s: reading the results out of the batches
    stats = {"build_s": 0.0, "compile_s": 0.0, "run_s": 0.0, "extract_s": 0.0, "sub_batches": 0, "rerun_full": 0,
             "timeline": [], "plan_s": t0 - t_call}
    # started when the first sub-batch is built, just before it runs: the racer's threads build
    # their experiments' batches in Python, and while the worker builds its own they would only
    # compete with it for the interpreter lock (the race matters while the worker simulates)
    racer = CpuRacer(exps, race_threads, counts=full_counts) if race_cpu else None
    # on the CPU an experiment out of compact slots runs again at once, not after its sub-batch
    # (mvopt/engine/reruns.py); threads of one core each, half the worker's cores
    early = None
    if compact and racer is None and worker.kind == "cpu" and len(exps) > 1:
        early = EarlyReruns(exps, threads=max(1, (worker.threads or usable_cores()) // 2))

    def run_groups(todo: list[list[int]], small: bool, done_before: int) -> None:
        for g in todo:
            if racer is not None:          # what the CPU already finished is not built again
                done_before += sum(1 for k in g if k in racer.results)
                g = [k for k in g if k not in racer.results]
                if not g:
                    continue
            t = t_start = time.perf_counter()
            sized = compact_counts if small else full_counts     # the planner's counts: not computed again
            batch = build_batch([exps[k] for k in g], compact=small, exp_counts=[sized[k] for k in g])
            built = time.perf_counter() - t
            stats["build_s"] += built
            t = time.perf_counter()
            be.prepare(batch)         # the kernels, compiled on first use: not run time
            stats["compile_s"] += time.perf_counter() - t
            t = time.perf_counter()
            if reporter is not None:
                reporter.start_sub_batch(stats["sub_batches"], done_before)
            steer = {"steer": racer.steer_for(g)} if racer is not None else {}
            if early is not None and small:
                steer = {"steer": early.steer_for(g)}
            if racer is not None and not racer.started:
                racer.start()
            iters = be.run(batch, progress=reporter, **steer)
            ran = time.perf_counter() - t
            stats["run_s"] += ran
            stats["sub_batches"] += 1
            stats["timeline"].append({"experiments": len(g), "compact": small, "start_s": t_start - t0,
                                      "build_s": built, "run_s": ran})
            t = time.perf_counter()
            extracted = extract_results(batch, iters)
            stats["extract_s"] += time.perf_counter() - t
            for k, r in zip(g, extracted):
                results[k] = r if r.status != "cancelled" else None   # the CPU's, below
            done_before += len(g)
            del batch

    def rerun_full(again: list[int]) -> None:
        if not again:
            return
        _log.info("%d of %d experiments ran out of their compact packet slots; they run again with full ones: %s",
                  len(again), len(exps), "; ".join(f"{names[k]}: {results[k].diagnostic}" for k in again[:5]))
        retry = [[again[j] for j in g] for g in split_by_memory([full_counts[k] for k in again], cap,
                                                                [names[k] for k in again])]
        retry = split_by_launch(retry, nodes, be.launch_parts)
        if reporter is not None:
            reporter.sub_batches += len(retry)
        stats["rerun_full"] = len(again)
        run_groups(retry, False, len(exps) - len(again))

    try:
        run_groups(groups, compact, 0)
        started_early: set[int] = set()
        if early is not None:
            early.close_intake()           # what its threads have not started runs below, on every core
            started_early = set(early.handed)
        again = [k for k, r in enumerate(results)
                 if r is not None and r.status == "capacity" and not (racer is not None and k in racer.results)
                 and k not in started_early]
        rerun_full(again)
        if early is not None:
            for k, r in early.join().items():
                results[k] = r
            stats["rerun_early"] = len(started_early)
    except BaseException:
        if early is not None:
            early.close_intake()
        if racer is not None:
            err = racer.finish(timeout_s=60)      # no racer left running behind a retried call
            if err is not None:
                _log.warning("the CPU racer failed too: %s: %s", type(err).__name__, err)
        raise
    racer_error = None
    if racer is not None:
        racer_error = racer.finish()
        for k in range(len(exps)):
            if results[k] is None or results[k].status in ("cancelled", "capacity"):
                results[k] = racer.take(k)
        stats.update(racer.stats)
    missing = [names[k] for k, r in enumerate(results) if r is None]
    if missing:
        if racer_error is not None:
            raise racer_error
        raise MvoptError(f"no result for {len(missing)} experiments ({', '.join(missing[:5])}): a bug")
    if racer_error is not None:      # the worker has every result: the racer's failure costs nothing
        _log.warning("the CPU racer failed (the results are the worker's): %s: %s",
                     type(racer_error).__name__, racer_error)
    return results, {"experiments": len(exps), "compact": compact, **stats, "busy_s": time.perf_counter() - t0}
