import importlib.util

import optuna
import pytest

from optimize_helpers import small_space_data
from mvopt.errors import MvoptError
from mvopt.optimize.samplers import make_sampler, sampler_names
from mvopt.optimize.space_file import load_space

SPACE = load_space(small_space_data())
TWO = load_space(small_space_data(prices={"switch": 1}, objectives=["iteration_time", "cost"]))


def test_all_documented_samplers_registered():
    assert set(sampler_names()) >= {"tpe", "gp", "cmaes", "nsga2", "random", "qmc", "grid"}


def test_batch_settings():
    tpe = make_sampler("tpe", SPACE, 16, seed=1)
    assert isinstance(tpe, optuna.samplers.TPESampler) and tpe._constant_liar
    nsga = make_sampler("nsga2", TWO, 24, seed=1)
    assert nsga._population_size == 24
    if importlib.util.find_spec("cmaes"):
        assert make_sampler("cmaes", SPACE, 12, seed=1)._popsize == 12


@pytest.mark.parametrize("name, module", [("gp", "torch"), ("cmaes", "cmaes")])
def test_missing_package_is_a_clear_error(name, module):
    if importlib.util.find_spec(module) is not None:
        assert make_sampler(name, SPACE, 8, seed=0) is not None
    else:
        with pytest.raises(MvoptError, match=f"needs the Python package '{module}'"):
            make_sampler(name, SPACE, 8, seed=0)


def test_single_objective_sampler_refuses_two_objectives():
    with pytest.raises(MvoptError, match="one objective"):
        make_sampler("cmaes", TWO, 8)


def test_unknown_sampler():
    with pytest.raises(MvoptError, match="unknown sampler"):
        make_sampler("bayes", SPACE, 8)


def test_grid_needs_finite_grid():
    from mvopt.errors import ConfigError
    with pytest.raises(ConfigError, match="needs `step` or `grid`"):
        make_sampler("grid", SPACE, 8)  # kmin_kb is a continuous log range


@pytest.mark.parametrize("name", ["tpe", "random", "qmc", "nsga2"])
def test_seeded_samplers_are_reproducible(name):
    def run() -> list:
        study = optuna.create_study(sampler=make_sampler(name, SPACE, 4, seed=7))
        return [SPACE.suggest(study.ask()) for _ in range(4)]
    assert run() == run()
