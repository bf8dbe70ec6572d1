"""``python -m mvopt report``: an HTML page of a study, with its plots as PNG files.

The page lists the best configurations (or, when no trial is feasible, why), the parameter
importances as tables that each say which trials they used (:mod:`mvopt.optimize.importance`),
Optuna's plots of the feasible trials (:mod:`mvopt.optimize.plots`: history, slices, parallel
coordinates, contours, Pareto front) and the iteration-time breakdown of the best trials.
"""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Callable

import optuna
from optuna.trial import TrialState

from mvopt.errors import InputFileError
from mvopt.files import write_text_atomic
from mvopt.optimize.artifacts import breakdown_chart
from mvopt.optimize.charts import to_png
from mvopt.optimize.importance import ImportanceTable, describe_trials, importance_tables
from mvopt.optimize.plots import Plot, draw_study_plots, have_matplotlib
from mvopt.optimize.records import is_feasible_trial
from mvopt.optimize.study import study_settings
from mvopt.optimize.summary import best_table, best_trials, decided_trials, fidelity_counts, no_feasible_note, noise_note

__all__ = ["write_report"]


def _objective_names(study: optuna.Study) -> list[str]:
    names = study_settings(study).get("objectives")
    return list(names) if names else [f"objective {i}" for i in range(len(study.directions))]


def _table(rows: list[dict[str, Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in rows[0])
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(v))}</td>" for v in r.values()) + "</tr>" for r in rows)
    return f"<table><tr>{head}</tr>{body}</table>"


def _importance_section(tables: list[ImportanceTable], n_feasible: int) -> str:
    if not tables:
        return (f"<h2>Parameter importance</h2><p>Not computed: {n_feasible} feasible trials "
                "(at least 4 with varying parameters are needed).</p>")
    parts = ["<h2>Parameter importance</h2><p>fANOVA importance for the first objective, on feasible trials; "
             "a conditional parameter is ranked among the trials that have it, in a table of its own.</p>"]
    for t in tables:
        rows = [{"parameter": k, "importance": f"{v:.3f}"} for k, v in t.values.items()]
        parts.append(f"<h3>{html.escape(t.label)}</h3><p class=trials>trials {html.escape(describe_trials(t.trials))}</p>"
                     + _table(rows))
    return "".join(parts)


def _breakdown_section(study: optuna.Study, out: Path, top: int, matplotlib: bool) -> str:
    best = best_trials(study, top)
    breakdowns = [t.user_attrs.get("breakdown") or {} for t in best]
    if not any(breakdowns):
        return ""
    if all(len(b) <= 1 for b in breakdowns):  # a collective's: its makespan, nothing to break down
        return ("<h2>Iteration-time breakdown</h2><p>The workload's iteration time has a single component "
                f"({html.escape(', '.join(sorted({k for b in breakdowns for k in b})))}): nothing to break down.</p>")
    if not matplotlib:
        return ""
    to_png(breakdown_chart([f"trial {t.number}" for t in best], breakdowns), out / "breakdown.png")
    return (f"<h2>Iteration-time breakdown</h2><p class=trials>the {len(best)} best trials</p>"
            '<img src="breakdown.png" alt="iteration-time breakdown">')


def write_report(study: optuna.Study, out_dir: str | Path, *, top: int = 5,
                 say: Callable[[str], None] = lambda s: None) -> Path:
    """Write ``index.html`` and the plots into ``out_dir``; returns the page's path. ``say``
    receives a short line before each step that may take a while."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputFileError(str(out), None, f"cannot be made a folder for the report ({e.strerror})") from None
    names = _objective_names(study)
    trials = study.get_trials(deepcopy=False)
    # a multi-fidelity study's flow-level screens are not ranked, plotted or weighed with packet-level values
    feasible = decided_trials([t for t in trials if is_feasible_trial(t)])
    states = {s.name: sum(1 for t in trials if t.state == s) for s in TrialState}
    counts = ", ".join(f"{v} {k.lower()}" for k, v in states.items() if v)

    say(f"computing parameter importances on {len(feasible)} feasible trials")
    tables = importance_tables(feasible, study.directions)
    common = sorted(set.intersection(*(set(t.params) for t in feasible))) if feasible else []
    everywhere = next((t for t in tables if t.trials == tuple(x.number for x in feasible)), None)
    ranked = list(everywhere.values) if everywhere else []

    matplotlib = have_matplotlib()
    plots: list[Plot] = []
    if matplotlib and feasible:
        varying = [p for p in common if len({repr(t.params[p]) for t in feasible}) > 1]
        plots = draw_study_plots(feasible, names, study.directions, out, common_params=varying, ranked_params=ranked,
                                 say=say)
    say("writing the page")
    rows = best_table(study, names, top)
    best = _table(rows) if rows else f"<p>{html.escape(no_feasible_note(study))}</p>"
    noise = noise_note(study, top) if rows else None
    if noise:
        best += f"<p><b>Within noise:</b> {html.escape(noise)}.</p>"
    levels = fidelity_counts(trials)
    reached = ""
    if levels:
        reached = ("<p>Fidelity reached: " + ", ".join(f"{n} at {level} level" for level, n in levels.items())
                   + (" (the best configurations, importances and plots use the packet-level trials only)"
                      if len(levels) > 1 and "packet" in levels else "") + ".</p>")
    note = "" if matplotlib else "<p><i>matplotlib is not installed: no plots (pip install matplotlib).</i></p>"
    figures = "".join(f'<h2>{html.escape(p.title)}</h2><p class=trials>{html.escape(p.caption)}</p>'
                      f'<img src="{p.key}.png" alt="{html.escape(p.title)}">' for p in plots)
    page = f"""<!doctype html><html><head><meta charset="utf-8"><title>mvopt study {html.escape(study.study_name)}</title>
<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:2px 8px;font-size:13px;text-align:left}}.trials{{color:#555;font-size:13px}}
img{{max-width:100%}}</style></head><body>
<h1>Study {html.escape(study.study_name)}</h1>
<p>{len(trials)} trials ({counts}); {len(feasible)} feasible. Objectives: {html.escape(", ".join(names))} (minimised).</p>
{reached}
{note}
<h2>Best configurations</h2>{best}
{_importance_section(tables, len(feasible))}
{figures}
{_breakdown_section(study, out, top, matplotlib)}
</body></html>
"""
    path = out / "index.html"
    write_text_atomic(path, page)
    return path
