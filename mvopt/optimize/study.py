"""Creating, resuming and joining studies; the search space travels inside the study.

``optimize`` creates the study and stores the (self-contained) search space, the sampler name
and the generation size as study user attributes, so that ``worker`` needs only the storage URL
and the study name, and ``report`` knows the objectives.
"""

from __future__ import annotations

import json
import logging
import warnings
from typing import Any

import optuna
from optuna.storages import BaseStorage

import mvopt
from mvopt.config import ExperimentConfig, config_to_dict, load_config
from mvopt.errors import ConfigError, MvoptError
from mvopt.optimize.samplers import make_sampler
from mvopt.optimize.scenarios import Scenario, scenario_configs
from mvopt.optimize.space import SearchSpace, flatten
from mvopt.optimize.space_file import load_space

__all__ = ["create_or_resume", "join_study", "space_of", "study_settings", "config_of_trial"]

_log = logging.getLogger("mvopt.optimize")

SPACE_ATTR = "mvopt_space"
SETTINGS_ATTR = "mvopt_settings"


def _exists(storage: BaseStorage, name: str) -> bool:
    try:
        storage.get_study_id_from_name(name)
        return True
    except KeyError:
        return False


def create_or_resume(storage: BaseStorage, space: SearchSpace, *, study_name: str | None = None,
                     sampler: str = "tpe", generation_size: int = 32, seed: int | None = None,
                     resume: bool = False) -> optuna.Study:
    """A new study for ``space`` or, with ``resume``, the existing one of that name.

    An existing study with trials is never reused silently: without ``resume`` it is an error
    naming the two ways out. Resuming with other objectives than the study's is an error too.
    """
    name = study_name or space.name
    settings = {"sampler": sampler, "generation_size": generation_size, "seed": seed,
                "objectives": space.objective_names, "mvopt_version": mvopt.__version__}
    opt_sampler = make_sampler(sampler, space, generation_size, seed)
    if _exists(storage, name):
        study = optuna.load_study(study_name=name, storage=storage, sampler=opt_sampler)
        if study.trials and not resume:
            raise MvoptError(f"study {name!r} already exists with {len(study.trials)} trials: pass --resume "
                             "to continue it, or --study NAME to start another one")
        stored = study.user_attrs.get(SETTINGS_ATTR, {}).get("objectives")
        if stored is not None and stored != space.objective_names:
            raise MvoptError(f"study {name!r} optimises {stored}, the search space {space.objective_names}: "
                             "use another --study name")
        stored_space = study.user_attrs.get(SPACE_ATTR)
        if isinstance(stored_space, dict):
            changed = _base_changes(stored_space.get("base"), space.base) if study.trials else []
            if changed:
                raise MvoptError(f"study {name!r} was created with another base experiment ({'; '.join(changed[:3])}"
                                 f"{'; ...' if len(changed) > 3 else ''}): its trials would not be comparable with "
                                 "this run's. Resume with the same base (space file and --set), or use another --study name")
            scen = ("scenarios", "scenario_objective")
            if study.trials and _as_stored({k: stored_space.get(k) for k in scen}) != \
                    _as_stored({k: space.to_data().get(k) for k in scen}):
                raise MvoptError(f"study {name!r} was created with other scenarios (scenarios, scenario_objective): "
                                 "its trials' values would not be comparable with this run's. Resume with the same "
                                 "scenarios, or use another --study name")
            if _problem(stored_space) != _problem(space.to_data()):
                _log.warning("study %r: the search space (parameters, derived values, constraints or prices) changed "
                             "since the study was created; continuing", name)
    else:
        study = optuna.create_study(study_name=name, storage=storage, sampler=opt_sampler,
                                    directions=space.directions, load_if_exists=True)
    study.set_user_attr(SPACE_ATTR, space.to_data())
    study.set_user_attr(SETTINGS_ATTR, settings)
    with warnings.catch_warnings():  # experimental in Optuna: names the objectives in the dashboard
        warnings.simplefilter("ignore")
        study.set_metric_names(space.objective_names)
    return study


def _as_stored(data: Any) -> Any:
    # (a study's attributes are stored as JSON: compare in that form, tuples as lists)
    return json.loads(json.dumps(data))


def _problem(space_data: dict[str, Any]) -> Any:
    # what a space asks, apart from its base experiment and its run settings
    return _as_stored({k: space_data.get(k) for k in ("parameters", "derived", "constraints", "prices", "objectives")})


def _base_changes(stored: Any, now: ExperimentConfig) -> list[str]:
    """The fields of the base experiment that differ, as ``path: then, now``. The stored base is
    read with today's schema first, so that fields added since (at their defaults) are no change;
    its folder, base_dir, is none either (the same space run from elsewhere is the same problem).
    A base that no longer loads, or none, cannot be compared: no change is reported."""
    if not isinstance(stored, dict) or not stored:
        return []
    try:
        old_cfg = load_config(stored)
    except ConfigError:
        return []
    old, new = (flatten(_as_stored(config_to_dict(c))) for c in (old_cfg, now))
    return [f"{k}: {old.get(k)!r} then, {new.get(k)!r} now" for k in sorted(set(old) | set(new)) if old.get(k) != new.get(k)]


def space_of(study: optuna.Study, *, fidelity: str | None = None) -> SearchSpace:
    """The search space stored in a study by ``optimize`` (``fidelity``: a worker's ``--fidelity``
    in place of the stored ``run.fidelity``)."""
    data = study.user_attrs.get(SPACE_ATTR)
    if data is None:
        raise MvoptError(f"study {study.study_name!r} has no search space: it was not created by "
                         "`python -m mvopt optimize`")
    try:
        return load_space(data, strict=False, fidelity=fidelity)
    except ConfigError as e:
        raise MvoptError(f"study {study.study_name!r}: its stored search space no longer loads: {e}") from None


def study_settings(study: optuna.Study) -> dict[str, Any]:
    """Sampler, generation size, seed and objectives recorded at creation."""
    return dict(study.user_attrs.get(SETTINGS_ATTR, {}))


def join_study(storage: BaseStorage, study_name: str, *, sampler: str | None = None,
               generation_size: int | None = None, seed: int | None = None,
               fidelity: str | None = None) -> tuple[optuna.Study, SearchSpace, int]:
    """Open an existing study as one more worker: (study, its space, generation size); ``fidelity``
    replaces the space's ``run.fidelity``."""
    if not _exists(storage, study_name):
        raise MvoptError(f"no study named {study_name!r} in this storage (create it with `python -m mvopt optimize "
                         "SPACE.yaml --storage URL` first)")
    probe = optuna.load_study(study_name=study_name, storage=storage)
    space = space_of(probe, fidelity=fidelity)
    settings = study_settings(probe)
    gen = generation_size or int(settings.get("generation_size", 32))
    name = sampler or settings.get("sampler", "tpe")
    if name == "grid":  # the seed orders the grid: every worker must use the study's
        seed = settings.get("seed")
    opt_sampler = make_sampler(name, space, gen, seed)
    return optuna.load_study(study_name=study_name, storage=storage, sampler=opt_sampler), space, gen


def config_of_trial(study: optuna.Study, number: int, scenario: str | None = None) -> ExperimentConfig:
    """The exact experiment trial ``number`` simulated (for ``simulate --from-study``); under the
    space's scenario named ``scenario`` when given (``--scenario``)."""
    trials = [t for t in study.get_trials(deepcopy=False) if t.number == number]
    if not trials:
        raise MvoptError(f"study {study.study_name!r} has no trial {number} (it has {len(study.trials)})")
    data = trials[0].user_attrs.get("config")
    if data is None:
        raise MvoptError(f"trial {number} of study {study.study_name!r} records no configuration "
                         f"(state {trials[0].state.name}; {trials[0].user_attrs.get('reason') or 'not finished'})")
    cfg = load_config(data)
    if scenario is None:
        return cfg
    stored = (study.user_attrs.get(SPACE_ATTR) or {}).get("scenarios") or {}
    if scenario not in stored:
        have = f"its scenarios are {', '.join(map(str, stored))}" if stored else "its search space has no scenarios"
        raise MvoptError(f"study {study.study_name!r} has no scenario {scenario!r}: {have}")
    return scenario_configs(cfg, [Scenario(scenario, tuple((stored[scenario] or {}).items()))])[0]
