"""Slow GPUs (workload.stragglers): a straggler's compute times are scaled by its factor."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.cluster import build_topology
from mvopt.comm import default_model
from mvopt.config import ParallelismConfig, load_config
from mvopt.engine import Experiment, TaskGraph, simulate
from mvopt.errors import ConfigError
from mvopt.workload import ComputeModel, OperatorTrace, get_gpu, get_model
from mvopt.workload.taskgraph import TrainingSetup, build_training, stage_costs
from mvopt._cfg.network import NetworkConfig

# embedding, output layer and optimizer cost nothing: every pipeline stage does the same work
UNIFORM = OperatorTrace({(n, ph): 0.0 for n in ("embedding", "final_norm", "logits", "cross_entropy", "adam")
                         for ph in ("fwd", "bwd_input", "bwd_weight", "step")})


def _pipeline(p: int, m: int, stragglers=()):
    """Zero-time transfers, identical stages; returns the makespan (s) and one stage's f + b (s)."""
    par = ParallelismConfig(tp=1, pp=p, dp=1, micro_batch=1, global_batch=m)
    setup = TrainingSetup(model=get_model("gpt3-13b"), par=par, gpu=get_gpu("A100"),
                          compute=ComputeModel("A100", trace=UNIFORM), intra=default_model(), gpus_per_server=8,
                          gpu_host=np.zeros(16, np.int64), ideal_comm=True, stragglers=tuple(stragglers))
    plan = build_training(setup)
    topo = build_topology(load_config({"cluster": {"topology": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2}}).cluster)
    r, = simulate([Experiment(topology=topo, network=NetworkConfig(), tasks=TaskGraph(**plan.columns))])
    assert r.ok
    c = stage_costs(setup, 0)
    busy = {rank: int((r.task_finish_ps[ids] - r.task_start_ps[ids]).sum()) for rank, ids in plan.rank_stream.items()}
    return r.makespan_s, sum(c.f_compute) + sum(c.b_compute), busy


def test_a_straggler_alone_takes_factor_times_longer():
    t, _, _ = _pipeline(1, 4)
    slow, _, _ = _pipeline(1, 4, [(0, 1.5)])
    assert slow == pytest.approx(1.5 * t, rel=1e-9)


@pytest.mark.parametrize("stage", [0, 2, 3])
def test_a_slow_pipeline_stage_computes_factor_times_longer(stage):
    """p stages, m micro-batches, zero-time transfers, one stage f times slower: that stage is busy
    f m (t_f + t_b), the others m (t_f + t_b); the iteration lies between the slow stage's busy
    time and the sum of every stage's f + b plus (m - 1) times the slowest one's."""
    p, m, f = 4, 8, 1.5
    t, tfb, busy = _pipeline(p, m)
    assert t == pytest.approx((m + p - 1) * tfb, rel=1e-9)
    slow, _, slow_busy = _pipeline(p, m, [(stage, f)])
    for rank in range(p):
        assert slow_busy[rank] == pytest.approx(busy[rank] * (f if rank == stage else 1.0), abs=2 * m)
    assert busy[stage] == pytest.approx(m * tfb * 1e12, rel=1e-9)
    assert m * f * tfb < slow <= (p - 1 + f + (m - 1) * f) * tfb * (1 + 1e-9)
    assert slow > t


def test_stragglers_naming_a_rank_outside_the_job_are_refused():
    with pytest.raises(ConfigError) as e:
        _pipeline(4, 4, [(1, 1.2), (4, 1.5)])
    assert e.value.path == "workload.stragglers[1]" and "ranks are 0..3" in str(e.value)


@pytest.mark.parametrize("workload, words", [
    ({"kind": "collective", "stragglers": [[0, 2.0]]}, "kind 'training' only"),
    ({"kind": "training", "model": "gpt3-13b", "stragglers": [[0, 0.5]]}, "compute_factor >= 1"),
    ({"kind": "training", "model": "gpt3-13b", "rail_sample": True, "stragglers": [[0, 2.0]]}, "rail_sample"),
])
def test_bad_stragglers_are_refused_by_the_config(workload, words):
    with pytest.raises(ConfigError) as e:
        load_config({"workload": workload})
    assert e.value.path == "workload.stragglers" and words in str(e.value)
