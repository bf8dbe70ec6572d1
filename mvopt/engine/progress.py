"""Progress of a running simulation: a long batch (minutes on a GPU) tells the person watching
how far it is, at most every few seconds. Results never depend on it."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

__all__ = ["BatchProgress", "ProgressFn", "ProgressReporter", "PROGRESS_INTERVAL_S", "backend_counts"]

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
    simulated_ps: int = 0             # the least simulated time of a running experiment (0: none runs)
    simulated_per_s: float | None = None  # how fast that advances: simulated ps per wall second
    ended_ps: int | None = None       # the median end of the experiments of the sub-batch that ended
    eta_s: float | None = None        # wall seconds until the slowest reaches ended_ps at that pace

    def describe(self) -> str:
        """One line for a person: ``412/812 experiments ended, window 5,230, sub-batch 1/2,
        slowest at 310.2 ms simulated (+2.1 ms/s), ~180 s left if it ends near the ended ones'
        677.4 ms, 96 s``."""
        sub = f", sub-batch {self.sub_batch + 1}/{self.sub_batches}" if self.sub_batches > 1 else ""
        sim = ""
        if self.simulated_ps > 0:
            sim = f", slowest at {self.simulated_ps / 1e9:.1f} ms simulated"
            if self.simulated_per_s:
                sim += f" (+{self.simulated_per_s / 1e9:.2f} ms/s)"
            if self.eta_s is not None and self.ended_ps is not None:
                sim += f", ~{self.eta_s:.0f} s left if it ends near the ended ones' {self.ended_ps / 1e9:.1f} ms"
        return (f"{self.done}/{self.total} experiments ended, window {self.windows:,}{sub}{sim}, "
                f"{self.elapsed_s:.0f} s")


def backend_counts(status, iters, clock) -> tuple[int, int, int, int | None]:
    """What a backend reports between launches, from host copies of the experiments' status,
    window count and clock: experiments ended, the furthest window, the least simulated time
    of a running experiment (0 if none) and the median end of those that ended (None if none)."""
    import numpy as np

    status, iters, clock = np.asarray(status), np.asarray(iters), np.asarray(clock)
    running = status == 0
    ended = ~running
    slowest = int(clock[running].min()) if running.any() else 0
    ended_ps = int(np.median(clock[ended])) if ended.any() else None
    return int(ended.sum()), int(iters.max()) if iters.size else 0, slowest, ended_ps


ProgressFn = Callable[[BatchProgress], None]


class ProgressReporter:
    """Turns a backend's per-launch counts into throttled :class:`BatchProgress` reports."""

    def __init__(self, fn: ProgressFn, total: int, sub_batches: int, interval_s: float | None = None) -> None:
        self.fn, self.total, self.sub_batches = fn, total, sub_batches
        self.interval_s = PROGRESS_INTERVAL_S if interval_s is None else interval_s
        self.t0 = self.last = time.perf_counter()
        self.done_before = 0   # experiments of the finished sub-batches
        self.sub_batch = 0
        self.last_sim: tuple[float, int] | None = None   # (wall time, slowest's simulated time) last reported

    def start_sub_batch(self, index: int, done_before: int) -> None:
        self.sub_batch, self.done_before = index, done_before
        self.last_sim = None

    def __call__(self, done: int, windows: int, simulated_ps: int = 0, ended_ps: int | None = None) -> None:
        """A backend's count after a launch: `done` experiments of the current sub-batch ended,
        the furthest is at window `windows`, the slowest running one at `simulated_ps`, and the
        ended ones' median end is `ended_ps`. Reported when the interval has passed."""
        now = time.perf_counter()
        if now - self.last < self.interval_s:
            return
        self.last = now
        rate = eta = None
        if simulated_ps > 0:
            if self.last_sim is not None and now > self.last_sim[0] and simulated_ps > self.last_sim[1]:
                rate = (simulated_ps - self.last_sim[1]) / (now - self.last_sim[0])
                if ended_ps is not None and ended_ps > simulated_ps:
                    eta = (ended_ps - simulated_ps) / rate
            self.last_sim = (now, int(simulated_ps))
        self.fn(BatchProgress(done=self.done_before + int(done), total=self.total, windows=int(windows),
                              sub_batch=self.sub_batch, sub_batches=self.sub_batches, elapsed_s=now - self.t0,
                              simulated_ps=int(simulated_ps), simulated_per_s=rate, ended_ps=ended_ps, eta_s=eta))
