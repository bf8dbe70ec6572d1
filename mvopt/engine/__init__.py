"""The SPME packet-level engine: many experiments simulated as one batch.

>>> from mvopt.engine import Experiment, simulate
>>> results = simulate([Experiment(topology=topo, network=net, tasks=graph)])  # doctest: +SKIP

See docs/engine.md for the exact model semantics.
"""

from __future__ import annotations

from typing import Sequence

from mvopt.engine.batch import Batch, build_batch, extract_results
from mvopt.engine.params import Experiment, resolve
from mvopt.engine.results import COUNTERS, ExperimentResult
from mvopt.engine.tasks import DELAY, FLOW, TaskGraph, TaskGraphBuilder

__all__ = ["Experiment", "ExperimentResult", "TaskGraph", "TaskGraphBuilder", "FLOW", "DELAY",
           "COUNTERS", "simulate", "build_batch", "get_backend", "resolve_backend", "resolve"]

_BACKENDS: dict[str, object] = {}


def resolve_backend(name: str = "auto") -> str:
    """'gpu' or 'cpu' for a requested backend; 'auto' picks the GPU when CuPy sees one."""
    if name == "auto":
        from mvopt.engine._gpu import gpu_available
        return "gpu" if gpu_available() else "cpu"
    if name not in ("cpu", "gpu"):
        from mvopt.errors import BackendUnavailable
        raise BackendUnavailable(f"unknown backend {name!r} (choose cpu, gpu or auto)")
    return name


def get_backend(name: str = "cpu"):
    """The backend object ('cpu', 'gpu' or 'auto'); compiled once per process. This is the one
    place that knows which backend classes exist."""
    name = resolve_backend(name)
    if name not in _BACKENDS:
        if name == "cpu":
            from mvopt.engine._cpu import CpuBackend
            _BACKENDS[name] = CpuBackend()
        else:
            from mvopt.engine._gpu import GpuBackend
            _BACKENDS[name] = GpuBackend()
    return _BACKENDS[name]


def simulate(experiments: Sequence[Experiment], backend: str = "cpu") -> list[ExperimentResult]:
    """Simulate all experiments as one SPME batch; results in input order."""
    if not experiments:
        return []
    batch = build_batch(list(experiments))
    iters = get_backend(backend).run(batch)
    return extract_results(batch, iters)
