"""Sampler registry: ``--sampler tpe|gp|cmaes|nsga2|random|qmc|grid`` with batch-aware settings.

A sampler is one small function registered with :func:`register_sampler`; it receives the search
space, the generation size and the seed. Samplers that need a package that is not installed say
so with a clear :class:`MvoptError` instead of failing inside Optuna.
"""

from __future__ import annotations

import importlib.util
import warnings
from dataclasses import dataclass
from typing import Callable

import optuna

from mvopt.errors import MvoptError
from mvopt.optimize.space import SearchSpace

__all__ = ["register_sampler", "make_sampler", "sampler_names", "SamplerSpec"]

Factory = Callable[[SearchSpace, int, "int | None"], optuna.samplers.BaseSampler]


@dataclass(frozen=True)
class SamplerSpec:
    """How to make one sampler: its factory, the modules it needs, whether it handles >1 objective."""

    name: str
    factory: Factory
    needs: tuple[tuple[str, str], ...] = ()  # (module, pip package)
    multi_objective: bool = True
    doc: str = ""


_SAMPLERS: dict[str, SamplerSpec] = {}


def register_sampler(name: str, *, needs: tuple[tuple[str, str], ...] = (), multi_objective: bool = True,
                     doc: str = "") -> Callable[[Factory], Factory]:
    """Decorator: register ``factory(space, generation_size, seed)`` as sampler ``name``."""
    def deco(factory: Factory) -> Factory:
        _SAMPLERS[name] = SamplerSpec(name, factory, needs, multi_objective, doc)
        return factory
    return deco


def sampler_names() -> list[str]:
    """Registered sampler names."""
    return list(_SAMPLERS)


def sampler_problem(name: str, objective_names: list[str]) -> str | None:
    """Why sampler ``name`` cannot search a space of these objectives (None: it can)."""
    spec = _SAMPLERS.get(name)
    if spec is None:
        return f"unknown sampler {name!r} (known: {', '.join(_SAMPLERS)})"
    if len(objective_names) > 1 and not spec.multi_objective:
        multi = ", ".join(n for n, s in _SAMPLERS.items() if s.multi_objective)
        return (f"sampler {name!r} handles one objective only; the space has {len(objective_names)} "
                f"({', '.join(objective_names)}): use one of {multi}")
    return None


def make_sampler(name: str, space: SearchSpace, generation_size: int, seed: int | None = None) -> optuna.samplers.BaseSampler:
    """The sampler ``name`` configured for generations of ``generation_size`` trials."""
    problem = sampler_problem(name, space.objective_names)
    if problem:
        raise MvoptError(problem)
    spec = _SAMPLERS[name]
    for module, package in spec.needs:
        if importlib.util.find_spec(module) is None:
            raise MvoptError(f"sampler {name!r} needs the Python package {package!r}, which is not "
                             f"installed (pip install {package})")
    return spec.factory(space, generation_size, seed)


@register_sampler("tpe", doc="TPE with constant liar (running trials of the generation count as bad)")
def _tpe(space: SearchSpace, n: int, seed: int | None) -> optuna.samplers.BaseSampler:
    return optuna.samplers.TPESampler(seed=seed, constant_liar=True, multivariate=True,
                                      n_startup_trials=max(10, n))


@register_sampler("gp", needs=(("torch", "torch"), ("scipy", "scipy")),
                  doc="Gaussian-process Bayesian optimisation (batch qEI over running trials)")
def _gp(space: SearchSpace, n: int, seed: int | None) -> optuna.samplers.BaseSampler:
    return optuna.samplers.GPSampler(seed=seed, n_startup_trials=max(10, n), deterministic_objective=True)


@register_sampler("cmaes", needs=(("cmaes", "cmaes"),), multi_objective=False,
                  doc="CMA-ES, population = generation size; infeasible trials rank last by their value")
def _cmaes(space: SearchSpace, n: int, seed: int | None) -> optuna.samplers.BaseSampler:
    # CMA-ES ignores Optuna constraints (it says so on every trial); infeasible trials are told
    # with a +inf value so that they rank last, which is what CMA-ES needs.
    warnings.filterwarnings("ignore", message="Constraints have been set, but CmaEsSampler")
    return optuna.samplers.CmaEsSampler(seed=seed, popsize=max(2, n), n_startup_trials=0,
                                        warn_independent_sampling=False)


@register_sampler("nsga2", doc="NSGA-II, population = generation size (constraint-dominance)")
def _nsga2(space: SearchSpace, n: int, seed: int | None) -> optuna.samplers.BaseSampler:
    return optuna.samplers.NSGAIISampler(seed=seed, population_size=max(2, n))


@register_sampler("random", doc="uniform random search")
def _random(space: SearchSpace, n: int, seed: int | None) -> optuna.samplers.BaseSampler:
    return optuna.samplers.RandomSampler(seed=seed)


@register_sampler("qmc", needs=(("scipy", "scipy"),), doc="scrambled Sobol quasi-random search")
def _qmc(space: SearchSpace, n: int, seed: int | None) -> optuna.samplers.BaseSampler:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.QMCSampler(seed=seed, scramble=True, warn_independent_sampling=False)


class _GenerationGridSampler(optuna.samplers.GridSampler):
    """GridSampler whose end is decided by the generation loop.

    Optuna's GridSampler calls ``study.stop()`` when the grid is exhausted, which only works
    inside ``study.optimize``; the loop stops by itself when no grid point is left.
    """

    def after_trial(self, study: optuna.Study, trial: optuna.trial.FrozenTrial, state: optuna.trial.TrialState,
                    values: "list[float] | None") -> None:
        return None


@register_sampler("grid", doc="every point of the space's grid once (float ranges need step or grid)")
def _grid(space: SearchSpace, n: int, seed: int | None) -> optuna.samplers.BaseSampler:
    return _GenerationGridSampler(space.grid(), seed=seed)
