"""Running many experiments on one or several workers: memory planning and cost balancing.

A *backend spec* names where experiments run: ``cpu``, ``gpu`` (every visible GPU), ``gpu:0,1``
(those devices), ``auto`` (the GPUs when CuPy sees one, else the CPU; one GPU is raced by the
CPU's cores, below) or ``cpu:N`` (N CPU workers sharing the cores; for testing the splitting);
``gpu:0+cpu`` (or ``gpu+cpu`` on a one-GPU machine) runs on that GPU while the CPU's cores race
it on its slowest experiments (:mod:`mvopt.engine.race`; ``cpu+cpu`` does the same with a
one-thread CPU worker, for testing).
Experiments are spread over the workers by
estimated cost (longest first onto the least-loaded worker); each worker cuts its share into
sub-batches that fit its memory (exact byte counts, computed before anything is built) and runs
them one after another; results come back in input order. Experiments are independent and
their results do not depend on the batch they share, so any split gives the same results.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mvopt.engine import routes, schema
from mvopt.engine.batch import build_batch, dependency_ends, extract_results, monitor_rows, scratch_nbytes
from mvopt.engine.capacity import CAPACITY_MODES, node_pool_slots, pools_compact, port_ring_capacities
from mvopt.engine.params import Experiment
from mvopt.engine.progress import ProgressFn, ProgressReporter
from mvopt.engine.race import CpuRacer
from mvopt.engine.results import ExperimentResult
from mvopt.engine.tasks import FLOW
from mvopt.errors import BackendUnavailable, MvoptError
from mvopt.procpool import drop_pool, get_pool, usable_cores

__all__ = ["Worker", "parse_backend", "races", "usable_cores", "thread_map", "describe_backend", "experiment_counts", "slot_counts", "batch_bytes", "split_by_memory",
           "balance", "run_share", "run_experiments", "INT32_LIMIT"]

INT32_LIMIT = 2**31 - 1            # kernels index slots, tasks, heaps ... with int32
GPU_MEMORY_FRACTION = 0.85         # of the free device memory a batch may take (the rest: CuPy, NVRTC, fragments)
_log = logging.getLogger("mvopt.engine")


@dataclass(frozen=True)
class Worker:
    """One place experiments run: the CPU (with `threads` cores) or one GPU."""

    kind: str                 # "cpu" or "gpu"
    device: int = 0
    threads: int | None = None

    def __str__(self) -> str:
        return f"gpu:{self.device}" if self.kind == "gpu" else "cpu"


def split_race(spec: str) -> tuple[str, bool]:
    """(the spec without it, whether it ends in ``+cpu``): the CPU's cores race the one worker
    of the spec on its slowest experiments (:mod:`mvopt.engine.race`)."""
    base, plus, helper = spec.partition("+")
    if plus and helper != "cpu":
        raise BackendUnavailable(f"backend {spec!r}: only '+cpu' may follow a backend (the CPU's cores "
                                 f"racing it on its slowest experiments), not {helper!r}")
    return base, bool(plus)


def races(spec: str) -> bool:
    """Whether the CPU's cores race the spec's worker: asked for (``+cpu``), or ``auto`` on a
    machine with one GPU, a spare core and a C++ compiler (measured: a generation of 1,000
    topology-space trials simulated in 58 s instead of 109 s, docs/performance.md), unless
    $MVOPT_AUTO_RACE=0. ``gpu`` alone never races."""
    import os
    base, explicit = split_race(spec)
    if explicit:
        return True
    if base.partition(":")[0] != "auto" or os.environ.get("MVOPT_AUTO_RACE", "1") == "0":
        return False
    workers = parse_backend(base)
    return len(workers) == 1 and workers[0].kind == "gpu" and usable_cores() >= 2 and _cpu_compiles()


# Work per experiment goes to threads only where experiments are large: a small one's batch part
# or result is mostly Python, which holds the interpreter lock, and threads then cost more than
# they give. Measured on 2 cores (build_batch of N copies, medians of 3): workload (a), 480
# tasks, 256 copies 0.30 s in one thread against 0.44 in two; 1,984 tasks 0.16 against 0.24;
# 8,064 tasks 0.074 against 0.103; 32,512 tasks (a 128-GPU ring) 3.04 against 2.26;
# extract_results of 512 copies of (a) 0.038 against 0.064 s.
EXPERIMENT_THREADS_MIN_TASKS = 16_384
THREAD_MAP_LIMIT = 16            # threads at most (and the usable cores)


def experiment_threads(experiments: Sequence[Experiment]) -> int:
    """thread_map's `limit` for work per experiment of these experiments (one thread for small ones)."""
    if not experiments:
        return 1
    tasks = sum(int(e.tasks.n) for e in experiments) / len(experiments)
    return THREAD_MAP_LIMIT if tasks >= EXPERIMENT_THREADS_MIN_TASKS else 1


def thread_map(fn, items: Sequence, limit: int = THREAD_MAP_LIMIT) -> list:
    """`[fn(x) for x in items]`, in up to `limit` threads (and the usable cores): for NumPy-heavy
    work per experiment, which releases the interpreter lock for most of its time (see
    experiment_threads for the limit). The first error propagates."""
    threads = max(1, min(len(items), usable_cores(), limit))
    if threads == 1:
        return [fn(x) for x in items]
    from concurrent.futures import ThreadPoolExecutor
    with ThreadPoolExecutor(threads, thread_name_prefix="mvopt-engine-host") as pool:
        return list(pool.map(fn, items))


def _cpu_compiles() -> bool:
    """Whether the CPU backend can be built here (it needs a C++ compiler)."""
    from mvopt.engine._cpu import _compiler
    try:
        _compiler()
    except BackendUnavailable:
        return False
    return True


def parse_backend(spec: str) -> list[Worker]:
    """The workers a backend spec names (see the module docstring)."""
    from mvopt.engine import resolve_backend
    spec, race = split_race(spec)
    name, _, arg = spec.partition(":")
    kind = resolve_backend(name)
    if kind == "gpu":
        from mvopt.engine._gpu import gpu_count
        n = gpu_count()
        if n == 0:
            raise BackendUnavailable(f"backend {spec!r}: no CUDA GPU found (the GPU backend needs CuPy "
                                     "and an NVIDIA GPU; use --backend cpu or auto)")
        devices = _int_list(spec, arg) if arg else list(range(n))
        bad = [d for d in devices if not 0 <= d < n]
        if bad:
            raise BackendUnavailable(f"backend {spec!r}: no GPU {bad[0]} (this machine has {n}: 0..{n - 1})")
        if race and len(devices) != 1:
            raise BackendUnavailable(f"backend {spec}+cpu: the CPU races one GPU, this names {len(devices)} "
                                     "(e.g. gpu:0+cpu)")
        return [Worker("gpu", d) for d in devices]
    if not arg:
        return [Worker("cpu", 0, 1 if race else None)]
    (n,) = _int_list(spec, arg)
    if n < 1:
        raise BackendUnavailable(f"backend {spec!r}: the number of CPU workers must be >= 1")
    return [Worker("cpu", 0, max(1, usable_cores() // n)) for _ in range(n)]


def _int_list(spec: str, arg: str) -> list[int]:
    try:
        return [int(x) for x in arg.split(",")]
    except ValueError:
        raise BackendUnavailable(f"backend {spec!r}: expected comma-separated integers after ':', got {arg!r}") from None


def experiment_counts(exp: Experiment, compact: bool = False) -> dict[str, int]:
    """The rows `exp` adds to a batch, per count of :mod:`schema` (exactly what build_batch adds,
    with the same `compact`; n_int is the INT slots it needs: its packet slots if it uses HPCC,
    else 0; n_monq / n_monw the rows of its monitor tables, 0 when its monitors are off; n_link
    its ports, the most link classes it can bring, of which the batch keeps the distinct ones)."""
    topo, g = exp.topology, exp.tasks
    nn = int(topo.n_node)
    npt = int(np.asarray(topo.node_port_offset)[-1])
    owner, _, local = dependency_ends(g)
    remote = ~local
    n_flow = int((g.kind == FLOW).sum())
    return {"n_exp": 1, "n_node": nn, "n_port": npt, "n_task": int(g.n), "n_flow": n_flow, "n_pred": int(remote.sum()),
            "n_succ": int(g.pred.size), "n_route": int(np.asarray(topo.sw_route_offset)[-1]),
            "n_nh": int(np.asarray(topo.nhset_offset)[-1]), **route_table_counts(topo, True), **slot_counts(exp, compact),
            "n_hop": n_flow if exp.network.cc == "hpcc" else 0,
            "n_fpath": n_flow if n_flow and routes.wants_paths(topo, n_flow) else 0,
            "n_heap": 2 * int(g.n) + nn, "n_list": int(np.unique(owner[remote]).size),
            "n_monq": monitor_rows(exp)[0], "n_monw": monitor_rows(exp)[1],
            "n_link": npt}     # (at most: the batch holds each distinct link class once)


def route_table_counts(topo, owner: bool) -> dict[str, int]:
    """The rows of the dense routing tables (engine/routes.py) of an experiment of `topo`: its
    topology's table if it brings it to the batch (`owner`; experiment_counts counts it so, an
    upper bound), none if another experiment of the same topology does."""
    if not owner or not routes.has_table(topo):
        return {"n_rtab": 0, "n_rtnh": 0}
    return {"n_rtab": int(topo.n_switch) * int(topo.n_host), "n_rtnh": int(topo.nhset_port.size)}


def batch_route_counts(experiments: Sequence[Experiment], counts: list[dict[str, int]],
                       owners: list[int | None] | None = None) -> list[dict[str, int]]:
    """`counts` (experiment_counts of `experiments`) as the experiments hold rows in one batch:
    the dense routing table of a topology counted once, for the first experiment of it
    (`owners`: routes.table_owners of their topologies, computed if not given), and so is each
    distinct link class (n_link)."""
    from mvopt.engine.batch import link_rows

    if owners is None:
        owners = routes.table_owners([e.topology for e in experiments])
    seen: set[bytes] = set()
    new_links = []
    classes: dict[tuple[int, int], set[bytes]] = {}    # (a generation repeats the same objects)
    for e in experiments:
        key = (id(e.topology), id(e.params))
        if key not in classes:
            rows = link_rows(np.asarray(e.topology.port_rate_bps, np.int64),
                             np.asarray(e.topology.port_delay_ps, np.int64), e.params)
            classes[key] = {r.tobytes() for r in np.unique(rows, axis=0)}
        keys = classes[key] - seen
        seen |= keys
        new_links.append(len(keys))
    return [{**c, **route_table_counts(e.topology, owners[i] == i), "n_link": new_links[i]}
            for i, (c, e) in enumerate(zip(counts, experiments))]


def slot_counts(exp: Experiment, compact: bool = False) -> dict[str, int]:
    """The packet-slot part of experiment_counts (n_slot, n_int), the only part `compact`
    changes: counts of one sizing become the other's with `{**counts, **slot_counts(exp, c)}`."""
    topo, p = exp.topology, exp.params
    n_slot = (int(port_ring_capacities(topo, p, compact).sum())
              + int(node_pool_slots(topo, p, compact and pools_compact(exp)).sum()))
    return {"n_slot": n_slot, "n_int": n_slot * schema.MAX_INT_HOPS if exp.network.cc == "hpcc" else 0}


def batch_counts(summed: dict[str, int]) -> dict[str, int]:
    """The counts of the batch of experiments whose experiment_counts were summed (what
    build_batch will report): a batch with any HPCC experiment holds HPCC's hop state for every
    flow, one with any experiment that wants its flows' paths (routes.wants_paths) holds them
    for every flow, and tables nobody uses still get one row."""
    out = dict(summed, n_hop=int(summed["n_flow"]) if summed.get("n_hop", 0) > 0 else 0,
               n_fpath=int(summed["n_flow"]) if summed.get("n_fpath", 0) > 0 else 0)
    for k in schema.MIN_ONE_COUNTS:
        out[k] = max(1, int(out[k]))
    return out


def batch_bytes(counts: dict[str, int]) -> int:
    """Bytes of a batch with these (summed) counts: every column plus the scratch packet slots."""
    counts = batch_counts(counts)
    return scratch_nbytes(counts) + sum(int(counts[col.length]) * col.mult * schema.numpy_dtype(col).itemsize
                                        for col in schema.COLUMNS if not col.doc.startswith("scratch"))


def experiment_cost(exp: Experiment) -> float:
    """Estimated simulation work: packets x path length (in windows) over all flows, plus the
    nodes (an idle window still visits every node)."""
    p = exp.params
    flows = exp.tasks.kind == FLOW
    hops = np.maximum(1.0, p.flow_base_rtt_ps[flows] / (2.0 * p.window_ps))
    return float((p.flow_npkt[flows] * hops).sum()) + float(exp.topology.n_node)


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


def describe_backend(spec: str) -> str:
    """What a backend spec resolves to on this machine, for the user ('auto' says its choice)."""
    workers = parse_backend(spec)
    if workers[0].kind == "gpu":
        what = f"gpu ({len(workers)} GPU{'s' if len(workers) > 1 else ''}: {','.join(str(w.device) for w in workers)})"
    else:
        what = "cpu" if len(workers) == 1 else f"cpu ({len(workers)} workers)"
    if races(spec):
        what += ", raced by the CPU's cores on its slowest experiments"
    return f"{spec} -> {what}" if spec.partition(":")[0].partition("+")[0] == "auto" else what


def _backend_for(worker: Worker):
    from mvopt.engine import get_backend
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
    reporter = ProgressReporter(progress, len(exps), len(groups)) if progress is not None else None
    results: list = [None] * len(exps)
    t0 = time.perf_counter()
    # timeline: each sub-batch's size, slots, start (s after the call began), build and run seconds
    # plan_s: the backend, the memory planning and the counts, before the first sub-batch;
    # extract_s: reading the results out of the batches
    stats = {"build_s": 0.0, "run_s": 0.0, "extract_s": 0.0, "sub_batches": 0, "rerun_full": 0, "timeline": [],
             "plan_s": t0 - t_call}
    # started when the first sub-batch is built, just before it runs: the racer's threads build
    # their experiments' batches in Python, and while the worker builds its own they would only
    # compete with it for the interpreter lock (the race matters while the worker simulates)
    racer = CpuRacer(exps, race_threads, counts=full_counts) if race_cpu else None

    def run_groups(todo: list[list[int]], small: bool, done_before: int) -> None:
        for g in todo:
            if racer is not None:          # what the CPU already finished is not built again
                done_before += sum(1 for k in g if k in racer.results)
                g = [k for k in g if k not in racer.results]
                if not g:
                    continue
            t = time.perf_counter()
            sized = compact_counts if small else full_counts     # the planner's counts: not computed again
            batch = build_batch([exps[k] for k in g], compact=small, exp_counts=[sized[k] for k in g])
            built = time.perf_counter() - t
            stats["build_s"] += built
            t = time.perf_counter()
            if reporter is not None:
                reporter.start_sub_batch(stats["sub_batches"], done_before)
            steer = {"steer": racer.steer_for(g)} if racer is not None else {}
            if racer is not None and not racer.started:
                racer.start()
            iters = be.run(batch, progress=reporter, **steer)
            ran = time.perf_counter() - t
            stats["run_s"] += ran
            stats["sub_batches"] += 1
            stats["timeline"].append({"experiments": len(g), "compact": small, "start_s": t - built - t0,
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
        if reporter is not None:
            reporter.sub_batches += len(retry)
        stats["rerun_full"] = len(again)
        run_groups(retry, False, len(exps) - len(again))

    try:
        run_groups(groups, compact, 0)
        again = [k for k, r in enumerate(results)
                 if r is not None and r.status == "capacity" and not (racer is not None and k in racer.results)]
        rerun_full(again)
    except BaseException:
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
