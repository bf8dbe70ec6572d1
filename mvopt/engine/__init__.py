"""The SPME packet-level engine: many experiments simulated as one batch.

>>> from mvopt.engine import Experiment, simulate
>>> results = simulate([Experiment(topology=topo, network=net, tasks=graph)])  # doctest: +SKIP

See docs/engine.md for the exact model semantics.
"""

from __future__ import annotations

from typing import Sequence

from mvopt.engine.batch import build_batch
from mvopt.engine.params import Experiment, resolve
from mvopt.engine.progress import BatchProgress, ProgressFn
from mvopt.engine.results import COUNTERS, ExperimentResult
from mvopt.engine.tasks import DELAY, FLOW, TaskGraph, TaskGraphBuilder

__all__ = ["Experiment", "ExperimentResult", "TaskGraph", "TaskGraphBuilder", "FLOW", "DELAY",
           "COUNTERS", "BatchProgress", "simulate", "build_batch", "get_backend", "resolve_backend", "resolve"]

_BACKENDS: dict[tuple, object] = {}


def resolve_backend(name: str = "auto") -> str:
    """'gpu' or 'cpu' for a requested backend; 'auto' picks the GPU when CuPy sees one."""
    name = name.partition(":")[0]
    if name == "auto":
        from mvopt.engine._gpu import gpu_available
        return "gpu" if gpu_available() else "cpu"
    if name not in ("cpu", "gpu"):
        from mvopt.errors import BackendUnavailable
        raise BackendUnavailable(f"unknown backend {name!r} (choose cpu, gpu or auto)")
    return name


def get_backend(name: str = "cpu", device: int = 0, threads: int | None = None):
    """The backend object ('cpu', 'gpu' or 'auto'; a GPU by device number, a CPU backend by its
    thread count); compiled once per process. This is the one place that knows which backend
    classes exist."""
    name = resolve_backend(name)
    key = (name, device if name == "gpu" else 0, threads if name == "cpu" else None)
    if key not in _BACKENDS:
        if name == "cpu":
            from mvopt.engine._cpu import CpuBackend
            _BACKENDS[key] = CpuBackend(threads=threads)
        else:
            from mvopt.engine._gpu import GpuBackend
            _BACKENDS[key] = GpuBackend(device=device)
    return _BACKENDS[key]


def simulate(experiments: Sequence[Experiment], backend: str = "cpu",
             memory_bytes: int | None = None, progress: ProgressFn | None = None,
             capacities: str = "auto", report: dict | None = None) -> list[ExperimentResult]:
    """Simulate the experiments; results in input order. `backend` is a backend spec ('cpu',
    'gpu', 'gpu:0,1', 'auto', 'cpu:N'; see :mod:`mvopt.engine.plan`): the experiments are spread
    over its workers by estimated cost, and each worker runs its share as SPME batches that fit
    its memory (one batch when it fits). `progress`, if given, is called with a
    :class:`~mvopt.engine.progress.BatchProgress` every few seconds of a long run on one
    worker (experiments ended, furthest window, sub-batch). `capacities` ('auto', 'full',
    'compact'; :mod:`mvopt.engine.capacity`) sizes the packet slots: 'auto' gives compact ones
    (a first try, retried with full ones where they run out) on the CPU, and on a GPU when full
    ones would need more than one batch; results never depend on it. `report`, if given, receives each worker's figures
    (sub-batches with their build and run seconds, reruns with full slots, the CPU racer's wins)."""
    from mvopt.engine.plan import run_experiments
    return run_experiments(experiments, backend, memory_bytes=memory_bytes, progress=progress, capacities=capacities,
                           report=report)
