"""Many experiments on the host's cores: each chunk of experiments built, run and read back on its
own thread.

A chunk is a few consecutive experiments (one, for experiments of a realistic size): its flow
batch is built (NumPy), run by the compiled loop on one core (a ctypes call, which lets the other
threads run) and turned into results, and its arrays are dropped before the thread takes the
next chunk. So the cores run the loop of some chunks while others are being built, and the
memory held is that of the chunks in flight, not of the whole generation. An experiment's
result does not depend on its chunk (the batch's rule), so it is the same whatever the number
of threads.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Sequence

from mvopt.engine.params import Experiment
from mvopt.engine.results import ExperimentResult
from mvopt.procpool import usable_cores

__all__ = ["simulate_on_cores", "chunks", "CHUNK_TASKS"]

# experiments are grouped into chunks of about this many tasks: enough to amortise a batch's
# fixed costs over small experiments, while a large one is a chunk of its own
CHUNK_TASKS = 200_000


def _threads(n_chunks: int, threads: int | None) -> int:
    env = os.environ.get("OMP_NUM_THREADS", "")
    most = threads or (int(env) if env.isdigit() and int(env) > 0 else usable_cores())
    return max(1, min(most, n_chunks))


def chunks(sizes: Sequence[int], threads: int) -> list[range]:
    """Consecutive ranges of experiments (`sizes`: their task counts), each of at most
    CHUNK_TASKS tasks (or one experiment), and at most a quarter of a thread's share of the whole,
    so that every thread gets work."""
    total = sum(sizes)
    most = max(1, min(CHUNK_TASKS, total // max(1, 4 * threads)))
    out, lo, acc = [], 0, 0
    for i, n in enumerate(sizes):
        if i > lo and acc + n > most:
            out.append(range(lo, i))
            lo, acc = i, 0
        acc += n
    if lo < len(sizes):
        out.append(range(lo, len(sizes)))
    return out


def simulate_on_cores(experiments: Sequence[Experiment], threads: int | None = None) -> list[ExperimentResult]:
    """Flow-level results of `experiments`, in order, on `threads` threads (default
    $OMP_NUM_THREADS, else every usable core), each running the compiled loop on one core.
    Raises ConfigError for an experiment the flow level cannot run, before any runs."""
    from mvopt.flow.batch import build_flow_batch, check_experiment
    from mvopt.flow.compiled import library, run_batch_compiled
    from mvopt.flow.results import extract_results

    for exp in experiments:
        check_experiment(exp)
    library()                 # (built or loaded once, before the threads)
    sizes = [int(e.tasks.n) for e in experiments]
    n = _threads(len(experiments), threads)
    parts = chunks(sizes, n)

    def run(part: range) -> list[ExperimentResult]:
        batch = build_flow_batch([experiments[i] for i in part])
        return extract_results(batch, run_batch_compiled(batch, threads=1))

    if n == 1 or len(parts) == 1:
        done = [run(p) for p in parts]
    else:
        with ThreadPoolExecutor(max_workers=min(n, len(parts)), thread_name_prefix="mvopt-flow") as pool:
            done = list(pool.map(run, parts))
    return [r for rs in done for r in rs]
