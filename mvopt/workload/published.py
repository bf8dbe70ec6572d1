"""The ``end_to_end`` rows of published.yaml as typed runs (model, GPU, parallel layout).

Rows do not state every setting the models need; the missing ones are filled here, each with its
reason, and listed in :attr:`PublishedRun.assumptions`:

* micro-batch: 1 where the row does not give one (Megatron SC21 Table 1 does not);
* the NeMo GPT-3 175B rows (``dgxc-*``) run NVIDIA's launcher configuration
  (NeMo-Framework-Launcher ``conf/training/gpt3/175b.yaml``): sequence parallelism, selective
  recompute, the distributed optimizer (``distributed_fused_adam``) and Transformer Engine's
  fused (flash) attention;
* Korthikanti et al. and Megatron SC21 (2021-22) ran without FlashAttention and without the
  distributed optimizer, as the rows' sources describe; SC21 predates sequence parallelism.
"""

from __future__ import annotations

from dataclasses import dataclass

from mvopt.config import ParallelismConfig
from mvopt.workload.gpus import GpuSpec, get_gpu, load_published
from mvopt.workload.models import ModelSpec, decoder_model

__all__ = ["PublishedRun", "published_runs", "published_run"]


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

    def full_recompute(self) -> ParallelismConfig:
        """The same layout with full activation recomputation (the rows' second time)."""
        d = {f: getattr(self.parallel, f) for f in self.parallel.__dataclass_fields__}
        d["recompute"] = "full"
        return ParallelismConfig(**d)


def _run(row: dict) -> PublishedRun:
    m, p = row["model"], row["parallel"]
    assumptions = []
    mbs = row.get("mbs")
    if mbs is None:
        mbs = 1
        assumptions.append("micro-batch not reported: 1 assumed")
    nemo = row["name"].startswith("dgxc-")
    par = dict(tp=p["tp"], pp=p["pp"], dp=p["dp"], virtual_stages=p.get("virtual_stages", 1),
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
        flash_attention=nemo, assumptions=tuple(assumptions))


def published_runs() -> list[PublishedRun]:
    """Every ``end_to_end`` row of published.yaml, in file order."""
    return [_run(r) for r in load_published()["end_to_end"]]


def published_run(name: str) -> PublishedRun:
    """The row called ``name`` (KeyError if absent)."""
    for run in published_runs():
        if run.name == name:
            return run
    raise KeyError(name)
