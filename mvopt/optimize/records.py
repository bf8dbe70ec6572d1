"""What a finished trial records, and how a stored trial is read back.

Every trial gets the user attributes listed in :data:`USER_ATTRS` (the canonical config, its key,
feasibility and reason, status, iteration-time breakdown, simulator statistics, backend and
simulator version), one constraint ``violation`` (<= 0 feasible, Optuna's convention) and one
value per objective. Infeasible or unfinished candidates are told COMPLETE with the constraint
> 0 and +inf values, so that every sampler learns from them (CMA-ES, which ignores constraints,
ranks them last by value); they cost no simulation.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

import optuna
from optuna.trial import FrozenTrial

import mvopt
from mvopt.optimize.evaluator import Evaluation
from mvopt.optimize.scenarios import SCENARIO_ATTRS
from mvopt.optimize.space import Candidate, SearchSpace
from mvopt.optimize.writer import Finish

__all__ = ["Outcome", "USER_ATTRS", "LEVEL_ATTRS", "CONSTRAINT", "identity_attrs", "outcome_of", "outcome_from_trial", "finish_of", "is_feasible_trial",
           "iteration_time_of"]

USER_ATTRS = ("config", "config_key", "feasible", "reason", "status", "breakdown", "sim_stats", "backend",
              "mvopt_version")
# What the levels of a simulated trial record (:mod:`mvopt.optimize.fidelity`): ``fidelity``, the
# level its values come from; ``<level>_iteration_time_s`` for every level it finished (the mean
# of its replicates); ``promoted`` and ``flow_blind`` (the fields the flow level cannot see) in
# multi-fidelity studies; with replicates, their seeds, times, standard deviation and spread; with
# scenarios, :data:`~mvopt.optimize.scenarios.SCENARIO_ATTRS`.
LEVEL_ATTRS = ("fidelity", "flow_iteration_time_s", "packet_iteration_time_s", "promoted", "flow_blind",
               "replicate_seeds", "replicate_times_s", "iteration_time_std_s", "iteration_time_spread") + SCENARIO_ATTRS
CONSTRAINT = "violation"
CONSTRAINT_ATTR = f"constraints:{CONSTRAINT}"  # Optuna 5's system attribute for trial.set_constraint(CONSTRAINT, v)


@dataclass
class Outcome:
    """The result of one configuration, ready to be told (and to be copied for duplicates)."""

    values: list[float]
    violation: float
    attrs: dict[str, Any] = field(default_factory=dict)

    @property
    def feasible(self) -> bool:
        return self.violation <= 0.0


def identity_attrs(cand: Candidate, backend: str) -> dict[str, Any]:
    """The attributes known before simulation (written when the RUNNING trial is created)."""
    return {"config": cand.config_data, "config_key": cand.key,
            "backend": backend, "mvopt_version": mvopt.__version__}


def outcome_of(space: SearchSpace, cand: Candidate, ev: Evaluation | None, backend: str,
               identity: Mapping[str, Any] | None = None, *, measured: Mapping[str, Any] | None = None) -> Outcome:
    """The outcome of ``cand``: from the space alone (infeasible) or from its evaluation ``ev``.

    ``identity``: :func:`identity_attrs` of ``cand`` when the caller has them already;
    ``measured``: the attributes its simulation recorded (``iteration_time_worst_s`` gives the
    ``worst_iteration_time`` objective)."""
    attrs = dict(identity) if identity is not None else identity_attrs(cand, backend)
    n = len(space.objectives)
    if ev is None:  # the space itself says no: invalid config or violated constraint
        attrs.update(feasible=False, reason=cand.reason, status="infeasible", breakdown={}, sim_stats={})
        return Outcome([math.inf] * n, max(cand.violation, 1e-9), attrs)
    attrs.update(feasible=ev.feasible, reason=ev.reason, status=ev.status, breakdown=dict(ev.breakdown),
                 sim_stats=dict(ev.sim_stats))
    if not ev.ok:
        if ev.feasible and ev.reason is None:
            attrs["reason"] = f"simulation {ev.status}"
        return Outcome([math.inf] * n, max(ev.violation, 1e-9), attrs)
    values = []
    for o in space.objectives:
        if o.name == "iteration_time":
            values.append(float(ev.iteration_time_s))  # type: ignore[arg-type]
        elif o.name == "worst_iteration_time":
            values.append(float((measured or {})["iteration_time_worst_s"]))
        else:
            values.append(float(cand.cost or 0.0))
    return Outcome(values, 0.0, attrs)


def finish_of(trial_id: int, outcome: Outcome, extra: Mapping[str, Any] | None = None, *,
              written: Mapping[str, Any] | None = None) -> Finish:
    """What telling ``outcome`` writes on a RUNNING trial: the constraint, the attributes, the values.

    The constraint uses the attribute ``trial.set_constraint`` writes, so that
    ``FrozenTrial.constraints`` reads it back (tests check). ``written`` holds the user attributes
    stored when the trial was created (skipped when unchanged). A :class:`~mvopt.optimize.writer.TrialWriter`
    stores a whole batch of these at once.
    """
    written = written or {}
    attrs = {k: v for k, v in {**outcome.attrs, **(extra or {})}.items() if k not in written or written[k] != v}
    return Finish(trial_id, [float(v) for v in outcome.values], {CONSTRAINT_ATTR: float(outcome.violation)}, attrs)


def outcome_from_trial(t: FrozenTrial) -> Outcome | None:
    """The outcome stored on a COMPLETE trial recorded by mvopt (None for other trials)."""
    if t.state != optuna.trial.TrialState.COMPLETE or "config_key" not in t.user_attrs or t.values is None:
        return None
    attrs = {k: t.user_attrs[k] for k in USER_ATTRS + LEVEL_ATTRS if k in t.user_attrs}
    violation = float(t.constraints.get(CONSTRAINT, 0.0))
    return Outcome(list(t.values), violation, attrs)


def is_feasible_trial(t: FrozenTrial) -> bool:
    """A COMPLETE trial with finite values and no violated constraint."""
    return (t.state == optuna.trial.TrialState.COMPLETE and t.values is not None
            and all(math.isfinite(v) for v in t.values) and all(c <= 0 for c in t.constraints.values()))


def iteration_time_of(t: FrozenTrial, objective_names: Sequence[str]) -> float | None:
    """The trial's iteration time in seconds (None when not an objective or not available)."""
    if t.values is None or "iteration_time" not in objective_names:
        return None
    v = t.values[list(objective_names).index("iteration_time")]
    return v if math.isfinite(v) else None
