"""Worker-process pools kept for the life of the process.

Successive calls (an optimizer's generations) should not pay interpreter start-up, imports,
kernel loading and GPU context creation again, so a pool, once started, is kept (per purpose and
size) until the process exits. Processes are spawned, never forked: a forked child of a process
that holds a CUDA context or OpenMP threads is not safe.
"""

from __future__ import annotations

import atexit
import multiprocessing as mp
import os
import signal
from concurrent.futures import ProcessPoolExecutor

__all__ = ["get_pool", "drop_pool", "usable_cores"]


def usable_cores() -> int:
    """Cores this process may run on (its CPU affinity where the OS says, else every core): what
    every pool and thread count is sized by (`taskset` or a container's cpuset may allow fewer
    than the machine has; a CPU quota such as `docker --cpus` is not an affinity and is not seen)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


_POOLS: dict[tuple[str, int], ProcessPoolExecutor] = {}


def get_pool(purpose: str, n: int) -> ProcessPoolExecutor:
    """The pool of `n` spawned worker processes for `purpose` (started on first use)."""
    key = (purpose, n)
    if key not in _POOLS:
        if not _POOLS:
            atexit.register(_close_all)
        _POOLS[key] = ProcessPoolExecutor(max_workers=n, mp_context=mp.get_context("spawn"),
                                          initializer=_quiet_on_interrupt)
    return _POOLS[key]


def _quiet_on_interrupt() -> None:
    # A terminal's Ctrl-C reaches the whole process group: the parent reports the interrupt and
    # re-queues the generation's trials; a worker just ends, without a traceback of its own. A
    # worker of a parent that ignores SIGINT (started in the background by a script) inherits
    # that and keeps ignoring it, as the parent does.
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        return
    signal.signal(signal.SIGINT, lambda *_: os._exit(128 + signal.SIGINT))


def drop_pool(purpose: str, n: int) -> None:
    """Forget a pool whose processes died (BrokenProcessPool): the next call starts fresh ones."""
    pool = _POOLS.pop((purpose, n), None)
    if pool is not None:
        pool.shutdown(wait=False, cancel_futures=True)


def _close_all() -> None:
    while _POOLS:
        _POOLS.popitem()[1].shutdown(wait=True)
