"""Model zoo: parameter counts against published totals and closed forms; validation errors."""

import pytest

from mvopt.errors import ConfigError
from mvopt.workload import ZOO, decoder_model, get_model, published_runs


@pytest.mark.parametrize("name,published_billions,rel_tol", [
    ("llama-3.1-8b", 8.03, 0.001),        # Meta model card: 8.03B
    ("llama-3.1-70b", 70.6, 0.001),       # 70.55B
    ("llama-3.1-405b", 405.9, 0.001),     # 405.85B
    ("gpt3-175b", 174.6, 0.001),          # 174.6B with the 50257-token vocabulary
    ("llama-65b", 65.2, 0.002),           # LLaMA paper: 65.2B
    ("gpt3-13b", 13.0, 0.02),             # GPT-3 paper rounds 12.85B to 13.0B
    ("megatron-1.7b", 1.7, 0.03),         # SC21 Table 1 names (1.65B rounded)
    ("megatron-7.5b", 7.5, 0.01),
    ("megatron-39.1b", 39.1, 0.001),
    ("megatron-145.6b", 145.6, 0.001),
])
def test_parameter_counts_match_published_totals(name, published_billions, rel_tol):
    assert get_model(name).param_count() / 1e9 == pytest.approx(published_billions, rel=rel_tol)


@pytest.mark.parametrize("name", ["megatron-1.7b", "korthikanti-22b", "megatron-gpt3-175b"])
def test_gpt_count_equals_megatron_closed_form(name):
    # Narayanan et al.: P = 12 l h^2 (1 + 13/(12h) + (V+s)/(12 l h)); it omits the final LayerNorm (2h).
    m = get_model(name)
    l, h, v, s = m.layers, m.hidden, m.vocab, m.seq_len
    closed = 12 * l * h * h + 13 * l * h + (v + s) * h
    assert m.param_count() == closed + 2 * h


def test_llama_layer_count_by_hand():
    m = get_model("llama-3.1-8b")
    h, kv, f = 4096, 8 * 128, 14336
    per_layer = h * h + 2 * h * kv + h * h + 3 * h * f + 2 * h     # q, k+v, o, gate/up/down, 2 RMSNorm
    assert m.param_counts().per_layer == per_layer
    assert m.param_count() == 32 * per_layer + 2 * 128256 * h + h


def test_every_end_to_end_model_is_in_the_zoo():
    zoo = {(m.layers, m.hidden, m.heads, m.vocab, m.seq_len) for m in ZOO.values()}
    for run in published_runs():
        m = run.model
        assert (m.layers, m.hidden, m.heads, m.vocab, m.seq_len) in zoo, run.name


def test_model_from_hyperparameters_and_mapping():
    m = decoder_model("tiny", layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=100, seq_len=32,
                      swiglu=True)
    assert not m.bias and not m.tied_embeddings and m.norm == "rmsnorm" and m.kv_dim == 32
    same = get_model({"name": "tiny", "layers": 2, "hidden": 64, "heads": 4, "kv_heads": 2, "ffn": 128,
                      "vocab": 100, "seq_len": 32, "swiglu": True})
    assert same == m
    assert get_model("LLaMA-3.1-8B") is ZOO["llama-3.1-8b"]


@pytest.mark.parametrize("kwargs,path", [
    (dict(hidden=100, heads=3), "heads"),
    (dict(heads=4, kv_heads=3), "kv_heads"),
    (dict(layers=0), "layers"),
])
def test_invalid_models_are_rejected(kwargs, path):
    base = dict(layers=2, hidden=64, heads=4, vocab=100, seq_len=32)
    with pytest.raises(ConfigError) as e:
        decoder_model("bad", **{**base, **kwargs})
    assert path in e.value.path


def test_unknown_model_and_swiglu_without_ffn():
    with pytest.raises(ConfigError, match="zoo"):
        get_model("gpt-5")
    with pytest.raises(ConfigError, match="ffn"):
        decoder_model("x", layers=1, hidden=64, heads=4, vocab=10, seq_len=8, swiglu=True)
    with pytest.raises(ConfigError):
        get_model({"layers": 1, "colour": "red"})


# Published totals and active counts: Mixtral (arXiv:2401.04088: 46.7 B / 12.9 B; Mistral's 8x22B
# announcement: 141 B / 39 B) count every parameter a token touches; DeepSeek-V3 (arXiv:2412.19437;
# its weights' README: 671 B, 36.6 B activated "including 0.9 B for the output head") leaves the
# input embedding out of the activated count.
@pytest.mark.parametrize("name,total,active,embedding_in_active", [
    ("mixtral-8x7b", 46.7e9, 12.9e9, True),
    ("mixtral-8x22b", 141e9, 39e9, True),
    ("deepseek-v3", 671e9, 36.6e9, False),
])
def test_moe_zoo_matches_published_counts(name, total, active, embedding_in_active):
    c = get_model(name).param_counts()
    assert c.total == pytest.approx(total, rel=5e-3)
    assert c.active - (0 if embedding_in_active else c.embedding) == pytest.approx(active, rel=5e-3)


def test_moe_counts_closed_form():
    h, f, fe, V = 64, 256, 32, 100
    m = decoder_model("moe", layers=4, hidden=h, heads=4, kv_heads=2, ffn=f, vocab=V, seq_len=16, swiglu=True,
                      experts=8, top_k=2, expert_ffn=fe, shared_experts=1, dense_layers=1)
    c = m.param_counts()
    attention = h * h + 2 * h * 32 + h * h
    expert = 3 * h * fe
    assert c.expert == expert and c.router == 8 * h and c.moe_mlp == 9 * expert + 8 * h
    dense_layer = attention + 3 * h * f + 2 * h
    moe_layer = attention + 9 * expert + 8 * h + 2 * h
    assert c.moe_layers == 3 and c.layers == dense_layer + 3 * moe_layer
    assert c.total == dense_layer + 3 * moe_layer + 2 * V * h + h
    assert c.active == c.total - 3 * 6 * expert
    assert m.moe_layers_in(0, 2) == 1 and m.moe_layers_in(2, 2) == 2 and m.moe_layers_in(0, 1) == 0


def test_latent_attention_counts():
    h, H, qr, kvr, rope, nope, v = 64, 4, 24, 16, 8, 16, 12
    m = decoder_model("mla", layers=1, hidden=h, heads=H, ffn=128, vocab=10, seq_len=8, swiglu=True,
                      mla_q_rank=qr, mla_kv_rank=kvr, mla_rope_dim=rope, mla_nope_dim=nope, mla_v_dim=v)
    expected = (h * qr + qr + qr * H * (nope + rope)            # query down, its norm, up
                + h * (kvr + rope) + kvr + kvr * H * (nope + v)  # key/value down, its norm, up
                + H * v * h)                                     # output
    assert m.param_counts().attention == expected
    assert m.attention_replicated() == h * qr + qr + h * (kvr + rope) + kvr


@pytest.mark.parametrize("kwargs,path", [
    (dict(experts=4, top_k=5, expert_ffn=8), "top_k"),
    (dict(experts=4, top_k=1), "expert_ffn"),
    (dict(top_k=2), "experts"),
    (dict(experts=4, top_k=1, expert_ffn=8, dense_layers=2), "dense_layers"),
])
def test_invalid_moe_models_are_rejected(kwargs, path):
    with pytest.raises(ConfigError) as e:
        decoder_model("bad", layers=2, hidden=64, heads=4, vocab=100, seq_len=32, **kwargs)
    assert path in e.value.path
