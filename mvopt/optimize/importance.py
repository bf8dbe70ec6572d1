"""Parameter importances of a study, computed where they mean something.

A conditional parameter (``network.hpcc.eta`` when ``network.cc`` is ``hpcc``) exists in some
trials only. Optuna's importance evaluators use the trials that have *every* parameter, which
in a conditional space are the trials of one branch, where the parameter that chose the branch
is constant: its importance then comes out near zero, the opposite of what the trials show. So
the importances come in tables, each saying which trials it used:

* one over the parameters that every feasible trial has, on all feasible trials;
* one per conditional branch (the feasible trials that share a set of parameters beyond those),
  over that branch's parameters, on that branch's trials.

Only feasible trials count (an infeasible one has no value), and each numeric range is narrowed
to the values the trials took (fANOVA integrates over the whole range; where no feasible trial
lies, its forest extrapolates noise into "importance").
"""

from __future__ import annotations

import logging
import warnings
from dataclasses import dataclass
from typing import Sequence

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import FrozenTrial

__all__ = ["ImportanceTable", "importance_tables", "within_observed_ranges", "describe_trials", "MIN_TRIALS"]

_log = logging.getLogger("mvopt.optimize")

MIN_TRIALS = 4   # fewer trials than this give no table


@dataclass(frozen=True)
class ImportanceTable:
    """fANOVA importances (summing to 1) of ``values``' parameters for the first objective,
    computed on the trials numbered ``trials``."""

    label: str
    trials: tuple[int, ...]
    values: dict[str, float]


def importance_tables(feasible: Sequence[FrozenTrial], directions: Sequence[optuna.study.StudyDirection]) -> list[ImportanceTable]:
    """The tables of the module docstring for ``feasible`` (feasible COMPLETE trials)."""
    if len(feasible) < MIN_TRIALS:
        return []
    common = set.intersection(*(set(t.params) for t in feasible))
    out = []
    values = _importances(feasible, common, directions)
    if values:
        out.append(ImportanceTable(f"parameters every feasible trial has, on all {len(feasible)} feasible trials",
                                   tuple(t.number for t in feasible), values))
    branches: dict[frozenset[str], list[FrozenTrial]] = {}
    for t in feasible:
        if set(t.params) != common:
            branches.setdefault(frozenset(t.params), []).append(t)
    for names, trials in sorted(branches.items(), key=lambda kv: (-len(kv[1]), sorted(kv[0]))):
        if len(trials) < MIN_TRIALS:
            continue
        values = _importances(trials, set(names), directions)
        if values:
            out.append(ImportanceTable(_branch_label(names - common, common, trials, feasible),
                                       tuple(t.number for t in trials), values))
    return out


def _branch_label(extra: frozenset[str], common: set[str], trials: Sequence[FrozenTrial],
                  feasible: Sequence[FrozenTrial]) -> str:
    """``the 14 feasible trials with network.hpcc.eta (network.cc = hpcc)``: the branch's own
    parameters, and the values of the shared categorical ones that lead to it."""
    where = []
    for name in sorted(common):
        if not isinstance(trials[0].distributions[name], CategoricalDistribution):
            continue
        here = {str(t.params[name]) for t in trials}
        if here != {str(t.params[name]) for t in feasible}:
            where.append(f"{name} = {' or '.join(sorted(here))}")
    cond = f" ({'; '.join(where)})" if where else ""
    return f"the {len(trials)} feasible trials with {', '.join(sorted(extra))}{cond}"


def _importances(trials: Sequence[FrozenTrial], names: set[str],
                 directions: Sequence[optuna.study.StudyDirection]) -> dict[str, float]:
    """fANOVA importances of ``names`` (those that vary) on ``trials``, for the first objective."""
    narrowed = within_observed_ranges(trials, names)
    if not narrowed or not narrowed[0].params:
        return {}
    copy = optuna.create_study(directions=list(directions))
    copy.add_trials(narrowed)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dict(optuna.importance.get_param_importances(copy, target=lambda t: t.values[0]))
    except (ValueError, RuntimeError) as e:
        _log.info("importances not computed: %s", e)
        return {}


def within_observed_ranges(trials: Sequence[FrozenTrial], names: set[str]) -> list[FrozenTrial]:
    """The trials restricted to the parameters ``names`` that take more than one value, each
    numeric range narrowed to the values the trials took."""
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    seen: dict[str, set[str]] = {}
    for t in trials:
        for name in names:
            v = t.params[name]
            seen.setdefault(name, set()).add(repr(v))
            if isinstance(t.distributions[name], (FloatDistribution, IntDistribution)):
                lo[name], hi[name] = min(lo.get(name, v), v), max(hi.get(name, v), v)
    varying = sorted(n for n in names if len(seen.get(n, ())) > 1)
    out = []
    for t in trials:
        dists = {}
        for name in varying:
            d = t.distributions[name]
            # a stepped float range is kept whole: optuna re-rounds its high end in floating
            # point, which could exclude an observed value (integers are exact)
            if name in lo and not (isinstance(d, FloatDistribution) and d.step is not None):
                d = type(d)(lo[name], hi[name], log=d.log, step=d.step)
            dists[name] = d
        out.append(optuna.trial.create_trial(params={n: t.params[n] for n in dists}, distributions=dists,
                                             values=t.values))
    return out


def describe_trials(numbers: Sequence[int], limit: int = 24) -> str:
    """``0-3, 5, 9-12`` (ranges of consecutive numbers; the first ``limit`` ranges, then how many more)."""
    ranges: list[list[int]] = []
    for n in sorted(numbers):
        if ranges and n == ranges[-1][1] + 1:
            ranges[-1][1] = n
        else:
            ranges.append([n, n])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in ranges[:limit])
    return text + (f", ... ({len(ranges) - limit} more ranges)" if len(ranges) > limit else "")
