"""Per-GPU memory of a training configuration: model state, activations, transients, reserve.

Model state follows the bytes-per-parameter table of published.yaml (Megatron-LM's distributed
optimizer guide and the ZeRO paper). Activations follow Korthikanti et al. (arXiv:2205.05198,
Table 2), generalised to GQA and SwiGLU by counting the same stored tensors (see
docs/training-model.md for the derivation); the stage holding the most in-flight micro-batches of
1F1B / interleaved 1F1B sets the activation peak. Every stage is evaluated and the largest total
is the peak.

>>> from mvopt.config import ParallelismConfig
>>> from mvopt.workload.models import get_model
>>> par = ParallelismConfig(tp=8, micro_batch=4, global_batch=4, sequence_parallel=True,
...                         recompute="selective")
>>> m = peak_memory(get_model("korthikanti-22b"), par, "A100")
>>> m.fits, round(m.total_bytes / 2**30, 1)
(True, 58.3)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from mvopt.cluster.gpus import GpuSpec, get_gpu
from mvopt.config import ParallelismConfig
from mvopt.errors import ConfigError, InfeasibleError
from mvopt.workload.context import fold_context_parallel
from mvopt.workload.fsdp import fsdp_group_size, fsdp_state_bytes
from mvopt.workload.models import ModelSpec
from mvopt.workload.parallel import num_microbatches
from mvopt.workload.routing import busiest_load

__all__ = ["PrecisionScheme", "PRECISIONS", "MemoryBreakdown", "layer_activation_bytes",
           "inflight_layers", "stage_param_count", "stage_expert_param_count", "chunk_layers",
           "moe_layer_params", "routed_load", "memory_per_stage", "peak_memory", "check_memory",
           "DEFAULT_RESERVE_BYTES"]

GiB = 2**30
# CUDA context, cuBLAS/NCCL workspaces and allocator slack not modelled otherwise.
DEFAULT_RESERVE_BYTES = 2 * GiB


@dataclass(frozen=True)
class PrecisionScheme:
    """Bytes per parameter of model state; the distributed optimizer shards ``optimizer`` over DP."""

    name: str
    param: float       # low-precision weights used by forward/backward
    grad: float        # gradient buffer
    optimizer: float   # fp32 master weights + Adam moments (and fp32 grads where kept there)

    def bytes_per_param(self, dp: int, distributed: bool) -> float:
        return self.param + self.grad + (self.optimizer / dp if distributed else self.optimizer)


PRECISIONS: dict[str, PrecisionScheme] = {
    # Megatron-LM bf16 training with fp32 gradient accumulation: 18 B; distributed: 6 + 12/d.
    "bf16_fp32_grad": PrecisionScheme("bf16_fp32_grad", param=2, grad=4, optimizer=12),
    # Mixed-precision Adam of the ZeRO paper (fp16 grads): 16 B; ZeRO-1 sharding: 4 + 12/d.
    "mixed_adam": PrecisionScheme("mixed_adam", param=2, grad=2, optimizer=12),
}


@dataclass(frozen=True)
class MemoryBreakdown:
    """Memory of one pipeline stage's GPU, bytes. ``total_bytes`` includes the reserve."""

    stage: int
    weights_bytes: float
    gradients_bytes: float
    optimizer_bytes: float
    activations_bytes: float     # stored for in-flight micro-batches
    transient_bytes: float       # live at the peak only: logits, a recomputed layer
    reserve_bytes: float
    capacity_bytes: float

    @property
    def total_bytes(self) -> float:
        return (self.weights_bytes + self.gradients_bytes + self.optimizer_bytes
                + self.activations_bytes + self.transient_bytes + self.reserve_bytes)

    @property
    def fits(self) -> bool:
        return self.total_bytes <= self.capacity_bytes

    def describe(self) -> str:
        """One line: peak, capacity and the parts, in GiB."""
        parts = ", ".join(f"{k} {getattr(self, k + '_bytes') / GiB:.1f}" for k in
                          ("weights", "gradients", "optimizer", "activations", "transient", "reserve"))
        return (f"peak {self.total_bytes / GiB:.1f} GiB vs capacity {self.capacity_bytes / GiB:.1f} GiB "
                f"on pipeline stage {self.stage} ({parts} GiB)")


def routed_load(model: ModelSpec, par: ParallelismConfig, expert_skew: float = 1.0) -> float:
    """Routed tokens the busiest EP rank receives, relative to uniform routing (its first rank:
    ``expert_skew`` times the sampling maximum of :func:`mvopt.workload.routing.busiest_load`;
    1 without expert parallelism)."""
    return busiest_load(model, par, expert_skew)


def layer_activation_bytes(model: ModelSpec, par: ParallelismConfig, *, flash_attention: bool = False,
                           dropout: bool | None = None, recompute: str | None = None, moe: bool = False,
                           load: float = 1.0) -> float:
    """Bytes one transformer layer keeps for backward, per micro-batch, per GPU.

    Korthikanti's accounting, tensor by tensor (16-bit activations, 1-byte dropout masks):
    split over TP: Q, K, V, attention-projection input, activation-function input, FC2 input and
    the attention core (softmax output, its dropout mask and output: 5*a*s^2*b, or the fp32
    log-sum-exp 4*a*s*b with FlashAttention); replicated over TP unless sequence parallel: the
    two norm inputs, the QKV and FC1 inputs and the two dropout masks. ``recompute`` overrides
    ``par.recompute`` ("none", "selective": the attention core is recomputed, "full": only the
    layer input is kept).

    Q, K, V and the projection input are kept at their widths (``heads x head_dim`` for Q and
    the projection input, ``kv_heads x head_dim`` for K and V); latent attention keeps its
    widths, plus the two latent vectors (replicated over TP). A sliding window changes nothing
    here: FlashAttention keeps Q, K, V, the output and the log-sum-exp whatever the window, and
    the unfused core materialises the whole masked square. A MoE layer (``moe``) keeps, instead of the dense MLP's
    activation and FC2 inputs, those of its shared experts over all tokens and of its routed
    experts over the ``R = s b top_k load`` tokens routed to this GPU (split over TP), the routed
    tokens' FC1 input ``2 R h`` (whole on every TP rank: the experts see the gathered tokens)
    and the router's fp32 probabilities ``4 s b experts`` (replicated unless sequence parallel).
    """
    s, b, h, a = model.seq_len, par.micro_batch, model.hidden, model.heads
    t = par.tp
    sp_div = t if par.sequence_parallel else 1
    mode = par.recompute if recompute is None else recompute
    if mode == "full":
        return 2.0 * s * b * h / sp_div
    keep_dropout = (not model.swiglu) if dropout is None else dropout
    sbh = float(s * b * h)
    split = 2.0 * s * b * (model.q_width + model.attn_k_width + model.attn_v_width + model.attn_out_width)
    if moe:
        routed = float(s * b * model.top_k * load)
        shared = model.shared_experts * model.expert_ffn
        w_in = 2 if model.swiglu else 1
        split += 2 * s * b * (w_in + 1) * shared + 2 * routed * (w_in + 1) * model.expert_ffn
    else:
        split += 2 * s * b * model.mlp_in_width + 2 * s * b * model.ffn
    if flash_attention:
        split += 4.0 * a * s * b
    elif mode != "selective":
        split += 5.0 * a * s * s * b if keep_dropout else 2.0 * a * s * s * b
    replicated = 4 * sbh + 2 * sbh + 2 * sbh + (2 * sbh if keep_dropout else 0.0)
    if model.is_mla:
        replicated += 2.0 * s * b * (model.mla_q_rank + model.mla_kv_rank + model.mla_rope_dim)
    if moe:
        replicated += 4.0 * s * b * model.experts
        return split / t + replicated / sp_div + 2.0 * s * b * model.top_k * load * h
    return split / t + replicated / sp_div


def inflight_layers(model: ModelSpec, par: ParallelismConfig, stage: int) -> float:
    """Layers' worth of activations stage ``stage`` holds at its peak (1F1B or interleaved).

    1F1B: stage i holds min(pp - i, m) micro-batches of L/pp layers. Interleaved with v chunks:
    Megatron's warm-up leaves min(2(pp - i - 1) + (v - 1) pp + 1, m v) chunk-micro-batches of
    L/(pp v) layers in flight; for stage 0 that is L (1 + (pp - 1)/(pp v)), Korthikanti's factor.
    """
    pp, v, m = par.pp, par.virtual_stages, num_microbatches(par)
    if v == 1:
        return min(pp - stage, m) * model.layers / pp
    chunks = min(2 * (pp - stage - 1) + (v - 1) * pp + 1, m * v)
    return chunks * model.layers / (pp * v)


def chunk_layers(model: ModelSpec, par: ParallelismConfig, stage: int, chunk: int = 0) -> tuple[int, int]:
    """(first layer, layer count) of model chunk ``chunk`` of pipeline stage ``stage``: model
    stage ``chunk * pp + stage`` of ``pp * virtual_stages`` equal ones."""
    n = model.layers // (par.pp * par.virtual_stages)
    return (chunk * par.pp + stage) * n, n


def _stage_moe_layers(model: ModelSpec, par: ParallelismConfig, stage: int) -> int:
    return sum(model.moe_layers_in(*chunk_layers(model, par, stage, c)) for c in range(par.virtual_stages))


def moe_layer_params(model: ModelSpec, par: ParallelismConfig) -> tuple[float, float]:
    """Parameters of one MoE layer held by one GPU: (everything but the routed experts, the
    routed experts). Attention, norms and shared experts as in a dense layer (split over TP but
    latent down-projections, norms and row-parallel biases); the router whole on every GPU; the
    routed experts ``experts / ep`` per GPU, each split over TP."""
    c, t = model.param_counts(), par.tp
    h, bias = model.hidden, int(model.bias)
    replicated = 2 * bias * h + c.norms + model.attention_replicated()
    shared = model.shared_experts * c.expert
    dense_part = (c.attention + c.norms + shared - replicated) / t + replicated + c.router
    return dense_part, c.expert * model.experts / (par.ep * t)


def stage_expert_param_count(model: ModelSpec, par: ParallelismConfig, stage: int) -> float:
    """Routed-expert parameters held by one GPU of pipeline stage ``stage`` (they are reduced over
    the expert-data-parallel group, and sharded over it by the distributed optimizer)."""
    return _stage_moe_layers(model, par, stage) * moe_layer_params(model, par)[1]


def stage_param_count(model: ModelSpec, par: ParallelismConfig, stage: int) -> float:
    """Parameters held by one GPU of pipeline stage ``stage`` (TP shards, Megatron placement):
    its layers with matrices and column-parallel biases split over TP and norms and row-parallel
    biases replicated; the vocabulary-parallel embedding (and learned positions) on stage 0; the
    final norm, and the output layer when untied or when pp > 1 (Megatron's copy), on the last.
    MoE layers count :func:`moe_layer_params` (routed experts included)."""
    c, t, pp = model.param_counts(), par.tp, par.pp
    h, bias = model.hidden, int(model.bias)
    # Row-parallel biases (attention projection, FC2), norms and latent down-projections are
    # replicated over TP.
    replicated = 2 * bias * h + c.norms + model.attention_replicated()
    per_layer = (c.per_layer - replicated) / t + replicated
    n_moe = _stage_moe_layers(model, par, stage)
    params = per_layer * (model.layers - pp * n_moe) / pp
    if n_moe:
        params += n_moe * sum(moe_layer_params(model, par))
    vocab_shard = model.padded_vocab(t) * h / t
    if stage == 0:
        params += vocab_shard + c.position
    if stage == pp - 1:
        params += c.final_norm
        if not model.tied_embeddings or pp > 1:   # untied, or Megatron's copy on the last stage
            params += vocab_shard
    return params


def memory_per_stage(model: ModelSpec, par: ParallelismConfig, gpu: str | GpuSpec, *,
                     precision: str = "bf16_fp32_grad", flash_attention: bool = False,
                     dropout: bool | None = None, reserve_bytes: float = DEFAULT_RESERVE_BYTES,
                     expert_skew: float = 1.0) -> list[MemoryBreakdown]:
    """Memory breakdown of a GPU of every pipeline stage (index = stage). For a MoE model the
    activations are the busiest EP rank's (``expert_skew``, see :func:`routed_load`) and the
    distributed optimizer shards the routed experts' state over the expert-data-parallel group
    (``dp / ep`` ranks) instead of the DP group."""
    spec = get_gpu(gpu)
    scheme = _scheme(precision)
    if par.cp > 1:
        if not flash_attention:
            raise ConfigError("workload.flash_attention", "must be true with context parallelism "
                              f"(parallelism.cp = {par.cp}): ring attention runs on the fused attention "
                              "kernels", flash_attention)
        # a CP rank stores the activations of seq_len / cp tokens (FlashAttention: linear in s)
        model, par = fold_context_parallel(model, par)
    sp_div = par.tp if par.sequence_parallel else 1
    s, b, h = model.seq_len, par.micro_batch, model.hidden
    per_layer = layer_activation_bytes(model, par, flash_attention=flash_attention, dropout=dropout)
    keep_dropout = (not model.swiglu) if dropout is None else dropout
    load = routed_load(model, par, expert_skew)
    moe_layer = (layer_activation_bytes(model, par, flash_attention=flash_attention, dropout=dropout, moe=True,
                                        load=load) if model.is_moe else 0.0)
    transient_layer = (layer_activation_bytes(model, par, flash_attention=flash_attention,
                                              dropout=dropout, recompute="none", moe=model.is_moe, load=load)
                       if par.recompute == "full" else 0.0)
    # Output layer of the last stage, one micro-batch: final-norm and logit-GEMM inputs plus the
    # fp32 logits of the cross entropy (Korthikanti: 4sbh/t (1 + v/h) with sequence parallelism).
    logits = 4.0 * s * b * h / sp_div + 4.0 * s * b * model.padded_vocab(par.tp) / par.tp
    out = []
    for stage in range(par.pp):
        n = stage_param_count(model, par, stage)
        layers = inflight_layers(model, par, stage)
        n_moe = _stage_moe_layers(model, par, stage)
        if n_moe:       # the stage's mix of dense and MoE layers
            stage_layers = model.layers / par.pp
            acts = layers * ((stage_layers - n_moe) * per_layer + n_moe * moe_layer) / stage_layers
        else:
            acts = layers * per_layer
        if stage == 0 and keep_dropout:   # embedding dropout mask, per in-flight micro-batch
            acts += layers / (model.layers / par.pp) * s * b * h / sp_div
        transient = max(transient_layer, logits if stage == par.pp - 1 else 0.0)
        dist = par.distributed_optimizer
        n_exp = stage_expert_param_count(model, par, stage)
        optimizer = n * (scheme.optimizer / par.dp if dist else scheme.optimizer)
        if dist and n_exp:   # routed experts: sharded over the dp / ep ranks that hold them
            optimizer += n_exp * scheme.optimizer * (par.ep - 1) / par.dp
        weights, grads = n * scheme.param, n * scheme.grad
        if par.fsdp:
            weights, grads, optimizer = fsdp_state_bytes(
                n, _largest_layer_params(model, par), fsdp_group_size(par), param=scheme.param,
                grad=scheme.grad, optimizer=scheme.optimizer)
        out.append(MemoryBreakdown(
            stage=stage, weights_bytes=weights, gradients_bytes=grads,
            optimizer_bytes=optimizer,
            activations_bytes=acts, transient_bytes=transient, reserve_bytes=float(reserve_bytes),
            capacity_bytes=float(spec.hbm_bytes)))
    return out


def _largest_layer_params(model: ModelSpec, par: ParallelismConfig) -> float:
    """Parameters of the largest transformer layer held by one GPU (TP shard; FSDP's gather unit)."""
    c, t = model.param_counts(), par.tp
    replicated = 2 * int(model.bias) * model.hidden + c.norms + model.attention_replicated()
    dense = (c.per_layer - replicated) / t + replicated
    return max(dense, sum(moe_layer_params(model, par))) if model.is_moe else dense


def peak_memory(model: ModelSpec, par: ParallelismConfig, gpu: str | GpuSpec, **options) -> MemoryBreakdown:
    """The stage with the largest total (see :func:`memory_per_stage` for ``options``)."""
    return max(memory_per_stage(model, par, gpu, **options), key=lambda m: m.total_bytes)


def check_memory(model: ModelSpec, par: ParallelismConfig, gpu: str | GpuSpec, **options) -> MemoryBreakdown:
    """The peak breakdown; raises :class:`InfeasibleError` (peak and capacity in the message)
    when it does not fit."""
    peak = peak_memory(model, par, gpu, **options)
    if not peak.fits:
        raise InfeasibleError(f"does not fit in GPU memory: {peak.describe()}")
    return peak


def _scheme(name: str | PrecisionScheme | Mapping) -> PrecisionScheme:
    if isinstance(name, PrecisionScheme):
        return name
    if name in PRECISIONS:
        return PRECISIONS[name]
    raise ConfigError("precision", f"must be one of {', '.join(PRECISIONS)}", name)
