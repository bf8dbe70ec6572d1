"""The one interface between the optimizer and the simulator.

The optimizer hands a whole generation of configurations to :meth:`Evaluator.evaluate` as **one
batch** and gets one :class:`Evaluation` per configuration back, in the same order. The product's
evaluator is :class:`SimulatorEvaluator`, which calls ``mvopt.experiment.evaluate`` (imported
lazily, so that this package never imports the engine or CuPy at import time). Other evaluators
(tests use a closed-form one) are registered by name with :func:`register_evaluator`.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Callable, Protocol, Sequence, runtime_checkable

from mvopt.config import ExperimentConfig
from mvopt.errors import BackendUnavailable, MvoptError

if TYPE_CHECKING:
    from mvopt.engine.progress import ProgressFn

__all__ = [
    "Evaluation", "Evaluator", "SimulatorEvaluator", "register_evaluator", "make_evaluator",
    "evaluator_names", "STATUSES",
]

STATUSES = ("ok", "timeout", "stuck", "infeasible")


@dataclass(frozen=True)
class Evaluation:
    """What the simulator says about one configuration.

    ``feasible`` False means the configuration cannot run (does not fit in GPU memory, invalid
    layout...): ``reason`` says why, no simulation was spent, ``iteration_time_s`` is None and
    ``status`` is ``"infeasible"``. ``violation`` (> 0) says how far from feasible it is when
    known (e.g. memory needed / memory available - 1); samplers prefer smaller violations.
    A feasible configuration that timed out or got stuck has ``status`` ``"timeout"``/``"stuck"``
    and no iteration time.
    """

    feasible: bool
    reason: str | None = None
    iteration_time_s: float | None = None
    breakdown: dict[str, float] = field(default_factory=dict)
    status: str = "ok"
    sim_stats: dict[str, float] = field(default_factory=dict)
    violation: float = 1.0

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"Evaluation.status must be one of {STATUSES}, got {self.status!r}")
        if self.status == "ok" and self.feasible and self.iteration_time_s is None:
            raise ValueError("a feasible Evaluation with status 'ok' needs iteration_time_s")

    @classmethod
    def infeasible(cls, reason: str, violation: float = 1.0) -> "Evaluation":
        """An infeasible result (costs no simulation)."""
        return cls(feasible=False, reason=reason, status="infeasible", violation=max(violation, 1e-9))

    @property
    def ok(self) -> bool:
        """True when the simulation finished and produced an iteration time."""
        return self.feasible and self.status == "ok" and self.iteration_time_s is not None


@runtime_checkable
class Evaluator(Protocol):
    """Evaluates a batch of configurations.

    Contract: ``evaluate(configs)`` returns exactly ``len(configs)`` evaluations in the same order;
    the result for one configuration never depends on the others of the batch; it raises only for
    errors of the evaluator itself (a crashed backend), never for an infeasible configuration.
    """

    name: str

    def evaluate(self, configs: list[ExperimentConfig]) -> list[Evaluation]: ...


class SimulatorEvaluator:
    """The packet-level simulator, through ``mvopt.experiment.evaluate(configs, backend=...)``."""

    def __init__(self, backend: str = "cpu") -> None:
        from mvopt.engine.plan import parse_backend
        parse_backend(backend)        # a backend this machine lacks fails before any trial exists
        self.name = backend
        self.backend = backend
        self.on_progress: ProgressFn | None = None    # told how a long batch advances (the CLI's progress)
        self.last_report: dict = {}                   # the engine's figures of the last batch, per worker
        self._evaluate: Callable[..., list[Evaluation]] | None = None

    def _load(self) -> Callable[..., list[Evaluation]]:
        if self._evaluate is None:
            try:
                module = importlib.import_module("mvopt.experiment")
            except ModuleNotFoundError as e:
                if e.name not in ("mvopt.experiment", "mvopt"):
                    raise
                raise BackendUnavailable(
                    "the simulator (module mvopt.experiment) is not part of this installation yet; "
                    "the optimizer needs it to evaluate configurations") from None
            fn = getattr(module, "evaluate", None)
            if fn is None:
                raise BackendUnavailable("mvopt.experiment has no evaluate(configs, backend) function")
            self._evaluate = fn
        return self._evaluate

    def evaluate(self, configs: list[ExperimentConfig]) -> list[Evaluation]:
        """Simulate the configurations as one batch on this evaluator's backend."""
        if not configs:
            return []
        kwargs = {"progress": self.on_progress} if self.on_progress is not None else {}
        self.last_report = {}
        results = list(self._load()(list(configs), backend=self.backend, report=self.last_report, **kwargs))
        return check_results(configs, results, self.name)


def check_results(configs: Sequence[ExperimentConfig], results: Sequence[Evaluation], name: str) -> list[Evaluation]:
    """Check an evaluator kept its contract (one Evaluation per config)."""
    if len(results) != len(configs):
        raise MvoptError(f"evaluator {name!r} returned {len(results)} results for {len(configs)} configurations")
    for r in results:
        if not isinstance(r, Evaluation):
            raise MvoptError(f"evaluator {name!r} returned {type(r).__name__}, expected Evaluation")
    return list(results)


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
    backend specs ``gpu:0,1``, ``cpu:N``, ``gpu+cpu`` and ``auto`` (mvopt.engine.plan) are the
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
