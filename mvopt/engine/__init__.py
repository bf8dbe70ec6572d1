"""The SPME packet-level engine: many experiments simulated as one batch.

>>> from mvopt.engine import Experiment, simulate
>>> results = simulate([Experiment(topology=topo, network=net, tasks=graph)])  # doctest: +SKIP

See docs/engine.md for the exact model semantics.
"""

from __future__ import annotations

from typing import Sequence

from mvopt.engine.backends import get_backend, resolve_backend
from mvopt.engine.batch import build_batch
from mvopt.engine.params import Experiment, resolve
from mvopt.engine.progress import BatchProgress, ProgressFn
from mvopt.engine.results import COUNTERS, ExperimentResult
from mvopt.engine.tasks import DELAY, FLOW, TaskGraph, TaskGraphBuilder
from mvopt.engine.workers import describe_backend, parse_backend

__all__ = ["Experiment", "ExperimentResult", "TaskGraph", "TaskGraphBuilder", "FLOW", "DELAY",
           "COUNTERS", "BatchProgress", "simulate", "build_batch", "get_backend", "resolve_backend", "resolve",
           "parse_backend", "describe_backend"]


def simulate(experiments: Sequence[Experiment], backend: str = "cpu",
             memory_bytes: int | None = None, progress: ProgressFn | None = None,
             capacities: str = "auto", report: dict | None = None) -> list[ExperimentResult]:
    """Simulate the experiments; results in input order. `backend` is a backend spec ('cpu',
    'gpu', 'gpu:0,1', 'auto', 'cpu:N'; see :mod:`mvopt.engine.workers`): the experiments are spread
    over its workers by estimated cost, and each worker runs its share as SPME batches that fit
    its memory (one batch when it fits). `progress`, if given, is called with a
    :class:`~mvopt.engine.progress.BatchProgress` every few seconds of a long run on one
    worker (experiments ended, furthest window, sub-batch). `capacities` ('auto', 'full',
    'compact'; :mod:`mvopt.engine.capacity`) sizes the packet slots: 'auto' gives compact ones
    (a first try, retried with full ones where they run out) on the CPU, and on a GPU when full
    ones would need more than one batch; results never depend on it. `report`, if given, receives each worker's figures
    (sub-batches with their build and run seconds, reruns with full slots, the CPU racer's wins)."""
    from mvopt.engine.balance import run_experiments
    return run_experiments(experiments, backend, memory_bytes=memory_bytes, progress=progress, capacities=capacities,
                           report=report)
