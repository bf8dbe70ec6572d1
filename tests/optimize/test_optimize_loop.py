"""The generation loop's mechanics, with the closed-form test evaluator."""

import math

import pytest
from optuna.trial import TrialState

import mvopt
from analytic_evaluator import AnalyticEvaluator, iteration_time
from optimize_helpers import grid_space_data, small_space_data
from mvopt.errors import MvoptError
from mvopt.optimize import Budget, GenerationLoop, create_or_resume, load_space, make_storage
from mvopt.optimize.evaluator import Evaluation
from mvopt.optimize.progress import ConsoleProgress
from mvopt.optimize.records import CONSTRAINT, USER_ATTRS
from mvopt.optimize.summary import best_table, best_trials


def _setup(url, data=None, sampler="random", gen=8, seed=0, name=None):
    space = load_space(data or small_space_data())
    study = create_or_resume(make_storage(url), space, study_name=name, sampler=sampler, generation_size=gen,
                             seed=seed, resume=True)
    return space, study


def test_one_batch_per_generation_and_every_trial_recorded(sqlite_url):
    space, study = _setup(sqlite_url)
    ev = AnalyticEvaluator()
    summary = GenerationLoop(study, space, ev, generation_size=8).run(Budget(n_trials=24))
    assert summary.told == 24 and summary.generations == 3 and summary.stopped == "trial budget reached"
    assert len(ev.batches) == 3 and all(1 <= b <= 8 for b in ev.batches)  # one evaluate() per generation
    trials = study.get_trials()
    assert len(trials) == 24 and all(t.state == TrialState.COMPLETE for t in trials)
    from mvopt.config import config_key
    from mvopt.optimize import config_of_trial
    for t in trials:
        assert config_key(config_of_trial(study, t.number)) == t.user_attrs["config_key"]  # re-simulable exactly
        assert set(USER_ATTRS) <= set(t.user_attrs)
        assert t.user_attrs["mvopt_version"] == mvopt.__version__ and t.user_attrs["backend"] == "analytic"
        assert CONSTRAINT in t.constraints
        from mvopt.config import load_config
        if t.user_attrs["feasible"]:
            assert t.values[0] == pytest.approx(iteration_time(load_config(t.user_attrs["config"])))
            assert set(t.user_attrs["breakdown"]) == {"compute", "exposed_dp", "bubble"}
        else:  # the evaluator's memory rule: told COMPLETE, constraint > 0, reason recorded
            assert t.constraints[CONSTRAINT] > 0 and math.isinf(t.values[0]) and "kmin_kb > 300" in t.user_attrs["reason"]


def test_identical_configs_simulated_once_within_and_across_generations(sqlite_url):
    data = grid_space_data()  # 12 distinct configurations only
    space, study = _setup(sqlite_url, data, sampler="random", gen=10)
    ev = AnalyticEvaluator()
    summary = GenerationLoop(study, space, ev, generation_size=10).run(Budget(n_trials=40))
    keys = [t.user_attrs["config_key"] for t in study.get_trials()]
    assert len(keys) == 40 and sum(ev.batches) == len(set(keys)) <= 12
    dups = [t for t in study.get_trials() if "duplicate_of" in t.user_attrs]
    assert len(dups) == 40 - len(set(keys)) == summary.cached
    by_number = {t.number: t for t in study.get_trials()}
    for t in dups:
        original = by_number[t.user_attrs["duplicate_of"]]
        assert original.user_attrs["config_key"] == t.user_attrs["config_key"] and original.values == t.values
    # a new loop on the same study (a resumed run) simulates nothing it already knows
    ev2 = AnalyticEvaluator()
    GenerationLoop(study, space, ev2, generation_size=10).run(Budget(n_trials=20))
    assert sum(ev2.batches) == 0


def test_space_infeasible_costs_no_simulation(sqlite_url):
    data = small_space_data(constraints=["network.ecn.kmin_kb <= 100"])
    space, study = _setup(sqlite_url, data)
    ev = AnalyticEvaluator()
    GenerationLoop(study, space, ev, generation_size=8).run(Budget(n_trials=32))
    infeasible = [t for t in study.get_trials() if t.user_attrs["status"] == "infeasible"]
    assert infeasible and all(t.state == TrialState.COMPLETE and t.constraints[CONSTRAINT] > 0 for t in infeasible)
    assert all(not t.user_attrs["feasible"] and "kmin_kb <= 100" in t.user_attrs["reason"] for t in infeasible)
    assert sum(ev.batches) == 32 - len(infeasible)


def test_grid_sampler_covers_every_point_once(sqlite_url):
    space, study = _setup(sqlite_url, grid_space_data(), sampler="grid", gen=5)
    ev = AnalyticEvaluator()
    summary = GenerationLoop(study, space, ev, generation_size=5).run(Budget())
    assert summary.stopped == "grid exhausted"
    params = {tuple(sorted(t.params.items())) for t in study.get_trials()}
    assert len(study.get_trials()) == len(params) == 12 and sum(ev.batches) == 12


def test_multi_objective_cost(sqlite_url):
    data = small_space_data(prices={"switch": 1000, "nic": 10},
                            parameters={"cluster.k": [4, 6], "network.cc": ["dcqcn", "hpcc"]},
                            objectives=["iteration_time", "cost"])
    space, study = _setup(sqlite_url, data, sampler="nsga2", gen=4)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4).run(Budget(n_trials=12))
    costs = {t.params["cluster.k"]: t.values[1] for t in study.get_trials()}
    assert costs == {4: 20 * 1000 + 16 * 10, 6: 45 * 1000 + 54 * 10}
    front = best_trials(study, 10)
    assert front and all(len(t.values) == 2 for t in front)
    assert [r["trial"] for r in best_table(study, space.objective_names, 10)] == [t.number for t in front]


def test_time_budget_and_stop_file(sqlite_url, tmp_path):
    space, study = _setup(sqlite_url)
    loop = GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4)
    assert loop.run(Budget(timeout_s=0.0)).told == 0
    stop = tmp_path / "STOP"
    stop.touch()
    summary = loop.run(Budget(n_trials=100, stop_file=str(stop)))
    assert summary.told == 0 and "stop file" in summary.stopped


class _Crashing:
    name = "crashing"

    def evaluate(self, configs):
        raise RuntimeError("backend crashed")


def test_evaluator_crash_leaves_nothing_running(sqlite_url):
    space, study = _setup(sqlite_url)
    with pytest.raises(RuntimeError, match="backend crashed"):
        GenerationLoop(study, space, _Crashing(), generation_size=6).run(Budget(n_trials=6))
    states = [t.state for t in study.get_trials()]
    assert TrialState.RUNNING not in states
    failed = [t for t in study.get_trials() if t.state == TrialState.FAIL]
    waiting = [t for t in study.get_trials() if t.state == TrialState.WAITING]
    assert len(failed) == len(waiting) == 6  # each failed trial is queued again, same parameters
    assert sorted(t.system_attrs["failed_trial"] for t in waiting) == sorted(t.number for t in failed)
    # the next run picks the queued trials up first and finishes them
    ev = AnalyticEvaluator()
    GenerationLoop(study, space, ev, generation_size=6).run(Budget(n_trials=6))
    done = [t for t in study.get_trials() if t.state == TrialState.COMPLETE]
    assert sorted(t.system_attrs["failed_trial"] for t in done) == sorted(t.number for t in failed)


class _WrongCount:
    name = "wrong"

    def evaluate(self, configs):
        return [Evaluation(True, iteration_time_s=1.0)]


def test_evaluator_contract_is_checked(sqlite_url):
    space, study = _setup(sqlite_url)
    with pytest.raises(MvoptError, match="returned 1 results for 4"):
        GenerationLoop(study, space, _WrongCount(), generation_size=4).run(Budget(n_trials=4))


def test_existing_study_needs_resume(sqlite_url):
    space, study = _setup(sqlite_url)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4).run(Budget(n_trials=4))
    with pytest.raises(MvoptError, match="--resume"):
        create_or_resume(make_storage(sqlite_url), space, sampler="random", resume=False)
    other = load_space(small_space_data(prices={"switch": 1}, objectives=["iteration_time", "cost"]))
    with pytest.raises(MvoptError, match="optimises"):
        create_or_resume(make_storage(sqlite_url), other, study_name=space.name, sampler="random", resume=True)


def test_resuming_with_another_base_experiment_is_an_error(sqlite_url, caplog):
    """Resuming a study under another base experiment (another collective size, say) would mix
    two problems' trials in one study: an error naming the field. Other parameter ranges are a
    refinement of the same problem: a warning, and the run continues."""
    space, study = _setup(sqlite_url)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4).run(Budget(n_trials=4))
    same = load_space(small_space_data())
    create_or_resume(make_storage(sqlite_url), same, sampler="random", resume=True)
    assert "changed" not in caplog.text
    base = {**small_space_data()["base"], "collective": {"bytes": 8 << 20}}
    other_base = load_space(small_space_data(base=base))
    with pytest.raises(MvoptError, match="another base experiment .*collective.bytes"):
        create_or_resume(make_storage(sqlite_url), other_base, sampler="random", resume=True)
    params = {**small_space_data()["parameters"], "network.ecn.kmin_kb": {"low": 20.0, "high": 400.0, "log": True}}
    create_or_resume(make_storage(sqlite_url), load_space(small_space_data(parameters=params)), sampler="random",
                     resume=True)
    assert "the search space (parameters, derived values, constraints or prices) changed" in caplog.text


def test_resuming_compares_what_the_base_asks_not_how_it_was_stored(sqlite_url, caplog):
    """A stored base read with today's schema (fields added since are at their defaults), its
    folder aside, and an empty study whatever its base: no error, no warning."""
    from mvopt.optimize.study import SPACE_ATTR

    space, study = _setup(sqlite_url)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4).run(Budget(n_trials=4))
    stored = study.user_attrs[SPACE_ATTR]
    older = {**stored, "base": {k: v for k, v in stored["base"].items() if k != "simulation"}}
    older["base"]["base_dir"] = "/somewhere/else"
    study.set_user_attr(SPACE_ATTR, older)           # as an older mvopt, elsewhere, would have stored it
    create_or_resume(make_storage(sqlite_url), load_space(small_space_data()), sampler="random", resume=True)
    assert "changed" not in caplog.text
    empty = load_space(small_space_data(name="empty"))
    create_or_resume(make_storage(sqlite_url), empty, sampler="random")
    base = {**small_space_data()["base"], "collective": {"bytes": 8 << 20}}
    create_or_resume(make_storage(sqlite_url), load_space(small_space_data(name="empty", base=base)),
                     sampler="random", resume=True)    # (no trials yet: nothing to compare with)


def test_journal_storage(tmp_path):
    space, study = _setup(str(tmp_path / "journal.log"))
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4).run(Budget(n_trials=8))
    assert len(study.get_trials(states=(TrialState.COMPLETE,))) == 8


@pytest.mark.parametrize("sampler", ["tpe", "qmc", "nsga2"])
def test_samplers_learn_in_the_loop(sqlite_url, sampler):
    space, study = _setup(sqlite_url, sampler=sampler, gen=8, seed=3)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=8).run(Budget(n_trials=48))
    assert study.best_trial.values[0] < 1.5e-3 and study.best_trial.user_attrs["feasible"]


def test_cmaes_in_the_loop(sqlite_url):
    pytest.importorskip("cmaes", reason="the cmaes package is not installed")
    data = small_space_data(parameters={"network.ecn.kmin_kb": {"low": 10.0, "high": 400.0},
                                        "network.hpcc.eta": {"low": 0.8, "high": 0.99}})
    data["base"] = {**data["base"], "network": {"cc": "hpcc"}}
    space, study = _setup(sqlite_url, data, sampler="cmaes", gen=6, seed=1)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=6).run(Budget(n_trials=36))
    generations = {t.system_attrs.get("cma:generation") for t in study.get_trials()}
    assert {0, 1, 2, 3} <= generations  # one CMA-ES generation per loop generation (popsize = 6)
    assert any(math.isinf(t.values[0]) for t in study.get_trials())  # kmin > 300: infeasible, ranked last
    assert study.best_value < 1.2e-3


def test_plain_db_path_is_sqlite(tmp_path):
    from optuna.storages import JournalStorage, RDBStorage
    assert isinstance(make_storage(str(tmp_path / "a.db")), RDBStorage)
    assert isinstance(make_storage(str(tmp_path / "a.journal")), JournalStorage)


def test_counts_are_honest_when_the_simulation_finds_every_trial_infeasible(sqlite_url):
    """The space passes its checks, but the simulator says no to every configuration: the run
    counts them as simulated AND infeasible, and says that there is no feasible trial, and why."""
    from mvopt.optimize.summary import no_feasible_note
    data = small_space_data(parameters={"network.ecn.kmin_kb": [350.0, 400.0, 450.0]})  # all > 300
    space, study = _setup(sqlite_url, data, sampler="grid", gen=3)
    seen = []
    progress = _collecting_progress(seen)
    summary = GenerationLoop(study, space, AnalyticEvaluator(), generation_size=3, progress=progress).run(Budget())
    assert (summary.told, summary.simulated, summary.rejected, summary.infeasible) == (3, 3, 0, 3)
    assert "3 simulated, 3 infeasible" in seen[0]
    assert no_feasible_note(study) == ("no feasible trial: all 3 complete trials are infeasible; the most common "
                                       "reason: does not fit (test rule: kmin_kb > 300)")


def test_study_trials_bounds_the_study_not_only_this_worker(sqlite_url):
    """Two loops (workers) on one study with study_trials 10: the study ends with exactly 10
    complete trials, and each progress line counts the study's trials."""
    space, study = _setup(sqlite_url, gen=4)
    other = GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4)
    other.run(Budget(n_trials=4))                      # another worker's trials, already there
    lines = []
    progress = _collecting_progress(lines)
    GenerationLoop(study, space, AnalyticEvaluator(), generation_size=4, progress=progress).run(Budget(study_trials=10))
    assert len(study.get_trials()) == 10 and all(t.state == TrialState.COMPLETE for t in study.get_trials())
    assert lines[0].startswith("gen   0 [################....] 8/10 study trials (4 by this worker)"), lines
    assert "10/10 study trials (6 by this worker)" in lines[-1]


def test_the_study_limit_is_taken_in_the_creating_transaction(sqlite_url):
    """Two workers that both read room for 4 trials: the second one's creation finds it taken."""
    from mvopt.optimize.writer import NewTrial, trial_writer
    space, study = _setup(sqlite_url, gen=4)
    writer = trial_writer(study._storage)
    assert writer.kind == "rdb"
    new = [NewTrial({}, {}) for _ in range(4)]
    assert len(writer.create_running(study._study_id, new, limit=6)) == 4
    assert len(writer.create_running(study._study_id, new, limit=6)) == 2
    assert writer.create_running(study._study_id, new, limit=6) == []
    assert [t.number for t in study.get_trials()] == list(range(6))


def _collecting_progress(lines):
    """A ConsoleProgress whose lines go to ``lines``."""
    progress = ConsoleProgress()
    progress.generation = lambda rep, budget: lines.append(progress.line(rep, budget))
    return progress


def test_a_sub_batch_that_ended_between_two_reports_is_said_to_have_ended():
    import io
    from mvopt.engine.progress import BatchProgress
    out = io.StringIO()
    progress = ConsoleProgress(out)
    progress.simulating(BatchProgress(done=412, total=812, windows=5230, sub_batch=1, sub_batches=2, elapsed_s=12.0))
    progress.simulating(BatchProgress(done=600, total=812, windows=6000, sub_batch=1, sub_batches=2, elapsed_s=22.0))
    lines = out.getvalue().splitlines()
    assert lines[0] == "        simulating: sub-batch 1/2 ended"
    assert "sub-batch 2/2" in lines[1] and "sub-batch 2/2" in lines[2] and len(lines) == 3
