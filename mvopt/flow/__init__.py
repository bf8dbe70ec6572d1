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
    'cpu' (NumPy), 'gpu' or 'gpu:N' (CuPy on device N), 'auto' (the GPU when there is one).
    An experiment's result does not depend on its batch, and is the same on either backend.
    Raises ConfigError for an experiment the flow level cannot run (a queue monitor)."""
    from mvopt.flow.batch import build_flow_batch
    from mvopt.flow.results import extract_results
    from mvopt.flow.sim import run_batch
    from mvopt.flow.xp import array_module

    if not experiments:
        return []
    xp = array_module(backend)
    batch = build_flow_batch(experiments)
    return extract_results(batch, run_batch(batch, xp))
