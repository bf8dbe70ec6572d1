"""Mixture of experts: EP layout, memory and FLOP counts against closed forms, the all-to-all bytes
of a training iteration, and a small MoE training experiment simulated to the end."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.build import build, training_report
from mvopt.comm import default_model
from mvopt.config import ParallelismConfig, load_config
from mvopt.engine import FLOW, simulate
from mvopt.errors import ConfigError, InfeasibleError
from mvopt.workload import ComputeModel, check_layout, decoder_model, get_gpu, get_model, iteration_flops
from mvopt.workload.compute import permutation_ops
from mvopt.workload.memory import layer_activation_bytes, memory_per_stage, stage_param_count
from mvopt.workload.parallel import ep_dp_groups, expert_dp_groups
from mvopt.workload.taskgraph import TrainingSetup, build_training

H, F, FE, V, S = 64, 256, 32, 256, 16
TINY = decoder_model("tiny-moe", layers=4, hidden=H, heads=4, kv_heads=2, ffn=F, vocab=V, seq_len=S, swiglu=True,
                     experts=8, top_k=2, expert_ffn=FE, shared_experts=1, dense_layers=1)


def test_ep_groups_packed_and_spread():
    packed = ParallelismConfig(dp=8, ep=4, global_batch=8)
    assert ep_dp_groups(packed).tolist() == [[0, 1, 2, 3], [4, 5, 6, 7]]
    assert expert_dp_groups(packed).tolist() == [[0, 4], [1, 5], [2, 6], [3, 7]]
    spread = ParallelismConfig(dp=8, ep=4, ep_placement="spread", global_batch=8)
    assert ep_dp_groups(spread).tolist() == [[0, 2, 4, 6], [1, 3, 5, 7]]


@pytest.mark.parametrize("model,par,msg", [
    ("llama-3.1-8b", dict(dp=4, ep=2), "needs a model with experts"),
    ("mixtral-8x7b", dict(dp=6, ep=3), "must divide the model's experts"),
    ("mixtral-8x7b", dict(dp=6, ep=4), "must divide dp"),
])
def test_ep_layout_problems(model, par, msg):
    with pytest.raises(InfeasibleError, match=msg):
        check_layout(get_model(model), ParallelismConfig(global_batch=48, **par), gpus_per_server=8)


def test_moe_parameters_per_gpu_closed_form():
    par = ParallelismConfig(tp=2, pp=2, dp=4, ep=4, global_batch=8)
    # stage 0: the dense layer and MoE layer 1; stage 1: MoE layers 2 and 3
    attention = (H * H + 2 * H * 32 + H * H) // 2                  # split over TP
    norms = 2 * H                                                   # replicated
    dense_mlp = 3 * H * F // 2
    shared = 3 * H * FE // 2
    router = 8 * H                                                  # whole on every GPU
    routed = 8 // 4 * 3 * H * FE // 2                               # experts / ep, each split over TP
    vocab = V * H // 2
    moe_layer = attention + norms + shared + router + routed
    assert stage_param_count(TINY, par, 0) == attention + norms + dense_mlp + moe_layer + vocab
    assert stage_param_count(TINY, par, 1) == 2 * moe_layer + vocab + H


def test_moe_activations_closed_form():
    par = ParallelismConfig(tp=1, micro_batch=2, global_batch=2)
    s, b, h = S, 2, H
    dense = layer_activation_bytes(TINY, par, flash_attention=True)
    moe = layer_activation_bytes(TINY, par, flash_attention=True, moe=True, load=1.5)
    routed = s * b * 2 * 1.5                                        # tokens x top-k x load
    dense_mlp = 2 * s * b * 2 * F + 2 * s * b * F                   # activation input, FC2 input
    moe_mlp = (2 * s * b * 3 * FE                                   # shared expert: both inputs
               + 2 * routed * 3 * FE                                # routed experts: both inputs
               + 2 * routed * h                                     # routed tokens' FC1 input
               + 4 * s * b * 8)                                     # fp32 router probabilities
    assert moe - dense == pytest.approx(moe_mlp - dense_mlp, rel=1e-12)


def test_moe_memory_shards_expert_optimizer_over_expert_dp():
    par = ParallelismConfig(tp=1, pp=1, dp=8, ep=4, global_batch=8, distributed_optimizer=True)
    m, = memory_per_stage(TINY, par, "H100", reserve_bytes=0)
    n = stage_param_count(TINY, par, 0)
    experts = 3 * (8 // 4) * 3 * H * FE                             # 3 MoE layers
    assert m.optimizer_bytes == pytest.approx(12 * ((n - experts) / 8 + experts / 2), rel=1e-12)
    assert m.weights_bytes == 2 * n and m.gradients_bytes == 4 * n


@pytest.mark.parametrize("tp,ep,load", [(1, 8, 1.0), (2, 4, 1.5), (1, 2, 1.0)])
def test_permutation_bytes_closed_form(tp, ep, load):
    """Megatron-Core's unfused permute / unpermute (and the local-expert sort with more than one
    local expert), element by element: T tokens, Rl = T k copies sent, R = Rl load received."""
    par = ParallelismConfig(tp=tp, dp=8, ep=ep, micro_batch=2, global_batch=16, sequence_parallel=tp > 1)
    before, after = permutation_ops(TINY, par, load=load)
    T, hl = S * 2, H / tp
    Rl = T * 2
    R = Rl * load
    got = {(o.name, o.phase): o.bytes for o in before + after}
    want = {("permute", "fwd"): 2 * (2 * Rl * hl), ("permute", "bwd_input"): 2 * (T + 3 * Rl) * hl,
            ("unpermute", "fwd"): 2 * (5 * Rl + T) * hl, ("unpermute", "bwd_input"): 2 * 8 * Rl * hl}
    if 8 // ep > 1:
        want |= {(n, ph): 2 * 2 * R * hl for n in ("expert_sort", "expert_unsort") for ph in ("fwd", "bwd_input")}
    assert got == pytest.approx(want)
    assert all(o.kind == "memory" and o.flops == 0 for o in before + after)
    # the sorts run between the all-to-alls (named expert_*), the permutations outside them
    assert [o.name for o in before][-1] == ("expert_sort" if 8 // ep > 1 else "permute")


def test_moe_flops_are_six_active_matrix_parameters_per_token_plus_attention():
    par = ParallelismConfig(tp=1, micro_batch=2, global_batch=6)
    c = TINY.param_counts()
    matrix_active = c.active - c.embedding - TINY.layers * c.norms - c.final_norm
    tokens = par.global_batch * S
    expect = 6 * tokens * matrix_active + 12 * tokens * S * H * TINY.layers
    assert iteration_flops(TINY, par, flash_attention=True) == pytest.approx(expect, rel=1e-12)
    # with TP, sequence parallelism keeps the (replicated) router on each rank's own tokens
    par = ParallelismConfig(tp=2, dp=4, ep=4, micro_batch=2, global_batch=8, sequence_parallel=True)
    assert iteration_flops(TINY, par, flash_attention=True) == pytest.approx(expect * 8 / 6, rel=1e-12)


@pytest.mark.parametrize("algorithm", ["concurrent", "pairwise"])
def test_all_to_all_bytes_of_an_iteration(algorithm):
    """One GPU per server: every block is a flow. Per MoE layer and micro-batch, 2 all-to-alls
    forward and 2 backward, each rank sending (E - 1)/E of its routed bytes."""
    from mvopt.config import CollectiveConfig
    E, tp, pp, dp, m = 4, 1, 2, 8, 2
    par = ParallelismConfig(tp=tp, pp=pp, dp=dp, ep=E, micro_batch=1, global_batch=m * dp)
    setup = TrainingSetup(model=TINY, par=par, gpu=get_gpu("H100"), compute=ComputeModel("H100"),
                          intra=default_model(), gpus_per_server=1, gpu_host=np.arange(16),
                          collective=CollectiveConfig(all_to_all=algorithm))
    cols = build_training(setup).columns
    ep = cols["categories"].index("ep_comm")
    flows = (cols["kind"] == FLOW) & (cols["category"] == ep)
    routed = 2 * S * 1 * 2 * H // tp                                 # bytes of tokens x top-k per rank
    per_a2a = dp * tp * routed * (E - 1) // E                       # every rank of the stage
    # the busiest rank's share (the sampling maximum, not a whole number of bytes) makes every
    # block round to a whole byte; the total leaving the ranks is still (E - 1) / E of the routed
    sent = int(cols["size_bytes"][flows].sum())
    assert abs(sent - TINY.moe_layers * m * 4 * per_a2a) <= 0.5 * int(flows.sum())
    assert int(flows.sum()) == TINY.moe_layers * m * 4 * dp * tp * (E - 1)


def _moe_cfg(**kw):
    par = {"tp": 1, "pp": 2, "dp": 4, "ep": 4, "global_batch": 8, "micro_batch": 1, "distributed_optimizer": True}
    par.update(kw.pop("par", {}))
    return load_config({"cluster": {"gpu": "H200", "topology": "rail_optimized", "servers": 4, "servers_per_group": 4,
                                    "gpus_per_server": 2, "link_gbps": [200, 200]},
                        "network": {"cc": "none", "payload_bytes": 16384},
                        "workload": {"kind": "training", "model": "mixtral-8x7b", "seq_len": 256,
                                     "expert_skew": kw.pop("skew", 1.0), **kw.pop("workload", {})},
                        "collective": {"all_to_all": kw.pop("algorithm", "pairwise")},
                        "parallelism": par, "simulation": {"time_limit_ms": 100_000}})


@pytest.mark.parametrize("algorithm", ["pairwise", "hierarchical"])
def test_small_moe_training_simulates_to_the_end(algorithm):
    b = build(_moe_cfg(algorithm=algorithm))
    r, = simulate([b.experiment], backend="cpu")
    assert r.status == "done", r.diagnostic
    rep = training_report(b.plan, r)
    bd = rep["breakdown"]
    assert bd["ep_comm"] > 0 and sum(bd.values()) == pytest.approx(rep["iteration_time_s"], rel=1e-9)


def test_routing_skew_slows_the_iteration():
    times = []
    for skew in (1.0, 2.0):
        b = build(_moe_cfg(skew=skew))
        r, = simulate([b.experiment], backend="cpu")
        times.append(training_report(b.plan, r)["iteration_time_s"])
    assert times[1] > times[0]


def test_bad_skew_and_rail_sample_are_refused():
    with pytest.raises(ConfigError, match="expert_skew"):
        build(_moe_cfg(skew=5.0))
    with pytest.raises(ConfigError, match="expert parallelism"):
        build(_moe_cfg(workload={"rail_sample": True}))
