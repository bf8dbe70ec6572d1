"""Attention width (``head_dim``), sliding-window attention and the GPT-OSS models: parameter
counts against the model card, FLOPs, activation memory and stage costs against hand counts,
and the configuration errors."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mvopt.comm import default_model
from mvopt.config import ParallelismConfig
from mvopt.errors import ConfigError, InfeasibleError
from mvopt.workload import ComputeModel, check_layout, decoder_model, get_gpu, get_model, iteration_flops
from mvopt.workload.compute import layer_ops
from mvopt.workload.memory import layer_activation_bytes
from mvopt.workload.taskgraph import TrainingSetup, stage_costs

# heads x head_dim (4 x 32 = 128) differs from hidden (96, not a multiple of the 5 heads' width)
H, A, KV, D, S = 96, 4, 2, 32, 64
WIDE = decoder_model("wide-heads", layers=4, hidden=H, heads=A, kv_heads=KV, head_dim=D, ffn=192, vocab=256,
                     seq_len=S, swiglu=True)


def _flops(ops, name, phase="fwd"):
    return sum(o.flops for o in ops if o.name == name and o.phase == phase)


# ------------------------------------------------------------------------------- parameters

@pytest.mark.parametrize("name,total,active,mlp,attention,embed", [
    # gpt-oss model card (arXiv:2508.10925) Table 1, in billions, 2 decimals; active counts the
    # unembedding but not the embedding
    ("gpt-oss-120b", 116.83, 5.13, 114.71, 0.96, 1.16),
    ("gpt-oss-20b", 20.91, 3.61, 19.12, 0.64, 1.16),
])
def test_gpt_oss_parameter_counts_match_the_model_card(name, total, active, mlp, attention, embed):
    m = get_model(name)
    c = m.param_counts()
    assert round(c.total / 1e9, 2) == total
    assert round((c.active - c.embedding) / 1e9, 2) == active
    assert round(c.moe_layers * c.moe_mlp / 1e9, 2) == mlp
    assert round(m.layers * c.attention / 1e9, 2) == attention
    assert round((c.embedding + c.output) / 1e9, 2) == embed


def test_gpt_oss_layer_by_hand():
    """hidden 2880, 64 heads x 64 and 8 KV heads x 64, biases: Q/K/V 2880 x (4096 + 2 x 512) plus
    biases, output 4096 x 2880 plus bias; an expert 2880 x 5760 + 5760 + 2880 x 2880 + 2880; the
    router 2880 x 128 + 128."""
    c = get_model("gpt-oss-120b").param_counts()
    assert c.attention == 2880 * 5120 + 5120 + 4096 * 2880 + 2880
    assert c.expert == 2880 * 5760 + 5760 + 2880 * 2880 + 2880
    assert c.router == 2880 * 128 + 128
    assert c.moe_mlp == 128 * c.expert + c.router


def test_head_dim_defaults_to_hidden_over_heads():
    base = dict(layers=2, hidden=128, heads=4, kv_heads=2, ffn=256, vocab=64, seq_len=16, swiglu=True)
    assert decoder_model("a", **base) == decoder_model("a", head_dim=32, **base)
    assert decoder_model("a", **base).head_dim == 32
    for zoo in ("llama-3.1-8b", "mixtral-8x7b", "gpt3-13b"):
        m = get_model(zoo)
        assert m.q_width == m.attn_out_width == m.hidden
        assert m.attn_k_width == m.attn_v_width == m.kv_heads * m.hidden // m.heads


def test_wide_heads_parameters_by_hand():
    c = WIDE.param_counts()
    assert (WIDE.q_width, WIDE.kv_dim) == (A * D, KV * D)
    assert c.attention == H * (A * D + 2 * KV * D) + A * D * H


# ------------------------------------------------------------------------------- FLOPs, memory

def test_wide_heads_flops_by_hand():
    """Per micro-batch (b = 1, tp = 2): QKV 2 s h (a d + 2 g d) / tp, output 2 s (a d) h / tp,
    FlashAttention 2 x 2 s^2 (a d) / tp."""
    t = 2
    ops = layer_ops(WIDE, ParallelismConfig(tp=t, micro_batch=1, global_batch=1), flash_attention=True)
    assert _flops(ops, "qkv") == pytest.approx(2 * S * H * (A * D + 2 * KV * D) / t, rel=1e-12)
    assert _flops(ops, "attn_proj") == pytest.approx(2 * S * A * D * H / t, rel=1e-12)
    assert _flops(ops, "flash_attention") == pytest.approx(4 * S * S * A * D / t, rel=1e-12)


def test_wide_heads_activation_bytes_by_hand():
    """No recompute, FlashAttention, b = 1, tp = 1, no dropout: Q and projection input 2 s a d each,
    K and V 2 s g d each, FC1 output 2 s 2f, FC2 input 2 s f, log-sum-exp 4 a s, and the norm
    inputs, QKV and FC1 inputs (2 s h each) and the two residual inputs' worth 2 s h (4 s h in all:
    Korthikanti's replicated part)."""
    par = ParallelismConfig(micro_batch=1, global_batch=1)
    f = 192
    split = 2 * S * (2 * A * D + 2 * KV * D) + 2 * S * 2 * f + 2 * S * f + 4 * A * S
    replicated = 4 * S * H + 2 * S * H + 2 * S * H
    assert layer_activation_bytes(WIDE, par, flash_attention=True) == pytest.approx(split + replicated, rel=1e-12)


def test_window_fraction_by_hand():
    """s = 8, w = 3: the queries attend to 1, 2, 3, 3, 3, 3, 3, 3 keys = 21 pairs of the causal
    36; a window as long as the sequence is no window."""
    m = decoder_model("w", layers=2, hidden=32, heads=2, ffn=64, vocab=16, seq_len=8, swiglu=True,
                      sliding_window=3)
    assert m.window_fraction() == pytest.approx(21 / 36, rel=1e-15)
    assert dataclasses.replace(m, sliding_window=8).window_fraction() == 1.0
    assert dataclasses.replace(m, sliding_window=100).window_fraction() == 1.0


def test_sliding_layer_attention_flops_and_memory():
    """A sliding layer's FlashAttention FLOPs are the full layer's x window_fraction; every other
    operator, the unfused core (which computes the masked square) and the activation memory are
    unchanged."""
    m = decoder_model("w", layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=32, seq_len=32, swiglu=True,
                      sliding_window=5, attention_pattern=["sliding", "full"])
    par = ParallelismConfig(micro_batch=2, global_batch=2)
    full, sl = (layer_ops(m, par, flash_attention=True, sliding=x) for x in (False, True))
    for a, b in zip(full, sl):
        scale = m.window_fraction() if a.name == "flash_attention" else 1.0
        assert (b.name, b.phase, b.bytes) == (a.name, a.phase, a.bytes)
        assert b.flops == pytest.approx(a.flops * scale, rel=1e-12)
    assert layer_ops(m, par, sliding=True) == layer_ops(m, par, sliding=False)
    for flash in (False, True):
        assert layer_activation_bytes(m, par, flash_attention=flash) == \
            layer_activation_bytes(dataclasses.replace(m, sliding_window=0, attention_pattern=()), par,
                                   flash_attention=flash)


def test_iteration_flops_count_each_layer_kind():
    """GPT-OSS-120B: 18 sliding and 18 full MoE layers plus the output layer."""
    m = get_model("gpt-oss-120b").with_seq_len(4096)
    par = ParallelismConfig(pp=4, dp=16, ep=8, micro_batch=1, global_batch=64)
    assert m.layer_kinds_in(0, 36) == {(True, True): 18, (True, False): 18}
    assert m.layer_kinds_in(9, 9) == {(True, False): 5, (True, True): 4}

    def matrix(**kw):
        return sum(o.flops for o in layer_ops(m, par, flash_attention=True, moe=True, **kw) if o.kind != "memory")
    no_window = dataclasses.replace(m, sliding_window=0, attention_pattern=())
    expect = iteration_flops(no_window, par, flash_attention=True) \
        + 64 * 18 * (matrix(sliding=True) - matrix(sliding=False))
    assert iteration_flops(m, par, flash_attention=True) == pytest.approx(expect, rel=1e-12)


def _setup(model, par):
    return TrainingSetup(model=model, par=par, gpu=get_gpu("H100"), compute=ComputeModel("H100"),
                         intra=default_model(), gpus_per_server=8, gpu_host=np.zeros(par.tp * par.pp * par.dp, np.int64),
                         flash_attention=True)


def test_stage_costs_add_each_layer_kind():
    """A chunk's forward and backward compute is the sum over its layers of their kind's cost: a
    dense model whose layers 0, 2 are sliding and 1, 3 full, on 2 stages, against the same model
    with every layer full plus the sliding layers' difference, and a window as long as the
    sequence changes nothing. (Long sequences: the attention core is compute-bound, so the window
    shortens it.)"""
    base = decoder_model("d", layers=4, hidden=512, heads=8, kv_heads=2, ffn=1024, vocab=64, seq_len=8192,
                         swiglu=True)
    m = dataclasses.replace(base, sliding_window=16, attention_pattern=("sliding", "full"))
    par = ParallelismConfig(pp=2, micro_batch=1, global_batch=2)
    cm = ComputeModel("H100")
    full, sl = (cm.phase_times(layer_ops(m, par, flash_attention=True, sliding=x)) for x in (False, True))
    for stage in (0, 1):
        a, b = stage_costs(_setup(base, par), stage), stage_costs(_setup(m, par), stage)
        assert b.f_compute[0] == pytest.approx(a.f_compute[0] + (sl.fwd - full.fwd), rel=1e-12)
        back = lambda t: t.recompute + t.bwd_input + t.bwd_weight   # noqa: E731
        assert b.b_compute[0] == pytest.approx(a.b_compute[0] + back(sl) - back(full), rel=1e-12)
        assert b.f_compute[0] < a.f_compute[0]
    whole = dataclasses.replace(base, sliding_window=8192, attention_pattern=("sliding", "full"))
    assert stage_costs(_setup(whole, par), 1) == stage_costs(_setup(base, par), 1)


# ------------------------------------------------------------------------------- errors

@pytest.mark.parametrize("kw,field,msg", [
    (dict(hidden=100, heads=3), "heads", "must divide hidden"),
    (dict(attention_pattern=["sliding", "full"]), "sliding_window", "must be > 0"),
    (dict(sliding_window=8, attention_pattern=["full"]), "attention_pattern", "must contain 'sliding'"),
    (dict(sliding_window=8, attention_pattern=["sliding", "local"]), "attention_pattern", "'full' or 'sliding'"),
    (dict(sliding_window=8, attention_pattern="sliding"), "attention_pattern", "must be a list"),
    (dict(head_dim=-1), "head_dim", "integer >= 0"),
    (dict(sliding_window=1.5), "sliding_window", "integer >= 0"),
    (dict(head_dim=64, mla_kv_rank=16, mla_nope_dim=8, mla_rope_dim=8, mla_v_dim=8), "head_dim",
     "latent attention"),
])
def test_bad_attention_fields_name_the_field(kw, field, msg):
    args = dict(layers=2, hidden=96, heads=4, ffn=64, vocab=16, seq_len=32, swiglu=True) | kw
    with pytest.raises(ConfigError, match=msg) as e:
        decoder_model("bad", **args)
    assert f"model bad.{field}" in str(e.value)


def test_model_mapping_from_yaml_takes_the_new_fields():
    m = get_model({"name": "y", "layers": 2, "hidden": 96, "heads": 4, "head_dim": 32, "ffn": 64, "vocab": 16,
                   "seq_len": 32, "swiglu": True, "sliding_window": 8, "attention_pattern": ["full", "sliding"]})
    assert (m.q_width, m.is_sliding(0), m.is_sliding(1), m.is_sliding(2)) == (128, False, True, False)
    assert decoder_model("mistral-like", layers=2, hidden=96, heads=4, ffn=64, vocab=16, seq_len=32, swiglu=True,
                         sliding_window=8).attention_pattern == ("sliding",)


def test_context_parallel_with_a_window_is_refused():
    par = ParallelismConfig(cp=2, dp=4, ep=8, global_batch=8)
    with pytest.raises(InfeasibleError, match="sliding-window attention"):
        check_layout(get_model("gpt-oss-120b").with_seq_len(4096), par, gpus_per_server=8)
