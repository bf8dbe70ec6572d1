"""A generation of flow-level configurations to evaluations, each trial built and simulated in
one worker process.

A worker takes a configuration, builds its experiment (topology, task graph), builds its flow
batch, runs the compiled loop on its core and returns the trial's evaluation: the experiment (tens
of MB for a training iteration of hundreds of GPUs) never leaves the worker, so the main process
only hands out configurations and collects evaluations, holds no experiment, and one trial's
building overlaps the other workers' loops. Trials are handed out one at a time, at most two per
worker in flight, so that the workers finish together. A trial's evaluation is the same whatever
the workers (an experiment's flow-level result does not depend on its batch, docs/decisions/0070).

Progress (trials done, with the time since the start) goes to this module's logger at INFO.
"""

from __future__ import annotations

import logging
import sys
import time
from concurrent.futures import FIRST_COMPLETED, wait
from typing import Sequence

from mvopt.config import ExperimentConfig
from mvopt.evaluation import Evaluation

__all__ = ["evaluate_flow", "flow_trial", "in_flow_workers", "PHASES"]

log = logging.getLogger(__name__)

# a trial's phases, in the order a worker runs them (CPU seconds of its process: one core's work,
# however busy the machine)
PHASES = ("build_cpu_s", "batch_cpu_s", "loop_cpu_s", "results_cpu_s")
# progress is logged at every this share of the trials, and at least this often
LOG_SHARE, LOG_EVERY_S = 0.05, 10.0


def in_flow_workers(n_configs: int) -> bool:
    """Whether a generation of `n_configs` flow-level configurations runs as worker trials
    (:func:`evaluate_flow`); fewer are built, then simulated on threads (mvopt.flow.generation)."""
    from mvopt.flow.generation import PROCESS_MIN
    return n_configs >= PROCESS_MIN


def flow_trial(cfg: ExperimentConfig) -> tuple[Evaluation, dict[str, float]]:
    """One flow-level configuration built, simulated on the calling core and evaluated; with the
    CPU seconds each of its PHASES took and its wall time (``busy_s``). A configuration that
    cannot be built is infeasible; one the flow level cannot run raises ConfigError."""
    from mvopt.build.evaluations import evaluation_of
    from mvopt.build.parallel import build_outcome
    from mvopt.flow.batch import build_flow_batch
    from mvopt.flow.compiled import run_batch_compiled
    from mvopt.flow.results import extract_results

    w0, t0 = time.perf_counter(), time.process_time()
    built, reason, violation = build_outcome(cfg)
    t1 = time.process_time()
    if built is None:
        ev, times = Evaluation.infeasible(reason, violation=violation), (t1 - t0, 0.0, 0.0, 0.0)
    else:
        batch = build_flow_batch([built.experiment])
        t2 = time.process_time()
        state = run_batch_compiled(batch, threads=1)
        t3 = time.process_time()
        ev = evaluation_of(built, extract_results(batch, state)[0], {})
        times = (t1 - t0, t2 - t1, t3 - t2, time.process_time() - t3)
    return ev, {**dict(zip(PHASES, times)), "busy_s": time.perf_counter() - w0}


def evaluate_flow(configs: Sequence[ExperimentConfig], threads: int | None = None,
                  report: dict | None = None) -> list[Evaluation]:
    """The evaluations of flow-level `configs`, in order, each a :func:`flow_trial` on one of
    `threads` workers (default $OMP_NUM_THREADS, else every usable core; one: in this process).
    A feasible evaluation's ``sim_stats`` hold the generation's ``batch_wall_s`` and
    ``batch_size``, and ``build_wall_s``: the workers' building time divided among them.
    `report`, if given, receives under ``"flow"`` the generation's figures: trials, workers,
    wall_s, each of PHASES summed over the trials, busy_s (the workers' wall time on trials),
    main_cpu_s (this process's CPU time: handing out and collecting) and idle_s (the workers'
    wall time on no trial: start-up, waiting, the end)."""
    from mvopt.flow.compiled import library
    from mvopt.flow.generation import workers

    if not configs:
        return []
    size = workers(sys.maxsize, threads)     # the pool's size, whatever the generation's
    n = min(size, len(configs))
    library()                 # (built or loaded once, before any worker)
    log.info("flow level: %d trials on %d workers: start", len(configs), n)
    clock = _Progress(len(configs))
    c0 = time.process_time()
    if n == 1:
        done = []
        for cfg in configs:
            done.append(flow_trial(cfg))
            clock.tick()
    else:
        done = _in_processes(configs, size, n, clock)
    wall, main_cpu = clock.elapsed(), time.process_time() - c0
    sums = {k: sum(t[k] for _, t in done) for k in (*PHASES, "busy_s")}
    log.info("flow level: %d trials done in %.1f s", len(configs), wall)
    stats = {"batch_wall_s": wall, "batch_size": float(len(configs)), "build_wall_s": sums["build_cpu_s"] / n}
    for ev, _ in done:
        if ev.feasible:
            ev.sim_stats.update(stats)
    if report is not None:
        report["flow"] = {"trials": len(configs), "workers": n, "wall_s": wall, **sums, "main_cpu_s": main_cpu,
                          "idle_s": max(0.0, n * wall - sums["busy_s"])}
    return [ev for ev, _ in done]


def _in_processes(configs: Sequence[ExperimentConfig], size: int, n: int, clock: "_Progress") -> list:
    """flow_trial of every configuration on `n` worker processes of the pool of `size` (kept
    between calls), at most two per worker in flight."""
    from concurrent.futures.process import BrokenProcessPool

    from mvopt.procpool import drop_pool, get_pool

    pool = get_pool("flow", size)
    done: list = [None] * len(configs)
    flying: dict = {}         # future -> index
    nxt = 0
    try:
        while nxt < len(configs) or flying:
            while nxt < len(configs) and len(flying) < 2 * n:
                flying[pool.submit(flow_trial, configs[nxt])] = nxt
                nxt += 1
            finished, _ = wait(flying, return_when=FIRST_COMPLETED)
            for fut in finished:
                done[flying.pop(fut)] = fut.result()
                clock.tick()
    except BrokenProcessPool:
        drop_pool("flow", size)  # a worker died (killed, out of memory): the next call starts fresh ones
        raise
    finally:
        for fut in flying:
            fut.cancel()
    return done


class _Progress:
    """Trials done since the start, logged at every LOG_SHARE of them and every LOG_EVERY_S."""

    def __init__(self, total: int) -> None:
        self.total, self.done = total, 0
        self.t0 = self.last = time.perf_counter()
        self.step = max(1, round(total * LOG_SHARE))

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def tick(self) -> None:
        self.done += 1
        now = time.perf_counter()
        if self.done % self.step == 0 or now - self.last >= LOG_EVERY_S:
            self.last = now
            log.info("flow level: %d/%d trials done at %.1f s", self.done, self.total, now - self.t0)
