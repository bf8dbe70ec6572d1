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

from typing import TYPE_CHECKING, Callable, Sequence

from mvopt.engine.params import Experiment
from mvopt.engine.results import ExperimentResult

if TYPE_CHECKING:
    from mvopt.flow.batch import FlowBatch
    from mvopt.flow.sim import FlowState

__all__ = ["simulate", "flow_runner"]


def simulate(experiments: Sequence[Experiment], backend: str = "cpu",
             threads: int | None = None) -> list[ExperimentResult]:
    """Simulate `experiments` at flow level; results in input order. `backend`: 'cpu' (the
    compiled event loop: experiments spread over `threads` workers, default $OMP_NUM_THREADS or
    every usable core, each running one experiment at a time on one core; worker processes for
    a generation, see :mod:`mvopt.flow.generation`), 'gpu' or 'gpu:N' (the
    array path on CuPy, device N, the experiments as one batch), 'auto' (the GPU when there is
    one). An experiment's result does not depend on the other experiments, on the number of
    threads or on the backend.
    Raises ConfigError for an experiment the flow level cannot run (a queue monitor)."""
    from mvopt.engine import resolve_backend
    from mvopt.flow.batch import build_flow_batch
    from mvopt.flow.generation import simulate_on_cores
    from mvopt.flow.results import extract_results

    if not experiments:
        return []
    if resolve_backend(backend) == "cpu":
        return simulate_on_cores(experiments, threads)
    run = flow_runner(backend)
    batch = build_flow_batch(experiments)
    return extract_results(batch, run(batch))


def flow_runner(backend: str) -> Callable[[FlowBatch], FlowState]:
    """What runs a built batch on `backend` (see :func:`simulate`): the compiled event loop on
    the CPU, the array path on a GPU (BackendUnavailable at once when the compiler, CuPy or the GPU
    is missing)."""
    from mvopt.engine import resolve_backend
    from mvopt.flow.compiled import library, run_batch_compiled
    from mvopt.flow.sim import run_batch
    from mvopt.flow.xp import array_module

    if resolve_backend(backend) == "cpu":
        library()             # (built or loaded now, not in the first run)
        return run_batch_compiled
    xp = array_module(backend)
    return lambda batch: run_batch(batch, xp)
