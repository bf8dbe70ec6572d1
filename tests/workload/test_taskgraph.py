"""Training task graphs: schedules, closed forms (pipeline bubble, ring all-reduce), the calibration
harness reproduced exactly, symmetry sampling, replication, infeasible configurations."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.build import build, evaluate, training_report
from mvopt.cluster import build_topology
from mvopt.comm import default_model
from mvopt.config import ParallelismConfig, load_config
from mvopt.engine import Experiment, TaskGraph, simulate
from mvopt.engine.tasks import topological_order
from mvopt.errors import ConfigError, InfeasibleError
from mvopt.workload import (ComputeModel, OperatorTrace, get_gpu, get_model, published_run,
                            single_stage_iteration_s)
from mvopt.workload.taskgraph import (TrainingSetup, build_training, chunk_param_counts, stage_costs,
                                      stage_program, training_breakdown, training_counts)
from mvopt._cfg.network import NetworkConfig
from mvopt.workload.memory import stage_param_count

# embedding, output layer and optimizer cost nothing: every pipeline stage does the same work
UNIFORM = OperatorTrace({(n, ph): 0.0 for n in ("embedding", "final_norm", "logits", "cross_entropy", "adam")
                         for ph in ("fwd", "bwd_input", "bwd_weight", "step")})


def _cfg(par: dict, cluster: dict | None = None, payload: int = 16384, model: str = "megatron-1.7b",
         **workload) -> object:
    cl = cluster or {"topology": "rail_optimized", "servers": 4, "servers_per_group": 4, "gpus_per_server": 8}
    cl = {"gpu": "A100", "link_gbps": [200, 200], **cl}
    return load_config({"cluster": cl, "network": {"cc": "none", "payload_bytes": payload},
                        "workload": {"kind": "training", "model": model, **workload},
                        "parallelism": par, "simulation": {"time_limit_ms": 100_000}})


def _run(cfg):
    b = build(cfg)
    r, = simulate([b.experiment])
    assert r.status == "done", r.diagnostic
    return b, r, training_report(b.plan, r)


# ---------------------------------------------------------------------------------------- schedule

@pytest.mark.parametrize("p,v,m", [(1, 1, 3), (4, 1, 8), (4, 1, 2), (4, 2, 8), (2, 4, 4), (8, 3, 16)])
def test_program_runs_every_chunk_microbatch_once_forward_before_backward(p, v, m):
    for st in range(p):
        prog = stage_program(p, v, m, st)
        assert len(prog) == 2 * m * v
        seen = {}
        for i, (fwd, c, j) in enumerate(prog):
            assert 0 <= c < v and 0 <= j < m
            assert (fwd, c, j) not in seen
            seen[(fwd, c, j)] = i
        assert all(seen[(True, c, j)] < seen[(False, c, j)] for c in range(v) for j in range(m))


def test_1f1b_order_matches_megatron():
    f = lambda j: (True, 0, j)   # noqa: E731
    b = lambda j: (False, 0, j)  # noqa: E731
    assert stage_program(4, 1, 6, 0) == [f(0), f(1), f(2), f(3), b(0), f(4), b(1), f(5), b(2), b(3), b(4), b(5)]
    assert stage_program(4, 1, 6, 3) == [x for j in range(6) for x in (f(j), b(j))]
    # interleaved, last stage: warm-up (v-1) p forwards, chunks in groups of p micro-batches
    prog = stage_program(2, 2, 2, 1)
    assert prog[:2] == [(True, 0, 0), (True, 0, 1)]
    assert prog[-1] == (False, 0, 1)


# --------------------------------------------------------------------------------- closed forms

def _ideal(p: int, v: int, m: int):
    model = get_model("gpt3-13b")
    par = ParallelismConfig(tp=1, pp=p, dp=1, virtual_stages=v, micro_batch=1, global_batch=m)
    setup = TrainingSetup(model=model, par=par, gpu=get_gpu("A100"), compute=ComputeModel("A100", trace=UNIFORM),
                          intra=default_model(), gpus_per_server=8, gpu_host=np.zeros(16, np.int64), ideal_comm=True)
    plan = build_training(setup)
    topo = build_topology(load_config({"cluster": {"topology": "leaf_spine", "leaves": 1, "hosts_per_leaf": 2}}).cluster)
    r, = simulate([Experiment(topology=topo, network=NetworkConfig(), tasks=TaskGraph(**plan.columns))])
    c = stage_costs(setup, 0)
    return plan, r, sum(c.f_compute) + sum(c.f_tp), sum(c.b_compute) + sum(c.b_tp)


@pytest.mark.parametrize("p,v,m", [(4, 1, 8), (4, 2, 8), (2, 4, 4), (4, 1, 2), (2, 1, 1)])
def test_bubble_of_an_idealised_pipeline_is_p_minus_1_over_m_v(p, v, m):
    """Zero-time transfers, identical stages: T = (m + (p-1)/v) (t_f + t_b), bubble fraction (p-1)/(m v)."""
    plan, r, tf, tb = _ideal(p, v, m)
    assert r.makespan_s == pytest.approx((m + (p - 1) / v) * (tf + tb), rel=1e-9)
    bd = training_breakdown(plan, r.task_start_ps, r.task_finish_ps, r.makespan_ps)["breakdown"]
    assert bd["bubble"] / (m * (tf + tb)) == pytest.approx((p - 1) / (m * v), rel=1e-9)
    assert sum(bd.values()) == pytest.approx(r.makespan_s, rel=1e-9)


@pytest.mark.parametrize("recompute", ["selective", "full"])
def test_single_server_iteration_equals_the_calibration_harness(recompute):
    """Hand-checked against mvopt.workload.calibration: korthikanti-22b (tp 8, pp 1, dp 1)."""
    run = published_run("korthikanti-22b")
    par = run.parallel if recompute == "selective" else run.full_recompute()
    cfg = load_config({"cluster": {"topology": "leaf_spine", "leaves": 1, "hosts_per_leaf": 1, "gpu": "A100"},
                       "workload": {"kind": "training", "model": "korthikanti-22b"},
                       "parallelism": {f: getattr(par, f) for f in par.__dataclass_fields__},
                       "simulation": {"time_limit_ms": 100_000}})
    _, _, rep = _run(cfg)
    ref = single_stage_iteration_s(run, par, ComputeModel(run.gpu), default_model())
    assert rep["iteration_time_s"] == pytest.approx(ref, rel=1e-9)
    assert rep["breakdown"]["bubble"] == 0 and rep["breakdown"]["dp_comm"] == 0
    assert sum(rep["breakdown"].values()) == pytest.approx(rep["iteration_time_s"], rel=1e-9)


def test_dp_all_reduce_after_the_flush_matches_the_ring_closed_form():
    """dp = 4 over 4 servers (one GPU per server and rail), gradients all-reduced after the last
    backward: the exposed DP time is the ring's 2(n-1)/n S/B plus its latency terms. Each NIC's
    uplink carries the ring's packets (payload + 48 B header) and the ACKs (60 B) of the flow it
    receives, so B is the line rate times payload / (payload + header + ACK)."""
    pl = 16384
    cfg = _cfg({"tp": 4, "pp": 1, "dp": 4, "global_batch": 4, "overlap_grad_reduce": False},
               {"topology": "rail_optimized", "servers": 4, "servers_per_group": 4, "gpus_per_server": 4},
               payload=pl, model="megatron-1.7b", rail_sample=True)
    b, r, rep = _run(cfg)
    model = get_model("megatron-1.7b")
    par = cfg.parallelism
    s = int(round(sum(chunk_param_counts(model, par, 0)) * 4))     # fp32 gradients
    n, bw = 4, 200e9 / 8
    wire = pl + 48
    packets_per_step = -(-(s // n) // pl)
    bandwidth = 2 * (n - 1) / n * s / bw * (wire + 60) / pl
    latency = 2 * (n - 1) * (2 * 1e-6 + 2 * wire / bw)          # per step: 2 hops, store-and-forward
    assert packets_per_step > 1000
    assert rep["breakdown"]["dp_comm"] == pytest.approx(bandwidth + latency, rel=2e-3)


def test_one_pipeline_transfer_by_hand():
    """pp = 2, one micro-batch, tp 1: F0, activation flow, F1, B1, gradient flow, B0, step."""
    cfg = _cfg({"tp": 1, "pp": 2, "dp": 1, "global_batch": 1}, {"topology": "leaf_spine", "leaves": 1,
               "hosts_per_leaf": 2, "nics_per_server": 1, "gpus_per_server": 1}, payload=4096)
    b, r, rep = _run(cfg)
    setup = b.plan.setup
    c0, c1 = stage_costs(setup, 0), stage_costs(setup, 1)
    h = 2304
    act = 2 * 2048 * h
    flow = act / 25e9 * 4144 / 4096 + 2 * 1e-6 + 4144 / 25e9   # 2 hops, first packet stored once
    # embedding-gradient all-reduce between the two stages (2-rank ring, S/2 per step): stage 1
    # finished first and already sent its first piece; after B0, stage 0 sends its first piece,
    # then (in order on the connection) its second while stage 1 sends its second back; each
    # link then also carries the ACKs of the opposite flow.
    emb = int(get_model("megatron-1.7b").padded_vocab(1) * h * 4)
    emb_ar = emb / 2 / 25e9 * (4144 + 4144 + 60) / 4096 + 2 * (2 * 1e-6 + 4144 / 25e9)
    expect = (c0.f_compute[0] + flow + c1.f_compute[0] + c1.b_compute[0] + flow + c0.b_compute[0]
              + emb_ar + c0.step)
    assert rep["iteration_time_s"] == pytest.approx(expect, rel=2e-3)


# --------------------------------------------------------------------------- structure and scale

@pytest.mark.parametrize("par", [
    {"tp": 8, "pp": 2, "dp": 2, "global_batch": 8, "virtual_stages": 2, "distributed_optimizer": True},
    {"tp": 8, "pp": 2, "dp": 2, "global_batch": 8, "distributed_optimizer": True, "overlap_param_gather": False},
    {"tp": 2, "pp": 4, "dp": 4, "global_batch": 8, "sequence_parallel": False},       # stages share servers
    {"tp": 1, "pp": 1, "dp": 32, "global_batch": 32, "recompute": "full"},             # hierarchical DP
    {"tp": 4, "pp": 2, "dp": 4, "global_batch": 16, "sequence_parallel": True, "tp_comm_overlap": True},
])
def test_graphs_are_valid_and_breakdowns_sum(par):
    cfg = _cfg({"bucket_mb": 400, **par})
    b, r, rep = _run(cfg)
    g = b.experiment.tasks
    g.validate(b.experiment.topology.n_host)
    assert topological_order(g) is not None
    assert sum(rep["breakdown"].values()) == pytest.approx(rep["iteration_time_s"], rel=1e-6)
    assert 0 < rep["mfu"] < 1


def test_rail_sample_gives_the_full_iteration_time():
    par = {"tp": 8, "pp": 2, "dp": 2, "global_batch": 4, "sequence_parallel": True, "bucket_mb": 400,
           "distributed_optimizer": True}
    b_full, _, full = _run(_cfg(par))
    b_one, _, one = _run(_cfg(par, rail_sample=True))
    assert one["simulated_gpus"] * 8 == full["simulated_gpus"] == 32
    assert b_one.experiment.tasks.n * 8 == b_full.experiment.tasks.n
    assert one["iteration_time_s"] == pytest.approx(full["iteration_time_s"], rel=1e-9)


def test_rail_sample_on_three_tiers_warns_that_it_is_approximate():
    import warnings
    from mvopt.errors import ApproximationWarning
    par = {"tp": 8, "pp": 1, "dp": 4, "global_batch": 4}
    three = {"topology": "rail_optimized", "servers": 4, "servers_per_group": 2, "gpus_per_server": 8,
             "tiers": 3, "groups_per_pod": 1}
    with pytest.warns(ApproximationWarning, match="3-tier"):
        build(_cfg(par, three, rail_sample=True))
    with warnings.catch_warnings():
        warnings.simplefilter("error", ApproximationWarning)
        build(_cfg(par, rail_sample=True))                                  # 2 tiers: exact, silent


def test_rail_sample_on_rail_zero_alone_gives_the_same_time_with_fewer_nodes():
    """`nics_per_server: 1` builds rail 0 of a 3-tier rail-optimised fabric alone (its leaves and
    NICs, the whole fabric's spines and cores). With one spine per pod and one core per plane (no
    ECMP choice) and line-rate traffic, the rail-sampled iteration takes exactly as long as on
    the whole fabric."""
    import warnings

    from mvopt.errors import ApproximationWarning
    par = {"tp": 8, "pp": 1, "dp": 4, "global_batch": 4}
    three = {"topology": "rail_optimized", "servers": 4, "servers_per_group": 2, "gpus_per_server": 8,
             "tiers": 3, "groups_per_pod": 1, "link_gbps": [100, 200, 1600]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ApproximationWarning)
        b_all, _, whole = _run(_cfg(par, three, rail_sample=True))
        b_one, _, alone = _run(_cfg(par, {**three, "nics_per_server": 1}, rail_sample=True))
    t_all, t_one = b_all.experiment.topology, b_one.experiment.topology
    assert (t_all.n_host, t_one.n_host) == (32, 4)
    assert t_one.n_switch == t_all.n_switch - 2 * 7           # 7 of the 8 leaves of each pod are gone
    assert alone["iteration_time_s"] == whole["iteration_time_s"]
    assert alone["breakdown"] == whole["breakdown"]


def test_rail_zero_alone_needs_the_rail_sample():
    three = {"topology": "rail_optimized", "servers": 4, "servers_per_group": 2, "gpus_per_server": 8,
             "tiers": 3, "groups_per_pod": 1, "nics_per_server": 1}
    with pytest.raises(ConfigError, match="nics_per_server.*rail_sample"):
        build(_cfg({"tp": 8, "pp": 1, "dp": 4, "global_batch": 4}, three))
    with pytest.raises(ConfigError, match="nics_per_server"):
        build(_cfg({"tp": 8, "pp": 1, "dp": 4, "global_batch": 4}, {**three, "nics_per_server": 2},
                   rail_sample=True))


def test_rail_sample_refuses_layouts_that_leave_the_rail():
    with pytest.raises(ConfigError, match="rail_sample"):
        build(_cfg({"tp": 2, "pp": 8, "dp": 2, "global_batch": 8}, rail_sample=True))


def test_pipelines_are_replicated_not_rebuilt():
    b = build(_cfg({"tp": 8, "pp": 2, "dp": 2, "global_batch": 4}))
    assert b.plan.stats["pipelines"] == 16 and b.plan.stats["pipeline_signatures"] == 1


@pytest.mark.parametrize("par,cluster,rail", [
    ({"tp": 2, "pp": 2, "dp": 8, "global_batch": 16, "distributed_optimizer": True}, None, False),
    ({"tp": 8, "pp": 2, "dp": 2, "global_batch": 8, "virtual_stages": 2, "bucket_mb": 40}, None, True),
    ({"tp": 4, "pp": 2, "dp": 4, "global_batch": 8, "overlap_grad_reduce": False},
     {"topology": "leaf_spine", "leaves": 2, "hosts_per_leaf": 2, "gpus_per_server": 8, "nics_per_server": 1}, True),
])
def test_counts_without_building_equal_the_built_graph(par, cluster, rail):
    from mvopt.engine.sizing import experiment_counts
    cfg = _cfg(par, cluster, rail_sample=rail)
    b = build(cfg)
    g = b.experiment.tasks
    c = training_counts(b.plan.setup)
    assert (c["tasks"], c["edges"]) == (g.n, g.pred.size)
    assert c["flows"] == int((g.kind == 0).sum())
    assert (c["flow_sizes"] == np.unique(g.size_bytes[g.kind == 0])).all()
    names = b.plan.columns["categories"]
    assert c["tasks_by_category"] == {n: int((g.category == i).sum()) for i, n in enumerate(names)}
    ec = experiment_counts(b.experiment)
    assert c["remote_edges"] <= ec["n_pred"] <= c["remote_edges"] + c["anchored_edges"]
    assert c["remote_owners"] <= ec["n_list"] <= c["remote_owners"] + c["anchored_owners"]
    assert c["dp_collectives"] == b.plan.n_buckets and c["simulated_gpus"] == b.plan.simulated_ranks.size


def test_chunk_parameters_sum_to_the_stage():
    model = get_model("megatron-gpt3-175b")
    par = ParallelismConfig(tp=4, pp=8, dp=4, virtual_stages=12, global_batch=256)
    for st in range(8):
        assert sum(chunk_param_counts(model, par, st)) == pytest.approx(stage_param_count(model, par, st), rel=1e-12)


def test_iterations_repeat_the_iteration():
    par = {"tp": 8, "pp": 2, "dp": 2, "global_batch": 4, "bucket_mb": 400}
    _, _, one = _run(_cfg(par, rail_sample=True))
    _, _, two = _run(_cfg(par, rail_sample=True, iterations=2))
    # the second iteration starts each stage when its own step ends (not all at 0): close, not equal
    assert two["iteration_time_s"] == pytest.approx(one["iteration_time_s"], rel=0.05)
    assert two["iteration_time_s"] >= one["iteration_time_s"] * (1 - 1e-9)


def test_memory_infeasible_is_rejected_before_simulation():
    cfg = _cfg({"tp": 1, "pp": 1, "dp": 32, "global_batch": 32}, model="gpt3-13b")   # 13B unsharded
    with pytest.raises(InfeasibleError, match="GiB"):
        build(cfg)
    ev, = evaluate([cfg])
    assert not ev.feasible and ev.status == "infeasible" and "capacity" in ev.reason and ev.violation > 1


def test_evaluate_reports_breakdown_mfu_and_memory():
    ev, = evaluate([_cfg({"tp": 8, "pp": 2, "dp": 2, "global_batch": 4, "bucket_mb": 400}, rail_sample=True)])
    assert ev.ok
    assert set(ev.breakdown) == {"compute", "tp_comm", "pp_comm", "dp_comm", "bubble"}
    assert sum(ev.breakdown.values()) == pytest.approx(ev.iteration_time_s, rel=1e-6)
    assert 0 < ev.sim_stats["mfu"] < 1 and 0 < ev.sim_stats["peak_memory_gib"] < 80


def test_invalid_layout_is_infeasible():
    ev, = evaluate([_cfg({"tp": 8, "pp": 5, "dp": 1, "global_batch": 4})])
    assert not ev.feasible and "layers" in ev.reason


def test_simulate_command_prints_training_report(tmp_path, capsys):
    import json

    import yaml

    from mvopt.__main__ import main

    cfg = {"name": "tiny", "cluster": {"topology": "rail_optimized", "servers": 4, "servers_per_group": 4,
                                       "gpus_per_server": 8, "gpu": "A100", "link_gbps": [200, 200]},
           "network": {"cc": "none", "payload_bytes": 16384},
           "workload": {"kind": "training", "model": "megatron-1.7b", "rail_sample": True},
           "parallelism": {"tp": 8, "pp": 2, "dp": 2, "global_batch": 4},
           "simulation": {"time_limit_ms": 100_000}}
    f = tmp_path / "t.yaml"
    f.write_text(yaml.safe_dump(cfg))
    assert main(["simulate", str(f)]) in (0, None)
    out = capsys.readouterr().out
    assert "iteration" in out and "MFU" in out and "bubble" in out and "memory/GPU" in out
    assert main(["simulate", str(f), "--json"]) in (0, None)
    t = json.loads(capsys.readouterr().out)["experiments"][0]["training"]
    assert t["gpus"] == 32 and t["simulated_gpus"] == 4
    assert sum(t["breakdown"].values()) == pytest.approx(t["iteration_time_s"], rel=1e-6)
