"""The best trials of a study and their table (printed at the end of a run and in reports)."""

from __future__ import annotations

import collections
import math
from typing import Any, Sequence

import optuna
from optuna.trial import FrozenTrial

from mvopt.optimize.fidelity import within_noise
from mvopt.optimize.records import is_feasible_trial
from mvopt.optimize.space import TIME_OBJECTIVES

__all__ = ["best_trials", "decided_trials", "format_value", "best_table", "format_table", "no_feasible_note",
           "fidelity_counts", "noise_note"]


def decided_trials(trials: Sequence[FrozenTrial]) -> list[FrozenTrial]:
    """The trials whose values come from the highest level any of them reached: when some reached
    packet level, those (and trials recorded before levels were, which have no ``fidelity``); a
    flow-level screen is never ranked against packet-level values."""
    if any(t.user_attrs.get("fidelity") == "packet" for t in trials):
        return [t for t in trials if t.user_attrs.get("fidelity", "packet") == "packet"]
    return list(trials)


def best_trials(study: optuna.Study, k: int = 5) -> list[FrozenTrial]:
    """Up to ``k`` best feasible trials of the deciding level (:func:`decided_trials`): by value
    (one objective) or the Pareto front (several).

    Duplicates of an already listed configuration are left out.
    """
    trials = decided_trials([t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
                             if is_feasible_trial(t)])
    if len(study.directions) > 1:
        trials = _pareto(trials)
        trials.sort(key=lambda t: tuple(t.values))
    else:
        trials.sort(key=lambda t: (t.values[0], t.number))
    out, seen = [], set()
    for t in trials:
        key = t.user_attrs.get("config_key", t.number)
        if key not in seen:
            seen.add(key)
            out.append(t)
        if len(out) == k:
            break
    return out


def _pareto(trials: list[FrozenTrial]) -> list[FrozenTrial]:
    front = []
    for t in trials:
        dominated = any(all(a <= b for a, b in zip(o.values, t.values)) and o.values != t.values for o in trials)
        if not dominated:
            front.append(t)
    return front


def format_value(name: str, v: float | None) -> str:
    """An objective value for people: times in ms/us/s, costs with thousands separators."""
    if v is None or not math.isfinite(v):
        return "-"
    if name in TIME_OBJECTIVES:
        if v >= 1:
            return f"{v:.3f} s"
        return f"{v * 1e3:.3f} ms" if v >= 1e-3 else f"{v * 1e6:.2f} us"
    return f"{v:,.0f}"


def best_table(study: optuna.Study, objective_names: Sequence[str], k: int = 5) -> list[dict[str, Any]]:
    """Rows (trial, one column per objective, each scenario's time when the space has scenarios,
    the level its values come from, the spread of its replicates when it has some, parameters) of
    the best trials."""
    rows = []
    best = best_trials(study, k)
    for t in best:
        row: dict[str, Any] = {"trial": t.number}
        for name, v in zip(objective_names, t.values):
            row[name] = format_value(name, v)
        for name in dict.fromkeys(n for b in best for n in b.user_attrs.get("scenario_times_s") or {}):
            row[f"scenario {name}"] = format_value("iteration_time", (t.user_attrs.get("scenario_times_s") or {}).get(name))
        if any("fidelity" in b.user_attrs for b in best):
            row["fidelity"] = t.user_attrs.get("fidelity", "-")
        if any("replicate_times_s" in b.user_attrs for b in best):
            row["seeds: std"] = _spread(t)
        row["parameters"] = ", ".join(f"{p}={_short(v)}" for p, v in t.params.items())
        rows.append(row)
    return rows


def _spread(t: FrozenTrial) -> str:
    times = t.user_attrs.get("replicate_times_s")
    std = t.user_attrs.get("iteration_time_std_s")
    if not times or std is None:
        return "-"
    mean = sum(times) / len(times)
    return f"{len(times)}: {100 * std / mean:.2f} %" if mean > 0 else f"{len(times)}: -"


def fidelity_counts(trials: Sequence[FrozenTrial]) -> dict[str, int]:
    """How many complete trials reached each level (``fidelity``), packet first; {} when none records one."""
    counts = collections.Counter(t.user_attrs["fidelity"] for t in trials
                                 if t.state == optuna.trial.TrialState.COMPLETE and "fidelity" in t.user_attrs)
    return {level: counts[level] for level in sorted(counts, key=lambda x: (x != "packet", x))}


def noise_note(study: optuna.Study, k: int = 5) -> str | None:
    """A sentence naming the best trials whose iteration times are within the best one's noise
    (replicate means closer than two standard errors of their difference); None when there are
    no such trials (or no replicates, or several objectives)."""
    if len(study.directions) != 1:
        return None
    best = best_trials(study, k)
    if len(best) < 2:
        return None
    top = best[0]
    close = [t for t in best[1:] if within_noise(top.user_attrs, t.user_attrs, top.values[0], t.values[0])]
    if not close:
        return None
    others = ", ".join(str(t.number) for t in close)
    return (f"trial {top.number} is within the seed-to-seed noise of trial{'s' if len(close) > 1 else ''} {others} "
            "(their mean iteration times differ by less than two standard errors of the difference): "
            "the simulation does not tell them apart (more run.replicates may)")


def _short(v: Any) -> str:
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def format_table(rows: list[dict[str, Any]]) -> str:
    """A plain-text table of ``rows`` (same keys in every row)."""
    if not rows:
        return "(no feasible trial yet)"
    cols = list(rows[0])
    widths = {c: max(len(c), *(len(str(r[c])) for r in rows)) for c in cols}
    lines = ["  ".join(c.ljust(widths[c]) for c in cols), "  ".join("-" * widths[c] for c in cols)]
    lines += ["  ".join(str(r[c]).ljust(widths[c]) for c in cols) for r in rows]
    return "\n".join(lines)


def no_feasible_note(study: optuna.Study) -> str:
    """What to say in place of the best configurations when no trial is feasible: how many
    trials are infeasible, and the most common reason."""
    done = study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
    if not done:
        return "no trial has finished yet"
    reasons = collections.Counter(str(t.user_attrs.get("reason") or t.user_attrs.get("status") or "no reason recorded")
                                  for t in done)
    reason, count = reasons.most_common(1)[0]
    every = "the only complete trial is" if len(done) == 1 else f"all {len(done)} complete trials are"
    share = "" if count == len(done) else f" ({count} of them)"
    return f"no feasible trial: {every} infeasible; the most common reason{share}: {reason}"
