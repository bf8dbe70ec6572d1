"""From configurations to experiments: workload kinds, batching, and the optimizer's evaluate()."""

from __future__ import annotations

import os

import numpy as np
import pytest

import mvopt.engine
from mvopt.build import build_experiment, evaluate, run
from mvopt.config import load_config
from mvopt.engine import DELAY, FLOW
from mvopt.errors import ConfigError, MvoptError
from mvopt.optimize.evaluator import Evaluation, SimulatorEvaluator

FAT_TREE = {"topology": "fat_tree", "k": 4}


def _collective(**coll):
    return {"cluster": FAT_TREE, "network": {"cc": "none"}, "workload": {"kind": "collective"},
            "collective": {"bytes": 64 * 1024, **coll}}


def test_explicit_task_graph():
    cfg = load_config({"cluster": FAT_TREE, "simulation": {"seed": 7, "time_limit_ms": 2.5}, "name": "g",
                       "workload": {"kind": "tasks", "tasks": [
                           {"id": "a", "src": 0, "dst": 5, "bytes": 3000},
                           {"kind": "delay", "node": 5, "duration_ns": 1.5, "after": ["a"]},
                           {"id": 9, "src": 5, "dst": 1, "bytes": 10, "after": [1, "a"], "start_ns": 2000},
                       ]}})
    exp = build_experiment(cfg)
    g = exp.tasks
    assert g.kind.tolist() == [FLOW, DELAY, FLOW]
    assert g.duration_ps.tolist() == [0, 1500, 0] and g.start_ps.tolist() == [0, 0, 2_000_000]
    assert [g.preds_of(t).tolist() for t in range(3)] == [[], [0], [1, 0]]
    assert (exp.seed, exp.time_limit_ps, exp.name) == (7, 2_500_000_000, "g")
    assert exp.topology.n_host == 16
    assert (exp.queue_monitor_ps, exp.link_monitor) == (0, False)          # monitors off by default
    mon = build_experiment(load_config({"cluster": FAT_TREE, "simulation": {
        "queue_monitor_ns": 2.5, "link_monitor": True, "monitor_max_samples": 64}}))
    assert (mon.queue_monitor_ps, mon.link_monitor, mon.monitor_max_samples) == (2_500, True, 64)


def test_tasks_validated_against_topology():
    tasks = [{"src": 0, "dst": 16, "bytes": 1}]
    cfg = load_config({"cluster": FAT_TREE, "workload": {"kind": "tasks", "tasks": tasks}})
    with pytest.raises(ConfigError, match=r"workload.tasks\[0\].dst: must be a host id in 0..15"):
        build_experiment(cfg)


def test_cyclic_dependencies_rejected():
    cfg = load_config({"cluster": FAT_TREE, "workload": {"kind": "tasks", "tasks": [
        {"id": "a", "src": 0, "dst": 1, "bytes": 1, "after": ["b"]},
        {"id": "b", "src": 1, "dst": 0, "bytes": 1, "after": ["a"]}]}})
    with pytest.raises(ConfigError, match="cycle"):
        build_experiment(cfg)


def test_collective_kind_default_hosts():
    exp = build_experiment(load_config(_collective(op="all_gather")))
    g = exp.tasks
    assert (g.kind == FLOW).sum() == 15 * 16 and set(g.src.tolist()) == set(range(16))


def test_hpcc_flows_kind_relative_to_config_file(tmp_path):
    (tmp_path / "topo.txt").write_text("3 1 2\n2\n0 2 100Gbps 1us 0\n1 2 100Gbps 1us 0\n")
    (tmp_path / "flow.txt").write_text("1\n0 1 3 100 5000 0.000002\n")
    (tmp_path / "exp.yaml").write_text("cluster: {topology: file, topology_file: topo.txt}\n"
                                       "workload: {kind: hpcc_flows, file: flow.txt}\n")
    exp = build_experiment(load_config(tmp_path / "exp.yaml"))
    assert exp.tasks.size_bytes.tolist() == [5000] and exp.tasks.start_ps.tolist() == [2_000_000]


@pytest.mark.parametrize("kind, extra, message", [
    ("training", {"model": "no-such-model"}, "workload.model: must be a model of the zoo"),
    ("astra", {"file": "/nonexistent/w.txt"}, "/nonexistent/w.txt: cannot be read"),
])
def test_training_and_astra_inputs_are_checked(kind, extra, message):
    cfg = load_config({"cluster": FAT_TREE, "workload": {"kind": kind, **extra}})
    with pytest.raises(MvoptError, match=message):
        build_experiment(cfg)


def test_run_batches_and_matches_single_runs():
    cfgs = [load_config(_collective(op=op)) for op in ("all_reduce", "all_to_all")]
    batch = run(cfgs)
    assert [r.status for r in batch] == ["done", "done"]
    for cfg, r in zip(cfgs, batch):
        alone, = run([cfg])
        assert r.same_as(alone)


def test_evaluate_mix_of_valid_and_invalid(tmp_path, monkeypatch):
    calls = []
    real = mvopt.engine.simulate

    def counting(experiments, backend="cpu", **options):
        calls.append(len(experiments))
        return real(experiments, backend=backend, **options)
    monkeypatch.setattr(mvopt.engine, "simulate", counting)

    configs = [
        load_config(_collective()),                                        # ok
        load_config(_collective(hosts=[0, 99])),                           # bad host id: ConfigError
        load_config({"cluster": {"topology": "file", "topology_file": str(tmp_path / "missing.txt")},
                     "workload": {"kind": "collective"}}),                 # missing file: InputFileError
        load_config(_collective(op="all_to_all")),                         # ok
        load_config(_collective(), simulation__time_limit_ms=0.001),      # runs out of simulated time
    ]
    evs = evaluate(configs)
    assert calls == [3]                       # only the buildable ones, in ONE simulate call
    assert all(isinstance(e, Evaluation) for e in evs) and len(evs) == len(configs)
    ok, bad_host, bad_file, a2a, slow = evs
    assert ok.ok and a2a.ok and ok.status == "ok"
    alone, = run([configs[0]])
    assert ok.iteration_time_s == alone.makespan_ps / 1e12 and ok.breakdown == {"makespan": ok.iteration_time_s}
    assert ok.sim_stats["flows"] == 30 * 16 and ok.sim_stats["batch_size"] == 3
    assert not bad_host.feasible and bad_host.status == "infeasible" and "collective.hosts[1]" in bad_host.reason
    assert not bad_file.feasible and "missing.txt" in bad_file.reason
    assert slow.feasible and slow.status == "timeout" and slow.iteration_time_s is None
    assert "unfinished flows" in slow.reason


def test_simulator_evaluator_uses_evaluate():
    evs = SimulatorEvaluator("cpu").evaluate([load_config(_collective(op="reduce_scatter"))])
    assert evs[0].ok and evs[0].iteration_time_s > 0


def test_evaluate_all_infeasible_costs_no_simulation(monkeypatch):
    monkeypatch.setattr(mvopt.engine, "simulate", lambda *a, **k: pytest.fail("simulated"))
    evs = evaluate([load_config(_collective(bytes=3))])
    assert evs[0].status == "infeasible" and "collective.bytes" in evs[0].reason
    assert evaluate([]) == []


def test_makespan_is_seconds_of_last_task():
    r, = run([load_config(_collective())])
    assert r.makespan_ps == int(np.max(r.task_finish_ps))


def test_evaluate_builds_in_worker_processes_with_the_same_outcomes(tmp_path, monkeypatch):
    """A generation built in worker processes (MVOPT_BUILD_WORKERS=2) gives exactly the
    outcomes of one built here, invalid configurations included, in order."""
    configs = [load_config(_collective()), load_config(_collective(hosts=[0, 99])),
               load_config({"cluster": {"topology": "file", "topology_file": str(tmp_path / "missing.txt")},
                            "workload": {"kind": "collective"}}),
               load_config(_collective(op="all_to_all"))]
    from mvopt import shmtransfer
    from mvopt.procpool import drop_pool

    outcomes = {}
    for workers, shm_min in (("1", None), ("2", None), ("2", "0")):
        monkeypatch.setenv("MVOPT_BUILD_WORKERS", workers)
        if shm_min is not None:     # every result through shared memory: fresh workers see the setting
            monkeypatch.setenv("MVOPT_SHM_MIN_BYTES", shm_min)
            drop_pool("build", 2)
        before = dict(shmtransfer.RECEIVED)
        outcomes[workers, shm_min] = [(e.status, e.feasible, e.reason, e.iteration_time_s, e.sim_stats.get("windows"))
                                      for e in evaluate(configs)]
        if shm_min is not None and os.path.isdir(shmtransfer.SHM_DIR):
            assert shmtransfer.RECEIVED["shared"] - before["shared"] == 2      # the two built experiments
    drop_pool("build", 2)           # no worker left with the test's setting
    assert outcomes["1", None] == outcomes["2", None] == outcomes["2", "0"]
    assert [o[0] for o in outcomes["2", None]] == ["ok", "infeasible", "infeasible", "ok"]


def test_build_workers_setting(monkeypatch):
    from mvopt.build import PARALLEL_BUILD_MIN, build_workers

    monkeypatch.delenv("MVOPT_BUILD_WORKERS", raising=False)
    assert build_workers(PARALLEL_BUILD_MIN - 1) == 1            # small generations: no processes
    assert build_workers(3) == 1
    # one process per core this process may use (its affinity), not per core of the machine
    from mvopt import procpool
    monkeypatch.setattr(procpool, "usable_cores", lambda: 3)
    assert build_workers(PARALLEL_BUILD_MIN + 10) == 3
    monkeypatch.setenv("MVOPT_BUILD_WORKERS", "8")
    assert build_workers(3) == 3                                 # never more processes than configurations
    monkeypatch.setenv("MVOPT_BUILD_WORKERS", "zero")
    with pytest.raises(ConfigError, match="MVOPT_BUILD_WORKERS"):
        build_workers(20)
