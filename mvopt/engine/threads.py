"""Work per experiment on the host, in threads: NumPy releases the interpreter lock for most of it."""

from __future__ import annotations

from typing import Sequence

from mvopt.engine.params import Experiment
from mvopt.procpool import usable_cores

__all__ = ["thread_map", "experiment_threads", "EXPERIMENT_THREADS_MIN_TASKS", "THREAD_MAP_LIMIT"]

# Work per experiment goes to threads only where experiments are large: a small one's batch part
# or result is mostly Python, which holds the interpreter lock, and threads then cost more than
# they give (docs/decisions/0051-engine-host-layers.md).
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
