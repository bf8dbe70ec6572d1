"""The best trials of a study and their table (printed at the end of a run and in reports)."""

from __future__ import annotations

import collections
import math
from typing import Any, Sequence

import optuna
from optuna.trial import FrozenTrial

from mvopt.optimize.records import is_feasible_trial

__all__ = ["best_trials", "format_value", "best_table", "format_table", "no_feasible_note"]


def best_trials(study: optuna.Study, k: int = 5) -> list[FrozenTrial]:
    """Up to ``k`` best feasible trials: by value (one objective) or the Pareto front (several).

    Duplicates of an already listed configuration are left out.
    """
    trials = [t for t in study.get_trials(deepcopy=False, states=(optuna.trial.TrialState.COMPLETE,))
              if is_feasible_trial(t)]
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
    if name == "iteration_time":
        if v >= 1:
            return f"{v:.3f} s"
        return f"{v * 1e3:.3f} ms" if v >= 1e-3 else f"{v * 1e6:.2f} us"
    return f"{v:,.0f}"


def best_table(study: optuna.Study, objective_names: Sequence[str], k: int = 5) -> list[dict[str, Any]]:
    """Rows (trial, one column per objective, parameters) of the best trials."""
    rows = []
    for t in best_trials(study, k):
        row: dict[str, Any] = {"trial": t.number}
        for name, v in zip(objective_names, t.values):
            row[name] = format_value(name, v)
        row["parameters"] = ", ".join(f"{p}={_short(v)}" for p, v in t.params.items())
        rows.append(row)
    return rows


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
