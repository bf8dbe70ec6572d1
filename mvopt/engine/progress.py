"""Progress of a running simulation: a long batch (minutes on a GPU) tells the person watching
how far it is, at most every few seconds. Results never depend on it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["BatchProgress", "ProgressFn", "ProgressReporter", "PROGRESS_INTERVAL_S"]

PROGRESS_INTERVAL_S = 10.0   # between two reports of one simulate() call


@dataclass(frozen=True)
class BatchProgress:
    """Where one :func:`mvopt.engine.simulate` call stands."""

    done: int          # experiments that ended (any status)
    total: int         # experiments of the call
    windows: int       # most windows an experiment of the current sub-batch has simulated
    sub_batch: int     # the sub-batch running (0-based) ...
    sub_batches: int   # ... of this many
    elapsed_s: float   # since the call started

    def describe(self) -> str:
        """One line for a person: ``412/812 experiments ended, window 5,230, sub-batch 1/2, 96 s``."""
        sub = f", sub-batch {self.sub_batch + 1}/{self.sub_batches}" if self.sub_batches > 1 else ""
        return (f"{self.done}/{self.total} experiments ended, window {self.windows:,}{sub}, "
                f"{self.elapsed_s:.0f} s")


ProgressFn = Callable[[BatchProgress], None]


class ProgressReporter:
    """Turns a backend's per-launch counts into throttled :class:`BatchProgress` reports."""

    def __init__(self, fn: ProgressFn, total: int, sub_batches: int, interval_s: float | None = None) -> None:
        self.fn, self.total, self.sub_batches = fn, total, sub_batches
        self.interval_s = PROGRESS_INTERVAL_S if interval_s is None else interval_s
        self.t0 = self.last = time.perf_counter()
        self.done_before = 0   # experiments of the finished sub-batches
        self.sub_batch = 0

    def start_sub_batch(self, index: int, done_before: int) -> None:
        self.sub_batch, self.done_before = index, done_before

    def __call__(self, done: int, windows: int) -> None:
        """A backend's count after a launch: `done` experiments of the current sub-batch ended,
        the furthest is at window `windows`. Reported when the interval has passed."""
        now = time.perf_counter()
        if now - self.last < self.interval_s:
            return
        self.last = now
        self.fn(BatchProgress(done=self.done_before + int(done), total=self.total, windows=int(windows),
                              sub_batch=self.sub_batch, sub_batches=self.sub_batches, elapsed_s=now - self.t0))
