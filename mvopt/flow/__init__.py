"""The flow-level (fluid) model: the packet engine's experiments at a fraction of the cost.

>>> from mvopt.flow import simulate
>>> results = simulate(experiments, backend="cpu")          # doctest: +SKIP

It runs the same :class:`~mvopt.engine.Experiment` objects (topology, network settings, task
graph) as :func:`mvopt.engine.simulate` and returns the same
:class:`~mvopt.engine.ExperimentResult`. Flows share links by max-min fairness over the paths
the packet engine's ECMP hash picks (sprayed flows split evenly over the equal-cost next hops);
rates are computed again at every flow arrival and end; each flow adds its path's latency. It
cannot see congestion control, ECN, buffers or PFC: docs/decisions/0070-flow-level-model.md.
"""

from __future__ import annotations

from typing import Sequence

from mvopt.engine.params import Experiment
from mvopt.engine.results import ExperimentResult

__all__ = ["simulate"]


def simulate(experiments: Sequence[Experiment], backend: str = "cpu") -> list[ExperimentResult]:
    """Simulate `experiments` at flow level as one batch; results in input order. `backend`:
    'cpu' (the compiled event loop, OpenMP over the experiments on $OMP_NUM_THREADS or every
    usable core), 'gpu' or 'gpu:N' (the array path on CuPy, device N), 'auto' (the GPU when there
    is one). An experiment's result does not depend on its batch, and is the same on either
    backend.
    Raises ConfigError for an experiment the flow level cannot run (a queue monitor)."""
    from mvopt.engine import resolve_backend
    from mvopt.flow.batch import build_flow_batch
    from mvopt.flow.compiled import run_batch_compiled
    from mvopt.flow.results import extract_results
    from mvopt.flow.sim import run_batch
    from mvopt.flow.xp import array_module

    if not experiments:
        return []
    on_host = resolve_backend(backend) == "cpu"
    xp = None if on_host else array_module(backend)     # (no CuPy: said before the batch is built)
    batch = build_flow_batch(experiments)
    return extract_results(batch, run_batch_compiled(batch) if on_host else run_batch(batch, xp))
