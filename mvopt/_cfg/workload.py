"""The ``workload``, ``parallelism`` and ``collective`` sections: what the cluster runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional, Union

from mvopt._cfg.algorithms import ALL_TO_ALL_ALGORITHMS, COLLECTIVE_ALGORITHMS
from mvopt._cfg.base import Section, at_least, field, non_negative, positive
from mvopt.errors import ConfigError


@dataclass(frozen=True)
class TaskSpec(Section):
    """One task of an explicit task graph: a network flow or a fixed delay."""

    id: Optional[Union[int, str]] = field(None, doc="name used by `after` (default: the list index)")
    kind: Literal["flow", "delay"] = field("flow", doc="flow (src -> dst, bytes) or delay (duration_ns on node)")
    src: Optional[int] = field(None, doc="flow: source host id", check=non_negative)
    dst: Optional[int] = field(None, doc="flow: destination host id", check=non_negative)
    bytes: Optional[int] = field(None, unit="B", doc="flow: size", check=positive)
    node: Optional[int] = field(None, doc="delay: host it runs on", check=non_negative)
    duration_ns: Optional[float] = field(None, unit="ns", doc="delay: duration", check=non_negative)
    start_ns: float = field(0.0, unit="ns", doc="earliest start time", check=non_negative)
    after: list[Union[int, str]] = field([], doc="ids of tasks that must finish first")
    priority: int = field(3, doc="flow priority class (recorded; data flows share one class)",
                          check=non_negative)

    def _check(self, path: str) -> None:
        if self.kind == "flow":
            for name in ("src", "dst", "bytes"):
                if getattr(self, name) is None:
                    raise ConfigError(f"{path}.{name}", "is required for a flow task", show_value=False)
            if self.src == self.dst:
                raise ConfigError(f"{path}.dst", "must differ from src", self.dst)
        else:
            for name in ("node", "duration_ns"):
                if getattr(self, name) is None:
                    raise ConfigError(f"{path}.{name}", "is required for a delay task", show_value=False)


@dataclass(frozen=True)
class CollectiveConfig(Section):
    """How collectives are run (NCCL settings); also the workload of kind `collective`."""

    op: Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all"] = field(
        "all_reduce", doc="collective (workload kind `collective`)")
    bytes: int = field(64 * 2**20, unit="B", doc="collective size per rank (workload kind `collective`)",
                       check=positive)
    hosts: Optional[list[int]] = field(None, doc="participating hosts in ring order (workload kind "
                                       "`collective`)", default_doc="all hosts")
    algorithm: Literal[COLLECTIVE_ALGORITHMS] = field("ring", doc="inter-server algorithm (NCCL_ALGO)")
    all_to_all: Literal[ALL_TO_ALL_ALGORITHMS] = field(
        "concurrent", doc="all-to-all algorithm: concurrent (every pair at once), pairwise (one peer at a "
        "time per sender, in NCCL's round order), hierarchical (intra-server to the destination's rail first, then pairwise "
        "between servers per rail: NCCL's PXN); the MoE token dispatch and combine, and op all_to_all")
    channels: int = field(1, doc="parallel channels (rings/trees); each carries size/channels",
                          check=at_least(1))
    chunk_bytes: Optional[int] = field(None, unit="B", doc="pipelining chunk per step",
                                       default_doc="size / (ranks * channels): one chunk per step",
                                       check=positive)
    hierarchical: Optional[bool] = field(
        None, doc="intra-server step analytical (NVLink model), inter-server step on the network, one "
        "collective per local GPU position (its rail); false: a flat ring over the GPUs whose "
        "intra-server edges are NVLink transfers", default_doc="hierarchical for training groups with "
        "several GPUs per server; flat for the collective workload")


@dataclass(frozen=True)
class ParallelismConfig(Section):
    """Megatron-style parallel layout."""

    tp: int = field(1, doc="tensor-parallel size (inside a server)", check=positive)
    pp: int = field(1, doc="pipeline-parallel size", check=positive)
    dp: int = field(1, doc="data-parallel size", check=positive)
    ep: int = field(1, doc="expert-parallel size: the experts of a MoE layer are spread over ep DP ranks, "
                    "which exchange tokens by all-to-all; must divide dp and the model's experts", check=positive)
    cp: int = field(1, doc="context-parallel size: each sequence is split over cp ranks, which exchange "
                    "their key/value blocks in a ring beside the attention (TransformerEngine's ring "
                    "attention); ranks ordered tp-cp-dp-pp; needs flash_attention", check=positive)
    fsdp: bool = field(False, doc="fully sharded data parallelism (ZeRO-3): parameters, gradients and "
                       "optimizer state sharded over the dp x cp ranks; each model chunk's parameters are "
                       "all-gathered before its forward and its backward (prefetched one pass ahead) and "
                       "its gradients reduce-scattered after each backward")
    ep_placement: Literal["packed", "spread"] = field(
        "packed", doc="which DP ranks form an EP group: packed = ep consecutive DP ranks (Megatron's "
        "order: inside a server when tp * ep <= GPUs per server); spread = DP ranks dp/ep apart (across "
        "servers)")
    virtual_stages: int = field(1, doc="model chunks per pipeline stage (interleaved 1F1B when > 1)",
                                check=positive)
    micro_batch: int = field(1, doc="micro-batch size (sequences)", check=positive)
    global_batch: int = field(8, doc="global batch size (sequences)", check=positive)
    sequence_parallel: bool = field(False, doc="Megatron sequence parallelism")
    distributed_optimizer: bool = field(False, doc="shard optimizer state over DP (reduce-scatter + all-gather)")
    recompute: Literal["none", "selective", "full"] = field("none", doc="activation recomputation")
    bucket_mb: float = field(160.0, unit="MB", doc="DP gradient bucket size (bytes of gradients per "
                             "collective; 160 MB = Megatron-core's default of 40M fp32 gradients)",
                             check=positive)
    overlap_grad_reduce: bool = field(True, doc="overlap DP gradient collectives with the backward pass")
    tp_comm_overlap: bool = field(False, doc="sequence-parallel TP all-gathers / reduce-scatters run "
                                  "inside the adjacent GEMMs (Transformer Engine userbuffers, NeMo "
                                  "ub_tp_comm_overlap); only the part longer than the GEMM, plus the "
                                  "GEMM's slowdown, is exposed")
    overlap_param_gather: bool = field(True, doc="distributed optimizer: the parameter all-gather runs "
                                       "beside the forward pass (each model chunk waits for its own "
                                       "parameters); false: after the optimizer step, exposed")


@dataclass(frozen=True)
class WorkloadConfig(Section):
    """What runs on the cluster."""

    kind: Literal["tasks", "collective", "training", "hpcc_flows", "astra", "chakra"] = field(
        "collective", doc="tasks (explicit graph), collective, training, hpcc_flows (HPCC flow.txt), "
        "astra (ASTRA-sim/SimAI workload file), chakra (Chakra execution traces, one file per rank)")
    tasks: list[TaskSpec] = field([], doc="kind tasks: the task graph")
    file: Optional[str] = field(None, doc="kind hpcc_flows / astra: input file; kind chakra: the traces' prefix "
                                "PREFIX, whose files PREFIX.0.et, PREFIX.1.et, ... are ranks 0, 1, ... (relative to "
                                "the config file)")
    comm_groups: Optional[str] = field(
        None, doc="kind chakra: communicator-group JSON file (ASTRA-sim's --comm-group-configuration: "
        "{\"1\": [0, 1], ...}) giving the ranks of each pg_name the traces use (relative to the config file)",
        default_doc="none: every collective runs over all ranks")
    model: Optional[str] = field(None, doc="kind training: model name from the zoo", default_doc="required for training")
    seq_len: Optional[int] = field(None, doc="kind training: sequence length", default_doc="the model's", check=positive)
    iterations: int = field(1, doc="kind training, astra, chakra: iterations simulated (training: the reported "
                            "iteration time is the mean; astra, chakra: one after another)", check=positive)
    precision: Literal["bf16_fp32_grad", "mixed_adam"] = field(
        "bf16_fp32_grad", doc="kind training: bytes per parameter of model state (bf16_fp32_grad: "
        "Megatron-LM bf16 with fp32 gradients, 2+4+12 B; mixed_adam: ZeRO paper, 2+2+12 B); the "
        "gradient bytes are also what DP collectives move")
    flash_attention: bool = field(False, doc="kind training: FlashAttention (memory and compute models)")
    dropout: Optional[bool] = field(None, doc="kind training: dropout layers present",
                                    default_doc="GPT-style models yes, LLaMA-style no")
    memory_reserve_gib: float = field(2.0, unit="GiB", doc="kind training: GPU memory held back for the "
                                      "CUDA context, NCCL and allocator slack", check=non_negative)
    operator_trace: Optional[str] = field(
        None, doc="kind training: CSV of measured operator times (header op,phase,time_us) replacing "
        "the compute model where it has the operator (relative to the config file)")
    intra_server_params: Optional[str] = field(
        None, doc="kind training: intra-server collective parameter file (from `mvopt calibrate`)",
        default_doc="the shipped fit (mvopt/data/intra_server_default.yaml)")
    expert_skew: float = field(
        1.0, doc="kind training, MoE models: load imbalance of the token routing. The first rank of every "
        "EP group receives expert_skew x the mean routed tokens, times the sampling maximum of "
        "routing uniform in expectation (docs/training-model.md), the others share the rest equally "
        "(1: uniform in expectation; at most ep)", check=at_least(1.0))
    rail_sample: bool = field(
        False, doc="kind training: simulate only the GPUs of local index 0 (NIC rail 0) and take their "
        "times for every GPU; exact when TP ranks are symmetric and all inter-server traffic stays on "
        "its rail (rail-optimised cluster, tp x dp a multiple of gpus_per_server, hierarchical DP "
        "collectives); a rail_optimized cluster may then describe rail 0 alone (nics_per_server: 1: its leaves "
        "and NICs with the whole fabric's spines and cores, about an eighth of the memory)")
    stragglers: list[list[float]] = field(
        [], doc="kind training: slow GPUs, each [rank, compute_factor]: every compute task of GPU rank `rank` "
        "(forward, backward, optimizer step) takes compute_factor x its time (>= 1); communication is unchanged",
        check=lambda v: None if all(len(x) == 2 and x[0] >= 0 and float(x[0]).is_integer() and x[1] >= 1
                                    for x in v)
        else "must list [rank, compute_factor] pairs: whole rank >= 0, compute_factor >= 1")

    def _check(self, path: str) -> None:
        if self.kind == "tasks" and not self.tasks:
            raise ConfigError(f"{path}.tasks", "must list at least one task for kind 'tasks'", [])
        if self.kind in ("hpcc_flows", "astra", "chakra") and not self.file:
            raise ConfigError(f"{path}.file", f"is required for kind {self.kind!r}", show_value=False)
        if self.kind == "training" and not self.model:
            raise ConfigError(f"{path}.model", "is required for kind 'training'", show_value=False)
        if self.comm_groups is not None and self.kind != "chakra":
            raise ConfigError(f"{path}.comm_groups", f"applies to kind 'chakra' only (kind is {self.kind!r})",
                              self.comm_groups)
        if self.stragglers and self.kind != "training":
            raise ConfigError(f"{path}.stragglers", f"applies to kind 'training' only (kind is {self.kind!r})",
                              [list(x) for x in self.stragglers])
        if self.stragglers and self.rail_sample:
            raise ConfigError(f"{path}.stragglers", "cannot be used with rail_sample: a straggler makes the "
                              "ranks unequal, so rail 0 no longer stands for the others",
                              [list(x) for x in self.stragglers])
        ids = {}
        for i, t in enumerate(self.tasks):
            key = t.id if t.id is not None else i
            if key in ids:
                raise ConfigError(f"{path}.tasks[{i}].id", f"duplicates tasks[{ids[key]}]", key)
            ids[key] = i
        for i, t in enumerate(self.tasks):
            for j, a in enumerate(t.after):
                if a not in ids:
                    raise ConfigError(f"{path}.tasks[{i}].after[{j}]", "must name a task id of this list", a)
