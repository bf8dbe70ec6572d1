"""Decoder-only transformer models: hyper-parameters, parameter counts, and a zoo.

Two families differ in the details that change parameter counts:

* GPT style (``swiglu=False``): biases on every linear layer, LayerNorm (weight + bias), learned
  position embeddings, output layer tied to the input embedding, FFN = 4 * hidden.
* LLaMA style (``swiglu=True``): no biases, RMSNorm (weight only), rotary positions (no
  parameters), untied output layer, SwiGLU MLP (gate, up and down projections), optional GQA.

:func:`decoder_model` picks those defaults from ``swiglu`` and lets each be overridden.

Mixture of experts (``experts > 0``): every layer after the first ``dense_layers`` replaces its
MLP by ``experts`` routed experts of width ``expert_ffn`` (each token goes to ``top_k`` of them,
chosen by a router ``h -> experts``) plus ``shared_experts`` experts of the same width that every
token goes through. Multi-head latent attention (DeepSeek-V2/V3, ``mla_kv_rank > 0``) replaces
the Q, K, V projections by low-rank down- and up-projections (see :meth:`ModelSpec.param_counts`).

Attention width: ``head_dim`` (0: ``hidden / heads``) sets the width of a head, so that the
queries and the attention output are ``heads x head_dim`` wide and keys and values ``kv_heads x
head_dim`` (Gemma, Qwen3, GPT-OSS have ``heads x head_dim != hidden``). Sliding-window attention:
``sliding_window`` (keys a query attends to, itself included; 0: none) applies to the layers whose
entry in ``attention_pattern`` is ``"sliding"``; the pattern repeats over the layers (GPT-OSS:
``["sliding", "full"]``; Mistral 7B: ``["sliding"]``, the default when a window is set).

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
    moe_mlp: int = 0            # routed experts + shared experts + router of one MoE layer
    expert: int = 0             # one routed expert
    router: int = 0
    moe_layers: int = 0
    active: int = 0             # parameters one token goes through (total for a dense model)


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
    experts: int = 0            # routed experts per MoE layer (0: a dense model)
    top_k: int = 0              # routed experts per token
    expert_ffn: int = 0         # width of one expert (routed or shared)
    shared_experts: int = 0     # experts every token goes through
    dense_layers: int = 0       # leading layers that keep a dense MLP of width ffn
    mla_q_rank: int = 0         # latent attention: query down-projection rank (0: no down-projection)
    mla_kv_rank: int = 0        # latent attention: key/value down-projection rank (0: no latent attention)
    mla_rope_dim: int = 0       # latent attention: rotary part of each query / key head
    mla_nope_dim: int = 0       # latent attention: non-rotary part of each query / key head
    mla_v_dim: int = 0          # latent attention: value head size
    head_dim: int = 0           # width of one attention head (0 on input: hidden / heads)
    sliding_window: int = 0     # keys a sliding-window layer's query attends to, itself included
    attention_pattern: tuple[str, ...] = ()   # per layer, repeating: "full" or "sliding"

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab", "seq_len"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ConfigError(f"model {self.name}.{name}", "must be an integer > 0", value)
        for name in ("experts", "top_k", "expert_ffn", "shared_experts", "dense_layers", "mla_q_rank",
                     "mla_kv_rank", "mla_rope_dim", "mla_nope_dim", "mla_v_dim", "head_dim", "sliding_window"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ConfigError(f"model {self.name}.{name}", "must be an integer >= 0", value)
        if self.experts:
            if not 1 <= self.top_k <= self.experts:
                raise ConfigError(f"model {self.name}.top_k", f"must be in 1..experts ({self.experts})", self.top_k)
            if self.expert_ffn <= 0:
                raise ConfigError(f"model {self.name}.expert_ffn", "must be > 0 for a model with experts",
                                  self.expert_ffn)
            if self.dense_layers >= self.layers:
                raise ConfigError(f"model {self.name}.dense_layers", f"must be below layers ({self.layers})",
                                  self.dense_layers)
        elif self.top_k or self.shared_experts or self.dense_layers:
            raise ConfigError(f"model {self.name}.experts", "must be > 0 when top_k, shared_experts or "
                              "dense_layers is set", self.experts)
        if self.mla_kv_rank and (self.mla_nope_dim + self.mla_rope_dim <= 0 or self.mla_v_dim <= 0):
            raise ConfigError(f"model {self.name}.mla_v_dim", "latent attention needs mla_v_dim > 0 and "
                              "mla_nope_dim + mla_rope_dim > 0", self.mla_v_dim)
        if self.head_dim == 0:
            if self.hidden % self.heads:
                raise ConfigError(f"model {self.name}.heads", f"must divide hidden ({self.hidden}) unless "
                                  "head_dim is given", self.heads)
            object.__setattr__(self, "head_dim", self.hidden // self.heads)
        elif self.is_mla:
            raise ConfigError(f"model {self.name}.head_dim", "does not apply to latent attention (its head "
                              "sizes are mla_nope_dim, mla_rope_dim and mla_v_dim)", self.head_dim)
        self._check_window()
        if self.heads % self.kv_heads:
            raise ConfigError(f"model {self.name}.kv_heads", f"must divide heads ({self.heads})", self.kv_heads)
        if self.norm not in ("layernorm", "rmsnorm"):
            raise ConfigError(f"model {self.name}.norm", "must be 'layernorm' or 'rmsnorm'", self.norm)

    def _check_window(self) -> None:
        if not isinstance(self.attention_pattern, (tuple, list)):
            raise ConfigError(f"model {self.name}.attention_pattern", "must be a list of 'full' or 'sliding', "
                              "one per layer, repeating", self.attention_pattern)
        pattern = tuple(self.attention_pattern)
        object.__setattr__(self, "attention_pattern", pattern)
        bad = [p for p in pattern if p not in ("full", "sliding")]
        if bad:
            raise ConfigError(f"model {self.name}.attention_pattern", "must list 'full' or 'sliding' per layer",
                              list(pattern))
        if self.sliding_window:
            if not pattern:
                object.__setattr__(self, "attention_pattern", ("sliding",))
            elif "sliding" not in pattern:
                raise ConfigError(f"model {self.name}.attention_pattern", "must contain 'sliding' when "
                                  "sliding_window is set", list(pattern))
            if self.is_mla:
                raise ConfigError(f"model {self.name}.sliding_window", "is not modelled with latent attention",
                                  self.sliding_window)
        elif "sliding" in pattern:
            raise ConfigError(f"model {self.name}.sliding_window", "must be > 0 when attention_pattern has "
                              "'sliding' layers", self.sliding_window)

    @property
    def has_sliding_window(self) -> bool:
        return self.sliding_window > 0

    def is_sliding(self, layer: int) -> bool:
        """Whether layer ``layer`` (0-based) attends over a sliding window."""
        return self.has_sliding_window and self.attention_pattern[layer % len(self.attention_pattern)] == "sliding"

    def layer_kinds_in(self, first: int, count: int) -> dict[tuple[bool, bool], int]:
        """Layers among ``first .. first + count - 1`` by kind ``(moe, sliding)`` (kinds present only)."""
        kinds: dict[tuple[bool, bool], int] = {}
        for i in range(first, first + count):
            key = (self.is_moe and i >= self.dense_layers, self.is_sliding(i))
            kinds[key] = kinds.get(key, 0) + 1
        return kinds

    def window_fraction(self) -> float:
        """Query-key pairs a causal sliding-window layer computes over those of a causal full
        layer at ``seq_len``: with ``w = min(sliding_window, s)`` keys per query (fewer for the
        first ``w - 1`` queries), ``(w s - w (w - 1) / 2) / (s (s + 1) / 2)``; 1 without a window."""
        if not self.has_sliding_window:
            return 1.0
        s = self.seq_len
        w = min(self.sliding_window, s)
        return (w * s - w * (w - 1) / 2) / (s * (s + 1) / 2)

    @property
    def kv_dim(self) -> int:
        """Width of the K (and of the V) projection: kv_heads * head_dim."""
        return self.kv_heads * self.head_dim

    @property
    def mlp_in_width(self) -> int:
        """Output width of the first MLP projection (2 * ffn for SwiGLU: gate and up)."""
        return 2 * self.ffn if self.swiglu else self.ffn

    @property
    def is_moe(self) -> bool:
        return self.experts > 0

    @property
    def is_mla(self) -> bool:
        return self.mla_kv_rank > 0

    @property
    def moe_layers(self) -> int:
        """Layers with experts (all but the leading ``dense_layers``)."""
        return self.layers - self.dense_layers if self.is_moe else 0

    def moe_layers_in(self, first: int, count: int) -> int:
        """MoE layers among layers ``first .. first + count - 1``."""
        if not self.is_moe:
            return 0
        return max(0, first + count - max(first, self.dense_layers))

    @property
    def q_width(self) -> int:
        """Width of the queries (and keys): all heads."""
        return self.heads * (self.mla_nope_dim + self.mla_rope_dim) if self.is_mla else self.heads * self.head_dim

    @property
    def attn_k_width(self) -> int:
        """Width of the keys the attention core reads (kv_dim; all heads' with latent attention)."""
        return self.q_width if self.is_mla else self.kv_dim

    @property
    def attn_v_width(self) -> int:
        """Width of the values the attention core reads (kv_dim; all heads' with latent attention)."""
        return self.heads * self.mla_v_dim if self.is_mla else self.kv_dim

    @property
    def attn_out_width(self) -> int:
        """Input width of the attention output projection."""
        return self.heads * self.mla_v_dim if self.is_mla else self.heads * self.head_dim

    def mlp_params(self, width: int) -> int:
        """Parameters of one MLP of ``width`` (a dense MLP, or one expert): two projections (three
        with SwiGLU) and their biases."""
        h, b = self.hidden, int(self.bias)
        w_in = 2 * width if self.swiglu else width
        return h * w_in + b * w_in + width * h + b * h

    def attention_replicated(self) -> int:
        """Attention parameters every TP rank holds whole: latent attention's down-projections
        and their norms (Megatron-Core keeps them duplicated over TP)."""
        if not self.is_mla:
            return 0
        h = self.hidden
        q_down = h * self.mla_q_rank + self.mla_q_rank if self.mla_q_rank else 0
        return q_down + h * (self.mla_kv_rank + self.mla_rope_dim) + self.mla_kv_rank

    def param_counts(self) -> ParamCounts:
        """Parameter counts by part (embeddings not padded: the published totals).

        ``per_layer`` is a dense layer. Latent attention: query down (``h x q_rank``, its norm)
        and up (``q_rank x q_width``; ``h x q_width`` without a down-projection), key/value down
        (``h x (kv_rank + rope)``, its norm) and up (``kv_rank x heads (nope + v)``), output
        ``heads v x h``. A MoE layer's MLP is ``experts + shared_experts`` MLPs of width
        ``expert_ffn`` plus the router ``h x experts`` (and its bias when the model has biases); a
        token goes through ``top_k`` routed experts, the shared ones and the router (``active``).
        Other attention: Q, K, V projections ``h x (q_width + 2 kv_dim)`` and the output
        projection ``q_width x h``, with ``q_width = heads x head_dim``.
        """
        h, b = self.hidden, int(self.bias)
        if self.is_mla:
            q_up = (self.mla_q_rank or h) * self.q_width
            kv_up = self.mla_kv_rank * self.heads * (self.mla_nope_dim + self.mla_v_dim)
            attention = self.attention_replicated() + q_up + kv_up + self.attn_out_width * h
        else:
            qkv_out = self.q_width + 2 * self.kv_dim
            attention = h * qkv_out + b * qkv_out + self.attn_out_width * h + b * h
        mlp = self.mlp_params(self.ffn)
        norm_params = h * (2 if self.norm == "layernorm" else 1)
        norms = 2 * norm_params
        per_layer = attention + mlp + norms
        embedding = self.vocab * h
        position = self.seq_len * h if self.learned_positions else 0
        output = 0 if self.tied_embeddings else self.vocab * h
        n_moe = self.moe_layers
        expert = self.mlp_params(self.expert_ffn) if self.is_moe else 0
        router = (h + b) * self.experts
        moe_mlp = (self.experts + self.shared_experts) * expert + router
        layers = self.layers * per_layer + n_moe * (moe_mlp - mlp)
        total = layers + embedding + position + output + norm_params
        active = total - n_moe * (self.experts - self.top_k) * expert
        return ParamCounts(attention, mlp, norms, per_layer, layers, embedding, position, output,
                           norm_params, total, moe_mlp=moe_mlp, expert=expert, router=router,
                           moe_layers=n_moe, active=active)

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
                  norm: str | None = None, learned_positions: bool | None = None, experts: int = 0,
                  top_k: int = 0, expert_ffn: int = 0, shared_experts: int = 0, dense_layers: int = 0,
                  mla_q_rank: int = 0, mla_kv_rank: int = 0, mla_rope_dim: int = 0, mla_nope_dim: int = 0,
                  mla_v_dim: int = 0, head_dim: int = 0, sliding_window: int = 0,
                  attention_pattern: tuple[str, ...] | list[str] = ()) -> ModelSpec:
    """Any decoder-only model from its hyper-parameters.

    Defaults follow the family chosen by ``swiglu`` (see the module docstring): ``kv_heads`` =
    ``heads`` (no GQA), ``ffn`` = 4 * hidden (GPT), ``tied_embeddings``/``bias``/
    ``learned_positions`` true and ``norm`` = layernorm for GPT style, the opposite for LLaMA style.
    ``experts``, ``top_k``, ``expert_ffn``, ``shared_experts``, ``dense_layers`` make a mixture of
    experts; ``mla_*`` latent attention; ``head_dim``, ``sliding_window`` and
    ``attention_pattern`` the attention's width and window (see the module docstring).
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
        experts=experts, top_k=top_k, expert_ffn=expert_ffn, shared_experts=shared_experts,
        dense_layers=dense_layers, mla_q_rank=mla_q_rank, mla_kv_rank=mla_kv_rank, mla_rope_dim=mla_rope_dim,
        mla_nope_dim=mla_nope_dim, mla_v_dim=mla_v_dim, head_dim=head_dim, sliding_window=sliding_window,
        attention_pattern=tuple(attention_pattern) if isinstance(attention_pattern, (list, tuple)) else attention_pattern,
    )


def _gpt(name: str, layers: int, hidden: int, heads: int, vocab: int = 51200, seq: int = 2048) -> ModelSpec:
    return decoder_model(name, layers=layers, hidden=hidden, heads=heads, vocab=vocab, seq_len=seq)


def _llama(name: str, layers: int, hidden: int, heads: int, kv: int, ffn: int, vocab: int,
           seq: int) -> ModelSpec:
    return decoder_model(name, layers=layers, hidden=hidden, heads=heads, kv_heads=kv, ffn=ffn,
                         vocab=vocab, seq_len=seq, swiglu=True)


def _mixtral(name: str, layers: int, hidden: int, heads: int, ffn: int, vocab: int, seq: int) -> ModelSpec:
    return decoder_model(name, layers=layers, hidden=hidden, heads=heads, kv_heads=8, ffn=ffn, vocab=vocab,
                         seq_len=seq, swiglu=True, experts=8, top_k=2, expert_ffn=ffn)


def _gpt_oss(name: str, layers: int, experts: int) -> ModelSpec:
    return decoder_model(name, layers=layers, hidden=2880, heads=64, kv_heads=8, head_dim=64, ffn=2880,
                         vocab=201088, seq_len=131072, swiglu=True, bias=True, experts=experts, top_k=4,
                         expert_ffn=2880, sliding_window=128, attention_pattern=("sliding", "full"))


# The zoo. Sources: GPT-3 (Brown et al. 2020, Table 2.1; BPE vocabulary 50257); LLaMA (Touvron et
# al. 2023, Table 2; FFN from the released config); Llama 3.1 (Meta's released configs: GQA with
# 8 KV heads, vocabulary 128256, trained at 8192 tokens). Megatron/Korthikanti/NeMo models use
# Megatron's padded GPT-2 vocabulary 51200 and are named after the end_to_end rows of
# published.yaml that use them. Mixtral (Jiang et al. 2024, arXiv:2401.04088; the released
# configs of mistralai/Mixtral-8x7B-v0.1 and Mixtral-8x22B-v0.1: 8 experts, top-2, GQA with 8 KV
# heads; published totals 46.7 B / 141 B, active 12.9 B / 39 B). DeepSeek-V3 (arXiv:2412.19437,
# Table/section 4.2, and the released config of deepseek-ai/DeepSeek-V3: 61 layers, the first 3
# dense, 256 routed experts of width 2048 with top-8 and 1 shared, latent attention with ranks
# 1536 / 512, head dims 128 + 64 rotary, values 128; 671 B total, 37 B active, without the
# multi-token-prediction module), trained at 4096 tokens. GPT-OSS (OpenAI, "gpt-oss-120b &
# gpt-oss-20b Model Card", arXiv:2508.10925, Table 1: 116.83 B / 20.91 B total, 5.13 B / 3.61 B
# active, counting the unembedding but not the embedding; the released config.json of
# openai/gpt-oss-120b and -20b as reproduced in Megatron-Bridge's GPTOSSProvider: 36 / 24 layers,
# hidden 2880, 64 heads of 64 dimensions and 8 KV heads, 128 / 32 experts of width 2880 with
# top-4, SwiGLU-style gated MLP, biases on every linear layer and the router, RMSNorm, untied
# embeddings, vocabulary 201088, a 128-token window on every other layer starting with the first,
# 131072-token context). Its per-head attention sinks (64 parameters per layer) are left out.
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
    # mixtures of experts
    _mixtral("mixtral-8x7b", 32, 4096, 32, 14336, 32000, 32768),
    _mixtral("mixtral-8x22b", 56, 6144, 48, 16384, 32768, 65536),
    decoder_model("deepseek-v3", layers=61, hidden=7168, heads=128, ffn=18432, vocab=129280, seq_len=4096,
                  swiglu=True, experts=256, top_k=8, expert_ffn=2048, shared_experts=1, dense_layers=3,
                  mla_q_rank=1536, mla_kv_rank=512, mla_rope_dim=64, mla_nope_dim=128, mla_v_dim=128),
    _gpt_oss("gpt-oss-120b", 36, 128),
    _gpt_oss("gpt-oss-20b", 24, 32),
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
