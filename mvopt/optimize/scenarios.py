"""Scenarios: every trial simulated once per set of overrides, its value the mean or the worst.

A search space's ``scenarios:`` names sets of configuration overrides applied on top of each
trial's configuration (a failed spine link, a slow NIC, a straggler...). Every trial is
simulated once per scenario, all in the same batch as the generation's other trials, and its
``iteration_time`` is the mean of the scenarios' times (``scenario_objective: mean``, the
default) or the largest (``worst``); the objective ``worst_iteration_time`` adds the largest
as a second objective to a mean. With replicates, the scenarios are combined seed by seed first
and the seeds then averaged, so that a trial's replicate times stay the values its mean is made of.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from mvopt.config import ExperimentConfig, with_overrides
from mvopt.errors import ConfigError
from mvopt.evaluation import Evaluation

__all__ = ["SCENARIO_OBJECTIVES", "MAX_SCENARIOS", "SCENARIO_ATTRS", "Scenario", "parse_scenarios",
           "scenario_configs", "combine_scenarios", "scenario_attrs"]

SCENARIO_OBJECTIVES = ("mean", "worst")  # what a trial's iteration_time is over its scenarios
MAX_SCENARIOS = 64
# What a trial of a space with scenarios records: each scenario's time (mean over the replicates),
# the mean and the worst over scenarios (each averaged over the replicates), the worst's name.
SCENARIO_ATTRS = ("scenario_times_s", "iteration_time_mean_s", "iteration_time_worst_s", "worst_scenario")


@dataclass(frozen=True)
class Scenario:
    """A named set of configuration overrides (dotted path -> value), applied after the trial's own."""

    name: str
    overrides: tuple[tuple[str, Any], ...] = ()


def scenario_configs(cfg: ExperimentConfig, scenarios: Sequence[Scenario]) -> list[ExperimentConfig]:
    """``cfg`` under every scenario, in order (an empty scenario gives ``cfg`` itself).

    Raises ConfigError (its field prefixed with ``scenarios.NAME``) for a scenario that makes
    the configuration invalid."""
    out = []
    for s in scenarios:
        if not s.overrides:
            out.append(cfg)
            continue
        try:
            out.append(with_overrides(cfg, dict(s.overrides)))
        except ConfigError as e:
            raise ConfigError(f"scenarios.{s.name}.{e.path}", e.allowed, e.value, show_value=e.show_value) from None
    return out


def combine_scenarios(evals: Sequence[Evaluation], names: Sequence[str],
                      objective: str) -> tuple[Evaluation, float | None]:
    """One Evaluation from one configuration's scenarios (one seed), and the worst time (None when
    not every scenario finished).

    All finished: ``objective`` ``mean`` gives the mean time and the mean breakdown, ``worst``
    the slowest scenario's time and breakdown; statistics are the first scenario's. Any not
    finished (infeasible, timeout, stuck): that scenario's evaluation, its name in the reason.
    """
    for ev, name in zip(evals, names):
        if not ev.ok:
            reason = f"scenario {name}: {ev.reason or 'simulation ' + ev.status}"
            return Evaluation(ev.feasible, reason, None, dict(ev.breakdown), ev.status, dict(ev.sim_stats),
                              ev.violation), None
    times = [float(ev.iteration_time_s) for ev in evals]  # type: ignore[arg-type]
    worst = max(range(len(times)), key=lambda i: (times[i], -i))
    if objective == "worst":
        ev = evals[worst]
        return Evaluation(True, None, times[worst], dict(ev.breakdown), "ok", dict(evals[0].sim_stats)), times[worst]
    keys = list(dict.fromkeys(k for ev in evals for k in ev.breakdown))
    parts = {k: math.fsum(float(ev.breakdown.get(k, 0.0)) for ev in evals) / len(evals) for k in keys}
    return Evaluation(True, None, math.fsum(times) / len(times), parts, "ok", dict(evals[0].sim_stats)), times[worst]


def scenario_attrs(per_seed: Sequence[Sequence[Evaluation]], names: Sequence[str],
                   worst_per_seed: Sequence[float | None]) -> dict[str, Any]:
    """The user attributes of :data:`SCENARIO_ATTRS` from every seed's scenario evaluations
    (``per_seed[r][s]``); {} unless every one finished."""
    if any(w is None for w in worst_per_seed):
        return {}
    n_seed = len(per_seed)
    times = {name: math.fsum(float(per_seed[r][s].iteration_time_s) for r in range(n_seed)) / n_seed  # type: ignore[arg-type]
             for s, name in enumerate(names)}
    means = [math.fsum(float(ev.iteration_time_s) for ev in seed) / len(seed) for seed in per_seed]  # type: ignore[arg-type]
    worst_name = max(names, key=lambda n: (times[n], -list(names).index(n)))
    return {"scenario_times_s": times, "iteration_time_mean_s": math.fsum(means) / n_seed,
            "iteration_time_worst_s": math.fsum(float(w) for w in worst_per_seed) / n_seed,  # type: ignore[arg-type]
            "worst_scenario": worst_name}


def parse_scenarios(raw: Any, check_path: Any) -> tuple[Scenario, ...]:
    """Validate a ``scenarios:`` mapping name -> {config path: value} (``check_path(where, path,
    value)`` raises ConfigError for a path that is not a configuration field or a value it refuses)."""
    if raw is None:
        return ()
    if not isinstance(raw, Mapping) or not raw:
        raise ConfigError("scenarios", "must be a non-empty mapping scenario name -> {config path: value} "
                          "(an empty mapping {} for the configuration as the trial sets it)", raw)
    if len(raw) > MAX_SCENARIOS:
        raise ConfigError("scenarios", f"must name at most {MAX_SCENARIOS} scenarios", len(raw))
    out = []
    for name, overrides in raw.items():
        where = f"scenarios.{name}"
        if not isinstance(name, str) or not name:
            raise ConfigError("scenarios", "scenario names must be non-empty strings", name)
        if overrides is None:
            overrides = {}
        if not isinstance(overrides, Mapping):
            raise ConfigError(where, "must be a mapping {config path: value} ({} for none)", overrides)
        for path, value in overrides.items():
            check_path(f"{where}.{path}", str(path), value)
        out.append(Scenario(name, tuple((str(p), v) for p, v in overrides.items())))
    return tuple(out)
