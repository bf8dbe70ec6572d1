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
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from mvopt.engine.batch import ST_CANCELLED, build_batch, extract_results
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
    share's own backend runs them too. `results` holds the ones the CPU finished first."""

    def __init__(self, exps: Sequence[Experiment], threads: int | None = None) -> None:
        import os

        from mvopt.engine._cpu import CpuBackend
        self.exps = list(exps)
        # an instance of its own: a CPU backend reuses its scratch memory from run to run, so two
        # runs at once (the share's own backend may be a CPU too) must not share one; one core
        # is left to the thread that drives the GPU
        self.backend = CpuBackend(threads=threads or max(1, (os.cpu_count() or 2) - 1))
        self.per_batch = max(1, int(self.backend.max_threads))
        self.order = sorted(range(len(self.exps)), key=lambda i: (-serial_cost(self.exps[i]), i))
        self.lock = threading.Lock()
        self.results: dict[int, ExperimentResult] = {}   # index in the share -> the CPU's result
        self.ended_elsewhere: set[int] = set()           # ended on the share's own backend
        self.taken: set[int] = set()
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.stats = {"cpu_won": 0, "cpu_batches": 0, "cpu_abandoned": 0}
        self.thread = threading.Thread(target=self._work, name="mvopt-cpu-racer", daemon=True)

    def start(self) -> "CpuRacer":
        self.thread.start()
        return self

    def finish(self) -> None:
        """Stop the CPU (its current batch is abandoned) and wait for it; re-raise its error."""
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise self.error

    def _next(self) -> list[int]:
        with self.lock:
            out = [i for i in self.order if i not in self.taken and i not in self.ended_elsewhere][:self.per_batch]
            self.taken.update(out)
        return out

    def _work(self) -> None:
        try:
            while not self.stop.is_set():
                todo = self._next()
                if not todo:
                    return

                def steer(status: np.ndarray, todo: list[int] = todo) -> list[int]:
                    if self.stop.is_set():
                        raise _Stop
                    with self.lock:
                        return [j for j, i in enumerate(todo) if i in self.ended_elsewhere]

                batch = build_batch([self.exps[i] for i in todo])
                iters = self.backend.run(batch, steer=steer)
                self.stats["cpu_batches"] += 1
                with self.lock:
                    for i, r in zip(todo, extract_results(batch, iters)):
                        if r.status != "cancelled" and i not in self.ended_elsewhere:
                            self.results[i] = r
        except _Stop:
            self.stats["cpu_abandoned"] += 1
        except BaseException as exc:   # reported by finish(), in the caller's thread
            self.error = exc

    def steer_for(self, share_index: Sequence[int]):
        """A `steer` for the share's own backend running a batch of these experiments (share
        indices, in batch order): records what ended there, cancels what the CPU has."""
        index = list(share_index)

        def steer(status: np.ndarray) -> list[int]:
            with self.lock:
                for j, i in enumerate(index):
                    if status[j] != 0 and status[j] != ST_CANCELLED:
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
