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
