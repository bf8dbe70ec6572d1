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
           "COUNTERS", "simulate", "build_batch", "get_backend", "resolve"]

_BACKENDS: dict[str, object] = {}


def get_backend(name: str = "cpu"):
    """The backend object for 'cpu' (more arrive with the GPU issue); compiled once per process."""
    if name not in _BACKENDS:
        if name == "cpu":
            from mvopt.engine._cpu import CpuBackend
            _BACKENDS[name] = CpuBackend()
        else:
            from mvopt.errors import BackendUnavailable
            raise BackendUnavailable(f"unknown backend {name!r} (available: cpu)")
    return _BACKENDS[name]


def simulate(experiments: Sequence[Experiment], backend: str = "cpu") -> list[ExperimentResult]:
    """Simulate all experiments as one SPME batch; results in input order."""
    if not experiments:
        return []
    batch = build_batch(list(experiments))
    iters = get_backend(backend).run(batch)
    return extract_results(batch, iters)
