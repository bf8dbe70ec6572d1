"""Check the memory model against the published configurations.

    python experiments/validate_memory.py             # writes the memory section of docs/validation.md
    python experiments/validate_memory.py --no-write  # print only

1. Every ``end_to_end`` configuration of published.yaml ran, so it must fit in its GPU.
2. Korthikanti et al. (arXiv:2205.05198, Figure 1) show that their 22B and 175B configurations do
   not fit in an 80 GB A100 with tensor parallelism alone (no sequence parallelism, no
   recomputation); with sequence parallelism and selective recomputation, or with full
   recomputation, they ran (Table 5 times). The model must agree on every variant.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import fields
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _report import provenance, update_section  # noqa: E402

from mvopt.config import ParallelismConfig  # noqa: E402
from mvopt.workload import DEFAULT_RESERVE_BYTES, num_microbatches, peak_memory, published_runs  # noqa: E402

GiB = 2**30


def _with(par: ParallelismConfig, **changes) -> ParallelismConfig:
    return ParallelismConfig(**{**{f.name: getattr(par, f.name) for f in fields(par)}, **changes})


def _layout(par: ParallelismConfig, flash: bool) -> str:
    bits = [f"TP{par.tp} PP{par.pp}" + (f"x{par.virtual_stages}" if par.virtual_stages > 1 else "")
            + f" DP{par.dp}", f"mbs {par.micro_batch}"]
    bits += [name for name, on in (("SP", par.sequence_parallel), ("dist-opt", par.distributed_optimizer),
                                   ("flash", flash)) if on]
    bits.append(f"recompute {par.recompute}")
    return ", ".join(bits)


def _max_micro_batch(run, limit: int = 64) -> int:
    """Largest micro-batch (keeping the micro-batch count) that still fits; 0 if none."""
    best, m = 0, num_microbatches(run.parallel)
    for mbs in range(1, limit + 1):
        par = _with(run.parallel, micro_batch=mbs, global_batch=mbs * run.parallel.dp * m)
        if not peak_memory(run.model, par, run.gpu, precision=run.precision,
                           flash_attention=run.flash_attention).fits:
            break
        best = mbs
    return best


def published_rows() -> tuple[list[str], int]:
    lines = ["| row | GPU | layout | peak GiB (stage) | capacity GiB | fits | largest mbs that fits |",
             "|---|---|---|---:|---:|:-:|---:|"]
    failures = 0
    for run in published_runs():
        peak = peak_memory(run.model, run.parallel, run.gpu, precision=run.precision,
                           flash_attention=run.flash_attention)
        failures += not peak.fits
        note = " *" if run.assumptions else ""
        lines.append(f"| {run.name}{note} | {run.gpu.name} | {_layout(run.parallel, run.flash_attention)} | "
                     f"{peak.total_bytes / GiB:.1f} ({peak.stage}) | {peak.capacity_bytes / GiB:.0f} | "
                     f"{'yes' if peak.fits else '**no**'} | {_max_micro_batch(run)} |")
    return lines, failures


VARIANTS = [  # (label, changes, expected to fit)
    ("tensor parallel only (Korthikanti's baseline)", dict(sequence_parallel=False, recompute="none"), False),
    ("+ sequence parallel + selective recompute (as run)", dict(sequence_parallel=True, recompute="selective"), True),
    ("full recompute (as run, Table 5)", dict(sequence_parallel=False, recompute="full"), True),
]


def korthikanti_rows() -> tuple[list[str], int]:
    lines = ["| row | variant | peak GiB | activations GiB | expected | model | agrees |",
             "|---|---|---:|---:|:-:|:-:|:-:|"]
    disagreements = 0
    for run in published_runs():
        if not run.name.startswith("korthikanti-"):
            continue
        for label, changes, expected in VARIANTS:
            par = _with(run.parallel, **changes)
            peak = peak_memory(run.model, par, run.gpu, precision=run.precision,
                               flash_attention=run.flash_attention)
            ok = peak.fits == expected
            disagreements += not ok
            lines.append(f"| {run.name} | {label} | {peak.total_bytes / GiB:.1f} | "
                         f"{peak.activations_bytes / GiB:.1f} | {'fits' if expected else 'does not fit'} | "
                         f"{'fits' if peak.fits else 'does not fit'} | {'yes' if ok else '**no**'} |")
    return lines, disagreements


def report(command: str) -> str:
    rows, failures = published_rows()
    variants, disagreements = korthikanti_rows()
    assumptions = sorted({a for r in published_runs() for a in r.assumptions})
    return f"""## Memory model

Model: `mvopt.workload.memory` (model state per the bytes-per-parameter table of `published.yaml`,
18 B/parameter or 6 + 12/d with the distributed optimizer, 16 B for the fp16 SC21 rows (`mixed_adam`); Korthikanti activations per layer
times the layers in flight on each pipeline stage; output-layer and recompute transients;
{DEFAULT_RESERVE_BYTES / GiB:g} GiB reserve). Capacity is the data-sheet size read as GiB.

{provenance(command)}

### Every published configuration fits ({len(rows) - 2 - failures} of {len(rows) - 2})

{chr(10).join(rows)}

\\* settings the row does not state, filled in by `mvopt.workload.published`:
{chr(10).join(f"- {a}" for a in assumptions)}

### Korthikanti et al.: which variants fit in an 80 GB A100 ({disagreements} disagreements)

{chr(10).join(variants)}
"""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/validation.md alone")
    args = ap.parse_args(argv)
    text = report("python experiments/validate_memory.py")
    print(text)
    if not args.no_write:
        update_section(HERE.parent / "docs" / "validation.md", "memory", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
