"""Per-rank task graphs of one training iteration (Megatron TP/PP/DP) for the packet-level engine.

What a rank runs (docs/training-model.md, section *Task graphs*, has the details):

* a **compute stream**: for every micro-batch and model chunk of its pipeline stage, in the order
  of Megatron's 1F1B schedule (or the interleaved one with ``virtual_stages > 1``), a forward
  and a backward; each is a ``compute`` delay (the chunk's layers, plus the embedding on the
  first model stage and the output layer on the last, from :mod:`mvopt.workload.compute`)
  followed by a ``tp_comm`` delay (the layers' exposed tensor-parallel collectives from the
  intra-server model, overlapped parts through ``overlapped_time_s``). All layers of a chunk are
  one task each way: nothing else waits on a layer boundary, except DP buckets, for which the
  last micro-batch's backward is cut at the bucket boundaries;
* **pipeline transfers** (``pp_comm``): the activation after each forward (the gradient after
  each backward) goes to the next (previous) model stage as a flow between the two GPUs' NICs,
  or an NVLink transfer (intra-server model) when both GPUs are in one server; with tensor
  parallelism each TP rank sends its 1/tp share (Megatron's scatter-gather; without sequence
  parallelism the receiver all-gathers it over NVLink on its stream). Sends do not block the
  sender; a forward / backward waits for the data it consumes;
* **gradient synchronisation** (``dp_comm``): buckets of ``bucket_mb`` of gradients per model
  chunk, launched as the last micro-batch's backward produces them (``overlap_grad_reduce``)
  or all after the last backward, run one after the other on the DP group's communicator:
  all-reduce, or reduce-scatter with the distributed optimizer followed by the parameter
  all-gather (beside the next forward with ``overlap_param_gather``, each chunk's first forward
  waiting for its parameters; otherwise after the step). Collectives go through
  :func:`mvopt.comm.hierarchical.add_group_collective` (NVLink / ring / tree / hierarchical).
  Tied embeddings with pp > 1 add Megatron's embedding-gradient all-reduce between the first
  and last stage. Then the optimizer step (``compute``). Compute that runs while the rank's DP
  collectives are in flight is slowed by ``overlap_slowdown`` (estimated comm time, closed form).

* **expert parallelism** (``ep_comm``, MoE models with ``ep > 1``): each chunk's forward and
  backward is cut at its MoE layers' token all-to-alls (dispatch and combine, and their
  gradients), each one a part over the EP group (:mod:`mvopt.comm.alltoall`) anchored on every
  member's preceding task; routed experts' gradients are reduced over the expert-data-parallel
  group.

Every dependency is on a task that finishes on the host where its successor starts (no remote
notification), except NVLink pipeline transfers between two NICs of a server.

**Replication.** All pipelines (one per (dp, tp) rank pair) run the same schedule: the pipeline
is built once per distinct *signature* (which transfers stay inside a server) and copied with
numpy (:mod:`mvopt.workload.replicate`); each DP bucket collective likewise, once per group
shape and size. ``rail_sample`` keeps only GPUs of local index 0 (see the config reference).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from mvopt.comm.alltoall import add_all_to_all, skewed_matrix
from mvopt.comm.hierarchical import add_group_collective, group_shape
from mvopt.comm.tree import ring_time_estimate
from mvopt.config import CollectiveConfig, ParallelismConfig
from mvopt.errors import ConfigError
from mvopt.comm.ring_exchange import add_ring_exchange
from mvopt.workload.context import cp_attention_ops, fold_context_parallel, ring_block_bytes, ring_pass_factors
from mvopt.workload.compute import (ComputeModel, embedding_ops, iteration_flops, layer_ops, optimizer_ops,
                                    output_ops, overlap_slowdown, overlapped_time_s)
from mvopt.cluster.gpus import GpuSpec
from mvopt.workload.memory import PRECISIONS, chunk_layers, memory_per_stage, moe_layer_params, routed_load
from mvopt.workload.models import ModelSpec
from mvopt.workload.parallel import Layout, check_layout, ep_dp_groups, expert_dp_groups, num_microbatches
from mvopt.workload.replicate import FLOW, Assembly, Part

__all__ = ["TrainingSetup", "TrainingPlan", "StageCosts", "stage_program", "stage_costs", "build_training",
           "training_counts",
           "chunk_param_counts", "ideal_pipeline", "training_breakdown", "CATEGORIES"]

CATEGORIES = ("compute", "tp_comm", "pp_comm", "dp_comm")
PS = 1e12


def _ps(seconds: float) -> int:
    return int(round(float(seconds) * PS))


# ----------------------------------------------------------------------------------------------
# inputs


@dataclass(frozen=True)
class TrainingSetup:
    """Everything the graph depends on (built by :mod:`mvopt.build` from a configuration)."""

    model: ModelSpec
    par: ParallelismConfig
    gpu: GpuSpec
    compute: ComputeModel
    intra: Any                                  # mvopt.comm.intra.IntraServerModel
    gpus_per_server: int
    gpu_host: np.ndarray                        # GPU -> host (NIC)
    collective: CollectiveConfig = field(default_factory=CollectiveConfig)
    precision: str = "bf16_fp32_grad"
    flash_attention: bool = False
    dropout: bool | None = None
    reserve_bytes: float = 2 * 2**30
    iterations: int = 1
    rail_sample: bool = False
    nic_bytes_per_s: float = 12.5e9             # for closed-form estimates only
    step_latency_s: float = 5e-6                # for closed-form estimates only
    chunk_gap_ps: int = 0
    wire_factor: float = 1.0                    # wire bytes per payload byte (in-order connections)
    ideal_comm: bool = False                    # every transfer and collective takes zero time
    expert_skew: float = 1.0                    # MoE routing imbalance (workload.expert_skew)
    stragglers: tuple[tuple[float, float], ...] = ()   # (rank, compute factor) (workload.stragglers)
    context_parallel: int = 1                   # cp of a folded setup (mvopt.workload.context)

    def intra_time(self, op: str, nbytes: float, gpus: int) -> float:
        if self.ideal_comm or gpus < 2 or nbytes <= 0:
            return 0.0
        return float(self.intra.time_s(op, nbytes, gpu=self.gpu, gpus=gpus))


# ----------------------------------------------------------------------------------------------
# schedule


def stage_program(p: int, v: int, m: int, stage: int) -> list[tuple[bool, int, int]]:
    """Megatron's order of (is_forward, model chunk, micro-batch) on pipeline stage ``stage``.

    1F1B (v = 1): ``min(p - stage - 1, m)`` warm-up forwards, then one forward one backward,
    then the remaining backwards. Interleaved (v > 1, m divisible by p): warm-up
    ``min(2 (p - stage - 1) + (v - 1) p, m v)`` forwards over virtual micro-batches ``k``
    (chunk ``(k mod pv) // p``, micro-batch ``(k // pv) p + k mod p``; backwards visit the
    chunks in reverse), then 1F1B, then the cool-down.
    """
    if v == 1:
        warm = min(p - stage - 1, m)
        prog = [(True, 0, j) for j in range(warm)]
        for i in range(m - warm):
            prog += [(True, 0, warm + i), (False, 0, i)]
        prog += [(False, 0, m - warm + i) for i in range(warm)]
        return prog
    total = m * v
    warm = min(2 * (p - stage - 1) + (v - 1) * p, total)

    def fwd(k: int) -> tuple[bool, int, int]:
        return True, (k % (p * v)) // p, (k // (p * v)) * p + k % p

    def bwd(k: int) -> tuple[bool, int, int]:
        return False, v - 1 - (k % (p * v)) // p, (k // (p * v)) * p + k % p

    prog = [fwd(k) for k in range(warm)]
    for i in range(total - warm):
        prog += [fwd(warm + i), bwd(i)]
    prog += [bwd(total - warm + i) for i in range(warm)]
    return prog


# ----------------------------------------------------------------------------------------------
# costs


def chunk_param_counts(model: ModelSpec, par: ParallelismConfig, stage: int) -> list[float]:
    """Parameters of each model chunk of ``stage`` held by one GPU (sums to
    :func:`mvopt.workload.memory.stage_param_count`): layers split as there, the embedding with
    the first model chunk of stage 0, final norm and output copy with the last chunk of the
    last stage."""
    c, t, p, v = model.param_counts(), par.tp, par.pp, par.virtual_stages
    h, bias = model.hidden, int(model.bias)
    replicated = 2 * bias * h + c.norms + model.attention_replicated()
    per_layer = (c.per_layer - replicated) / t + replicated
    layers = model.layers / (p * v)
    vocab_shard = model.padded_vocab(t) * h / t
    moe_layer = sum(moe_layer_params(model, par)) if model.is_moe else 0.0
    out = []
    for ch in range(v):
        n_moe = model.moe_layers_in(*chunk_layers(model, par, stage, ch))
        n = per_layer * (layers - n_moe)
        if n_moe:
            n += n_moe * moe_layer
        if stage == 0 and ch == 0:
            n += vocab_shard + c.position
        if stage == p - 1 and ch == v - 1:
            n += c.final_norm
            if not model.tied_embeddings or p > 1:
                n += vocab_shard
        out.append(n)
    return out


def chunk_expert_param_counts(model: ModelSpec, par: ParallelismConfig, stage: int) -> list[float]:
    """Routed-expert parameters of each model chunk of ``stage`` held by one GPU (part of
    :func:`chunk_param_counts`)."""
    if not model.is_moe:
        return [0.0] * par.virtual_stages
    per = moe_layer_params(model, par)[1]
    return [model.moe_layers_in(*chunk_layers(model, par, stage, ch)) * per for ch in range(par.virtual_stages)]


Segment = tuple[float, float]       # (compute s, tp_comm s) of a stream piece between two all-to-alls


@dataclass(frozen=True)
class StageCosts:
    """Seconds of the stream tasks of one pipeline stage, per model chunk. With expert
    parallelism, ``f_segments`` / ``b_segments`` cut each chunk's forward / backward at its
    all-to-alls (``len = 2 * MoE layers + 1`` pieces; empty for chunks without one)."""

    f_compute: tuple[float, ...]
    f_tp: tuple[float, ...]
    b_compute: tuple[float, ...]
    b_tp: tuple[float, ...]
    step: float
    chunk_params: tuple[float, ...]
    f_segments: tuple[tuple[Segment, ...], ...] = ()
    b_segments: tuple[tuple[Segment, ...], ...] = ()


def stage_costs(setup: TrainingSetup, stage: int, load: float = 1.0) -> StageCosts:
    """Per-chunk forward / backward costs on ``stage`` (same formulas as
    :func:`mvopt.workload.calibration.single_stage_iteration_s`, which calibrated the compute model).
    ``load``: routed tokens of this GPU relative to uniform routing (MoE layers)."""
    model, par, cm = setup.model, setup.par, setup.compute
    t, p, v = par.tp, par.pp, par.virtual_stages
    act = 2.0 * model.seq_len * par.micro_batch * model.hidden

    def coll(name: str, nbytes: float) -> float:
        return float(setup.intra.time_s(name, nbytes, gpu=setup.gpu, gpus=t)) if t > 1 else 0.0

    ag, rs, ar = coll("all_gather", act), coll("reduce_scatter", act), coll("all_reduce", act)
    if par.sequence_parallel:
        fwd_comm, bwd_exposed, with_dgrad, with_wgrad = 2 * (ag + rs), 2 * ag, ag, rs
    else:
        fwd_comm, bwd_exposed, with_dgrad, with_wgrad = 2 * ar, 0.0, 0.0, ar
    cp = setup.context_parallel
    ops = cp_attention_ops(layer_ops(model, par, flash_attention=setup.flash_attention, dropout=setup.dropout), cp)
    times = cm.phase_times(ops)
    slow = overlap_slowdown(setup.gpu)
    # (forward, backward) compute of a layer of each kind (moe, sliding window); TP collectives
    # and the routed experts do not depend on the window
    kind_c: dict[tuple[bool, bool], tuple[float, float]] = {}

    def kind_cost(moe: bool, sliding: bool) -> tuple[float, float]:
        if (moe, sliding) not in kind_c:
            pt = cm.phase_times(cp_attention_ops(layer_ops(model, par, flash_attention=setup.flash_attention,
                                                           dropout=setup.dropout, moe=moe, load=load,
                                                           sliding=sliding), cp))
            kind_c[(moe, sliding)] = (pt.fwd, pt.recompute + pt.bwd_input + pt.bwd_weight)
        return kind_c[(moe, sliding)]

    def gemm(name: str, phase: str) -> float:
        return sum(cm.op_time_s(o) for o in ops if o.name == name and o.phase == phase)

    def hidden(pairs) -> float:
        """Exposed time of collectives run inside GEMMs: overlapped_time_s(gemm, comm) - gemm."""
        return sum(overlapped_time_s(gemm(n, ph), c, slow) - gemm(n, ph) for n, ph, c in pairs)

    extra = hidden([(n, ph, c) for n in ("qkv", "fc1")
                    for ph, c in (("bwd_input", with_dgrad), ("bwd_weight", with_wgrad))])
    if par.tp_comm_overlap and par.sequence_parallel and t > 1:
        # userbuffers: forward AG into QKV / FC1, RS out of the projections; backward AG of the
        # output gradients into the projections' input-gradient GEMMs
        fwd_comm = hidden([("qkv", "fwd", ag), ("attn_proj", "fwd", rs), ("fc1", "fwd", ag), ("fc2", "fwd", rs)])
        bwd_exposed = hidden([("attn_proj", "bwd_input", ag), ("fc2", "bwd_input", ag)])
    rec_comm = fwd_comm if par.recompute == "full" else 0.0
    lf_c, lf_t = times.fwd, fwd_comm
    lb_c, lb_t = times.recompute + times.bwd_input + times.bwd_weight, rec_comm + bwd_exposed + extra
    # a MoE layer: the same TP collectives; its routed experts (between the all-to-alls) apart
    mf_c = mb_c = ef_c = eb_c = 0.0
    if model.is_moe:
        moe_ops = cp_attention_ops(layer_ops(model, par, flash_attention=setup.flash_attention,
                                             dropout=setup.dropout, moe=True, load=load), cp)
        mt = cm.phase_times(moe_ops)
        # between the dispatch and the combine: the routed experts (and their local regrouping)
        et = cm.phase_times([o for o in moe_ops if o.name.startswith("expert_")])
        mf_c, mb_c = mt.fwd, mt.recompute + mt.bwd_input + mt.bwd_weight
        ef_c, eb_c = et.fwd, et.recompute + et.bwd_input + et.bwd_weight
        kind_c[(True, False)] = (mf_c, mb_c)
    kind_c[(False, False)] = (lf_c, lb_c)
    emb = cm.phase_times(embedding_ops(model, par, dropout=setup.dropout))
    out = cm.phase_times(output_ops(model, par))
    if par.sequence_parallel:
        emb_f, emb_b, out_f, out_b = rs, ag, ag, rs
    else:
        emb_f, emb_b, out_f, out_b = ar, 0.0, 0.0, ar
    n_layers = model.layers / (p * v)
    a2a = par.ep > 1
    fc, ft, bc, bt, fseg, bseg = [], [], [], [], [], []
    for ch in range(v):
        first = stage == 0 and ch == 0
        last = stage == p - 1 and ch == v - 1
        kinds = model.layer_kinds_in(*chunk_layers(model, par, stage, ch))
        n_moe = sum(n for (moe, _), n in kinds.items() if moe)
        dense = n_layers - n_moe
        # compute of the chunk's dense and MoE layers, and the mean MoE layer (sliding-window
        # layers cost less attention than full ones)
        dense_f = dense_b = moe_f = moe_b = 0.0
        for (moe, sliding), n in kinds.items():
            f, b = kind_cost(moe, sliding)
            if moe:
                moe_f, moe_b = moe_f + n * f, moe_b + n * b
            else:
                dense_f, dense_b = dense_f + n * f, dense_b + n * b
        moe_kinds = [k for k in kinds if k[0]]
        mean_mf, mean_mb = (kind_cost(*moe_kinds[0]) if len(moe_kinds) == 1
                            else (moe_f / n_moe, moe_b / n_moe) if n_moe else (0.0, 0.0))
        head_f = (emb.fwd if first else 0.0, emb_f if first else 0.0)
        tail_f = (out.fwd if last else 0.0, out_f if last else 0.0)
        head_b = (emb.bwd_weight + emb.bwd_input if first else 0.0, emb_b if first else 0.0)
        tail_b = (out.bwd_input + out.bwd_weight if last else 0.0, out_b if last else 0.0)
        fc.append(dense_f + moe_f + head_f[0] + tail_f[0])
        ft.append(n_layers * lf_t + head_f[1] + tail_f[1])
        bc.append(dense_b + moe_b + head_b[0] + tail_b[0])
        bt.append(n_layers * lb_t + head_b[1] + tail_b[1])
        if a2a and n_moe:
            # forward: [embedding, dense layers, MoE layer 1 up to its dispatch] | experts 1 |
            # [rest of layer 1, layer 2 up to its dispatch] | ... | experts n | [rest, output layer]
            pre_f = (mean_mf - ef_c, lf_t)
            f = [(head_f[0] + dense_f + pre_f[0], head_f[1] + dense * lf_t + pre_f[1])]
            for i in range(n_moe):
                f.append((ef_c, 0.0))
                f.append((tail_f[0], tail_f[1]) if i == n_moe - 1 else pre_f)
            # backward in reverse: [output layer] | experts n | [layer n's rest] | ... | experts 1 |
            # [layer 1's rest, dense layers, embedding]
            pre_b = (mean_mb - eb_c, lb_t)
            b = [tail_b]
            for i in range(n_moe):
                b.append((eb_c, 0.0))
                b.append((pre_b[0] + dense_b + head_b[0], pre_b[1] + dense * lb_t + head_b[1])
                         if i == n_moe - 1 else pre_b)
            fseg.append(tuple(f))
            bseg.append(tuple(b))
        else:
            fseg.append(())
            bseg.append(())
    chunks = chunk_param_counts(model, par, stage)
    experts = sum(chunk_expert_param_counts(model, par, stage))
    if par.distributed_optimizer or par.fsdp:   # dense state sharded over dp, routed experts over dp / ep
        local = (sum(chunks) - experts) / par.dp + experts * par.ep / par.dp if experts else sum(chunks) / par.dp
    else:
        local = sum(chunks)
    step = cm.phase_times(optimizer_ops(local)).total
    return StageCosts(tuple(fc), tuple(ft), tuple(bc), tuple(bt), step, tuple(chunks),
                      tuple(fseg) if a2a else (), tuple(bseg) if a2a else ())


def scaled_compute(c: StageCosts, factor: float) -> StageCosts:
    """``c`` with every compute time (forward, backward, step, compute pieces of segments) times
    ``factor``; TP communication is unchanged (a straggler computes slowly, its links do not)."""
    if factor == 1.0:
        return c

    def seg(chunks: tuple) -> tuple:
        return tuple(tuple((comp * factor, tp) for comp, tp in ch) for ch in chunks)
    return replace(c, f_compute=tuple(x * factor for x in c.f_compute),
                   b_compute=tuple(x * factor for x in c.b_compute), step=c.step * factor,
                   f_segments=seg(c.f_segments), b_segments=seg(c.b_segments))


def straggler_factors(setup: TrainingSetup, world: int) -> np.ndarray:
    """float[world]: each rank's compute factor (1 where none is given). A rank outside the job
    raises ConfigError naming ``workload.stragglers[i]``."""
    factor = np.ones(world)
    for i, (rank, f) in enumerate(setup.stragglers):
        if not 0 <= rank < world:
            raise ConfigError(f"workload.stragglers[{i}]", f"names GPU rank {int(rank)}, which does not exist "
                              f"(the job's ranks are 0..{world - 1}: tp x pp x dp = {world})", [rank, f])
        factor[int(rank)] *= f
    return factor


# ----------------------------------------------------------------------------------------------
# plan (what the breakdown needs after the simulation)


@dataclass
class TrainingPlan:
    """The graph's columns plus what reports need (per-rank stream tasks, ideal bubble, FLOPs)."""

    columns: dict
    setup: TrainingSetup
    world: int
    simulated_ranks: np.ndarray          # ranks present in the graph
    rank_stream: dict[int, np.ndarray]   # rank -> global ids of its stream tasks, in order (all iterations)
    rank_end: np.ndarray                 # [len(simulated_ranks)] global id of each rank's last task
    ideal_source: tuple                  # (pipeline part, stream, pp): for ideal_bubble_s
    stream_cat: dict[int, np.ndarray]    # rank -> category name index of each stream task
    model_flops: float                   # per iteration, all GPUs, without recomputation
    hardware_flops: float                # per iteration, with recomputation
    memory: list                         # MemoryBreakdown per stage
    n_buckets: int = 0
    stats: dict = field(default_factory=dict)

    @property
    def ideal_bubble_s(self) -> np.ndarray:
        """[pp] per-iteration bubble of the zero-communication pipeline (computed on first use)."""
        if "_ideal" not in self.stats:
            self.stats["_ideal"] = ideal_pipeline(*self.ideal_source)
        return self.stats["_ideal"]

    @property
    def peak_memory(self):
        return max(self.memory, key=lambda m: m.total_bytes)


# ----------------------------------------------------------------------------------------------
# the pipeline part


_A_DP, _A_AG, _A_PREV = 0, 1, 2


class _PipeBuilder:
    """One pipeline (all stages of one (dp, tp) position) as a Part over slots = stages."""

    def __init__(self, setup: TrainingSetup, costs: list[StageCosts], same_server: dict, buckets: list[list[int]],
                 bucket_est: list[list[list[float]]], ag_est: list[float], has_dp: bool, ag_overlap: bool,
                 emb_bytes: int, fsdp: bool = False):
        par = setup.par
        self.s, self.p, self.v, self.m = setup, par.pp, par.virtual_stages, num_microbatches(par)
        p, v = self.p, self.v
        # FSDP: every pass (forward / backward of a chunk) waits for its parameter all-gather
        self.fsdp, self.passes = fsdp, 2 * self.m * v
        self.n_anchor = p + p * v + p + (p * self.passes if fsdp else 0)
        self.fsdp_launch: list[list[int]] = [[] for _ in range(p)]     # per stage: each pass's last task
        self.part = Part(p, self.n_anchor)
        self.costs, self.same, self.buckets = costs, same_server, buckets
        self.bucket_est, self.ag_est = bucket_est, ag_est
        self.has_dp, self.ag_overlap, self.emb_bytes = has_dp, ag_overlap, emb_bytes
        self.slow = overlap_slowdown(setup.gpu)
        # all-to-alls of the EP group: (stage, launching task, anchor of their completion, transposed)
        self.a2a: list[tuple[int, int, int, bool]] = []
        # key/value rings of the CP group: (stage, launching task, anchor of their completion, bytes per step)
        self.ring: list[tuple[int, int, int, int]] = []
        cp = setup.context_parallel
        n_layers = setup.model.layers // (par.pp * par.virtual_stages)
        f, b = ring_pass_factors(par)
        # the folded model's sequence is a CP rank's seq_len / cp tokens
        block = ring_block_bytes(setup.model, par) if cp > 1 else 0.0
        self.ring_bytes = (int(round(block * n_layers * f)), int(round(block * n_layers * b)))

    def _extra_anchor(self) -> int:
        return self.n_anchor + len(self.a2a) + len(self.ring)

    def _ring(self, st: int, launch: int, nbytes: int) -> int:
        """The CP group's key/value ring after ``launch`` on stage ``st``: its completion anchor."""
        a = self._extra_anchor()
        self.ring.append((st, launch, a, nbytes))
        return Part.anchor(a)

    def _a2a(self, st: int, launch: int, *, transpose: bool) -> int:
        """An all-to-all of the EP group after ``launch`` on stage ``st``: its completion anchor.
        The first of a chunk's pass moves tokens to their experts (forward: the dispatch;
        backward: the combine's gradient), the next one back (``transpose``), and so on."""
        a = self._extra_anchor()
        self.a2a.append((st, launch, a, transpose))
        return Part.anchor(a)

    def anchor(self, kind: int, stage: int, chunk: int = 0) -> int:
        p, v = self.p, self.v
        a = stage if kind == _A_DP else (p + stage * v + chunk if kind == _A_AG else p + p * v + stage)
        return Part.anchor(a)

    def build(self):
        s, part = self.s, self.part
        p, v, m = self.p, self.v, self.m
        par = s.par
        t = par.tp
        act = 2 * s.model.seq_len * par.micro_batch * s.model.hidden
        pp_bytes = max(1, act // t) if t > 1 else act
        gather = s.intra_time("all_gather", act, t) if (t > 1 and not par.sequence_parallel) else 0.0
        first_task: dict[tuple, int] = {}
        last_task: dict[tuple, int] = {}
        last_deps: dict[tuple, list[int]] = {}
        stream: list[list[tuple[int, str]]] = [[] for _ in range(p)]
        launches: list[list[list[int]]] = [[[] for _ in range(v)] for _ in range(p)]
        last_stream = [0] * p
        for st in range(p):
            c = self.costs[st]
            outstanding = sum(self.ag_est) if (self.ag_overlap and self.has_dp) else 0.0
            prev: list[int] = [self.anchor(_A_PREV, st)]
            prog = stage_program(p, v, m, st)

            def add(dur_s: float, cat: str, deps: list[int], compute: bool) -> int:
                nonlocal outstanding
                if compute and outstanding > 0 and dur_s > 0:
                    lost = min(outstanding, dur_s) * (1.0 - 1.0 / self.slow)
                    outstanding = max(0.0, outstanding - dur_s)
                    dur_s += lost
                elif outstanding > 0:
                    outstanding = max(0.0, outstanding - dur_s)
                k = part.delay(st, _ps(dur_s), after=deps, category=cat)
                stream[st].append((k, cat))
                return k

            for i_pass, (fwd, ch, j) in enumerate(prog):
                mstage = ch * p + st
                receives = (mstage > 0) if fwd else (mstage < p * v - 1)
                deps = list(prev)
                if self.fsdp:
                    deps.append(Part.anchor(p + p * v + p + st * self.passes + i_pass))
                if fwd and j == 0 and self.ag_overlap and self.has_dp:
                    deps.append(self.anchor(_A_AG, st, ch))
                first = None
                if receives and gather > 0:
                    first = add(gather, "pp_comm", deps, False)
                    deps = [first]
                launch = (not fwd) and j == m - 1 and par.overlap_grad_reduce and self.has_dp
                segments = (c.f_segments or c.b_segments) and (c.f_segments if fwd else c.b_segments)[ch]
                if segments:
                    # cut at the EP group's all-to-alls; the chunk's buckets leave at its end
                    nb = len(self.buckets[st][ch]) if launch else 0
                    pieces = list(segments)
                elif fwd:
                    pieces = [(c.f_compute[ch], c.f_tp[ch])]
                else:
                    nb = max(1, len(self.buckets[st][ch])) if launch else 1
                    pieces = [(c.b_compute[ch] / nb, c.b_tp[ch] / nb)] * nb
                ring = None
                for i, (comp, tp) in enumerate(pieces):
                    if segments and i > 0:
                        deps = deps + [self._a2a(st, deps[0], transpose=i % 2 == 0)]
                    k = add(comp, "compute", deps, True)
                    first = k if first is None else first
                    if i == 0 and self.ring_bytes[0]:
                        # the ring runs beside the pass; the pass's results wait for it
                        ring = self._ring(st, deps[0] if deps[0] >= 0 else k, self.ring_bytes[0 if fwd else 1])
                    if tp > 0:
                        k = add(tp, "tp_comm", [k], False)
                    deps = [k]
                    if launch and not segments and i < len(self.buckets[st][ch]):
                        launches[st][ch].append(k)
                        outstanding += self.bucket_est[st][ch][i]
                if launch and segments:
                    launches[st][ch] = [deps[0]] * nb
                    outstanding += sum(self.bucket_est[st][ch])
                if ring is not None:
                    deps = deps + [ring]
                first_task[(fwd, ch, j, st)] = first
                last_task[(fwd, ch, j, st)] = deps[0]
                last_deps[(fwd, ch, j, st)] = deps
                self.fsdp_launch[st].append(deps[0])
                prev = deps
            last_stream[st] = prev[0]
            if not par.overlap_grad_reduce and self.has_dp:
                for ch in range(v):
                    launches[st][ch] = [prev[0]] * len(self.buckets[st][ch])
        # pipeline transfers
        for st in range(p):
            for fwd, ch, j in stage_program(p, v, m, st):
                mstage = ch * p + st
                if fwd and mstage == p * v - 1 or (not fwd and mstage == 0):
                    continue
                to = mstage + 1 if fwd else mstage - 1
                dst, dch = to % p, to // p
                src = last_deps[(fwd, ch, j, st)]
                if s.ideal_comm:
                    x = part.delay(dst, 0, after=src, category="pp_comm")
                elif self.same[(st, dst)]:
                    x = part.delay(dst, _ps(s.intra_time("send_recv", pp_bytes, 2)), after=src,
                                   category="pp_comm")
                else:
                    x = part.flow(st, dst, pp_bytes, after=src, category="pp_comm")
                part.add_pred(first_task[(fwd, dch, j, dst)], x)
        # embedding-gradient all-reduce between the first and the last stage, then the step
        before_step: list[list[int]] = [[last_stream[st]] + ([self.anchor(_A_DP, st)] if self.has_dp else [])
                                        for st in range(p)]
        if self.emb_bytes > 0 and p > 1:
            done = add_group_collective(
                part, "all_reduce", [0, p - 1], [0, 0 if self.same[(0, p - 1)] else 1], self.emb_bytes,
                intra=s.intra_time, algorithm="ring", channels=1, after={0: before_step[0], 1: before_step[p - 1]},
                category="dp_comm", nic_bytes_per_s=s.nic_bytes_per_s, step_latency_s=s.step_latency_s,
                fifo_wire_factor=s.wire_factor)
            for i, st in ((0, 0), (1, p - 1)):
                before_step[st] = before_step[st] + done[i]
        steps = []
        for st in range(p):
            k = part.delay(st, _ps(self.costs[st].step), after=before_step[st], category="compute")
            stream[st].append((k, "compute"))
            steps.append(k)
        part.n_anchor = self._extra_anchor()
        return part.freeze(), stream, launches, steps


# ----------------------------------------------------------------------------------------------
# helpers


def _bucket_sizes(total_bytes: float, bucket_bytes: float) -> list[int]:
    """``ceil(total / bucket)`` buckets of one equal size (the total rounded up by < one byte per
    bucket), so that every bucket of a chunk shares one collective template."""
    total = int(math.ceil(total_bytes))
    if total <= 0:
        return []
    n = max(1, math.ceil(total / bucket_bytes))
    return [-(-total // n)] * n


def _a2a_template(setup: TrainingSetup, servers: tuple[int, ...], matrix: np.ndarray):
    """One all-to-all of an EP group as a part over its members (anchor ``e``: member ``e``'s
    launching task); returns the frozen part and each member's completion task."""
    E = len(servers)
    part = Part(E, E)
    if setup.ideal_comm:
        done = {e: [] for e in range(E)}
    else:
        done = add_all_to_all(part, list(range(E)), list(servers), matrix, algorithm=setup.collective.all_to_all,
                              intra=setup.intra_time, after={e: [Part.anchor(e)] for e in range(E)},
                              category="ep_comm")
    ends = np.asarray([ids[0] if len(ids) == 1 else part.delay(e, 0, after=ids or [Part.anchor(e)],
                                                               category="ep_comm")
                       for e, ids in sorted(done.items())], np.int64)
    return part.freeze(), ends


def _fsdp_chain(program: list[tuple[bool, int, int]], chunk_params: tuple[float, ...], param_bytes: float,
                grad_bytes: float) -> tuple[list[tuple], list[int]]:
    """The FSDP collectives of one stage in communicator order, and the chain index of each
    pass's all-gather. Pass ``i``'s parameters are gathered when pass ``i - 1`` starts (the
    first two passes': after the previous iteration); its gradients, for a backward,
    reduce-scattered when it ends, after the gather of pass ``i + 2``."""
    def gather(i: int, kind: str, launch: int) -> tuple:
        c = program[i][1]
        return ("all_gather", int(math.ceil(chunk_params[c] * param_bytes)), kind, c, launch, False)

    n = len(program)
    chain = [gather(i, "fsdp_prev", 0) for i in range(min(2, n))]
    ag = list(range(len(chain)))
    for i, (fwd, c, _j) in enumerate(program):
        if i + 2 < n:
            ag.append(len(chain))
            chain.append(gather(i + 2, "fsdp", i))
        if not fwd:
            chain.append(("reduce_scatter", int(math.ceil(chunk_params[c] * grad_bytes)), "fsdp", c, i, False))
    return chain, ag


def _relative(servers: np.ndarray) -> tuple[int, ...]:
    """Servers of a group's members renumbered in order of first appearance (its template key)."""
    first_seen: dict[int, int] = {}
    return tuple(first_seen.setdefault(int(x), len(first_seen)) for x in servers)


def _ring_template(setup: TrainingSetup, servers: tuple[int, ...], nbytes: int, steps: int):
    """One key/value ring of a CP group as a part over its members (anchor ``e``: member ``e``'s
    launching task); returns the frozen part and each member's completion task."""
    E = len(servers)
    part = Part(E, E)
    after = {e: [Part.anchor(e)] for e in range(E)}
    done = after if setup.ideal_comm else add_ring_exchange(
        part, list(servers), nbytes, steps, intra=setup.intra_time, after=after, category="cp_comm")
    ends = np.asarray([part.delay(e, 0, after=done[e], category="cp_comm") for e in range(E)], np.int64)
    return part.freeze(), ends


def ideal_pipeline(part, stream: list[list[tuple[int, str]]], p: int) -> np.ndarray:
    """Per-stage idle time (bubble) of the pipeline part with zero-time transfers and no DP:
    longest paths over the part (flows and anchors take no time), up to each stage's last
    forward/backward task, minus that stage's busy time."""
    n = part.n
    dur = np.where(part.kind == FLOW, 0, part.dur).astype(np.int64)
    succ_of: list[list[int]] = [[] for _ in range(n)]
    indeg = np.zeros(n, np.int64)
    for a, b in zip(part.e_succ.tolist(), part.e_pred.tolist()):
        succ_of[b].append(a)
        indeg[a] += 1
    start = np.zeros(n, np.int64)
    ready = [i for i in range(n) if indeg[i] == 0]
    finish = np.zeros(n, np.int64)
    while ready:
        k = ready.pop()
        finish[k] = start[k] + dur[k]
        for s in succ_of[k]:
            if finish[k] > start[s]:
                start[s] = finish[k]
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    out = np.zeros(p)
    for st in range(p):
        ids = [k for k, _ in stream[st][:-1]]       # without the optimizer step
        busy = sum(int(dur[k]) for k in ids)
        out[st] = (int(finish[ids[-1]]) - busy) / PS if ids else 0.0
    return out


# ----------------------------------------------------------------------------------------------
# the whole graph


def build_training(setup: TrainingSetup) -> TrainingPlan:
    """The task graph of ``setup.iterations`` training iterations and its plan.

    Raises InfeasibleError for an invalid layout (before building anything) and ConfigError for
    a rail sample the layout does not allow.
    """
    return _build(setup, count_only=False)


def training_counts(setup: TrainingSetup) -> dict:
    """Size of the graph :func:`build_training` would build, without building it: the templates
    are built and placed, the graph's columns are not (:meth:`Assembly.counts` says what is
    counted). For clusters whose graph does not fit in host memory. Adds ``pipelines``,
    ``pipeline_signatures``, ``dp_templates``, ``dp_collectives`` and ``template_tasks`` (tasks
    in the distinct templates, what is actually built)."""
    return _build(setup, count_only=True)


def _build(setup: TrainingSetup, count_only: bool):
    gps = setup.gpus_per_server
    check_layout(setup.model, setup.par, gpus_per_server=gps)
    user_model, user_par = setup.model, setup.par
    if setup.par.cp > 1:
        model, par = fold_context_parallel(setup.model, setup.par)
        setup = replace(setup, model=model, par=par, context_parallel=user_par.cp)
    model, par = setup.model, setup.par
    gpu_host = np.asarray(setup.gpu_host, np.int64)
    world = Layout(par, gps).world_size
    if world > gpu_host.size:
        raise ConfigError("parallelism", f"tp * pp * dp = {world} GPUs but the cluster has {gpu_host.size}",
                          world)
    p, v, D, T = par.pp, par.virtual_stages, par.dp, par.tp
    grid = np.arange(world, dtype=np.int64).reshape(p, D, T)          # [pp, dp, tp] -> rank
    server = grid // gps
    kept = (grid % gps == 0) if setup.rail_sample else np.ones_like(grid, bool)
    pk = kept.all(axis=0)                                              # pipelines (d, t) kept whole
    if (kept.any(axis=0) & ~pk).any():
        raise ConfigError("workload.rail_sample", "needs every pipeline to stay on one local GPU index "
                          "(tp * dp a multiple of gpus_per_server, or pp = 1)", True)
    pipes = np.argwhere(pk)                                            # rows (d, t)
    n_pipe = len(pipes)
    gbytes = PRECISIONS[setup.precision].grad
    pbytes = PRECISIONS[setup.precision].param
    E = par.ep
    if E > 1 and setup.rail_sample:
        raise ConfigError("workload.rail_sample", "is not available with expert parallelism (ep > 1): the "
                          "all-to-alls of an EP group span several local GPU indices", True)
    if setup.context_parallel > 1 and setup.rail_sample:
        raise ConfigError("workload.rail_sample", "is not available with context parallelism (cp > 1): the "
                          "key/value rings span several local GPU indices", True)
    skew = routed_load(model, par, setup.expert_skew)      # the busiest EP rank's routed tokens / mean
    ep_groups = ep_dp_groups(par) if E > 1 else np.zeros((0, 1), np.int64)       # [dp / ep, ep] dp indices
    ep_rank = np.zeros(D, np.int64)
    if E > 1:
        ep_rank[ep_groups.reshape(-1)] = np.tile(np.arange(E), D // E)
    # the first rank of every EP group is the busiest one (expert_skew times the sampling
    # maximum, mvopt.workload.routing); the others share the rest
    hot_costs = [stage_costs(setup, st, load=skew) for st in range(p)]
    costs = hot_costs if skew == 1.0 else [stage_costs(setup, st, load=(E - skew) / (E - 1)) for st in range(p)]
    has_dp = D > 1 and not setup.ideal_comm
    dist = par.distributed_optimizer and has_dp
    fsdp = par.fsdp and has_dp
    ag_overlap = dist and par.overlap_param_gather
    rs_op = "reduce_scatter" if (dist or fsdp) else "all_reduce"
    cap = par.bucket_mb * 1e6
    empty = [[[] for _ in range(v)] for _ in range(p)]
    gcap = cap if par.overlap_grad_reduce else math.inf
    if E > 1:
        # routed experts are reduced over their expert-data-parallel group (dp / ep ranks), after
        # the chunk's other gradients (none to reduce when ep = dp)
        experts = [chunk_expert_param_counts(model, par, st) for st in range(p)]

        def split(st: int, per_param: float, bcap: float) -> list[list[tuple[int, bool]]]:
            out = []
            for c, (n, ne) in enumerate(zip(costs[st].chunk_params, experts[st])):
                xs = [(x, False) for x in _bucket_sizes((n - ne) * per_param, bcap)]
                if D > E:
                    xs += [(x, True) for x in _bucket_sizes(ne * per_param, bcap)]
                out.append(xs)
            return out
        tagged = [split(st, gbytes, gcap) for st in range(p)] if has_dp else empty
        ag_tagged = [split(st, pbytes, cap) for st in range(p)] if dist else empty
    else:
        tagged = [[[(x, False) for x in _bucket_sizes(c * gbytes, gcap)] for c in costs[st].chunk_params]
                  for st in range(p)] if has_dp else empty
        ag_tagged = [[[(x, False) for x in _bucket_sizes(c * pbytes, cap)] for c in costs[st].chunk_params]
                     for st in range(p)] if dist else empty
    if fsdp:        # no buckets: the per-pass collectives of the FSDP chain below replace them
        tagged = empty
    buckets = [[[x for x, _ in c] for c in st] for st in tagged]
    ag_buckets = [[[x for x, _ in c] for c in st] for st in ag_tagged]

    # --- DP groups: one per (stage, tp position with kept pipelines); members = dp index
    tps = sorted({int(tr) for _, tr in pipes})
    G = len(tps)
    pipe_of = np.full((D, T), -1, np.int64)
    pipe_of[pipes[:, 0], pipes[:, 1]] = np.arange(n_pipe)
    shape_cache: dict[tuple, tuple] = {}

    def gshape(st: int, tr: int):
        servers = tuple(int(x) for x in server[st, :, tr] - server[st, 0, tr])
        kp = tuple(bool(x) for x in kept[st, :, tr])
        key = (servers, kp)
        if key not in shape_cache:
            order, by = group_shape(list(servers))
            shape_cache[key] = (key, len(order), len(by[0]), len({len(x) for x in by}) == 1)
        return shape_cache[key]

    est_cache: dict[tuple, float] = {}

    def est(op: str, nbytes: float, st: int) -> float:
        """Closed-form time of one DP collective (for the overlap slowdown only)."""
        if not has_dp:
            return 0.0
        key = (op, nbytes, gshape(st, tps[0])[0])
        if key not in est_cache:
            est_cache[key] = _est(op, nbytes, st)
        return est_cache[key]

    def _est(op: str, nbytes: float, st: int) -> float:
        _, k, g, _ = gshape(st, tps[0])
        t = 0.0
        if g > 1:
            t += setup.intra_time("all_gather" if op == "all_gather" else "reduce_scatter", nbytes, g)
            if op == "all_reduce":
                t += setup.intra_time("all_gather", nbytes, g)
        if k > 1:
            t += ring_time_estimate(op, k, nbytes / g, setup.nic_bytes_per_s, setup.step_latency_s)
        return t

    bucket_est = [[[est(rs_op, b, st) for b in buckets[st][c]] for c in range(v)] for st in range(p)]
    ag_est = [sum(est("all_gather", b, st) for c in range(v) for b in ag_buckets[st][c]) for st in range(p)]
    emb_bytes = int(model.padded_vocab(T) * model.hidden / T * gbytes) \
        if (model.tied_embeddings and p > 1 and not setup.ideal_comm) else 0

    # --- pipelines: one part per signature (which transfers stay inside a server)
    pairs = [(st, st + 1) for st in range(p - 1)] + ([(p - 1, 0), (0, p - 1)] if p > 1 else [])
    sv = server[:, pipes[:, 0], pipes[:, 1]]                          # [p, n_pipe]
    hot = (ep_rank[pipes[:, 0]] == 0) & (skew != 1.0)
    slow = straggler_factors(setup, world)[grid[:, pipes[:, 0], pipes[:, 1]]]      # [p, n_pipe]
    sig_rows = [tuple(bool(sv[a, i] == sv[b, i]) for a, b in pairs) + ((bool(hot[i]),) if E > 1 else ())
                + ((tuple(float(x) for x in slow[:, i]),) if setup.stragglers else ())
                for i in range(n_pipe)]
    sigs = sorted(set(sig_rows))
    sig_of = np.asarray([sigs.index(x) for x in sig_rows], np.int64)
    pipe_parts = []
    for sig in sigs:
        same = {pr: f for pr, f in zip(pairs, sig)}
        same.update({(b, a): f for (a, b), f in zip(pairs, sig)})
        base = hot_costs if (E > 1 and sig[len(pairs)]) else costs
        if setup.stragglers:
            base = [scaled_compute(c, f) for c, f in zip(base, sig[-1])]
        pb = _PipeBuilder(setup, base, same, buckets, bucket_est, ag_est, has_dp, ag_overlap, emb_bytes, fsdp)
        frozen, stream, launches, steps = pb.build()
        local = [np.fromiter((k for k, _ in stream[st]), np.int64) for st in range(p)]
        cats = [np.fromiter((CATEGORIES.index(c) for _, c in stream[st]), np.int64) for st in range(p)]
        pipe_parts.append(dict(part=frozen, stream=stream, launches=launches, steps=np.asarray(steps, np.int64),
                               a2a=pb.a2a, ring=pb.ring, fsdp_launch=np.asarray(pb.fsdp_launch, np.int64),
                               n_anchor=pb.n_anchor, a2a_launch=np.asarray([x[1] for x in pb.a2a], np.int64),
                               local=local, cats=cats, last=np.asarray([x[-2] if len(x) > 1 else x[-1]
                                                                        for x in local], np.int64)))

    # --- the DP chain of every stage: collectives in communicator order, per group member
    chain: list[list[tuple]] = []        # per stage: (op, size, launch kind, chunk, bucket)
    fsdp_ag: list[list[int]] = [[] for _ in range(p)]   # per stage: chain index of each pass's all-gather
    for st in range(p):
        ch = []
        if ag_overlap:
            ch += [("all_gather", sz, "prev_end", c, b, e) for c in range(v) for b, (sz, e) in enumerate(ag_tagged[st][c])]
        kind = "seg" if par.overlap_grad_reduce else "last"
        ch += [(rs_op, sz, kind, c, b, e) for c in reversed(range(v)) for b, (sz, e) in enumerate(tagged[st][c])]
        if dist and not ag_overlap:
            ch += [("all_gather", sz, "step", c, b, e) for c in range(v) for b, (sz, e) in enumerate(ag_tagged[st][c])]
        if fsdp:
            ch, fsdp_ag[st] = _fsdp_chain(stage_program(p, v, num_microbatches(par), st), costs[st].chunk_params,
                                          pbytes, gbytes)
        chain.append(ch if has_dp else [])
    K = max((len(c) for c in chain), default=0)
    dp_cache: dict[tuple, tuple] = {}

    def dp_part(key: tuple, st: int, tr: int, op: str, nbytes: int, expert: bool = False):
        if key not in dp_cache:
            part = Part(D, 2 * D)
            after = {i: [Part.anchor(i), Part.anchor(D + i)] for i in range(D)}
            # the whole DP group, or (routed experts) each expert-data-parallel group
            groups = expert_dp_groups(par).tolist() if expert else [list(range(D))]
            done: dict[int, list[int]] = {}
            for members in groups:
                res = add_group_collective(
                    part, op, members, [int(server[st, d, tr]) for d in members], nbytes, intra=setup.intra_time,
                    algorithm=setup.collective.algorithm, channels=setup.collective.channels,
                    chunk_bytes=setup.collective.chunk_bytes, chunk_gap_ps=setup.chunk_gap_ps,
                    hierarchical=setup.collective.hierarchical, after={k: after[d] for k, d in enumerate(members)},
                    category="dp_comm", kept=[bool(kept[st, d, tr]) for d in members],
                    nic_bytes_per_s=setup.nic_bytes_per_s, step_latency_s=setup.step_latency_s,
                    fifo_wire_factor=setup.wire_factor, where="collective")
                done.update({members[k]: ids for k, ids in res.items()})
            ends = np.full(D, -1, np.int64)
            for i, ids in done.items():
                ends[i] = ids[0] if len(ids) == 1 else part.delay(
                    i, 0, after=ids or [Part.anchor(i), Part.anchor(D + i)], category="dp_comm")
            dp_cache[key] = (part.freeze(), ends)
        return dp_cache[key]

    # rows of every DP placement, grouped by template: (stage, group, chain index)
    rows_by_key: dict[tuple, list[tuple[int, int, int]]] = {}
    for st in range(p):
        for g, tr in enumerate(tps):
            shape_key = gshape(st, tr)[0]
            for k, (op, sz, *_rest, expert) in enumerate(chain[st]):
                key = (shape_key, op, sz, expert)
                dp_part(key, st, tr, op, sz, expert)
                rows_by_key.setdefault(key, []).append((st, g, k))
    row_arrays = {key: np.asarray(rows, np.int64).reshape(-1, 3) for key, rows in rows_by_key.items()}
    hosts_sgd = gpu_host[grid[:, :, tps]].transpose(0, 2, 1) if G else np.zeros((p, 0, D), np.int64)  # [p, G, D]
    member_pipe = pipe_of[:, tps].T if G else np.zeros((0, D), np.int64)                       # [G, D]
    kept_gd = member_pipe >= 0

    # --- the EP groups' all-to-alls: one template per (group shape, direction), placed per
    # (all-to-all of the schedule, EP group); anchors: each member's task before it
    n_fixed = pipe_parts[0]["n_anchor"] if n_pipe else p + p * v + p
    a2a_list = pipe_parts[0]["a2a"] if n_pipe else []
    a2a_cols = np.asarray([x[2] - n_fixed for x in a2a_list], np.int64)
    ring_list = pipe_parts[0]["ring"] if n_pipe else []
    n_extra = len(a2a_list) + len(ring_list)
    cp = setup.context_parallel
    # CP groups: the cp consecutive folded DP indices of one DP rank, per TP position
    cp_d = np.arange(D, dtype=np.int64).reshape(D // cp, cp) if ring_list else np.zeros((0, 1), np.int64)
    ring_grp_d = np.concatenate([cp_d] * G) if ring_list else cp_d
    ring_grp_t = np.repeat(np.asarray(tps, np.int64), len(cp_d)) if ring_list else np.zeros(0, np.int64)
    ring_cache: dict[tuple, tuple] = {}
    ring_rows: dict[tuple, list[tuple[int, int]]] = {}
    for qi, (st, _launch, _a, nbytes) in enumerate(ring_list):
        for gi_ in range(len(ring_grp_d)):
            rel = _relative(server[st, ring_grp_d[gi_], ring_grp_t[gi_]])
            key = (rel, nbytes)
            if key not in ring_cache:
                ring_cache[key] = _ring_template(setup, rel, nbytes, cp - 1)
            ring_rows.setdefault(key, []).append((qi, gi_))
    K2 = len(a2a_list)
    q_st = np.asarray([x[0] for x in a2a_list], np.int64)
    q_tr = np.asarray([x[3] for x in a2a_list], bool)
    grp_d = np.concatenate([ep_groups] * G) if K2 else np.zeros((0, E), np.int64)    # [n_g, E] dp indices
    grp_t = np.repeat(np.asarray(tps, np.int64), len(ep_groups)) if K2 else np.zeros(0, np.int64)
    grp_pipe = pipe_of[grp_d, grp_t[:, None]]                                        # [n_g, E]
    a2a_cache: dict[tuple, tuple] = {}
    a2a_rows: dict[tuple, tuple[list, list]] = {}
    if K2:
        routed = 2.0 * model.seq_len * par.micro_batch * model.top_k * model.hidden / T
        dispatch = skewed_matrix(E, routed, skew)
        for st in range(p):
            for gi_ in range(len(grp_d)):
                rel = _relative(server[st, grp_d[gi_], grp_t[gi_]])
                for tflag in (False, True):
                    qs = np.nonzero((q_st == st) & (q_tr == tflag))[0]
                    if not qs.size:
                        continue
                    key = (rel, tflag)
                    if key not in a2a_cache:
                        a2a_cache[key] = _a2a_template(setup, rel, dispatch.T if tflag else dispatch)
                    rq, rg = a2a_rows.setdefault(key, ([], []))
                    rq.append(qs)
                    rg.append(np.full(qs.size, gi_, np.int64))
    a2a_arrays = {k: (np.concatenate(q), np.concatenate(g)) for k, (q, g) in a2a_rows.items()}

    asm = Assembly()
    rank_stream: dict[int, list[np.ndarray]] = {}
    rank_cat: dict[int, list[np.ndarray]] = {}
    prev_end = np.full((n_pipe, p), -1, np.int64)
    prev_comm = np.full((p, G, D), -1, np.int64)
    n_buckets = 0
    for _it in range(setup.iterations):
        pbase = np.zeros(n_pipe, np.int64)
        handles = []
        for si, pp_ in enumerate(pipe_parts):
            rows = np.nonzero(sig_of == si)[0]
            hm = gpu_host[grid[:, pipes[rows, 0], pipes[rows, 1]]].T
            h, base = asm.place(pp_["part"], hm)
            pbase[rows] = base
            handles.append((h, rows))
        # local ids (within its pipeline part) of each pipe's exports
        steps_g = np.stack([pipe_parts[sig_of[i]]["steps"] for i in range(n_pipe)]) + pbase[:, None] \
            if n_pipe else np.zeros((0, p), np.int64)
        last_g = np.stack([pipe_parts[sig_of[i]]["last"] for i in range(n_pipe)]) + pbase[:, None] \
            if n_pipe else np.zeros((0, p), np.int64)
        # DP placements (pass 1: ids)
        done_tab = np.full((p, G, max(K, 1), D), -1, np.int64)
        placed = []
        for key, ra in row_arrays.items():
            fr, ends = dp_cache[key]
            h, base = asm.place(fr, hosts_sgd[ra[:, 0], ra[:, 1]])
            done_tab[ra[:, 0], ra[:, 1], ra[:, 2]] = np.where(ends[None, :] >= 0, base[:, None] + ends[None, :], -1)
            placed.append((h, ra))
            n_buckets += len(ra)
        # launch ids [p, G, K, D]
        launch = np.full((p, G, max(K, 1), D), -1, np.int64)
        for st in range(p):
            for k, (op, sz, kind, c, b, _expert) in enumerate(chain[st]):
                mp = member_pipe                                       # [G, D]
                safe = np.maximum(mp, 0)
                if kind in ("prev_end", "fsdp_prev"):
                    ids = prev_end[safe, st]
                elif kind == "fsdp":
                    loc = np.asarray([pipe_parts[sig_of[i]]["fsdp_launch"][st][b] for i in range(n_pipe)], np.int64)
                    ids = (pbase + loc)[safe]
                elif kind == "step":
                    ids = steps_g[safe, st]
                elif kind == "last":
                    ids = last_g[safe, st]
                else:
                    loc = np.asarray([pipe_parts[sig_of[i]]["launches"][st][c][b] for i in range(n_pipe)], np.int64)
                    ids = (pbase + loc)[safe]
                launch[st, :, k] = np.where(kept_gd, ids, -1)
        # pass 2: anchors (launch, previous collective on the member's communicator)
        prev_tab = np.concatenate([prev_comm[:, :, None, :], done_tab[:, :, :-1, :]], axis=2)
        for h, ra in placed:
            asm.set_anchors(h, np.concatenate([launch[ra[:, 0], ra[:, 1], ra[:, 2]],
                                               prev_tab[ra[:, 0], ra[:, 1], ra[:, 2]]], axis=1))
        # all-to-alls of the EP groups
        a2a_done = np.full((n_pipe, K2), -1, np.int64)
        if K2:
            la = np.stack([pipe_parts[sig_of[i]]["a2a_launch"] for i in range(n_pipe)]) + pbase[:, None]
            for key, (qs, gs) in a2a_arrays.items():
                fr, ends = a2a_cache[key]
                h, base = asm.place(fr, gpu_host[grid[q_st[qs][:, None], grp_d[gs], grp_t[gs][:, None]]])
                members = grp_pipe[gs]                                         # [R, E]
                asm.set_anchors(h, la[members, qs[:, None]])
                a2a_done[members, qs[:, None]] = base[:, None] + ends[None, :]
        # pipeline anchors: last gradient collective, parameter all-gathers, previous iteration,
        # all-to-alls
        anchors = np.full((n_pipe, n_fixed + n_extra), -1, np.int64)
        anchors[:, p + p * v:p + p * v + p] = prev_end
        anchors[:, n_fixed + a2a_cols] = a2a_done
        if ring_list:
            lr = np.stack([np.asarray([x[1] for x in pipe_parts[sig_of[i]]["ring"]], np.int64)
                           for i in range(n_pipe)]) + pbase[:, None]
            for key, rows in ring_rows.items():
                fr, ends = ring_cache[key]
                ra = np.asarray(rows, np.int64)
                qs, gs = ra[:, 0], ra[:, 1]
                h, base = asm.place(fr, gpu_host[grid[np.asarray([ring_list[q][0] for q in qs])[:, None],
                                                      ring_grp_d[gs], ring_grp_t[gs][:, None]]])
                members = pipe_of[ring_grp_d[gs], ring_grp_t[gs][:, None]]      # [R, cp]
                asm.set_anchors(h, lr[members, qs[:, None]])
                anchors[members, np.asarray([ring_list[q][2] for q in qs])[:, None]] = base[:, None] + ends[None, :]
        gi = np.searchsorted(tps, pipes[:, 1]) if G else np.zeros(n_pipe, np.int64)
        di = pipes[:, 0]
        ends_now = steps_g.copy()
        for st in range(p):
            ks = [k for k, e in enumerate(chain[st]) if e[0] == rs_op]
            if ks:
                anchors[:, st] = done_tab[st, gi, ks[-1], di]
            for c in range(v):
                kc = [k for k, e in enumerate(chain[st]) if e[2] == "prev_end" and e[3] == c]
                if kc:
                    anchors[:, p + st * v + c] = done_tab[st, gi, kc[-1], di]
            ka = [k for k, e in enumerate(chain[st]) if e[2] == "step"]
            if ka:
                ends_now[:, st] = done_tab[st, gi, ka[-1], di]
        if fsdp:
            passes = 2 * num_microbatches(par) * v
            for st in range(p):
                for i, k in enumerate(fsdp_ag[st]):
                    anchors[:, p + p * v + p + st * passes + i] = done_tab[st, gi, k, di]
        for h, rows in handles:
            asm.set_anchors(h, anchors[rows])
        prev_end = ends_now
        if K:
            last_k = np.asarray([len(c) - 1 for c in chain])
            prev_comm = done_tab[np.arange(p), :, last_k, :] if (last_k >= 0).all() else prev_comm
        for i, (d, tr) in enumerate(pipes):
            pp_ = pipe_parts[sig_of[i]]
            for st in range(p):
                r = int(grid[st, d, tr])
                rank_stream.setdefault(r, []).append(pp_["local"][st] + pbase[i])
                rank_cat.setdefault(r, []).append(pp_["cats"][st])
    if count_only:
        out = asm.counts()
        out.update(pipelines=n_pipe, pipeline_signatures=len(sigs), dp_templates=len(dp_cache),
                   dp_collectives=n_buckets, simulated_gpus=len({int(grid[st, d, tr]) for d, tr in pipes
                                                                 for st in range(p)}),
                   template_tasks=sum(x["part"].n for x in pipe_parts) + sum(f.n for f, _ in dp_cache.values()))
        return out
    cols = asm.build()
    # every dependency follows the iteration's data flow (schedule order inside a pipeline,
    # gradients into DP collectives, their results into the step and the next uses), so the graph
    # has no cycle: the engine need not check (tests/workload/test_taskgraph.py orders the graphs)
    cols["acyclic"] = True
    ranks = np.asarray(sorted(rank_stream), np.int64)
    end_of = {int(grid[st, d, tr]): int(prev_end[i, st]) for i, (d, tr) in enumerate(pipes) for st in range(p)}
    flops_par = replace(user_par, recompute="none")
    mem = memory_per_stage(user_model, user_par, setup.gpu, precision=setup.precision, flash_attention=setup.flash_attention,
                           dropout=setup.dropout, reserve_bytes=setup.reserve_bytes, expert_skew=setup.expert_skew)
    return TrainingPlan(
        columns=cols, setup=setup, world=world, simulated_ranks=ranks,
        rank_stream={r: np.concatenate(x) for r, x in rank_stream.items()},
        rank_end=np.asarray([end_of[int(r)] for r in ranks], np.int64),
        ideal_source=(pipe_parts[0]["part"], pipe_parts[0]["stream"], p),
        stream_cat={r: np.concatenate(x) for r, x in rank_cat.items()},
        model_flops=iteration_flops(user_model, flops_par, flash_attention=setup.flash_attention),
        hardware_flops=iteration_flops(user_model, user_par, flash_attention=setup.flash_attention), memory=mem,
        n_buckets=n_buckets,
        stats=dict(pipelines=n_pipe, pipeline_signatures=len(sigs), dp_templates=len(dp_cache)))


# ----------------------------------------------------------------------------------------------
# after the simulation


def training_breakdown(plan: TrainingPlan, task_start_ps: np.ndarray, task_finish_ps: np.ndarray,
                       makespan_ps: int, window_ps: int = 0) -> dict[str, Any]:
    """Iteration time, its breakdown, MFU and memory from an engine result.

    The critical rank is the simulated rank that finishes last. Its stream time splits into busy
    time by category (compute incl. the optimizer step, exposed TP communication, on-stream
    pipeline gathers) and waits; a wait is charged to the category of the predecessor that
    released the task last (pipeline transfers: ``pp_comm``; DP collectives: ``dp_comm``). The
    pipeline waits up to the ideal bubble of the zero-communication pipeline are the ``bubble``;
    the rest is exposed ``pp_comm``. Everything is per iteration (mean over ``iterations``).
    """
    cols = plan.columns
    it = plan.setup.iterations
    start = np.asarray(task_start_ps, np.int64)
    finish = np.asarray(task_finish_ps, np.int64)
    fin_end = finish[plan.rank_end]
    crit = int(plan.simulated_ranks[int(np.argmax(fin_end))])
    ids = plan.rank_stream[crit]
    cats = plan.stream_cat[crit]
    dur = cols["duration_ps"][ids].astype(np.int64)
    busy = {c: float(dur[cats == i].sum()) for i, c in enumerate(CATEGORIES)}
    prev_fin = np.concatenate([[0], finish[ids[:-1]]])
    gaps = np.maximum(0, start[ids] - prev_fin)
    off, pred = cols["pred_offset"], cols["pred"]
    categories = cols["categories"]
    catcol = cols["category"]
    waits = {"pp_comm": 0.0, "dp_comm": 0.0, "ep_comm": 0.0, "cp_comm": 0.0}
    stream_set = set(ids.tolist())
    for k, gap in zip(ids[gaps > 0].tolist(), gaps[gaps > 0].tolist()):
        ps = pred[off[k]:off[k + 1]]
        others = [q for q in ps.tolist() if q not in stream_set]
        if not others:
            waits["pp_comm"] += gap
            continue
        q = max(others, key=lambda x: finish[x])
        c = categories[catcol[q]]
        waits[c if c in ("dp_comm", "ep_comm", "cp_comm") else "pp_comm"] += gap
    tail = max(0, int(makespan_ps) - int(finish[ids[-1]]))
    waits["dp_comm"] += tail
    p_stage = int(crit // (plan.setup.par.tp * plan.setup.par.dp))
    ideal = float(plan.ideal_bubble_s[p_stage]) * PS * it
    bubble = min(waits["pp_comm"], ideal)
    bd = {"compute": busy["compute"], "tp_comm": busy["tp_comm"],
          "pp_comm": busy["pp_comm"] + waits["pp_comm"] - bubble, "dp_comm": busy["dp_comm"] + waits["dp_comm"],
          "bubble": bubble}
    if plan.setup.par.ep > 1:
        bd["ep_comm"] = waits["ep_comm"]
    if plan.setup.context_parallel > 1:
        bd["cp_comm"] = waits["cp_comm"]
    bd = {k: v / PS / it for k, v in bd.items()}
    t_iter = makespan_ps / PS / it
    peak = plan.peak_memory
    g = plan.setup.gpu
    return {
        "iteration_time_s": t_iter,
        "breakdown": bd,
        "critical_rank": crit,
        "mfu": plan.model_flops / (t_iter * plan.world * g.peak_bf16_flops),
        "hfu": plan.hardware_flops / (t_iter * plan.world * g.peak_bf16_flops),
        "tflops_per_gpu": plan.hardware_flops / (t_iter * plan.world) / 1e12,
        "peak_memory_bytes": float(peak.total_bytes),
        "memory_capacity_bytes": float(peak.capacity_bytes),
        "peak_memory_stage": int(peak.stage),
        "memory_per_stage_bytes": [float(mb.total_bytes) for mb in plan.memory],
        "gpus": plan.world,
        "simulated_gpus": int(plan.simulated_ranks.size),
    }
