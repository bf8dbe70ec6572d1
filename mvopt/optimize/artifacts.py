"""Per-trial plots stored as Optuna artifacts (optuna-dashboard shows them on the trial page)."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import optuna
from optuna.artifacts import FileSystemArtifactStore, get_all_artifact_meta, upload_artifact
from optuna.trial import FrozenTrial

from mvopt.optimize.charts import Chart, Series, to_svg
from mvopt.optimize.summary import best_trials

__all__ = ["breakdown_chart", "attach_best_plots", "default_artifact_dir"]

ARTIFACT_NAME = "breakdown.svg"


def default_artifact_dir(storage_url: str | None) -> str:
    """``<directory of the SQLite/journal file>/mvopt-artifacts``, else ``./mvopt-artifacts``."""
    url = storage_url or "sqlite:///mvopt.db"
    path = url[len("sqlite:///"):] if url.startswith("sqlite:///") else (url if "://" not in url else "")
    return str(Path(path).resolve().parent / "mvopt-artifacts") if path else "mvopt-artifacts"


def breakdown_chart(trials: list[FrozenTrial], title: str = "iteration-time breakdown (ms)") -> Chart:
    """Stacked bars of each trial's iteration-time breakdown, in milliseconds."""
    keys: list[str] = []
    for t in trials:
        for k in t.user_attrs.get("breakdown") or {}:
            if k not in keys:
                keys.append(k)
    series = [Series(k, [1e3 * float((t.user_attrs.get("breakdown") or {}).get(k, 0.0)) for t in trials]) for k in keys]
    return Chart(title, "bars", series, xlabel="ms", categories=[f"trial {t.number}" for t in trials])


def attach_best_plots(study: optuna.Study, artifact_dir: str, k: int = 3) -> int:
    """Upload a breakdown plot to each of the ``k`` best trials that has none yet; returns how many."""
    store = FileSystemArtifactStore(artifact_dir)
    os.makedirs(artifact_dir, exist_ok=True)
    n = 0
    for t in best_trials(study, k):
        if not t.user_attrs.get("breakdown"):
            continue
        if any(m.filename == ARTIFACT_NAME for m in get_all_artifact_meta(t, storage=study._storage)):
            continue
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, ARTIFACT_NAME)
            Path(path).write_text(to_svg(breakdown_chart([t], f"trial {t.number}: iteration-time breakdown (ms)")))
            upload_artifact(artifact_store=store, file_path=path, study_or_trial=t, storage=study._storage,
                            mimetype="image/svg+xml")
        n += 1
    return n
