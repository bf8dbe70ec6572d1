"""What an evaluator promises: the contract between the optimizer and whatever evaluates
configurations (the simulator, :mod:`mvopt.build`; tests use a closed-form one).

The optimizer hands a whole generation of configurations to :meth:`Evaluator.evaluate` as **one
batch** and gets one :class:`Evaluation` per configuration back, in the same order. This module
sits below both sides, so that neither imports the other to agree on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol, Sequence, runtime_checkable

from mvopt.config import ExperimentConfig
from mvopt.errors import MvoptError

__all__ = ["Evaluation", "Evaluator", "STATUSES", "check_results"]

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


def check_results(configs: Sequence[ExperimentConfig], results: Sequence[Evaluation], name: str) -> list[Evaluation]:
    """Check an evaluator kept its contract (one Evaluation per config)."""
    if len(results) != len(configs):
        raise MvoptError(f"evaluator {name!r} returned {len(results)} results for {len(configs)} configurations")
    for r in results:
        if not isinstance(r, Evaluation):
            raise MvoptError(f"evaluator {name!r} returned {type(r).__name__}, expected Evaluation")
    return list(results)
