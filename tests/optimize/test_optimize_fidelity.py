"""Multi-fidelity studies: promotion to packet level, what the flow level cannot see, both values
recorded, resuming between the levels, replicates over seeds, determinism."""

import math
import statistics

import optuna
import pytest
import yaml
from optuna.trial import TrialState

from analytic_evaluator import FidelityEvaluator, flow_time, packet_time
from optimize_helpers import BASE
from optimize_procs import run
from mvopt.errors import ConfigError
from mvopt.optimize.fidelity import (FLOW_BLIND_FIELDS, FLOW_BLIND_SECTIONS, flow_blind_paths, promotion_order,
                                     within_noise)
from mvopt.optimize.loop import Budget, GenerationLoop
from mvopt.optimize.space_file import _config_fields, load_space
from mvopt.optimize.storage import make_storage
from mvopt.optimize.study import create_or_resume, join_study
from mvopt.optimize.summary import best_trials, noise_note


def _space_data(**run) -> dict:
    """collective.bytes (the flow level sees it) and network.lb (spraying it does not)."""
    return {"name": "multi", "base": BASE,
            "parameters": {"collective.bytes": {"low": 1_000_000, "high": 16_000_000, "step": 1_000_000},
                           "network.lb": ["ecmp", "spray"]},
            "run": {"fidelity": "multi", "promote": 0.25, **run}}


def _study(url, data, seed=3, resume=False):
    space = load_space(data)
    study = create_or_resume(make_storage(url, heartbeat_s=None), space, sampler="random", generation_size=8, seed=seed,
                             resume=resume)
    return space, study


# ------------------------------------------------------------------ the rules


def test_flow_blind_list_names_real_fields():
    fields = _config_fields()
    assert all(f in fields for f in FLOW_BLIND_FIELDS)
    assert all(any(f.startswith(s) for f in fields) for s in FLOW_BLIND_SECTIONS)
    assert {"network.dcqcn.", "network.hpcc.", "network.dctcp."} <= set(FLOW_BLIND_SECTIONS)


def test_flow_blind_paths():
    sets = {"cluster.k": 8, "collective.bytes": 1 << 20, "network.lb": "ecmp", "network.payload_bytes": 4096,
            "network.cc": "hpcc", "network.hpcc.eta": 0.9, "network.dcqcn.g": 0.01, "network.dctcp.g": 0.1,
            "network.ecn.kmin_kb": 50.0, "network.pfc.enabled": False, "network.buffer_mb": 16.0,
            "network.rto_us": 500.0}
    assert flow_blind_paths(sets) == ["network.cc", "network.hpcc.eta", "network.dcqcn.g", "network.dctcp.g",
                                      "network.ecn.kmin_kb", "network.pfc.enabled", "network.buffer_mb",
                                      "network.rto_us"]
    assert flow_blind_paths({"network.lb": "spray"}) == ["network.lb"]
    assert flow_blind_paths({"network.lb": "ecmp", "cluster.k": 4}) == []


def test_promotion_count_and_order():
    values = [[5.0], [1.0], [3.0], None, [2.0], [4.0]]
    # ceil(0.34 x 5 with values) = 2 best by value, then the blind ones with values, in index order
    assert promotion_order(values, [False, False, False, True, False, True], 0.34) == [1, 4, 5]
    assert promotion_order(values, [False] * 6, 1.0) == [1, 4, 2, 5, 0]
    assert promotion_order(values, [True] * 6, 0.01) == [1, 0, 2, 4, 5]  # never the one the flow level did not finish
    # two objectives: the non-dominated first (by values), then the next layer
    front = [[1.0, 5.0], [3.0, 3.0], [2.0, 2.0], [5.0, 1.0]]
    assert promotion_order(front, [False] * 4, 0.75) == [0, 2, 3]


def test_run_section_is_checked():
    for run_, path in (({"fidelity": "fluid"}, "run.fidelity"), ({"promote": 1.5}, "run.promote"),
                       ({"promote": 0}, "run.promote"), ({"replicates": 0}, "run.replicates"),
                       ({"replicates": 65}, "run.replicates")):
        with pytest.raises(ConfigError, match=path):
            load_space(_space_data(**run_))


def test_fidelity_sets_the_base_level():
    assert load_space(_space_data()).base.simulation.fidelity == "packet"
    assert load_space(_space_data(), fidelity="flow").base.simulation.fidelity == "flow"
    plain = {k: v for k, v in _space_data().items() if k != "run"}
    assert load_space(plain).fidelity_plan.mode == "packet"   # no run.fidelity: the base's level
    space = load_space(plain, fidelity="multi")
    assert space.fidelity_plan.mode == "multi" and space.to_data()["run"]["fidelity"] == "multi"


# ------------------------------------------------------------------ a multi-fidelity study


def test_promoted_trials_and_both_values(sqlite_url):
    space, study = _study(sqlite_url, _space_data())
    ev = FidelityEvaluator()
    GenerationLoop(study, space, ev, generation_size=8).run(Budget(n_trials=16))
    trials = study.get_trials()
    assert all(t.state == TrialState.COMPLETE for t in trials)
    seen = iter(ev.seen)
    for size in ev.batches:                       # per generation: a flow batch, then a packet batch
        batch = [next(seen) for _ in range(size)]
        assert len({c.simulation.fidelity for c in batch}) == 1
    assert [c.simulation.fidelity for c in ev.seen[:ev.batches[0]]] == ["flow"] * ev.batches[0]
    originals = [t for t in trials if "duplicate_of" not in t.user_attrs]
    for t in originals:
        a = t.user_attrs
        cfg = load_space(_space_data()).candidate(t.params).config
        assert a["flow_iteration_time_s"] == flow_time(cfg)
        if a["fidelity"] == "packet":
            assert a["promoted"] is True and a["packet_iteration_time_s"] == packet_time(cfg) == t.values[0]
        else:
            assert a["promoted"] is False and "packet_iteration_time_s" not in a and t.values[0] == a["flow_iteration_time_s"]
        assert (a.get("flow_blind") == ["network.lb"]) == (t.params["network.lb"] == "spray")
    # every sprayed trial reached packet level; of the others, the best quarter of each generation by flow value
    assert all(t.user_attrs["fidelity"] == "packet" for t in originals if t.params["network.lb"] == "spray")
    first = [t for t in originals if t.number < 8]
    ranked = sorted(first, key=lambda t: (t.user_attrs["flow_iteration_time_s"], t.number))
    n_best = math.ceil(0.25 * len(first))
    assert {t.number for t in ranked[:n_best]} <= {t.number for t in first if t.user_attrs["fidelity"] == "packet"}
    # the packet batch runs the best by rank first, then the blind ones
    packet_batch = ev.seen[ev.batches[0]:ev.batches[0] + ev.batches[1]]
    assert [c.collective.bytes for c in packet_batch[:n_best]] == \
        [t.params["collective.bytes"] for t in ranked[:n_best]]
    # the best configurations are packet-level ones, with their packet value
    best = best_trials(study, 5)
    assert best and all(t.user_attrs["fidelity"] == "packet" for t in best)
    assert best[0].values[0] == min(t.values[0] for t in trials if t.user_attrs["fidelity"] == "packet")


def test_replicates_mean_and_spread(sqlite_url):
    space, study = _study(sqlite_url, _space_data(replicates=3))
    ev = FidelityEvaluator()
    GenerationLoop(study, space, ev, generation_size=8).run(Budget(n_trials=8))
    packet = ev.seen[ev.batches[0]:]
    promoted = [t for t in study.get_trials() if t.user_attrs["fidelity"] == "packet" and "duplicate_of" not in t.user_attrs]
    assert promoted and len(packet) == 3 * len(promoted)
    # each promoted configuration three times in a row, over seeds 1, 2, 3, in ONE batch
    assert [c.simulation.seed for c in packet] == [1, 2, 3] * (len(packet) // 3)
    assert len(ev.batches) == 2
    for t in study.get_trials():
        a = t.user_attrs
        if a["fidelity"] != "packet":
            assert "replicate_times_s" not in a
            continue
        times = a["replicate_times_s"]
        assert a["replicate_seeds"] == [1, 2, 3] and len(set(times)) > 1
        assert t.values[0] == a["packet_iteration_time_s"] == math.fsum(times) / 3
        assert a["iteration_time_std_s"] == statistics.stdev(times)
        assert a["iteration_time_spread"] == (max(times) - min(times)) / (math.fsum(times) / 3)


def test_within_noise():
    a = {"replicate_times_s": [1.00, 1.02, 0.98]}
    b = {"replicate_times_s": [1.01, 1.03, 0.99]}
    c = {"replicate_times_s": [1.50, 1.51, 1.49]}
    assert within_noise(a, b, 1.0, 1.01) and not within_noise(a, c, 1.0, 1.5)
    assert not within_noise({}, b, 1.0, 1.01)   # no replicates: no measured noise


def test_noise_note_names_the_best_within_noise(sqlite_url):
    data = _space_data(replicates=2)
    data["parameters"] = {"network.lb": ["spray"], "collective.bytes": {"choices": [1_000_000, 2_000_000, 3_000_000]}}
    space, study = _study(sqlite_url, data)
    GenerationLoop(study, space, FidelityEvaluator(), generation_size=8).run(Budget(n_trials=8))
    note = noise_note(study)
    # the made-up packet level ignores collective.bytes: the sprayed configurations tie within their noise
    assert note is not None and "within the seed-to-seed noise" in note


def test_deterministic(tmp_path):
    def run_once(name):
        space, study = _study(f"sqlite:///{tmp_path / name}", _space_data(replicates=2))
        GenerationLoop(study, space, FidelityEvaluator(), generation_size=8).run(Budget(n_trials=16))
        return [(t.params, t.values, {k: v for k, v in t.user_attrs.items() if k != "sim_stats"})
                for t in study.get_trials()]
    assert run_once("a.db") == run_once("b.db")


class _InterruptedAtPacketLevel(FidelityEvaluator):
    def evaluate(self, configs):
        if configs[0].simulation.fidelity == "packet":
            raise KeyboardInterrupt
        return super().evaluate(configs)


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_resume_between_flow_and_packet_level(tmp_path, kind):
    url = f"sqlite:///{tmp_path / 'r.db'}" if kind == "sqlite" else str(tmp_path / "r.journal")
    space, study = _study(url, _space_data())
    with pytest.raises(KeyboardInterrupt):
        GenerationLoop(study, space, _InterruptedAtPacketLevel(), generation_size=8).run(Budget(n_trials=8))
    trials = study.get_trials()
    done = [t for t in trials if t.state == TrialState.COMPLETE]
    failed = [t for t in trials if t.state == TrialState.FAIL]
    waiting = [t for t in trials if t.state == TrialState.WAITING]
    assert done and failed and len(waiting) == len(failed)
    assert all(t.user_attrs["fidelity"] == "flow" for t in done)          # the flow level's answers are stored
    assert all(t.user_attrs["promoted"] is True and "flow_iteration_time_s" in t.user_attrs for t in failed)

    space, study = _study(url, _space_data(), resume=True)
    ev = FidelityEvaluator()
    GenerationLoop(study, space, ev, generation_size=8).run(Budget(n_trials=len(waiting)))
    assert ev.batches == [len({tuple(sorted(t.params.items())) for t in waiting})]
    assert all(c.simulation.fidelity == "packet" for c in ev.seen)      # the flow level is not run again
    by_number = {t.number: t for t in failed}
    retried = [t for t in study.get_trials() if t.state == TrialState.COMPLETE and "failed_trial" in t.system_attrs]
    assert sorted(t.system_attrs["failed_trial"] for t in retried) == sorted(by_number)
    for t in retried:
        before = by_number[t.system_attrs["failed_trial"]]
        assert t.user_attrs["fidelity"] == "packet" and t.user_attrs["promoted"] is True
        assert t.user_attrs["flow_iteration_time_s"] == before.user_attrs["flow_iteration_time_s"]
        assert t.values[0] == t.user_attrs["packet_iteration_time_s"]


def test_worker_fidelity_replaces_the_studys(sqlite_url):
    space, study = _study(sqlite_url, _space_data())
    _, joined, _ = join_study(make_storage(sqlite_url, heartbeat_s=None), "multi", fidelity="flow")
    assert joined.fidelity_plan.mode == "flow" and joined.base.simulation.fidelity == "flow"
    _, same, _ = join_study(make_storage(sqlite_url, heartbeat_s=None), "multi")
    assert same.fidelity_plan.mode == "multi"


def test_cli_multi_fidelity_table(tmp_path, subprocess_env):
    path = tmp_path / "space.yaml"
    path.write_text(yaml.safe_dump({k: v for k, v in _space_data().items() if k != "run"}))
    res = run(["optimize", str(path), "--storage", f"sqlite:///{tmp_path / 'c.db'}", "--fidelity", "multi",
               "--backend", "analytic_evaluator:make_fidelity", "--sampler", "random", "--seed", "1", "-g", "8",
               "-n", "8", "--artifacts", str(tmp_path / "art")], subprocess_env)
    assert res.returncode == 0, res.stderr
    assert "multi-fidelity" in res.stderr and "also at packet level" in res.stdout
    header = next(line for line in res.stdout.splitlines() if line.startswith("trial"))
    assert "fidelity" in header.split()
    rows = [line.split() for line in res.stdout.splitlines() if line[:1].isdigit()]
    assert rows and all("packet" in r for r in rows)
    study = optuna.load_study(study_name="multi", storage=f"sqlite:///{tmp_path / 'c.db'}")
    assert {t.user_attrs["fidelity"] for t in study.get_trials()} == {"flow", "packet"}


@pytest.mark.parametrize("in_workers", [False, True])
def test_simulator_levels_match_single_simulations(sqlite_url, monkeypatch, in_workers):
    """The real simulator on a k=4 fat-tree: every value a multi-fidelity study records is the value
    of simulating that configuration alone at that level (seeds 1 and 2 for the replicates); with
    its flow level run as a generation of worker trials too (mvopt.build.flow_trials)."""
    import mvopt.build.flow_trials as flow_trials
    import mvopt.flow.generation as generation
    from mvopt.build import evaluate
    from mvopt.config import with_overrides
    from mvopt.optimize.evaluator import SimulatorEvaluator

    generations: list[int] = []
    real = flow_trials.evaluate_flow

    def counted(cfgs, **kw):
        generations.append(len(cfgs))
        return real(cfgs, **kw)
    monkeypatch.setattr(flow_trials, "evaluate_flow", counted)
    if in_workers:
        monkeypatch.setattr(generation, "PROCESS_MIN", 2)
        monkeypatch.setenv("OMP_NUM_THREADS", "2")

    data = {"name": "k4", "base": {**BASE, "collective": {"op": "all_reduce", "bytes": 65536, "algorithm": "ring"}},
            "parameters": {"collective.bytes": {"choices": [32768, 65536, 131072]}, "network.lb": ["ecmp", "spray"]},
            "run": {"fidelity": "multi", "promote": 0.25, "replicates": 2}}
    space = load_space(data)
    study = create_or_resume(make_storage(sqlite_url, heartbeat_s=None), space, sampler="grid", generation_size=6, seed=0)
    GenerationLoop(study, space, SimulatorEvaluator("cpu"), generation_size=6).run(Budget(n_trials=6))
    assert generations == ([6] if in_workers else [])     # the flow level of the generation's 6 configurations
    trials = study.get_trials()
    assert len(trials) == 6 and all(t.state == TrialState.COMPLETE for t in trials)
    packet = [t for t in trials if t.user_attrs["fidelity"] == "packet"]
    # ceil(0.25 x 6) = 2 best by flow value, and the sprayed ones (flow-blind)
    ranked = sorted(trials, key=lambda t: (t.user_attrs["flow_iteration_time_s"], t.number))
    assert {t.number for t in packet} == {t.number for t in ranked[:2]} | \
        {t.number for t in trials if t.params["network.lb"] == "spray"}
    for t in trials:
        cfg = space.candidate(t.params).config
        flow = evaluate([with_overrides(cfg, {"simulation.fidelity": "flow"})])[0]
        assert t.user_attrs["flow_iteration_time_s"] == flow.iteration_time_s
        if t in packet:
            reps = [evaluate([with_overrides(cfg, {"simulation.seed": s})])[0].iteration_time_s for s in (1, 2)]
            assert t.user_attrs["replicate_times_s"] == reps and t.values[0] == math.fsum(reps) / 2
        else:
            assert t.values[0] == flow.iteration_time_s
