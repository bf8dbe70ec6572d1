"""Compute time of a transformer training step, operator by operator.

Each operator of a layer (and of the embedding, the output layer and the optimizer) is counted in
FLOPs and HBM bytes per GPU for one micro-batch, for every phase it runs in:

* ``fwd`` - forward; ``recompute`` - forward work repeated before backward (selective: the
  attention core; full: the whole layer); ``bwd_input`` - input gradients; ``bwd_weight`` - weight
  gradients (separate so that a task graph can overlap them with communication).

FLOPs follow Megatron's convention (every GEMM 2*M*N*K, the attention core counted over the whole
s x s square), so that sums reproduce the closed form 72*B*s*l*h^2*(1 + s/(6h) + V/(12*l*h))
(96*... with full recompute). Times come from a roofline with achieved fractions
(:class:`Efficiency`) per GPU type: a GEMM runs at ``peak * max_matmul_efficiency *
gemm_fraction`` times the measured efficiency of its shape where the GPU type has a shape table
(:mod:`mvopt.workload.gemm_shape`), a memory-bound kernel at ``hbm_bandwidth * memory_fraction``; an operator takes
the larger of its compute and memory times, plus ``kernel_overhead_s``. The shipped fractions
were calibrated on the published row ``korthikanti-22b`` only (see
:mod:`mvopt.workload.calibration`). A measured per-operator trace (:class:`OperatorTrace`) can
replace the model operator by operator.
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Literal, Mapping

from mvopt.cluster.gpus import GpuSpec, get_gpu
from mvopt.config import ParallelismConfig
from mvopt.errors import ConfigError, InputFileError
from mvopt.files import read_text
from mvopt.workload.gemm_shape import shape_efficiency
from mvopt.workload.models import ModelSpec

__all__ = ["Op", "Efficiency", "DEFAULT_EFFICIENCY", "ComputeModel", "OperatorTrace", "PhaseTimes",
           "layer_ops", "moe_mlp_ops", "permutation_ops", "embedding_ops", "output_ops", "optimizer_ops",
           "iteration_flops", "megatron_flops", "overlapped_time_s", "overlap_slowdown", "PHASES", "NCCL_SMS"]

Phase = Literal["fwd", "recompute", "bwd_input", "bwd_weight", "step"]
PHASES: tuple[str, ...] = ("fwd", "recompute", "bwd_input", "bwd_weight", "step")
_B = 2          # bytes of a bf16 activation / weight element
# SMs an NCCL collective occupies on a DGX-class server while compute runs beside it (NVIDIA/nccl
# issue #689, the NCCL maintainer: "on DGX with 8 NICs ... it would use 16 SMs").
NCCL_SMS = 16


@dataclass(frozen=True)
class Op:
    """One operator execution on one GPU for one micro-batch."""

    name: str
    phase: str
    kind: Literal["gemm", "attention", "memory"]
    flops: float               # model FLOPs (Megatron convention)
    bytes: float
    work_factor: float = 1.0   # executed / model FLOPs (FlashAttention's backward recomputes S)
    shape: tuple[float, float, float] | None = None   # (m, n, k) of each GEMM a "gemm" op runs


@dataclass(frozen=True)
class Efficiency:
    """Achieved fractions of the roofline (dimensionless) and a fixed per-kernel overhead."""

    gemm_fraction: float = 0.771         # of peak * max_matmul_efficiency, for GEMMs in training
    memory_fraction: float = 0.733       # of HBM bandwidth, for memory-bound kernels
    flash_relative: float = 0.85         # FlashAttention throughput relative to a GEMM's
    causal_flash_work: float = 0.5       # share of the s x s square a causal flash kernel computes
    kernel_overhead_s: float = 0.0       # per operator (launch gaps)

    def __post_init__(self) -> None:
        for name in ("gemm_fraction", "memory_fraction", "flash_relative", "causal_flash_work"):
            v = getattr(self, name)
            if not 0 < v <= 1:
                raise ConfigError(f"compute.{name}", "must be in (0, 1]", v)
        if self.kernel_overhead_s < 0:
            raise ConfigError("compute.kernel_overhead_s", "must be >= 0", self.kernel_overhead_s)


# Calibrated by mvopt.workload.calibration on the row korthikanti-22b of published.yaml (its
# selective- and full-recompute times); pinned here, and a test checks that re-running the
# calibration reproduces them.
DEFAULT_EFFICIENCY = Efficiency()


@dataclass(frozen=True)
class PhaseTimes:
    """Seconds per phase for one micro-batch (a layer, the embedding or the output layer)."""

    fwd: float = 0.0
    recompute: float = 0.0
    bwd_input: float = 0.0
    bwd_weight: float = 0.0
    step: float = 0.0

    @property
    def total(self) -> float:
        return self.fwd + self.recompute + self.bwd_input + self.bwd_weight + self.step


# ----------------------------------------------------------------------------------------------
# operator lists


def _gemm(name: str, m: float, k: float, n: float, *, recompute: bool, weights: float = 1) -> list[Op]:
    """A linear layer Y[m,n] = X[m,k] W[k,n]: forward, input gradient, weight gradient.
    ``weights`` matrices of ``k x n`` are read (a grouped GEMM over several experts' rows: one
    GEMM per matrix over ``m / weights`` rows, as TransformerEngine's ``GroupedLinear`` runs it).
    Each op records the ``(m, n, k)`` of its GEMMs: forward ``m x n x k``, input gradient
    ``m x k x n``, weight gradient ``k x n x m``."""
    flops = 2.0 * m * k * n
    wk = weights * k * n
    rows = m / weights
    fwd_bytes = _B * (m * k + wk + m * n)
    ops = [Op(name, "fwd", "gemm", flops, fwd_bytes, shape=(rows, n, k))]
    if recompute:
        ops.append(Op(name, "recompute", "gemm", flops, fwd_bytes, shape=(rows, n, k)))
    ops += [Op(name, "bwd_input", "gemm", flops, _B * (m * n + wk + m * k), shape=(rows, k, n)),
            Op(name, "bwd_weight", "gemm", flops, _B * (m * n + m * k) + 4 * wk,   # fp32 main grad
               shape=(k, n, rows))]
    return ops


def _memory(name: str, fwd_bytes: float, bwd_bytes: float, *, recompute: bool, flops: float = 0.0) -> list[Op]:
    ops = [Op(name, "fwd", "memory", flops, fwd_bytes)]
    if recompute:
        ops.append(Op(name, "recompute", "memory", flops, fwd_bytes))
    ops.append(Op(name, "bwd_input", "memory", 2 * flops, bwd_bytes))
    return ops


def _keep_dropout(model: ModelSpec, dropout: bool | None) -> bool:
    return (not model.swiglu) if dropout is None else dropout


def layer_ops(model: ModelSpec, par: ParallelismConfig, *, flash_attention: bool = False,
              dropout: bool | None = None, moe: bool = False, load: float = 1.0,
              sliding: bool = False) -> list[Op]:
    """Operators of one transformer layer for one micro-batch on one GPU (TP shard), all phases.

    With sequence parallelism the norms, dropouts and residual adds work on s/tp tokens; the
    GEMMs always see the whole sequence (after the all-gather). Latent attention replaces the
    QKV GEMM by its down- (whole on every TP rank) and up-projections. ``moe``: the MLP is
    :func:`moe_mlp_ops` with ``load`` times the uniform share of routed tokens. ``sliding``: a
    sliding-window layer; FlashAttention computes only the window's query-key pairs
    (:meth:`ModelSpec.window_fraction` of the core's FLOPs), the unfused core the whole masked
    square as for a full layer.
    """
    s, b, h, t = model.seq_len, par.micro_batch, model.hidden, par.tp
    tokens = float(s * b)
    local = tokens / t if par.sequence_parallel else tokens      # tokens of the non-TP region
    heads = model.heads / t
    full = par.recompute == "full"
    sel = par.recompute in ("selective", "full")
    drop = _keep_dropout(model, dropout)
    norm_fwd, norm_bwd = _B * 2 * local * h, _B * 3 * local * h
    # bias + dropout + residual add: read 2, write 1 (+ 1-byte mask); backward reads grad & mask.
    bda_fwd = local * h * (3 * _B + (1 if drop else 0))
    bda_bwd = local * h * (2 * _B + (1 if drop else 0))
    ops: list[Op] = []
    ops += _memory("norm_attn", norm_fwd, norm_bwd, recompute=full, flops=8 * local * h)
    if model.is_mla:
        if model.mla_q_rank:
            ops += _gemm("q_down", tokens, h, model.mla_q_rank, recompute=full)
        ops += _gemm("q_up", tokens, model.mla_q_rank or h, model.q_width / t, recompute=full)
        ops += _gemm("kv_down", tokens, h, model.mla_kv_rank + model.mla_rope_dim, recompute=full)
        ops += _gemm("kv_up", tokens, model.mla_kv_rank,
                     model.heads * (model.mla_nope_dim + model.mla_v_dim) / t, recompute=full)
        q_bytes = _B * tokens * model.q_width / t
        kv_bytes = _B * tokens * (model.attn_k_width + model.attn_v_width) / t
        score_flops = 2.0 * tokens * s * model.q_width / t
        value_flops = 2.0 * tokens * s * model.attn_v_width / t
        out_bytes = _B * tokens * model.attn_out_width / t
    else:
        ops += _gemm("qkv", tokens, h, (model.q_width + 2 * model.kv_dim) / t, recompute=full)
        q_bytes = _B * tokens * model.q_width / t
        kv_bytes = _B * tokens * 2 * model.kv_dim / t
        score_flops = value_flops = 2.0 * tokens * s * model.q_width / t     # QK^T and, again, P V
        out_bytes = q_bytes
    if flash_attention:
        io_bytes = q_bytes + kv_bytes + out_bytes
        core = (score_flops + value_flops) * (model.window_fraction() if sliding else 1.0)
        ops.append(Op("flash_attention", "fwd", "attention", core, io_bytes))
        if full:
            ops.append(Op("flash_attention", "recompute", "attention", core, io_bytes))
        # backward: 4 products (dQ, dK, dV, dP) plus S recomputed inside the kernel (5 instead of 4).
        ops.append(Op("flash_attention", "bwd_input", "attention", 2 * core, 2 * io_bytes + out_bytes,
                      work_factor=1.25))
    else:
        square = b * heads * s * s                   # elements of the score matrices
        ops += _batched("attn_scores", score_flops, q_bytes + kv_bytes / 2 + _B * square, recompute=sel)
        ops += _memory("softmax", 2 * _B * square, 3 * _B * square, recompute=sel, flops=5 * square)
        if drop:
            ops += _memory("attn_dropout", (2 * _B + 1) * square, (2 * _B + 1) * square, recompute=sel)
        ops += _batched("attn_values", value_flops, _B * square + kv_bytes / 2 + out_bytes, recompute=sel)
    ops += _gemm("attn_proj", tokens, model.attn_out_width / t, h, recompute=full)
    ops += _memory("bias_dropout_add_attn", bda_fwd, bda_bwd, recompute=full)
    ops += _memory("norm_mlp", norm_fwd, norm_bwd, recompute=full, flops=8 * local * h)
    if moe:
        ops += moe_mlp_ops(model, par, load=load)
    else:
        ops += _mlp("", model, tokens, model.ffn, t, recompute=full)
    ops += _memory("bias_dropout_add_mlp", bda_fwd, bda_bwd, recompute=full)
    return ops


def _mlp(prefix: str, model: ModelSpec, tokens: float, width: float, t: int, *, recompute: bool,
         weights: float = 1) -> list[Op]:
    """FC1, activation, FC2 of an MLP of ``width`` over ``tokens`` (TP shard); ``weights``
    experts' matrices when it is a grouped GEMM."""
    w_in = 2 * width if model.swiglu else width
    h = model.hidden
    ops = _gemm(prefix + "fc1", tokens, h, w_in / t, recompute=recompute, weights=weights)
    act_in = tokens * w_in / t
    act_out = tokens * width / t
    ops += _memory(prefix + ("swiglu" if model.swiglu else "gelu"), _B * (act_in + act_out),
                   _B * (act_in + act_out + act_in), recompute=recompute, flops=8 * act_out)
    ops += _gemm(prefix + "fc2", tokens, width / t, h, recompute=recompute, weights=weights)
    return ops


def moe_mlp_ops(model: ModelSpec, par: ParallelismConfig, *, load: float = 1.0) -> list[Op]:
    """The MLP of a MoE layer, one micro-batch on one GPU: the router GEMM (``h x experts``, on
    the tokens this TP rank holds), the token permutation and unpermutation of Megatron-Core's
    all-to-all dispatcher (:func:`permutation_ops`), the routed experts as grouped GEMMs over the
    ``R = s b top_k load`` tokens routed to this GPU (``experts / ep`` experts' weights, each
    split over TP), and the shared experts as a dense MLP of width ``shared_experts x
    expert_ffn`` over all tokens. ``load`` is 1 for uniform routing."""
    s, b, h, t = model.seq_len, par.micro_batch, model.hidden, par.tp
    tokens = float(s * b)
    local = tokens / t if par.sequence_parallel else tokens
    full = par.recompute == "full"
    routed = tokens * model.top_k * load
    permute, unpermute = permutation_ops(model, par, load=load)
    ops = _gemm("router", local, h, model.experts, recompute=full)
    ops += permute
    ops += _mlp("expert_", model, routed, model.expert_ffn, t, recompute=full, weights=model.experts / par.ep)
    ops += unpermute
    if model.shared_experts:
        ops += _mlp("shared_", model, tokens, model.shared_experts * model.expert_ffn, t, recompute=full)
    return ops


def permutation_ops(model: ModelSpec, par: ParallelismConfig, *, load: float = 1.0) -> tuple[list[Op], list[Op]]:
    """The memory-bound token reordering around a MoE layer's experts, as Megatron-Core's
    all-to-all dispatcher runs it in unfused PyTorch operators (``moe_utils.permute`` /
    ``unpermute``), one micro-batch on one GPU: (operators before the experts, operators after).

    Counted in elements of the hidden vectors this GPU holds (``h' = h / tp``), with ``T = s b``
    tokens, ``Rl = T top_k`` routed copies leaving this GPU and ``R = Rl load`` arriving:

    * ``permute`` (tokens into expert order): forward an ``index_select``, read ``Rl h'`` and
      write ``Rl h'``; backward ``index_add`` into zeros: write ``T h'``, read ``Rl h'`` and
      read-modify-write ``Rl h'``, so ``(T + 3 Rl) h'``.
    * ``unpermute`` (back to token order, weighted by the router's probabilities): forward the
      product with the probabilities (read and write ``Rl h'``), zeros ``T h'`` and a
      ``scatter_add`` (read ``Rl h'``, read-modify-write ``Rl h'``), so ``(5 Rl + T) h'``;
      backward the gather of the output gradient (``2 Rl h'``), the input gradient of the
      product (``2 Rl h'``) and the probabilities' gradient, a product summed over ``h``
      (read ``2 Rl h'``, write ``Rl h'``, read it again: ``4 Rl h'``), so ``8 Rl h'``.
    * ``expert_sort`` / ``expert_unsort`` (only with more than one local expert): the received
      tokens regrouped by local expert after the dispatch and back before the combine
      (``sort_chunks_by_idxs``: a split and a concatenation), ``2 R h'`` each way.

    2-byte elements; the ``permute`` / ``unpermute`` pair runs on the tokens this GPU sends
    (not scaled by ``load``), the sorts on those it receives.
    """
    h_loc = model.hidden / par.tp
    tokens = float(model.seq_len * par.micro_batch)
    sent = tokens * model.top_k
    received = sent * load
    full = par.recompute == "full"
    before = _memory("permute", _B * 2 * sent * h_loc, _B * (tokens + 3 * sent) * h_loc, recompute=full)
    after = _memory("unpermute", _B * (5 * sent + tokens) * h_loc, _B * 8 * sent * h_loc, recompute=full)
    if model.experts > par.ep:
        sort = 2 * _B * received * h_loc
        before += _memory("expert_sort", sort, sort, recompute=full)
        after = _memory("expert_unsort", sort, sort, recompute=full) + after
    return before, after


def _batched(name: str, flops: float, fwd_bytes: float, *, recompute: bool) -> list[Op]:
    """A batched attention GEMM (no weights): backward is two products of the same size."""
    ops = [Op(name, "fwd", "gemm", flops, fwd_bytes)]
    if recompute:
        ops.append(Op(name, "recompute", "gemm", flops, fwd_bytes))
    ops.append(Op(name, "bwd_input", "gemm", 2 * flops, 2 * fwd_bytes))
    return ops


def embedding_ops(model: ModelSpec, par: ParallelismConfig, *, dropout: bool | None = None) -> list[Op]:
    """Token (and learned position) embedding of the first stage, one micro-batch: gather the rows
    of each table and write their sum, then dropout on the (sequence-parallel) output; backward
    scatter-adds the gradient into fp32 table gradients (read-modify-write)."""
    tokens = float(model.seq_len * par.micro_batch)
    local = tokens / par.tp if par.sequence_parallel else tokens
    h = model.hidden
    tables = 2 if model.learned_positions else 1
    fwd = _B * tokens * h * (tables + 1)
    if _keep_dropout(model, dropout):
        fwd += (2 * _B + 1) * local * h
    bwd = tables * tokens * h * (_B + 2 * 4)
    return [Op("embedding", "fwd", "memory", 0.0, fwd), Op("embedding", "bwd_weight", "memory", 0.0, bwd)]


def output_ops(model: ModelSpec, par: ParallelismConfig) -> list[Op]:
    """Final norm, logit GEMM (vocabulary split over TP) and cross entropy of the last stage."""
    tokens = float(model.seq_len * par.micro_batch)
    local = tokens / par.tp if par.sequence_parallel else tokens
    h, vocab = model.hidden, model.padded_vocab(par.tp) / par.tp
    ops = _memory("final_norm", _B * 2 * local * h, _B * 3 * local * h, recompute=False, flops=8 * local * h)
    ops += _gemm("logits", tokens, h, vocab, recompute=False)
    # fp32 cross entropy over the vocabulary shard: upcast, max, exp-sum, loss; backward softmax - onehot.
    ops += _memory("cross_entropy", tokens * vocab * (_B + 3 * 4), tokens * vocab * (4 + 4 + _B),
                   recompute=False, flops=5 * tokens * vocab)
    return ops


def optimizer_ops(params_local: float) -> list[Op]:
    """Adam step over ``params_local`` parameters (the DP shard with the distributed optimizer):
    fp32 master weight, two moments and gradient read, three written back, a bf16 copy written,
    and one read of the gradients for the norm used by clipping: 34 bytes per parameter."""
    return [Op("adam", "step", "memory", 12.0 * params_local, 34.0 * params_local)]


# ----------------------------------------------------------------------------------------------
# FLOP closed forms


def iteration_flops(model: ModelSpec, par: ParallelismConfig, *, flash_attention: bool = False) -> float:
    """Matrix FLOPs of one iteration summed over all GPUs (all phases, recompute included),
    from the operator lists; comparable with :func:`megatron_flops`."""
    def matrix(ops: list[Op]) -> float:
        return sum(o.flops for o in ops if o.kind != "memory")
    per_micro = matrix(output_ops(model, par))
    for (moe, sliding), n in model.layer_kinds_in(0, model.layers).items():
        per_micro += n * matrix(layer_ops(model, par, flash_attention=flash_attention, moe=moe, sliding=sliding))
    return par.global_batch / par.micro_batch * par.tp * per_micro


def megatron_flops(model: ModelSpec, global_batch: int, *, recompute: bool) -> float:
    """Narayanan et al. (SC21) closed form for GPT models: 72 B s l h^2 (1 + s/6h + V/12lh), or
    96 B s l h^2 (1 + s/6h + V/16lh) with full activation recomputation."""
    b, s, l, h, v = global_batch, model.seq_len, model.layers, model.hidden, model.vocab
    if recompute:
        return 96.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (16 * l * h))
    return 72.0 * b * s * l * h * h * (1 + s / (6 * h) + v / (12 * l * h))


# ----------------------------------------------------------------------------------------------
# time


def overlap_slowdown(gpu: str | GpuSpec, nccl_sms: int = NCCL_SMS) -> float:
    """Slowdown of compute that runs beside a collective: the collective's kernels hold
    ``nccl_sms`` SMs, so compute keeps sm_count - nccl_sms of them (A100: 1.17, H100/H200: 1.14).
    The arXiv:2507.03114 characterisation measured an average 18.9% slowdown (A100/H100/MI250/
    MI210). GPUs without a known SM count get 1.15."""
    spec = get_gpu(gpu)
    if spec.sm_count is None:
        return 1.15
    return spec.sm_count / (spec.sm_count - nccl_sms)


def overlapped_time_s(compute_s: float, comm_s: float, slowdown: float) -> float:
    """Wall time of ``compute_s`` of compute run together with ``comm_s`` of communication.

    While the communication runs, compute progresses at 1/slowdown of its speed; afterwards at
    full speed. ``max(comm, compute + comm * (1 - 1/slowdown))``.
    """
    return max(comm_s, compute_s + comm_s * (1.0 - 1.0 / slowdown))


@dataclass(frozen=True)
class OperatorTrace:
    """Measured operator times (seconds) keyed by (operator name, phase); see :meth:`read`."""

    times_s: Mapping[tuple[str, str], float] = field(default_factory=dict)

    @staticmethod
    def read(path: str | Path) -> "OperatorTrace":
        """Read a CSV with header ``op,phase,time_us`` (one row per operator and phase, for one
        micro-batch on one GPU; phases: fwd, recompute, bwd_input, bwd_weight, step)."""
        return OperatorTrace.parse(read_text(path), str(path))

    @staticmethod
    def parse(text: str, file: str = "<string>") -> "OperatorTrace":
        rows = list(csv.reader(io.StringIO(text)))
        if not rows or [c.strip() for c in rows[0]] != ["op", "phase", "time_us"]:
            raise InputFileError(file, 1, "operator trace must start with the header 'op,phase,time_us'")
        times: dict[tuple[str, str], float] = {}
        for i, row in enumerate(rows[1:], start=2):
            if not row or not "".join(row).strip():
                continue
            if len(row) != 3:
                raise InputFileError(file, i, f"expected 3 fields (op, phase, time_us), got {len(row)}")
            op, phase, value = (c.strip() for c in row)
            if phase not in PHASES:
                raise InputFileError(file, i, f"phase must be one of {', '.join(PHASES)}, got {phase!r}")
            try:
                us = float(value)
            except ValueError:
                raise InputFileError(file, i, f"time_us must be a number, got {value!r}") from None
            if us < 0:
                raise InputFileError(file, i, f"time_us must be >= 0, got {us}")
            times[(op, phase)] = us * 1e-6
        return OperatorTrace(times)


class ComputeModel:
    """Operator times on one GPU type: a measured trace where it has the operator, else the
    roofline of :class:`Efficiency`."""

    def __init__(self, gpu: str | GpuSpec, efficiency: Efficiency = DEFAULT_EFFICIENCY,
                 trace: OperatorTrace | None = None) -> None:
        self.gpu = get_gpu(gpu)
        self.efficiency = efficiency
        self.trace = trace or OperatorTrace()

    def op_time_s(self, op: Op) -> float:
        """Seconds ``op`` takes."""
        measured = self.trace.times_s.get((op.name, op.phase))
        if measured is not None:
            return measured
        e, g = self.efficiency, self.gpu
        memory = op.bytes / (g.hbm_bytes_per_s * e.memory_fraction)
        gemm_rate = g.peak_bf16_flops * g.matmul_efficiency * e.gemm_fraction
        if op.kind == "gemm":
            shape = 1.0 if op.shape is None else shape_efficiency(g, *op.shape)
            compute = op.flops / (gemm_rate * shape)
        elif op.kind == "attention":
            compute = op.flops * op.work_factor * e.causal_flash_work / (gemm_rate * e.flash_relative)
        else:
            compute = op.flops / g.peak_bf16_flops    # vector work: far below the tensor-core peak
        return max(compute, memory) + e.kernel_overhead_s

    def phase_times(self, ops: Iterable[Op]) -> PhaseTimes:
        """Sum of operator times per phase."""
        acc = dict.fromkeys(PHASES, 0.0)
        for op in ops:
            acc[op.phase] += self.op_time_s(op)
        return PhaseTimes(**acc)
