"""Context parallelism and FSDP: layout rules, the key/value ring's bytes of an iteration against
the formula, memory against closed forms, and a small CP training experiment simulated to the end."""

from __future__ import annotations

import numpy as np
import pytest

from mvopt.build import build, training_report
from mvopt.comm import default_model
from mvopt.config import ParallelismConfig, load_config
from mvopt.engine import FLOW, simulate
from mvopt.errors import ConfigError, InfeasibleError
from mvopt.workload import ComputeModel, check_layout, decoder_model, get_gpu, get_model
from mvopt.workload.context import cp_traffic_bytes, ring_block_bytes
from mvopt.workload.fsdp import fsdp_traffic_bytes
from mvopt.workload.memory import memory_per_stage, stage_param_count
from mvopt.workload.taskgraph import TrainingSetup, build_training

H, F, V, S = 64, 256, 256, 32
TINY = decoder_model("tiny", layers=4, hidden=H, heads=4, kv_heads=2, ffn=F, vocab=V, seq_len=S, swiglu=True)


@pytest.mark.parametrize("par,msg", [
    (dict(dp=2, cp=3), "divisible by 2 \\* cp"),
    (dict(dp=2, fsdp=True, distributed_optimizer=True), "distributed_optimizer must be false"),
    (dict(dp=2, cp=2), "must equal the 8 GPUs"),
])
def test_cp_fsdp_layout_problems(par, msg):
    with pytest.raises(InfeasibleError, match=msg):
        check_layout(get_model("llama-3.1-8b"), ParallelismConfig(global_batch=48, **par), gpus_per_server=8, gpus=8)


@pytest.mark.parametrize("pp,cp,recompute", [(1, 2, "none"), (2, 4, "none"), (2, 2, "full")])
def test_ring_bytes_of_an_iteration(pp, cp, recompute):
    """One GPU per server: every block is a flow. Per layer and micro-batch each CP rank sends
    (cp - 1) key/value blocks forward and twice that backward (three times with full recompute)."""
    dp, m = 2, 2
    par = ParallelismConfig(pp=pp, dp=dp, cp=cp, micro_batch=1, global_batch=m * dp, recompute=recompute)
    world = pp * dp * cp
    setup = TrainingSetup(model=TINY, par=par, gpu=get_gpu("H100"), compute=ComputeModel("H100"),
                          intra=default_model(), gpus_per_server=1, gpu_host=np.arange(world), flash_attention=True)
    cols = build_training(setup).columns
    k = cols["categories"].index("cp_comm")
    flows = (cols["kind"] == FLOW) & (cols["category"] == k)
    block = 2 * (S // cp) * 1 * (2 * TINY.kv_dim)                 # bf16 keys and values of s / cp tokens
    assert ring_block_bytes(TINY, par) == block
    passes = 1 + (3 if recompute == "full" else 2)
    assert cp_traffic_bytes(TINY, par) == m * TINY.layers / pp * (cp - 1) * block * passes
    assert int(cols["size_bytes"][flows].sum()) == world * cp_traffic_bytes(TINY, par)


def test_cp_memory_is_the_folded_layout_and_needs_flash_attention():
    """CP ranks hold the whole model state (sharded over dp x cp by the distributed optimizer) and
    1/cp of the activations (FlashAttention: linear in the sequence length)."""
    model = get_model("llama-3.1-8b")
    par = ParallelismConfig(tp=8, dp=2, cp=4, global_batch=8, distributed_optimizer=True)
    cp1 = ParallelismConfig(tp=8, dp=2, global_batch=8, distributed_optimizer=True)
    a, = memory_per_stage(model, par, "H100", flash_attention=True)
    b, = memory_per_stage(model, cp1, "H100", flash_attention=True)
    n = stage_param_count(model, cp1, 0)
    assert a.weights_bytes == b.weights_bytes == 2 * n and a.optimizer_bytes == pytest.approx(12 * n / 8)
    assert a.activations_bytes == pytest.approx(b.activations_bytes / 4)
    with pytest.raises(ConfigError, match="flash_attention"):
        memory_per_stage(model, par, "H100")


def test_fsdp_memory_and_traffic_closed_forms():
    model = get_model("llama-3.1-8b")
    par = ParallelismConfig(tp=1, dp=8, global_batch=16, fsdp=True)
    m, = memory_per_stage(model, par, "H100", flash_attention=True)
    n = stage_param_count(model, par, 0)
    c = model.param_counts()
    layer = c.per_layer
    assert m.weights_bytes == pytest.approx(2 * n / 8 + 2 * 2 * layer)
    assert m.gradients_bytes == pytest.approx(4 * n / 8 + 4 * layer)
    assert m.optimizer_bytes == pytest.approx(12 * n / 8)
    # 2 micro-batches, each: parameter all-gathers before forward and backward, gradient reduce-scatter
    assert fsdp_traffic_bytes(n, par, param=2, grad=4) == pytest.approx(2 * 7 / 8 * n * (2 * 2 + 4))


def _cp_cfg(**par):
    p = {"tp": 1, "pp": 2, "dp": 2, "cp": 2, "global_batch": 4, "micro_batch": 1, "distributed_optimizer": True}
    p.update(par)
    return load_config({"cluster": {"gpu": "H200", "topology": "rail_optimized", "servers": 4, "servers_per_group": 4,
                                    "gpus_per_server": 2, "link_gbps": [200, 200]},
                        "network": {"cc": "none", "payload_bytes": 16384},
                        "workload": {"kind": "training", "model": "llama-3.1-8b", "seq_len": 512,
                                     "flash_attention": True},
                        "parallelism": p, "simulation": {"time_limit_ms": 100_000}})


def test_small_cp_training_simulates_to_the_end():
    b = build(_cp_cfg())
    r, = simulate([b.experiment], backend="cpu")
    assert r.status == "done", r.diagnostic
    rep = training_report(b.plan, r)
    assert sum(rep["breakdown"].values()) == pytest.approx(rep["iteration_time_s"], rel=1e-9)
    assert rep["gpus"] == 8


@pytest.mark.parametrize("v", [1, 2])
def test_fsdp_bytes_of_an_iteration(v):
    """One GPU per server, ring collectives: per micro-batch and chunk two parameter all-gathers
    and one gradient reduce-scatter, each rank sending (n - 1)/n of the buffer."""
    from mvopt.workload.taskgraph import chunk_param_counts
    dp, m = 4, 2
    par = ParallelismConfig(dp=dp, fsdp=True, micro_batch=1, global_batch=m * dp, virtual_stages=v,
                            pp=2 if v > 1 else 1)
    world = dp * par.pp
    setup = TrainingSetup(model=TINY, par=par, gpu=get_gpu("H100"), compute=ComputeModel("H100"),
                          intra=default_model(), gpus_per_server=1, gpu_host=np.arange(world))
    cols = build_training(setup).columns
    k = cols["categories"].index("dp_comm")
    flows = (cols["kind"] == FLOW) & (cols["category"] == k)
    assert not TINY.tied_embeddings       # no embedding-gradient all-reduce between the stages
    expected = sum(dp * fsdp_traffic_bytes(sum(chunk_param_counts(TINY, par, st)), par, param=2, grad=4)
                   for st in range(par.pp))
    assert int(cols["size_bytes"][flows].sum()) == pytest.approx(expected, rel=1e-6)


@pytest.mark.parametrize("par", [dict(cp=1, dp=4, fsdp=True, distributed_optimizer=False),
                                 dict(cp=2, dp=2, fsdp=True, distributed_optimizer=False)])
def test_small_fsdp_training_simulates_to_the_end(par):
    b = build(_cp_cfg(**par))
    r, = simulate([b.experiment], backend="cpu")
    assert r.status == "done", r.diagnostic
    rep = training_report(b.plan, r)
    assert rep["breakdown"]["dp_comm"] > 0
    assert sum(rep["breakdown"].values()) == pytest.approx(rep["iteration_time_s"], rel=1e-9)
