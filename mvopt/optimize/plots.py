"""The report's plots, drawn by Optuna's visualization module (matplotlib backend) as PNG files.

Every plot is drawn on a copy of the study that holds its feasible trials only, with times in
milliseconds: an infeasible trial has +inf values, which no axis can show. The optimisation
history and the slice plots have a logarithmic value axis when every value is positive, since a
search's values span decades (a good configuration at 0.8 ms, a poor one at 15 ms) and a linear
axis flattens the range where the interesting trials are. The iteration-time breakdown, the one
plot specific to mvopt, is drawn by :mod:`mvopt.optimize.charts`.
"""

from __future__ import annotations

import importlib.util
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import optuna
from optuna.trial import FrozenTrial

from mvopt.files import write_atomic
from mvopt.optimize.space import TIME_OBJECTIVES

__all__ = ["Plot", "have_matplotlib", "feasible_copy", "draw_study_plots", "value_axis_name"]

_log = logging.getLogger("mvopt.optimize")

MAX_CONTOUR_PARAMS = 3   # a contour grid of k parameters has k x k panels: the k most important ones


@dataclass(frozen=True)
class Plot:
    """A PNG written into the report's folder."""

    key: str       # file name without .png
    title: str
    caption: str   # which trials and parameters it shows


def have_matplotlib() -> bool:
    """Whether the plots can be drawn."""
    return importlib.util.find_spec("matplotlib") is not None


def value_axis_name(name: str) -> str:
    """An objective's name on an axis, with its unit."""
    return f"{name} (ms)" if name in TIME_OBJECTIVES else name


def _scale(name: str) -> float:
    return 1e3 if name in TIME_OBJECTIVES else 1.0


def feasible_copy(feasible: Sequence[FrozenTrial], objective_names: Sequence[str],
                  directions: Sequence[optuna.study.StudyDirection], *, first_only: bool = False) -> optuna.Study:
    """An in-memory study of the feasible trials, values in display units (ms for times);
    ``first_only``: of the first objective only (Optuna draws the best-so-far line of a
    one-objective study only)."""
    n = 1 if first_only else len(directions)
    copy = optuna.create_study(directions=list(directions)[:n])
    scales = [_scale(name) for name in objective_names[:n]]
    copy.add_trials([optuna.trial.create_trial(params=t.params, distributions=t.distributions,
                                               values=[v * s for v, s in zip(t.values, scales)])
                     for t in sorted(feasible, key=lambda t: t.number)])
    return copy


def draw_study_plots(feasible: Sequence[FrozenTrial], objective_names: Sequence[str],
                     directions: Sequence[optuna.study.StudyDirection], out: Path, *,
                     common_params: Sequence[str], ranked_params: Sequence[str],
                     say: Callable[[str], None] = lambda s: None) -> list[Plot]:
    """Draw history, slice, parallel-coordinate, contour and (two objectives) Pareto plots of
    the ``feasible`` trials into ``out``; returns what was drawn. ``common_params``: the
    parameters every trial has (parallel coordinates); ``ranked_params``: those, most important
    first (the contour's)."""
    import matplotlib
    matplotlib.use("Agg")
    from optuna.visualization import matplotlib as ovm

    first = feasible_copy(feasible, objective_names, directions, first_only=True)
    target_name = value_axis_name(objective_names[0])
    every = f"the {len(feasible)} feasible trials"
    target: dict[str, Any] = {"target": lambda t: t.value, "target_name": target_name}
    positive = all(t.value > 0 for t in first.trials)
    log = "; logarithmic axis" if positive else ""
    plans: list[tuple[str, str, str, Callable[[], Any], bool]] = [
        ("history", "optimisation history", f"{target_name} of {every} by trial number, and the best so far{log}",
         lambda: _labelled(ovm.plot_optimization_history(first), target_name), positive),
        ("slice", "slice plots", f"{target_name} against each parameter, on the feasible trials that have it{log}",
         lambda: ovm.plot_slice(first, **target), positive),
    ]
    if len(common_params) >= 2:
        plans.append(("parallel", "parallel coordinates", f"{every}, over the parameters every trial has",
                      lambda: ovm.plot_parallel_coordinate(first, params=list(common_params), **target), False))
    contour = list(ranked_params[:MAX_CONTOUR_PARAMS])
    if len(contour) >= 2:
        plans.append(("contour", "contour plots", f"{every}, over the {len(contour)} most important parameters "
                      f"every trial has ({', '.join(contour)})",
                      lambda: ovm.plot_contour(first, params=contour, **target), False))
    if len(objective_names) == 2:
        names = [value_axis_name(x) for x in objective_names]
        plans.append(("pareto", "Pareto front", f"{every} in the plane of the two objectives; the front highlighted",
                      lambda: ovm.plot_pareto_front(feasible_copy(feasible, objective_names, directions),
                                                    target_names=names), False))
    drawn = []
    for key, title, caption, draw, log_axis in plans:
        say(f"drawing the {title}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")   # Optuna marks its matplotlib backend experimental
                axes = draw()
                _save(axes, out / f"{key}.png", log_axis)
        except (ValueError, RuntimeError) as e:   # e.g. too few distinct values for a contour
            _log.info("%s not drawn: %s", title, e)
            continue
        drawn.append(Plot(key, title, caption))
    return drawn


def _labelled(ax: Any, name: str) -> Any:
    ax.set_ylabel(name)
    return ax


def _save(axes: Any, path: Path, log_axis: bool) -> None:
    import matplotlib.pyplot as plt
    import numpy as np

    all_axes = list(np.ravel(axes)) if isinstance(axes, np.ndarray) else [axes]
    if log_axis:
        for ax in all_axes:
            ax.set_yscale("log")
    fig = all_axes[0].figure
    try:
        fig.tight_layout()
        write_atomic(path, lambda f: fig.savefig(f, format="png", dpi=90), binary=True)
    finally:
        plt.close(fig)
