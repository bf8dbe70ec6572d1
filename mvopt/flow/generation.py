"""Many experiments on the host's cores: chunks of experiments, each built, run on one core and
read back by a worker before it takes the next.

A chunk is a few consecutive experiments (one, for experiments of a realistic size): its flow
batch is built (NumPy), run by the compiled loop on one core and turned into results, and its
arrays are dropped before the worker takes the next chunk, so the memory held is that of the
chunks in flight, not of the whole generation. A generation of at least PROCESS_MIN experiments
runs its chunks in worker processes (kept between calls, mvopt.procpool), which the chunks reach
and leave through shared memory (mvopt.shmtransfer): a chunk's NumPy building holds its process's
interpreter lock for part of the time, which would serialise threads on many cores. Fewer
experiments run on threads of this process (the compiled loop lets the other threads run), and
one thread runs them here. An experiment's result does not depend on its chunk (the batch's
rule), so it is the same whatever the workers.
"""

from __future__ import annotations

import os
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait
from typing import Sequence

from mvopt.engine.params import Experiment
from mvopt.engine.results import ExperimentResult
from mvopt.procpool import usable_cores

__all__ = ["simulate_on_cores", "chunks", "CHUNK_TASKS", "PROCESS_MIN"]

# experiments are grouped into chunks of about this many tasks: enough to amortise a batch's
# fixed costs over small experiments, while a large one is a chunk of its own
CHUNK_TASKS = 200_000
# from this many experiments on (and more than one worker), the chunks run in worker processes
PROCESS_MIN = 16


def workers(n_experiments: int, threads: int | None = None) -> int:
    """Workers for `n_experiments`: `threads`, else $OMP_NUM_THREADS, else every usable core."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    most = threads or (int(env) if env.isdigit() and int(env) > 0 else usable_cores())
    return max(1, min(most, n_experiments))


def chunks(sizes: Sequence[int], n_workers: int) -> list[range]:
    """Consecutive ranges of experiments (`sizes`: their task counts), each of at most
    CHUNK_TASKS tasks (or one experiment), and at most a quarter of a worker's share of the
    whole, so that every worker gets work."""
    total = sum(sizes)
    most = max(1, min(CHUNK_TASKS, total // max(1, 4 * n_workers)))
    out, lo, acc = [], 0, 0
    for i, n in enumerate(sizes):
        if i > lo and acc + n > most:
            out.append(range(lo, i))
            lo, acc = i, 0
        acc += n
    if lo < len(sizes):
        out.append(range(lo, len(sizes)))
    return out


def run_chunk(experiments: Sequence[Experiment]) -> list[ExperimentResult]:
    """The results of `experiments` as one batch on the calling thread's core."""
    from mvopt.flow.batch import build_flow_batch
    from mvopt.flow.compiled import run_batch_compiled
    from mvopt.flow.results import extract_results

    batch = build_flow_batch(experiments)
    return extract_results(batch, run_batch_compiled(batch, threads=1))


def _run_chunk_packed(packed):
    """:func:`run_chunk` in a worker process, from and to shared memory."""
    from mvopt.shmtransfer import pack, unpack
    return pack(run_chunk(unpack(packed)))


def simulate_on_cores(experiments: Sequence[Experiment], threads: int | None = None) -> list[ExperimentResult]:
    """Flow-level results of `experiments`, in order, on `threads` workers (default
    $OMP_NUM_THREADS, else every usable core), each running the compiled loop on one core.
    Raises ConfigError for an experiment the flow level cannot run, before any runs."""
    from mvopt.flow.batch import check_experiment
    from mvopt.flow.compiled import library

    for exp in experiments:
        check_experiment(exp)
    library()                 # (built or loaded once, before any worker)
    n = workers(len(experiments), threads)
    parts = [[experiments[i] for i in r] for r in chunks([int(e.tasks.n) for e in experiments], n)]
    if n == 1 or len(parts) == 1:
        done = [run_chunk(p) for p in parts]
    elif len(experiments) < PROCESS_MIN:
        with ThreadPoolExecutor(max_workers=min(n, len(parts)), thread_name_prefix="mvopt-flow") as pool:
            done = list(pool.map(run_chunk, parts))
    else:
        done = _in_processes(parts, n)
    return [r for rs in done for r in rs]


def _in_processes(parts: list[list[Experiment]], n: int) -> list[list[ExperimentResult]]:
    """run_chunk of every part in `n` worker processes, at most 2n parts in flight (packed in
    shared memory: a part is packed when a worker is about to need it)."""
    from concurrent.futures.process import BrokenProcessPool

    from mvopt.procpool import drop_pool, get_pool
    from mvopt.shmtransfer import pack, sweep_stale, unpack

    sweep_stale()
    pool = get_pool("flow", n)
    done: list = [None] * len(parts)
    flying: dict = {}             # future -> (part, its packed experiments)
    nxt = 0
    try:
        while nxt < len(parts) or flying:
            while nxt < len(parts) and len(flying) < 2 * n:
                packed = pack(parts[nxt])
                flying[pool.submit(_run_chunk_packed, packed)] = (nxt, packed)
                nxt += 1
            finished, _ = wait(flying, return_when=FIRST_COMPLETED)
            for fut in finished:
                done[flying.pop(fut)[0]] = unpack(fut.result())
    except BrokenProcessPool:
        drop_pool("flow", n)      # a worker died (killed, out of memory): the next call starts fresh ones
        raise
    finally:
        _drop(flying)
    return done


def _drop(flying: dict) -> None:
    """After an error: the shared-memory files of the parts still in flight, sent or returned."""
    from mvopt.shmtransfer import unpack

    for fut, (_, packed) in flying.items():
        if fut.cancel():
            if packed.path is not None and os.path.exists(packed.path):
                os.remove(packed.path)
            continue
        try:
            unpack(fut.result())  # (removes the returned file)
        except Exception:         # noqa: BLE001 - the error being raised is the one to report
            pass
