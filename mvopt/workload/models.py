"""Decoder-only transformer models: hyper-parameters, parameter counts, and a zoo.

Two families differ in the details that change parameter counts:

* GPT style (``swiglu=False``): biases on every linear layer, LayerNorm (weight + bias), learned
  position embeddings, output layer tied to the input embedding, FFN = 4 * hidden.
* LLaMA style (``swiglu=True``): no biases, RMSNorm (weight only), rotary positions (no
  parameters), untied output layer, SwiGLU MLP (gate, up and down projections), optional GQA.

:func:`decoder_model` picks those defaults from ``swiglu`` and lets each be overridden.

>>> round(get_model("llama-3.1-8b").param_count() / 1e9, 2)
8.03
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal, Mapping

from mvopt.errors import ConfigError

__all__ = ["ModelSpec", "ParamCounts", "decoder_model", "get_model", "model_names", "ZOO"]


@dataclass(frozen=True)
class ParamCounts:
    """Parameters of a model, by part. ``per_layer`` is one transformer layer."""

    attention: int
    mlp: int
    norms: int
    per_layer: int
    layers: int                 # all transformer layers
    embedding: int              # token embedding
    position: int               # learned position embedding (0 for rotary)
    output: int                 # output (logit) layer; 0 when tied to the embedding
    final_norm: int
    total: int


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer. Build it with :func:`decoder_model` or take one from :data:`ZOO`."""

    name: str
    layers: int
    hidden: int
    heads: int
    kv_heads: int
    ffn: int
    vocab: int
    seq_len: int
    swiglu: bool
    tied_embeddings: bool
    bias: bool
    norm: Literal["layernorm", "rmsnorm"]
    learned_positions: bool

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"model {self.name}.{name}", "must be an integer > 0", value)
        if self.hidden % self.heads:
            raise ConfigError(f"model {self.name}.heads", f"must divide hidden ({self.hidden})", self.heads)
        if self.heads % self.kv_heads:
            raise ConfigError(f"model {self.name}.kv_heads", f"must divide heads ({self.heads})", self.kv_heads)
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ConfigError(f"model {self.name}.norm", "must be 'layernorm' or 'rmsnorm'", self.norm)

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def kv_dim(self) -> int:
        """Width of the K (and of the V) projection: kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def mlp_in_width(self) -> int:
        """Output width of the first MLP projection (2 * ffn for SwiGLU: gate and up)."""
        return 2 * self.ffn if self.swiglu else self.ffn

    def param_counts(self) -> ParamCounts:
        """Parameter counts by part (embeddings not padded: the published totals)."""
        h, b = self.hidden, int(self.bias)
        qkv_out = h + 2 * self.kv_dim
        attention = h * qkv_out + b * qkv_out + h * h + b * h
        mlp = h * self.mlp_in_width + b * self.mlp_in_width + self.ffn * h + b * h
        norm_params = h * (2 if self.norm == "layernorm" else 1)
        norms = 2 * norm_params
        per_layer = attention + mlp + norms
        embedding = self.vocab * h
        position = self.seq_len * h if self.learned_positions else 0
        output = 0 if self.tied_embeddings else self.vocab * h
        total = self.layers * per_layer + embedding + position + output + norm_params
        return ParamCounts(attention, mlp, norms, per_layer, self.layers * per_layer, embedding,
                           position, output, norm_params, total)

    def param_count(self) -> int:
        """Total number of parameters."""
        return self.param_counts().total

    def padded_vocab(self, tp: int = 1, multiple: int = 128) -> int:
        """Vocabulary padded as Megatron-LM does (to a multiple of ``multiple * tp``)."""
        step = multiple * tp
        return -(-self.vocab // step) * step

    def with_seq_len(self, seq_len: int) -> "ModelSpec":
        """The same model trained at another sequence length."""
        return replace(self, seq_len=seq_len)


def decoder_model(name: str, *, layers: int, hidden: int, heads: int, vocab: int, seq_len: int,
                  kv_heads: int | None = None, ffn: int | None = None, swiglu: bool = False,
                  tied_embeddings: bool | None = None, bias: bool | None = None,
                  norm: str | None = None, learned_positions: bool | None = None) -> ModelSpec:
    """Any decoder-only model from its hyper-parameters.

    Defaults follow the family chosen by ``swiglu`` (see the module docstring): ``kv_heads`` =
    ``heads`` (no GQA), ``ffn`` = 4 * hidden (GPT), ``tied_embeddings``/``bias``/
    ``learned_positions`` true and ``norm`` = layernorm for GPT style, the opposite for LLaMA style.
    """
    gpt = not swiglu
    if ffn is None:
        if not gpt:
            raise ConfigError(f"model {name}.ffn", "is required for a SwiGLU model", show_value=False)
        ffn = 4 * hidden
    return ModelSpec(
        name=name, layers=layers, hidden=hidden, heads=heads,
        kv_heads=heads if kv_heads is None else kv_heads, ffn=ffn, vocab=vocab, seq_len=seq_len,
        swiglu=swiglu,
        tied_embeddings=gpt if tied_embeddings is None else tied_embeddings,
        bias=gpt if bias is None else bias,
        norm=(norm or ("layernorm" if gpt else "rmsnorm")),  # type: ignore[arg-type]
        learned_positions=gpt if learned_positions is None else learned_positions,
    )


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200, seq: int = 2048) -> ModelSpec:
    return decoder_model(name, layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_len=seq)


def _llama(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int,
           seq: int) -> ModelSpec:
    return decoder_model(name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn=ffn,
                         vocab=vocab, seq_len=seq, swiglu=True)


# The zoo. Sources: GPT-3 (Brown et al. 2020, Table 2.1; BPE vocabulary 50257); LLaMA (Touvron et
# al. 2023, Table 2; FFN from the released config); Llama 3.1 (Meta's released configs: GQA with
# 8 KV heads, vocabulary 128256, trained at 8192 tokens). Megatron/Korthikanti/NeMo models use
# Megatron's padded GPT-2 vocabulary 51200 and are named after the end_to_end rows of
# published.yaml that use them.
ZOO: dict[str, ModelSpec] = {m.name: m for m in [
    _gpt("gpt3-13b", 40, 5120, 40, vocab=50257),
    _gpt("gpt3-175b", 96, 12288, 96, vocab=50257),
    _llama("llama-65b", 80, 8192, 64, 64, 22016, 32000, 2048),
    _llama("llama-3.1-8b", 32, 4096, 32, 8, 14336, 128256, 8192),
    _llama("llama-3.1-70b", 80, 8192, 64, 8, 28672, 128256, 8192),
    _llama("llama-3.1-405b", 126, 16384, 128, 8, 53248, 128256, 8192),
    # end_to_end rows of published.yaml
    _gpt("megatron-1.7b", 24, 2304, 24),
    _gpt("megatron-7.5b", 36, 4096, 32),
    _gpt("megatron-39.1b", 48, 8192, 64),
    _gpt("megatron-145.6b", 80, 12288, 96),
    _gpt("korthikanti-22b", 48, 6144, 64),
    _gpt("megatron-gpt3-175b", 96, 12288, 96),   # GPT-3 175B with Megatron's 51200 vocabulary
]}


def model_names() -> list[str]:
    """Names of the models in the zoo."""
    return sorted(ZOO)


def get_model(model: str | ModelSpec | Mapping[str, Any], *, path: str = "workload.model") -> ModelSpec:
    """A model by zoo name (case-insensitive), a :class:`ModelSpec`, or a mapping of
    :func:`decoder_model` arguments (``name`` optional)."""
    if isinstance(model, ModelSpec):
        return model
    if isinstance(model, Mapping):
        args = dict(model)
        name = str(args.pop("name", "custom"))
        try:
            return decoder_model(name, **args)
        except TypeError as e:
            raise ConfigError(path, f"is not a valid model definition ({e})", dict(model)) from None
    if isinstance(model, str):
        found = ZOO.get(model.strip().lower())
        if found is not None:
            return found
    raise ConfigError(path, f"must be a model of the zoo ({', '.join(model_names())}) or a mapping "
                      "of hyper-parameters", model)
