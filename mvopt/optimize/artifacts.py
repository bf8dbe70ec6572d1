"""Per-trial plots stored as Optuna artifacts (optuna-dashboard shows them on the trial page).

Optuna accepts artifacts only on running trials, so the loop attaches the plot when it tells a
trial that improves the best value so far: every trial that was once the best, the final best
included, carries its iteration-time breakdown plot.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import optuna
from optuna.artifacts import FileSystemArtifactStore, upload_artifact

from mvopt.optimize.charts import Chart, Series, to_svg

__all__ = ["breakdown_chart", "attach_breakdown_plot", "default_artifact_dir", "ARTIFACT_NAME"]

ARTIFACT_NAME = "breakdown.svg"


def default_artifact_dir(storage_url: str | None) -> str:
    """``<directory of the SQLite/journal file>/mvopt-artifacts``, else ``./mvopt-artifacts``."""
    url = storage_url or "sqlite:///mvopt.db"
    path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else (url if "://" not in url else "")
    return str(Path(path).resolve().parent / "mvopt-artifacts") if path else str(Path("mvopt-artifacts").resolve())


def breakdown_chart(labels: Sequence[str], breakdowns: Sequence[Mapping[str, float]],
                    title: str = "iteration-time breakdown (ms)") -> Chart:
    """Stacked bars, one per label, of iteration-time breakdowns (seconds) shown in milliseconds."""
    keys: list[str] = []
    for b in breakdowns:
        keys += [k for k in b if k not in keys]
    series = [Series(k, [1e3 * float(b.get(k, 0.0)) for b in breakdowns]) for k in keys]
    return Chart(title, series, xlabel="ms", categories=list(labels))


def attach_breakdown_plot(study: optuna.Study, trial_id: int, breakdown: Mapping[str, float],
                          artifact_dir: str) -> str:
    """Upload the breakdown plot of a running trial; returns the artifact id."""
    os.makedirs(artifact_dir, exist_ok=True)
    trial = study._storage.get_trial(trial_id)
    chart = breakdown_chart([f"trial {trial.number}"], [breakdown], f"trial {trial.number}: iteration-time breakdown (ms)")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, ARTIFACT_NAME)
        Path(path).write_text(to_svg(chart))
        return upload_artifact(artifact_store=FileSystemArtifactStore(artifact_dir), file_path=path,
                               study_or_trial=trial, storage=study._storage, mimetype="image/svg+xml")
