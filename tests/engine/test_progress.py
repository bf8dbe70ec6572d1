"""Progress reports: what a backend counts between launches and the line a person reads."""

from __future__ import annotations

import numpy as np

from mvopt.engine import progress
from mvopt.engine.progress import BatchProgress, ProgressReporter, backend_counts


def test_backend_counts_slowest_running_and_median_end() -> None:
    status = np.array([0, 1, 0, 3, 1])           # running, done, running, timeout, done
    iters = np.array([40, 12, 41, 30, 20])
    clock = np.array([500, 100, 300, 900, 200])
    assert backend_counts(status, iters, clock) == (3, 41, 300, 200)
    assert backend_counts(np.zeros(2, int), np.array([1, 2]), np.array([7, 9])) == (0, 2, 7, None)
    assert backend_counts(np.ones(2, int), np.array([1, 2]), np.array([7, 9]))[2] == 0


def test_reporter_rate_and_time_left(monkeypatch) -> None:
    """The simulated pace is the slowest's advance over the wall time between two reports; the
    time left is what that pace needs to reach the ended experiments' median end."""
    seen: list[BatchProgress] = []
    wall = iter([0.0, 10.0, 20.0])
    monkeypatch.setattr(progress.time, "perf_counter", lambda: next(wall))
    rep = ProgressReporter(seen.append, total=4, sub_batches=1, interval_s=5.0)
    rep(1, 100, simulated_ps=2 * 10**9, ended_ps=10 * 10**9)
    rep(2, 200, simulated_ps=4 * 10**9, ended_ps=10 * 10**9)
    assert seen[0].simulated_per_s is None and seen[0].eta_s is None
    assert seen[1].simulated_per_s == 2 * 10**8          # 2 ms of simulated time in 10 s
    assert seen[1].eta_s == 30.0                         # 6 ms left at 0.2 ms/s
    line = seen[1].describe()
    assert "slowest at 4.0 ms simulated (+0.20 ms/s)" in line and "~30 s left" in line
    assert "ended ones' 10.0 ms" in line


def test_a_report_without_clocks_reads_as_before() -> None:
    p = BatchProgress(done=1, total=3, windows=5230, sub_batch=0, sub_batches=2, elapsed_s=96.4)
    assert p.describe() == "1/3 experiments ended, window 5,230, sub-batch 1/2, 96 s"
