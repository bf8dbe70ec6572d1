"""Which evaluator the optimizer uses: the simulator, or one registered by name.

The contract every evaluator keeps (:class:`Evaluation`, :class:`Evaluator`) lives in the neutral
:mod:`mvopt.evaluation`, re-exported here. The product's evaluator is :class:`SimulatorEvaluator`,
which calls :func:`mvopt.build.evaluate` (imported on first use, so that this package never
imports the engine or CuPy at import time). Other evaluators (tests use a closed-form one) are
registered by name with :func:`register_evaluator`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Callable

from mvopt.config import ExperimentConfig
from mvopt.errors import MvoptError
from mvopt.evaluation import STATUSES, Evaluation, Evaluator, check_results

if TYPE_CHECKING:
    from mvopt.engine.progress import ProgressFn

__all__ = [
    "Evaluation", "Evaluator", "SimulatorEvaluator", "register_evaluator", "make_evaluator",
    "evaluator_names", "check_results", "STATUSES",
]


class SimulatorEvaluator:
    """The packet-level simulator, through :func:`mvopt.build.evaluate` (configs, backend=...)."""

    def __init__(self, backend: str = "cpu") -> None:
        from mvopt.engine import parse_backend
        parse_backend(backend)        # a backend this machine lacks fails before any trial exists
        self.name = backend
        self.backend = backend
        self.on_progress: ProgressFn | None = None    # told how a long batch advances (the CLI's progress)
        self.last_report: dict = {}                   # the engine's figures of the last batch, per worker

    def evaluate(self, configs: list[ExperimentConfig]) -> list[Evaluation]:
        """Simulate the configurations as one batch on this evaluator's backend."""
        if not configs:
            return []
        from mvopt.build import evaluate     # here, not at the top: the optimizer loads no engine until it simulates

        kwargs = {"progress": self.on_progress} if self.on_progress is not None else {}
        self.last_report = {}
        results = list(evaluate(list(configs), backend=self.backend, report=self.last_report, **kwargs))
        return check_results(configs, results, self.name)


_REGISTRY: dict[str, Callable[[], Evaluator]] = {
    "cpu": lambda: SimulatorEvaluator("cpu"),
    "gpu": lambda: SimulatorEvaluator("gpu"),
}


_ENGINE_SPECS = ("cpu", "gpu")  # spec heads that mean the simulator with devices/workers: gpu:0,1, cpu:4


def register_evaluator(name: str, factory: Callable[[], Evaluator]) -> None:
    """Make ``factory()`` available as ``--backend NAME`` (replaces an existing name)."""
    _REGISTRY[name] = factory


def evaluator_names() -> list[str]:
    """Names accepted by :func:`make_evaluator`."""
    return sorted(_REGISTRY)


def make_evaluator(name: str) -> Evaluator:
    """The evaluator registered under ``name``.

    ``module:attr`` names are imported on demand (``attr`` is a factory or an Evaluator class),
    so that worker processes can use evaluators defined outside mvopt (tests do). The engine's
    backend specs ``gpu:0,1``, ``cpu:N``, ``gpu+cpu`` and ``auto`` (mvopt.engine.workers) are the
    simulator.
    """
    head = name.partition("+")[0].partition(":")[0]
    if name == "auto" or head in _ENGINE_SPECS and (":" in name or "+" in name) or name.startswith("auto+"):
        return SimulatorEvaluator(name)
    if name not in _REGISTRY and ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            obj = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise MvoptError(f"evaluator {name!r} cannot be imported: {e}") from None
        return _checked(obj(), name)
    if name not in _REGISTRY:
        raise MvoptError(f"unknown evaluator backend {name!r} (known: {', '.join(evaluator_names())}, an engine "
                         "spec such as auto, gpu:0,1, cpu:N or gpu:0+cpu, or module:factory)")
    return _checked(_REGISTRY[name](), name)


def _checked(ev: object, name: str) -> Evaluator:
    if not isinstance(ev, Evaluator):
        raise MvoptError(f"{name!r} did not make an Evaluator (needs .name and .evaluate)")
    return ev
