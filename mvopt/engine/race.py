"""The CPU's cores racing a GPU batch on its slowest experiments (backend spec ``gpu+cpu``).

On a GPU one thread runs one node, so an experiment lasts at least as long as its busiest node's
events take one after another. A wide switch that forwards hundreds of packets per window (the
128-port spines of a rail-optimised cluster) makes such an experiment 20-40x slower on the GPU
than on one CPU core (docs/performance.md, "Where a GPU generation's time goes"), and a GPU batch
ends with its slowest experiment. Meanwhile the CPU's cores are idle.

So, while the GPU runs its share as usual, a :class:`CpuRacer` runs the same experiments on the
CPU, heaviest serial load first (:func:`serial_cost`), one per core at a time. Whichever backend
finishes an experiment first provides its result; the other cancels it at its next check
(``steer``: between the GPU's launches, every few hundred windows on the CPU). Both backends give
identical results for every experiment (tested), so the outcome never depends on who won; only
the wall time does. No calibration is needed: the race decides.

Known limits (not yet measured on a GPU machine, so left simple): the racer runs fixed batches
of one experiment per thread and takes new work only when a whole batch ended, so once most of
a batch is cancelled the rest of its threads wait; and the CPU backend's thread count is one
setting per process, so with ``cpu+cpu`` (tests) the two CPU runs share it (results do not
depend on thread counts).
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from mvopt.engine.batch import ST_CANCELLED, ST_CAPACITY, ST_RUN, build_batch, extract_results
from mvopt.engine.params import Experiment
from mvopt.engine.results import ExperimentResult

__all__ = ["serial_cost", "CpuRacer"]


def serial_cost(exp: Experiment) -> float:
    """Estimated events of the experiment's busiest switch, the GPU's serial part: its packet-hops
    (planner estimate) times the widest switch's share of all switch ports."""
    from mvopt.engine.plan import experiment_cost
    topo = exp.topology
    nh = int(topo.n_host)
    ports = np.diff(np.asarray(topo.node_port_offset, np.int64))[nh:]
    share = float(ports.max()) / float(ports.sum()) if ports.size and ports.sum() else 1.0
    return experiment_cost(exp) * share


class _Stop(Exception):
    """Raised inside the CPU's run to abandon it: the GPU has finished."""


class CpuRacer:
    """Runs experiments of a share on the CPU, in a thread, heaviest serial load first, while the
    share's own backend runs them too. `results` holds the ones the CPU finished first.

    The racer's batches use compact packet slots (host memory: (cores - 1) rail-optimised
    experiments are ~5 GB at full slots); one that runs out is taken again later with full ones."""

    def __init__(self, exps: Sequence[Experiment], threads: int | None = None) -> None:
        import os

        self.exps = list(exps)
        # one core is left to the thread that drives the GPU
        self.threads = threads or max(1, (os.cpu_count() or 2) - 1)
        self.order = sorted(range(len(self.exps)), key=lambda i: (-serial_cost(self.exps[i]), i))
        self.lock = threading.Lock()
        self.results: dict[int, ExperimentResult] = {}   # index in the share -> the CPU's result
        self.ended_elsewhere: set[int] = set()           # ended on the share's own backend
        self.taken: set[int] = set()
        self.full_slots: list[int] = []                   # ran out of compact slots here: again, full
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.stats = {"cpu_won": 0, "cpu_batches": 0, "cpu_abandoned": 0}
        self.thread = threading.Thread(target=self._work, name="mvopt-cpu-racer", daemon=True)

    def start(self) -> "CpuRacer":
        self.thread.start()
        return self

    def finish(self, timeout_s: float | None = None) -> BaseException | None:
        """Stop the CPU (its current batch is abandoned), wait for it, and return its error, if
        any (the caller decides whether it matters: not when the other backend has every result)."""
        self.stop.set()
        self.thread.join(timeout_s)
        return self.error

    def _next(self) -> tuple[list[int], list[bool]]:
        """The next experiments to run (at most one per thread) and whether each gets compact slots."""
        with self.lock:
            free = lambda i: i not in self.ended_elsewhere and i not in self.results  # noqa: E731
            again = [i for i in self.full_slots if free(i)][:self.threads]
            self.full_slots = [i for i in self.full_slots if i not in again]
            fresh = [i for i in self.order if i not in self.taken and free(i)][:self.threads - len(again)]
            self.taken.update(fresh)
        return again + fresh, [False] * len(again) + [True] * len(fresh)

    def _work(self) -> None:
        from mvopt.engine._cpu import CpuBackend
        try:
            # an instance of its own, built here (it may compile): a CPU backend reuses its
            # scratch memory from run to run, so two runs at once must not share one
            backend = CpuBackend(threads=self.threads)
            while not self.stop.is_set():
                todo, compact = self._next()
                if not todo:
                    return

                def steer(status: np.ndarray, todo: list[int] = todo) -> list[int]:
                    if self.stop.is_set():
                        raise _Stop
                    with self.lock:
                        return [j for j, i in enumerate(todo) if i in self.ended_elsewhere]

                batch = build_batch([self.exps[i] for i in todo], compact=compact)
                if self.stop.is_set():
                    raise _Stop
                iters = backend.run(batch, steer=steer)
                self.stats["cpu_batches"] += 1
                done = list(zip(todo, extract_results(batch, iters)))
                del batch
                with self.lock:
                    for i, r in done:
                        if r.status == "capacity":
                            self.full_slots.append(i)
                        elif r.status != "cancelled" and i not in self.ended_elsewhere:
                            self.results[i] = r
        except _Stop:
            self.stats["cpu_abandoned"] += 1
        except BaseException as exc:   # returned by finish(), in the caller's thread
            self.error = exc

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
                return [j for j, i in enumerate(index) if status[j] == 0 and i in self.results]
        return steer

    def take(self, i: int) -> ExperimentResult | None:
        """The CPU's result for share index i, if it has one (counted as a win)."""
        with self.lock:
            r = self.results.get(i)
        if r is not None:
            self.stats["cpu_won"] += 1
        return r
