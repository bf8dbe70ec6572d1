"""A flow-level generation whose trials are each built and simulated in one worker: the same
evaluations as building them all and simulating them as one flow-level batch, whatever the
workers, in order, with infeasible ones and refusals where they belong."""

from __future__ import annotations

import pytest

import mvopt.flow.generation as gen
from mvopt.build import build_all, evaluate, simulate_built
from mvopt.build.evaluations import evaluation_of
from mvopt.build.flow_trials import PHASES, evaluate_flow
from mvopt.config import load_config
from mvopt.errors import ConfigError

# what depends on the run's timing, not on the trial
TIMING = {"build_s", "build_wall_s", "batch_wall_s", "batch_size"}


def _config(seed: int, fidelity: str = "flow", **collective):
    return load_config({"name": f"ring-{seed}", "cluster": {"topology": "fat_tree", "k": 4},
                        "workload": {"kind": "collective"},
                        "collective": {"op": "all_reduce", "bytes": 1 << 20, "algorithm": "ring", **collective},
                        "simulation": {"fidelity": fidelity, "seed": seed}})


def _configs():
    return [_config(1), _config(2, op="all_to_all"), _config(3, bytes=3), _config(4),
            _config(5, op="reduce_scatter")]


def _reference(configs):
    """Every configuration built, then the buildable ones simulated as one flow-level batch."""
    out = []
    for built, _, _ in build_all(configs):
        out.append(None if built is None else evaluation_of(built, simulate_built([built])[0], {}))
    return out


def _same(a, b) -> None:
    fields = ("feasible", "status", "iteration_time_s", "breakdown")
    assert [getattr(a, k) for k in fields] == [getattr(b, k) for k in fields]
    assert {k: v for k, v in a.sim_stats.items() if k not in TIMING} == \
        {k: v for k, v in b.sim_stats.items() if k not in TIMING}


@pytest.mark.parametrize("threads", [1, 2])
def test_worker_trials_give_each_configuration_its_evaluation(threads):
    configs = _configs()
    report: dict = {}
    got = evaluate_flow(configs, threads=threads, report=report)
    want = _reference(configs)
    assert len(got) == len(configs)
    for ev, ref in zip(got, want, strict=True):
        if ref is None:       # collective.bytes 3 cannot be built
            assert ev.status == "infeasible" and "collective.bytes" in ev.reason
        else:
            _same(ev, ref)
            assert ev.sim_stats["batch_size"] == len(configs)
    flow = report["flow"]
    assert flow["trials"] == len(configs) and flow["workers"] == threads
    assert all(flow[k] >= 0 for k in PHASES) and flow["loop_cpu_s"] > 0 and flow["wall_s"] > 0
    assert 0 < flow["busy_s"] <= threads * flow["wall_s"]


def test_evaluate_runs_a_flow_generation_as_worker_trials_beside_packet_configurations(monkeypatch):
    monkeypatch.setattr(gen, "PROCESS_MIN", 2)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    configs = [_config(1), _config(1, fidelity="packet"), _config(2, op="all_to_all"), _config(3, bytes=3)]
    report: dict = {}
    evs = evaluate(configs, report=report)
    assert report["flow"]["trials"] == 3                     # the flow-level ones, in workers
    flow_ref = _reference([configs[0], configs[2]])
    _same(evs[0], flow_ref[0])
    _same(evs[2], flow_ref[1])
    assert evs[3].status == "infeasible"
    packet_alone, = evaluate([configs[1]])
    _same(evs[1], packet_alone)
    assert evs[1].iteration_time_s != evs[0].iteration_time_s     # each at its own level


def test_a_configuration_the_flow_level_cannot_run_is_refused_from_a_worker():
    bad = load_config({"cluster": {"topology": "fat_tree", "k": 4, "link_gbps": [20_000.0]},
                       "workload": {"kind": "collective"}, "collective": {"bytes": 1 << 20},
                       "simulation": {"fidelity": "flow"}})
    with pytest.raises(ConfigError, match="link_gbps") as err:
        evaluate_flow([_config(1), bad], threads=2)
    assert err.value.path == "cluster.link_gbps" and err.value.value == 20_000
