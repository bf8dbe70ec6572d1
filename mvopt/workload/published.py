"""The ``end_to_end`` rows of published.yaml as typed runs (model, GPU, parallel layout).

Rows do not state every setting the models need; the missing ones are filled here, each with its
reason, and listed in :attr:`PublishedRun.assumptions`:

* Megatron SC21 Table 1 rows (``megatron-sc21-t1-*``): what Table 1 does not state is taken from
  the authors' artifact, the scripts that produced Table 1 (NVIDIA/Megatron-LM
  ``examples/sc21/run_table_1.sh`` and ``CONFIG.sh``; :data:`SC21_TABLE1`): micro-batch, the
  interleaved schedule (``--num-layers-per-virtual-pipeline-stage``), the data-parallel
  implementation (``--DDP-impl torch``: PyTorch DDP, bucketed all-reduce overlapped with the
  last backward; ``local``: Megatron's own, one all-reduce after the pipeline flush) and fp16
  training (``--fp16``, without ``--accumulate-allreduce-grads-in-fp32``: gradients are kept and
  all-reduced in fp16, so the model state is ``mixed_adam``, 2 + 2 + 12 B per parameter);
* micro-batch: 1 where neither the row nor its source's scripts give one;
* the NeMo GPT-3 175B rows (``dgxc-*``) run NVIDIA's launcher configuration
  (NeMo-Framework-Launcher ``conf/training/gpt3/175b.yaml``): sequence parallelism, selective
  recompute, the distributed optimizer (``distributed_fused_adam``) and Transformer Engine's
  fused (flash) attention;
* Korthikanti et al. and Megatron SC21 (2021-22) ran without FlashAttention and without the
  distributed optimizer, as the rows' sources describe; SC21 predates sequence parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

from mvopt.cluster.gpus import GpuSpec, get_gpu, load_published
from mvopt.config import ParallelismConfig
from mvopt.workload.models import ModelSpec, decoder_model

__all__ = ["PublishedRun", "published_runs", "published_run", "SC21_TABLE1", "TORCH_DDP_BUCKET_MB"]


# Megatron SC21 (Narayanan et al., arXiv:2104.04473) Table 1: settings of the runs that the table
# does not give, from the artifact scripts in NVIDIA/Megatron-LM examples/sc21/ ("scripts that were
# used to produce the results in the Megatron paper"): run_table_1.sh sets MBS, DDP and
# MEGATRON_EXTRA_PARAMS per model size (every size: "--activations-checkpoint-method uniform",
# later renamed "--recompute-method uniform", i.e. full recomputation); CONFIG.sh passes
# "--fp16 --loss-scale 8192" to every run and no --accumulate-allreduce-grads-in-fp32.
# Megatron-LM's arguments.py turns fp32 gradient accumulation / all-reduce on only for --bf16
# and asserts that it runs with --DDP-impl local, so the torch-DDP rows cannot have used it either.
SC21_TABLE1: dict[str, dict] = {
    # row: micro-batch, layers per virtual stage (None: 1F1B), DDP implementation, and the
    # script's model / layout (checked against the row: layers, hidden, heads, tp, pp, gbs)
    "megatron-sc21-t1-1.7b": dict(mbs=16, layers_per_virtual_stage=None, ddp="torch",
                                  check=(24, 2304, 24, 1, 1, 512)),
    "megatron-sc21-t1-7.5b": dict(mbs=16, layers_per_virtual_stage=None, ddp="torch",
                                  check=(36, 4096, 32, 4, 1, 512)),
    "megatron-sc21-t1-39.1b": dict(mbs=4, layers_per_virtual_stage=None, ddp="local",
                                   check=(48, 8192, 64, 8, 2, 1536)),
    "megatron-sc21-t1-145.6b": dict(mbs=2, layers_per_virtual_stage=5, ddp="local",
                                    check=(80, 12288, 96, 8, 8, 2304)),
}
SC21_SOURCE = ("NVIDIA/Megatron-LM examples/sc21/run_table_1.sh (MBS, DDP, --num-layers-per-virtual-"
               "pipeline-stage) and CONFIG.sh (--fp16 --loss-scale 8192)")
TORCH_DDP_BUCKET_MB = 25.0      # torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=25), its default


@dataclass(frozen=True)
class PublishedRun:
    """One measured training configuration."""

    name: str
    source: str
    label: str
    gpu: GpuSpec
    model: ModelSpec
    parallel: ParallelismConfig
    gpus: int
    cluster: str
    t_iter_s: float
    t_iter_full_recompute_s: float | None
    flash_attention: bool
    assumptions: tuple[str, ...]
    precision: str = "bf16_fp32_grad"      # mvopt.workload.memory.PRECISIONS key of the run's model state
    ddp: str = "local"                     # "torch": PyTorch DDP (bucketed, overlapped); "local": Megatron's

    def full_recompute(self) -> ParallelismConfig:
        """The same layout with full activation recomputation (the rows' second time)."""
        d = {f: getattr(self.parallel, f) for f in self.parallel.__dataclass_fields__}
        d["recompute"] = "full"
        return ParallelismConfig(**d)


def _run(row: dict) -> PublishedRun:
    m, p = row["model"], row["parallel"]
    assumptions = []
    mbs = row.get("mbs")
    virtual = p.get("virtual_stages", 1)
    precision, ddp = "bf16_fp32_grad", "local"
    sc21 = SC21_TABLE1.get(row["name"])
    if sc21 is not None:
        got = (m["layers"], m["hidden"], m["heads"], p["tp"], p["pp"], row["gbs"])
        if got != sc21["check"]:
            raise ValueError(f"published.yaml row {row['name']}: {got} differs from the SC21 script's "
                             f"{sc21['check']} (layers, hidden, heads, tp, pp, gbs)")
        if mbs is None:
            mbs = sc21["mbs"]
        if sc21["layers_per_virtual_stage"] and "virtual_stages" not in p:
            virtual = m["layers"] // p["pp"] // sc21["layers_per_virtual_stage"]
        precision, ddp = "mixed_adam", sc21["ddp"]
        assumptions.append(f"from {SC21_SOURCE}: micro-batch {mbs}, {virtual} model chunk(s) per stage, "
                           f"--DDP-impl {ddp}, fp16 gradients")
    if mbs is None:
        mbs = 1
        assumptions.append("micro-batch not reported: 1 assumed")
    nemo = row["name"].startswith("dgxc-")
    par = dict(tp=p["tp"], pp=p["pp"], dp=p["dp"], virtual_stages=virtual,
               micro_batch=mbs, global_batch=row["gbs"],
               sequence_parallel=p.get("sequence_parallel", False),
               recompute=p.get("recompute", "none"), distributed_optimizer=False)
    if nemo:
        par.update(sequence_parallel=True, recompute="selective", distributed_optimizer=True)
        assumptions.append("NeMo launcher gpt3/175b.yaml: sequence parallel, selective recompute, "
                           "distributed optimizer, fused (flash) attention")
    model = decoder_model(row["name"], layers=m["layers"], hidden=m["hidden"], heads=m["heads"],
                          vocab=m["vocab"], seq_len=m["seq"])
    return PublishedRun(
        name=row["name"], source=row["source"], label=row["label"], gpu=get_gpu(row["gpu"]),
        model=model, parallel=ParallelismConfig(**par), gpus=row["gpus"], cluster=row["cluster"],
        t_iter_s=float(row["t_iter_s"]), t_iter_full_recompute_s=row.get("t_iter_full_recompute_s"),
        flash_attention=nemo, assumptions=tuple(assumptions), precision=precision, ddp=ddp)


def published_runs() -> list[PublishedRun]:
    """Every ``end_to_end`` row of published.yaml, in file order."""
    return [_run(r) for r in load_published()["end_to_end"]]


def published_run(name: str) -> PublishedRun:
    """The row called ``name`` (KeyError if absent)."""
    for run in published_runs():
        if run.name == name:
            return run
    raise KeyError(name)
