"""Scenarios: every trial simulated once per set of overrides in one batch, its value the mean or
the worst (or both as two objectives), each scenario's time recorded and shown; the space's
checks; a resumed study with other scenarios refused; the real simulator on a tiny space."""

import json
import math

import pytest

from analytic_evaluator import FidelityEvaluator, packet_time
from optimize_helpers import BASE
from mvopt.config import with_overrides
from mvopt.errors import ConfigError, MvoptError
from mvopt.evaluation import Evaluation
from mvopt.optimize.loop import Budget, GenerationLoop
from mvopt.optimize.space_file import load_space
from mvopt.optimize.storage import make_storage
from mvopt.optimize.study import create_or_resume
from mvopt.optimize.summary import best_table

SPINE_DOWN_FACTOR = 1.5  # the test double's made-up slowdown with a failed link


class FaultEvaluator(FidelityEvaluator):
    """The analytic packet level, slower by a made-up factor per failed link; a NIC slowed to a
    tenth or less is "infeasible" (a test rule)."""

    name = "faults"

    def evaluate(self, configs):
        self.batches.append(len(configs))
        self.seen += configs
        out = []
        for cfg in configs:
            if any(f <= 0.1 for _, f in cfg.cluster.slow_nics):
                out.append(Evaluation.infeasible("too slow (test rule)", violation=0.5))
                continue
            t = time_of(cfg)
            out.append(Evaluation(True, None, t, {"compute": 0.5 * t, "exposed_dp": 0.5 * t}, "ok", {"packets": 1.0}))
        return out


def time_of(cfg):
    return packet_time(cfg) * SPINE_DOWN_FACTOR ** len(cfg.cluster.failed_links)


SCENARIOS = {"healthy": {}, "spine_down": {"cluster.failed_links": [[2, 0]]}}


def _data(**extra):
    data = {"name": "scen", "base": BASE,
            "parameters": {"network.cc": ["dcqcn", "hpcc"], "network.lb": ["ecmp", "spray"]},
            "scenarios": SCENARIOS}
    data.update(extra)
    return data


def _run(url, data, n=4, ev=None, resume=False):
    space = load_space(data)
    study = create_or_resume(make_storage(url, heartbeat_s=None), space, sampler="random", generation_size=n, seed=5,
                             resume=resume)
    ev = ev or FaultEvaluator()
    GenerationLoop(study, space, ev, generation_size=n).run(Budget(n_trials=n))
    return space, study, ev


def _simulated(study):
    return [t for t in study.get_trials() if "duplicate_of" not in t.user_attrs and t.user_attrs.get("feasible")]


@pytest.mark.parametrize("how", ["mean", "worst"])
def test_every_scenario_in_one_batch_and_the_value(sqlite_url, how):
    space, study, ev = _run(sqlite_url, _data(scenario_objective=how))
    done = _simulated(study)
    assert done and len(ev.batches) == 1 and ev.batches[0] == 2 * len(done)
    # each trial's configuration twice in a row: as the trial sets it, then with the spine link down
    assert [c.cluster.failed_links for c in ev.seen] == [(), ((2, 0),)] * len(done)
    for t in done:
        cfg = with_overrides(space.base, {k: v for k, v in t.params.items()})
        healthy, down = time_of(cfg), time_of(with_overrides(cfg, {"cluster.failed_links": [[2, 0]]}))
        a = t.user_attrs
        assert a["scenario_times_s"] == {"healthy": healthy, "spine_down": down}
        assert a["iteration_time_mean_s"] == math.fsum([healthy, down]) / 2
        assert a["iteration_time_worst_s"] == down and a["worst_scenario"] == "spine_down"
        assert t.values[0] == (down if how == "worst" else math.fsum([healthy, down]) / 2)
        assert a["config"]["cluster"]["failed_links"] == []   # the trial's own configuration is stored
    rows = best_table(study, space.objective_names)
    assert {"scenario healthy", "scenario spine_down"} <= set(rows[0])


def test_worst_as_a_second_objective(sqlite_url):
    space, study, _ = _run(sqlite_url, _data(objectives=["iteration_time", "worst_iteration_time"]))
    for t in _simulated(study):
        assert t.values == [t.user_attrs["iteration_time_mean_s"], t.user_attrs["iteration_time_worst_s"]]
    assert "worst_iteration_time" in best_table(study, space.objective_names)[0]


def test_replicates_combine_scenarios_seed_by_seed(sqlite_url):
    space, study, ev = _run(sqlite_url, _data(scenario_objective="worst", run={"replicates": 2}))
    done = _simulated(study)
    assert ev.batches == [4 * len(done)]
    for t in done:
        cfg = with_overrides(space.base, dict(t.params))
        seeds = [with_overrides(cfg, {"simulation.seed": s}) for s in (1, 2)]
        worst = [max(time_of(c), time_of(with_overrides(c, {"cluster.failed_links": [[2, 0]]}))) for c in seeds]
        assert t.user_attrs["replicate_times_s"] == worst
        assert t.values[0] == math.fsum(worst) / 2


def test_a_scenario_that_does_not_finish_makes_the_trial_infeasible(sqlite_url):
    data = _data(scenarios={"healthy": {}, "slow_nic": {"cluster.slow_nics": [[0, 0.1]]}})
    _, study, _ = _run(sqlite_url, data)
    trials = study.get_trials()
    assert trials and all(not t.user_attrs["feasible"] and math.isinf(t.values[0]) for t in trials)
    assert all("scenario slow_nic: too slow (test rule)" in t.user_attrs["reason"] for t in trials
               if "duplicate_of" not in t.user_attrs)


def test_a_scenario_invalid_for_a_trial_is_rejected_before_simulation(sqlite_url):
    data = _data(parameters={"network.cc": ["dcqcn", "hpcc"], "network.payload_bytes": [1000, 30000]},
                 scenarios={"healthy": {}, "big_headers": {"network.header_bytes": 4000}})
    space = load_space(data)
    cands = space.sample(16)
    bad = [c for c in cands if not c.feasible]
    assert bad and all(c.params["network.payload_bytes"] == 30000 for c in bad)
    assert all("scenarios.big_headers.network.payload_bytes" in c.reason for c in bad)
    good = [c for c in cands if c.feasible]
    assert good and all(c.scenario_configs[1].network.header_bytes == 4000 for c in good)


@pytest.mark.parametrize("change, message", [
    ({"scenarios": {"x": {"cluster.failed_linkz": []}}}, "did you mean 'cluster.failed_links'"),
    ({"scenarios": {"x": {"network.cc": "hpcc"}}}, "is a parameter or derived value of the space"),
    ({"scenarios": {"x": {"network.buffer_mb": -1.0}}}, "scenarios.x.network.buffer_mb"),
    ({"scenarios": {}}, "must be a non-empty mapping"),
    ({"scenarios": {"x": [1]}}, "must be a mapping {config path: value}"),
    ({"scenario_objective": "median"}, "must be one of mean, worst"),
    ({"scenarios": None, "scenario_objective": "worst"}, "needs `scenarios:`"),
    ({"scenarios": None, "objectives": ["worst_iteration_time"]}, "'worst_iteration_time' needs `scenarios:`"),
    ({"scenario_objective": "worst", "objectives": ["iteration_time", "worst_iteration_time"]},
     "iteration_time is the worst scenario's time already"),
])
def test_bad_scenarios_are_refused(change, message):
    data = _data(**change)
    if data.get("scenarios") is None:
        data.pop("scenarios")
    with pytest.raises(ConfigError) as e:
        load_space(data)
    assert message in str(e.value)


def test_resuming_with_other_scenarios_is_refused(sqlite_url):
    _run(sqlite_url, _data())
    with pytest.raises(MvoptError, match="other scenarios"):
        _run(sqlite_url, _data(scenario_objective="worst"), resume=True)
    _run(sqlite_url, _data(), resume=True)  # the same scenarios resume


def test_real_simulator_tiny_space(sqlite_url, capsys):
    """The CPU engine: a trial's scenario times are those of its configurations simulated alone."""
    from mvopt.optimize.evaluator import SimulatorEvaluator
    base = {"cluster": {"topology": "fat_tree", "k": 4, "gpus_per_server": 1}, "workload": {"kind": "collective"},
            "collective": {"op": "all_to_all", "bytes": 65536, "all_to_all": "concurrent"}}
    data = {"name": "tiny", "base": base, "parameters": {"network.lb": ["ecmp", "adaptive"]},
            "scenarios": SCENARIOS, "scenario_objective": "worst", "run": {"sampler": "grid"}}
    space = load_space(data)
    study = create_or_resume(make_storage(sqlite_url, heartbeat_s=None), space, sampler="grid", generation_size=2,
                             seed=0)
    ev = SimulatorEvaluator(backend="cpu")
    GenerationLoop(study, space, ev, generation_size=2).run(Budget(n_trials=2))
    trials = study.get_trials()
    assert len(trials) == 2
    cfgs, names = [], []
    for t in trials:
        cfg = with_overrides(space.base, dict(t.params))
        cfgs += [cfg, with_overrides(cfg, {"cluster.failed_links": [[2, 0]]})]
    alone = [e.iteration_time_s for e in ev.evaluate(cfgs)]
    for i, t in enumerate(trials):
        times = t.user_attrs["scenario_times_s"]
        assert [times["healthy"], times["spine_down"]] == alone[2 * i:2 * i + 2]
        assert t.values[0] == max(alone[2 * i:2 * i + 2])
    # simulate --from-study --trial N --scenario NAME: the trial under that scenario, exactly
    from mvopt import __main__ as cli
    t = trials[0]
    for scenario, value in (("spine_down", t.user_attrs["scenario_times_s"]["spine_down"]), (None, alone[0])):
        argv = ["simulate", "--from-study", sqlite_url, "--trial", str(t.number), "--json"]
        assert cli.main(argv + (["--scenario", scenario] if scenario else [])) == 0
        out = capsys.readouterr().out
        assert json.loads(out)["experiments"][0]["makespan_s"] == value
    assert cli.main(["simulate", "--from-study", sqlite_url, "--trial", "0", "--scenario", "flood"]) == 1
    assert "has no scenario 'flood': its scenarios are healthy, spine_down" in capsys.readouterr().err
