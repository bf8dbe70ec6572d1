"""Context parallelism (ring attention, as Megatron-LM runs it on TransformerEngine).

With ``cp`` ranks a sequence is cut into ``2 cp`` chunks and rank ``r`` holds chunks ``r`` and
``2 cp - 1 - r`` (the causal load balance), so every rank does ``1/cp`` of each layer's work: its
``s / cp`` tokens through every GEMM, norm and MLP, and ``1/cp`` of the causal attention, whose
keys and values come from every rank. The key/value blocks travel round the CP ring, ``cp - 1``
steps per layer, each overlapped with the attention of the block already there. Backward sends
the key/value blocks and their gradients (twice the bytes per step).

Everything else of a CP rank is that of a data-parallel rank over a sequence ``cp`` times shorter
whose attention costs ``cp`` times more: Megatron reduces gradients (and shards the distributed
optimizer) over the combined ``dp x cp`` group, and carves expert-parallel groups out of it.
:func:`fold_context_parallel` states that equivalence; the task graph and the memory model use it.
"""

from __future__ import annotations

from dataclasses import replace

from mvopt.config import ParallelismConfig
from mvopt.workload.compute import Op
from mvopt.workload.models import ModelSpec
from mvopt.workload.parallel import num_microbatches

__all__ = ["fold_context_parallel", "cp_attention_ops", "ring_block_bytes", "ring_pass_factors",
           "cp_traffic_bytes"]

_B = 2      # bytes of a 16-bit activation


def fold_context_parallel(model: ModelSpec, par: ParallelismConfig) -> tuple[ModelSpec, ParallelismConfig]:
    """The equivalent layout without CP: sequences of ``seq_len / cp`` tokens over ``dp * cp``
    data-parallel ranks (Megatron's tp-cp-dp-pp order: the CP ranks of one DP rank consecutive)
    with the global batch scaled so that the micro-batch count is unchanged. The caller scales
    the attention core with :func:`cp_attention_ops`. Identity when ``cp = 1``."""
    cp = par.cp
    if cp == 1:
        return model, par
    return (replace(model, seq_len=model.seq_len // cp),
            replace(par, cp=1, dp=par.dp * cp, global_batch=par.global_batch * cp))


def cp_attention_ops(ops: list[Op], cp: int) -> list[Op]:
    """Operators of a folded layer (:func:`fold_context_parallel`) with the attention core
    (kind ``attention``: FlashAttention) scaled to a CP rank's share: its ``s / cp`` queries
    attend over all ``s`` keys, ``cp`` times the folded layer's FLOPs and key/value reads."""
    if cp == 1:
        return ops
    return [replace(o, flops=o.flops * cp, bytes=o.bytes * cp) if o.kind == "attention" else o for o in ops]


def ring_block_bytes(model: ModelSpec, par: ParallelismConfig) -> float:
    """Bytes of one key/value block a CP rank sends per ring step, per layer and micro-batch, on
    one TP rank: keys and values of its ``s / cp`` tokens, ``b`` sequences, heads split over TP."""
    return _B * (model.seq_len / par.cp) * par.micro_batch * (model.attn_k_width + model.attn_v_width) / par.tp


def ring_pass_factors(par: ParallelismConfig) -> tuple[int, int]:
    """Blocks per ring step in (forward, backward): the forward sends key/values; the backward
    their gradients too, and again the key/values when full recomputation reruns the forward."""
    return 1, 2 + (1 if par.recompute == "full" else 0)


def cp_traffic_bytes(model: ModelSpec, par: ParallelismConfig) -> float:
    """Bytes one GPU sends to its CP neighbour per iteration (0 without CP):
    ``m * L / pp * (cp - 1) * block * (f + b)`` with ``m`` micro-batches, ``L / pp`` layers per
    stage, :func:`ring_block_bytes` and the :func:`ring_pass_factors`."""
    if par.cp == 1:
        return 0.0
    f, b = ring_pass_factors(par)
    return (num_microbatches(par) * model.layers / par.pp * (par.cp - 1)
            * ring_block_bytes(model, par) * (f + b))
