"""``python -m mvopt report``: an HTML page (and PNGs when matplotlib is installed) for a study.

Plots: optimisation history (feasible trials and best so far), parameter importances computed
on feasible trials only, the Pareto front (several objectives), and the iteration-time breakdown
of the best trials. Each plot is written as SVG (no dependency) and as PNG when matplotlib is
installed; the page shows the PNG when there is one and the SVG otherwise.
"""

from __future__ import annotations

import html
import logging
import math
import warnings
from pathlib import Path
from typing import Any

import optuna
from optuna.distributions import FloatDistribution, IntDistribution
from optuna.trial import TrialState

from mvopt.errors import InputFileError
from mvopt.files import write_text_atomic
from mvopt.optimize.artifacts import breakdown_chart
from mvopt.optimize.charts import Chart, Series, have_matplotlib, to_png, to_svg
from mvopt.optimize.records import is_feasible_trial
from mvopt.optimize.study import study_settings
from mvopt.optimize.summary import best_table, best_trials

__all__ = ["write_report", "history_chart", "importances", "importance_chart", "pareto_chart"]

_log = logging.getLogger("mvopt.optimize")


def _objective_names(study: optuna.Study) -> list[str]:
    names = study_settings(study).get("objectives")
    return list(names) if names else [f"objective {i}" for i in range(len(study.directions))]


def history_chart(study: optuna.Study) -> Chart:
    """First objective of every feasible trial, and the best so far (milliseconds for times)."""
    name = _objective_names(study)[0]
    scale = 1e3 if name == "iteration_time" else 1.0
    feasible = sorted((t for t in study.get_trials(deepcopy=False) if is_feasible_trial(t)), key=lambda t: t.number)
    xs = [float(t.number) for t in feasible]
    ys = [t.values[0] * scale for t in feasible]
    best, run = [], math.inf
    for y in ys:
        run = min(run, y)
        best.append(run)
    unit = " (ms)" if scale != 1.0 else ""
    return Chart("optimisation history", "xy", [Series("trial", ys, xs), Series("best so far", best, xs, "line")],
                 xlabel="trial", ylabel=f"{name}{unit}")


def importances(study: optuna.Study) -> dict[str, float]:
    """fANOVA parameter importances for the first objective, on feasible trials only."""
    feasible = [t for t in study.get_trials(deepcopy=False) if is_feasible_trial(t)]
    if len(feasible) < 4:
        return {}
    copy = optuna.create_study(directions=study.directions)
    try:
        copy.add_trials(_within_observed_ranges(feasible))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return dict(optuna.importance.get_param_importances(copy, target=lambda t: t.values[0]))
    except (ValueError, RuntimeError) as e:  # e.g. no parameter common to every trial
        _log.info("importances not computed: %s", e)
        return {}


def _within_observed_ranges(trials: list[optuna.trial.FrozenTrial]) -> list[optuna.trial.FrozenTrial]:
    """The trials with each numeric range narrowed to the values the trials took.

    fANOVA integrates over the whole range of every parameter; where no feasible trial lies (a
    region that a constraint made infeasible) its forest extrapolates noise into "importance".
    """
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for t in trials:
        for name, v in t.params.items():
            if isinstance(t.distributions[name], (FloatDistribution, IntDistribution)):
                lo[name], hi[name] = min(lo.get(name, v), v), max(hi.get(name, v), v)
    out = []
    for t in trials:
        dists = {}
        for name, d in t.distributions.items():
            if name in lo and lo[name] < hi[name]:
                # a stepped float range is kept whole: optuna re-rounds its high end in floating
                # point, which could exclude an observed value (integers are exact)
                if not (isinstance(d, FloatDistribution) and d.step is not None):
                    d = type(d)(lo[name], hi[name], log=d.log, step=d.step)
            elif name in lo:
                continue  # one value only: no importance to speak of
            dists[name] = d
        out.append(optuna.trial.create_trial(params={n: t.params[n] for n in dists}, distributions=dists,
                                             values=t.values))
    return out


def importance_chart(values: dict[str, float]) -> Chart:
    """Horizontal bars of parameter importances."""
    names = list(values)
    return Chart("parameter importance (feasible trials)", "bars", [Series("importance", [values[n] for n in names])],
                 xlabel="fANOVA importance", categories=names)


def pareto_chart(study: optuna.Study) -> Chart:
    """Feasible trials in the plane of the first two objectives, and the Pareto front."""
    names = _objective_names(study)
    feasible = [t for t in study.get_trials(deepcopy=False) if is_feasible_trial(t)]
    scale = 1e3 if names[0] == "iteration_time" else 1.0
    front = sorted(best_trials(study, k=10**9), key=lambda t: t.values[0])
    return Chart("Pareto front", "xy", [
        Series("feasible trials", [t.values[1] for t in feasible], [t.values[0] * scale for t in feasible]),
        Series("Pareto front", [t.values[1] for t in front], [t.values[0] * scale for t in front], "line")],
        xlabel=names[0] + (" (ms)" if scale != 1.0 else ""), ylabel=names[1])


def _table(rows: list[dict[str, Any]]) -> str:
    if not rows:
        return "<p>(no feasible trial yet)</p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def write_report(study: optuna.Study, out_dir: str | Path, *, top: int = 5) -> Path:
    """Write ``index.html`` and the plots into ``out_dir``; returns the page's path."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputFileError(str(out), None, f"cannot be made a folder for the report ({e.strerror})") from None
    names = _objective_names(study)
    trials = study.get_trials(deepcopy=False)
    states = {s.name: sum(1 for t in trials if t.state == s) for s in TrialState}
    feasible = sum(1 for t in trials if is_feasible_trial(t))
    charts: dict[str, Chart] = {"history": history_chart(study)}
    imp = importances(study)
    if imp:
        charts["importance"] = importance_chart(imp)
    if len(study.directions) > 1:
        charts["pareto"] = pareto_chart(study)
    best = best_trials(study, top)
    if any(t.user_attrs.get("breakdown") for t in best):
        charts["breakdown"] = breakdown_chart([f"trial {t.number}" for t in best],
                                              [t.user_attrs.get("breakdown") or {} for t in best])
    sections = []
    for key, chart in charts.items():
        svg = to_svg(chart)
        write_text_atomic(out / f"{key}.svg", svg)
        if to_png(chart, out / f"{key}.png"):
            sections.append(f'<h2>{html.escape(chart.title)}</h2><img src="{key}.png" alt="{html.escape(chart.title)}">')
        else:
            sections.append(f"<h2>{html.escape(chart.title)}</h2>{svg}")
    note = "" if have_matplotlib() else "<p><i>matplotlib is not installed: plots are SVG only (pip install matplotlib for PNGs).</i></p>"
    counts = ", ".join(f"{v} {k.lower()}" for k, v in states.items() if v)
    imp_rows = [{"parameter": k, "importance": f"{v:.3f}"} for k, v in imp.items()]
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>mvopt study {html.escape(study.study_name)}</title>
<style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px;font-size:13px;text-align:left}}</style></head><body>
<h1>Study {html.escape(study.study_name)}</h1>
<p>{len(trials)} trials ({counts}); {feasible} feasible. Objectives: {html.escape(", ".join(names))} (minimised).</p>
{note}
<h2>Best configurations</h2>{_table(best_table(study, names, top))}
{"<h2>Parameter importance</h2>" + _table(imp_rows) if imp_rows else ""}
{"".join(sections)}
</body></html>
"""
    path = out / "index.html"
    write_text_atomic(path, page)
    return path
