"""The CPU's cores racing a GPU batch on its slowest experiments (backend spec ``gpu+cpu``).

On a GPU one thread runs one node, so an experiment lasts at least as long as its busiest node's
events take one after another. A wide switch that forwards hundreds of packets per window (the
128-port spines of a rail-optimised cluster) makes such an experiment many times slower on the
GPU than on one CPU core (docs/decisions/0009-cpu-racing-the-gpu.md), and a GPU batch ends with
its slowest experiment. Meanwhile the CPU's cores are idle.

So, while the GPU runs its share as usual, a :class:`CpuRacer` runs the same experiments on the
CPU, heaviest serial load first (:func:`serial_cost`), one per core at a time. Whichever backend
finishes an experiment first provides its result; the other cancels it at its next check
(``steer``: between the GPU's launches, every few hundred windows on the CPU). Both backends give
identical results for every experiment (tested), so the outcome never depends on who won; only
the wall time does. No calibration is needed: the race decides.

Known limit: the CPU backend's thread count is one setting per process, so with ``cpu+cpu``
(tests) the worker and the racer's threads share it (results do not depend on thread counts).
The racer's threads all run with the same count.
Building an experiment's batch is Python, so the racer's threads take turns there; the
simulation itself runs without the interpreter lock.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Sequence

import numpy as np

from mvopt.engine._cpu import CpuBackend
from mvopt.engine.batch import ST_CANCELLED, ST_CAPACITY, ST_RUN, build_batch, extract_results
from mvopt.engine.params import Experiment
from mvopt.engine.results import ExperimentResult
from mvopt.engine.sizing import batch_bytes, experiment_cost, experiment_counts, slot_counts
from mvopt.procpool import usable_cores

__all__ = ["serial_cost", "CpuRacer", "backend_lock", "host_memory_available"]


def serial_cost(exp: Experiment) -> float:
    """Estimated events of the experiment's busiest switch, the GPU's serial part: its packet-hops
    (planner estimate) times the widest switch's share of all switch ports."""
    topo = exp.topology
    nh = int(topo.n_host)
    ports = np.diff(np.asarray(topo.node_port_offset, np.int64))[nh:]
    share = float(ports.max()) / float(ports.sum()) if ports.size and ports.sum() else 1.0
    return experiment_cost(exp) * share


def host_memory_available() -> int:
    """Bytes of host memory available now (Linux: MemAvailable; elsewhere the free pages)."""
    import os
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    except (ValueError, OSError, AttributeError):
        return 1 << 62      # unknown: no limit


_BACKEND_LOCK = threading.Lock()


def backend_lock() -> threading.Lock:
    """The lock under which threads make their own CPU backends, one at a time (a cold cache is
    compiled once, not once per thread)."""
    return _BACKEND_LOCK
_log = logging.getLogger("mvopt.engine")


class _Stop(Exception):
    """Raised inside the CPU's run to abandon it: the GPU has finished."""


class CpuRacer:
    """Runs experiments of a share on the CPU while the share's own backend runs them too: racer
    threads (`threads` cores in all, default all but one), each taking the next experiment,
    heaviest serial load first, as soon as it is free. A share of fewer experiments than cores
    gets fewer threads with several cores each (one experiment alone: all of them, since one
    large experiment with few busy nodes can run faster on a machine's cores than on its GPU).
    `results` holds the ones the CPU finished first.

    Each experiment runs with compact packet slots (host memory: a rail-optimised experiment per
    core at full slots would take several times as much); one that runs out is taken again later with full
    ones. An experiment whose batch would need more than `memory_bytes` (default: half the host
    memory available when the racer's first thread looks, after the worker built its own batch,
    shared by the threads) is left to the share's own backend: the CPU must not run the host out
    of memory racing a very large experiment."""

    def __init__(self, exps: Sequence[Experiment], threads: int | None = None,
                 memory_bytes: int | None = None, counts: Sequence[dict[str, int]] | None = None) -> None:
        """`counts`: the experiments' sizing.experiment_counts (full slots), when the caller has
        them (run_share does): not computed again."""
        self.exps = list(exps)
        # one core is left to the thread that drives the GPU
        self.threads = threads or max(1, usable_cores() - 1)
        self.n_workers = max(1, min(self.threads, len(self.exps)))
        self.memory_bytes = memory_bytes
        self.counts = list(counts) if counts is not None else None
        self.order: list[int] | None = None              # planned at the first _next
        self.lock = threading.Lock()
        self._plan_lock = threading.Lock()
        self.results: dict[int, ExperimentResult] = {}   # index in the share -> the CPU's result
        self.ended_elsewhere: set[int] = set()           # ended on the share's own backend
        self.taken: set[int] = set()
        self.full_slots: list[int] = []                   # ran out of compact slots here: again, full
        self._full_fits: set[int] = set()                 # ... if their full-slot batch fits the budget
        self.stop = threading.Event()
        self.errors: list[BaseException] = []
        # cpu_ready_s: seconds from start() until the last thread that got its backend before
        # finish() got it (a cold start compiles the CPU engine); cpu_busy_s: the threads'
        # simulation seconds, summed
        self.stats = {"cpu_won": 0, "cpu_runs": 0, "cpu_abandoned": 0, "cpu_ready_s": 0.0, "cpu_busy_s": 0.0,
                      "cpu_left_to_worker": 0}
        self._t0 = 0.0
        self._ready: set[str] = set()                     # threads that have their backend
        # the cores divided among the threads, the remainder one each to the first ones
        cores = [self.threads // self.n_workers + (k < self.threads % self.n_workers) for k in range(self.n_workers)]
        self.workers = [threading.Thread(target=self._work, args=(cores[k],), name=f"mvopt-cpu-racer-{k}", daemon=True)
                        for k in range(self.n_workers)]

    def _plan(self) -> None:
        """The experiments the CPU may take, heaviest serial load first (those within the memory
        budget), planned once by the first thread that asks. Not under `lock`: the worker's
        steer takes it at every poll, and sizing a generation's experiments takes seconds."""
        with self._plan_lock:
            if self.order is not None:
                return
            budget = self.memory_bytes
            if budget is None:
                budget = host_memory_available() // (2 * self.n_workers)

            def sizes(i: int) -> tuple[int, int]:   # bytes with compact and with full slots
                e = self.exps[i]
                full = self.counts[i] if self.counts is not None else experiment_counts(e)
                return batch_bytes({**full, **slot_counts(e, True)}), batch_bytes(full)

            both = [sizes(i) for i in range(len(self.exps))]
            fits = [i for i in range(len(self.exps)) if both[i][0] <= budget]
            # an experiment that runs out of compact slots here is taken again with full ones
            # only if those fit too
            self._full_fits = {i for i in fits if both[i][1] <= budget}
            order = sorted(fits, key=lambda i: (-serial_cost(self.exps[i]), i))
            with self.lock:
                self.stats["cpu_left_to_worker"] = len(self.exps) - len(fits)
                self.order = order

    @property
    def started(self) -> bool:
        return self._t0 > 0.0

    def start(self) -> "CpuRacer":
        self._t0 = time.perf_counter()
        for t in self.workers:
            t.start()
        return self

    def finish(self, timeout_s: float | None = None) -> BaseException | None:
        """Stop the CPU (what its threads run is abandoned), wait for them, and return the first
        error, if any (the caller decides whether it matters: not when the other backend has
        every result). A thread still getting its backend (a cold start compiles the CPU engine,
        ~a minute) is not waited for: it holds no result, and it stops once the engine is built
        (the compiled engine is cached for the next run)."""
        self.stop.set()
        for t in self.workers:
            with self.lock:
                ready = t.name in self._ready
            if t.ident is not None and ready:   # never started, or not ready: nothing to wait for
                t.join(timeout_s)
        return self.errors[0] if self.errors else None

    def _next(self) -> tuple[int, bool] | None:
        """The next experiment to run and whether it gets compact slots (None: nothing left)."""
        if self.order is None:
            self._plan()
        with self.lock:
            free = lambda i: i not in self.ended_elsewhere and i not in self.results  # noqa: E731
            while self.full_slots:
                i = self.full_slots.pop(0)
                if free(i):
                    return i, False
            for i in self.order:
                if i not in self.taken and free(i):
                    self.taken.add(i)
                    return i, True
        return None

    def _work(self, cores: int) -> None:
        try:
            # an instance per thread, built here (it may compile): a CPU backend reuses its
            # scratch memory from run to run, so two runs at once must not share one; one
            # thread at a time, so that a cold cache is compiled once, not once per core
            with _BACKEND_LOCK:
                backend = CpuBackend(threads=cores)
            with self.lock:
                self.stats["cpu_ready_s"] = max(self.stats["cpu_ready_s"], time.perf_counter() - self._t0)
                self._ready.add(threading.current_thread().name)
            while not self.stop.is_set():
                job = self._next()
                if job is None:
                    return
                i, compact = job

                def steer(status: np.ndarray, i: int = i) -> list[int]:
                    if self.stop.is_set():
                        raise _Stop
                    with self.lock:
                        return [0] if i in self.ended_elsewhere else []

                batch = build_batch([self.exps[i]], compact=compact)
                if self.stop.is_set():
                    raise _Stop
                t = time.perf_counter()
                try:
                    iters = backend.run(batch, steer=steer)
                finally:
                    ran = time.perf_counter() - t
                    with self.lock:
                        self.stats["cpu_busy_s"] += ran
                (r,) = extract_results(batch, iters)
                del batch
                with self.lock:
                    self.stats["cpu_runs"] += 1
                    if r.status == "capacity":
                        if i in self._full_fits:
                            self.full_slots.append(i)
                    elif r.status != "cancelled" and i not in self.ended_elsewhere:
                        self.results[i] = r
        except _Stop:
            with self.lock:
                self.stats["cpu_abandoned"] += 1
        except BaseException as exc:   # returned by finish(), in the caller's thread
            with self.lock:
                self.errors.append(exc)
            if self.stop.is_set():         # finish() may have returned already (a thread not ready)
                _log.warning("a CPU racer thread failed: %s: %s", type(exc).__name__, exc)

    def steer_for(self, share_index: Sequence[int]):
        """A `steer` for the share's own backend running a batch of these experiments (share
        indices, in batch order): records what ended there, cancels what the CPU has."""
        index = list(share_index)

        def steer(status: np.ndarray) -> list[int]:
            with self.lock:
                for j, i in enumerate(index):
                    # ended there for good: not cancelled, and not out of compact slots (it then
                    # runs again there with full ones, and the race goes on)
                    if status[j] not in (ST_RUN, ST_CANCELLED, ST_CAPACITY):
                        self.ended_elsewhere.add(i)
                return [j for j, i in enumerate(index) if status[j] == ST_RUN and i in self.results]
        return steer

    def take(self, i: int) -> ExperimentResult | None:
        """The CPU's result for share index i, if it has one (counted as a win)."""
        with self.lock:
            r = self.results.get(i)
        if r is not None:
            self.stats["cpu_won"] += 1
        return r
