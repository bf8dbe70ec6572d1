"""On the CPU, an experiment that runs out of its compact packet slots runs again with full ones
at once, on a thread of its own, while the rest of its sub-batch goes on.

A CPU worker runs its share with compact packet slots first (docs/engine.md, "Packet slots"); an
experiment that runs out of them ends early with status ``capacity`` and must run again with
full ones. Waiting for the end of the sub-batch would leave the cores of the experiments that
ended early idle for as long as the slowest experiment of the sub-batch runs (minutes, in a
search space whose candidates differ in buffer sizes and loss). So the sub-batch's `steer`
hands each such experiment to :class:`EarlyReruns` as soon as it ends, whose threads (one core
each) run it alone with full slots. When the sub-batch has ended, the worker takes back what
the threads have not started (:meth:`EarlyReruns.close_intake`) and runs those as one batch on
every core, as before. Experiments are independent, so the results are those of any other
schedule (tests/engine/test_reruns.py)."""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from mvopt.engine._cpu import CpuBackend
from mvopt.engine.batch import ST_CAPACITY, build_batch, extract_results
from mvopt.engine.params import Experiment
from mvopt.engine.race import backend_lock
from mvopt.engine.results import ExperimentResult

__all__ = ["EarlyReruns"]


class EarlyReruns:
    """Threads that run, with full packet slots, the experiments of a share handed to them."""

    def __init__(self, exps: Sequence[Experiment], threads: int = 1) -> None:
        self.exps = list(exps)
        self.n_threads = max(1, threads)
        self.lock = threading.Lock()
        self.wake = threading.Condition(self.lock)
        self.queue: list[int] = []                          # handed, not started
        self.handed: set[int] = set()
        self.results: dict[int, ExperimentResult] = {}     # share index -> result with full slots
        self.errors: list[BaseException] = []
        self.closed = False
        self.threads = [threading.Thread(target=self._work, name=f"mvopt-cpu-rerun-{k}", daemon=True)
                        for k in range(self.n_threads)]
        for t in self.threads:
            t.start()

    def steer_for(self, share_index: Sequence[int]):
        """A `steer` for the CPU backend running a batch of these experiments (share indices, in
        batch order): hands over each one that ended out of compact slots; cancels nothing."""
        index = list(share_index)

        def steer(status: np.ndarray) -> list[int]:
            ran_out = [index[j] for j in np.flatnonzero(np.asarray(status) == ST_CAPACITY)]
            with self.lock:
                new = [i for i in ran_out if i not in self.handed]
                if new and not self.closed:
                    self.handed.update(new)
                    self.queue.extend(new)
                    self.wake.notify_all()
            return []
        return steer

    def close_intake(self) -> list[int]:
        """No more experiments: returns those handed over and not started (the caller runs them);
        the threads finish what they run (:meth:`join`)."""
        with self.lock:
            self.closed = True
            left, self.queue = self.queue, []
            self.handed.difference_update(left)
            self.wake.notify_all()
        return left

    def join(self) -> dict[int, ExperimentResult]:
        """Wait for the threads (after :meth:`close_intake`); their results (share index ->
        result), or the first error."""
        for t in self.threads:
            t.join()
        if self.errors:
            raise self.errors[0]
        return dict(self.results)

    def _next(self) -> int | None:
        with self.lock:
            while not self.queue and not self.closed:
                self.wake.wait()
            return self.queue.pop(0) if self.queue else None

    def _work(self) -> None:
        backend = None
        try:
            while (i := self._next()) is not None:
                if backend is None:       # an instance per thread: a CPU backend reuses its scratch memory
                    with backend_lock():
                        backend = CpuBackend(threads=1)
                batch = build_batch([self.exps[i]], compact=False)
                iters = backend.run(batch)
                (r,) = extract_results(batch, iters)
                with self.lock:
                    self.results[i] = r
        except BaseException as exc:    # raised by join(), in the caller's thread
            with self.lock:
                self.errors.append(exc)
                self.closed = True
                self.wake.notify_all()
