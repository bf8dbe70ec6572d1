"""Total completion time over many draws of the random ECN marks, in both simulators.

    python experiments/hpcc_ref/draws.py                                   # ft-permutation, shipped-dcqcn, 12 draws
    python experiments/hpcc_ref/draws.py --only ls-mixed --settings dcqcn --draws 8

compare.py compares one draw of each simulator's random ECN marks (and the reference against
one more draw). Where a run's total is set by its slowest flow and that flow's number of rate
cuts, one draw says little: this script runs a scenario and setting (scenarios.py) through

* the reference as the authors run it, with ns-3's RngRun 1..N,
* mvopt, with ``simulation.seed`` 1..N (one batch, the backend of ``--backend``),

and prints each draw's total (last flow's end minus first flow's start) and, per simulator, the
minimum, median and maximum. Results: experiments/results/hpcc_ref_draws/SCENARIO-SETTING.json.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import numpy as np

import compare as C  # beside this script; it puts experiments/ on sys.path (for _report)

S = C.S
RESULTS = C.REPO / "experiments" / "results" / "hpcc_ref_draws"


def total_ns(fct: dict) -> int:
    """Last flow's end minus first flow's start (the total compare.py reports)."""
    return max(s + f for _, s, f in fct.values()) - min(s for _, s, _ in fct.values())


def reference_totals(binary: Path, folder: Path, draws: int) -> list[int]:
    out = []
    for r in range(1, draws + 1):
        C.run_reference(binary, folder, f"_authors{r}", rng_run=r)
        out.append(total_ns(C.read_fct(folder / f"fct_ref_authors{r}.txt")))
    return out


def mvopt_totals(folder: Path, config: Path, draws: int, backend: str) -> list[int]:
    """mvopt's totals with simulation.seed 1..draws, built as `mvopt simulate --hpcc-*` builds them."""
    from mvopt.commands.simulate import _hpcc_built, _hpcc_config
    from mvopt.engine import simulate

    args = SimpleNamespace(hpcc_topology=str(folder / "topology.txt"), hpcc_flows=str(folder / "flow.txt"),
                           hpcc_config=str(config), hpcc_paths=None)
    cfg, topo, flows, _ = _hpcc_config(args)
    exps = [_hpcc_built(dataclasses.replace(cfg, simulation=dataclasses.replace(cfg.simulation, seed=s)),
                        topo, flows, args).experiment for s in range(1, draws + 1)]
    out = []
    for r in simulate(exps, backend=backend):
        fct, start = np.asarray(r.flow_fct_ps, np.int64), np.asarray(r.task_start_ps, np.int64)
        out.append(int(round(((start + fct).max() - start.min()) / 1000)))
    return out


def _stats(xs: list[int]) -> str:
    us = np.asarray(xs, float) / 1e3
    return f"min {us.min():8.1f}  median {np.median(us):8.1f}  max {us.max():8.1f} us"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--only", default="ft-permutation", help="scenario name (scenarios.py)")
    ap.add_argument("--settings", default="shipped-dcqcn", help="setting (scenarios.SETTINGS)")
    ap.add_argument("--draws", type=int, default=12, help="draws per simulator (RngRun / simulation.seed 1..N)")
    ap.add_argument("--work", default="/tmp/mvopt-hpcc-ref-draws", help="folder for the runs' files")
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--out", help="results JSON (default: experiments/results/hpcc_ref_draws/SCENARIO-SETTING.json)")
    args = ap.parse_args(argv)
    binary = C.reference_binary()
    if binary is None:
        print("draws.py: the HPCC simulator is not built: run experiments/hpcc_ref/build.sh "
              "(or set HPCC_REF_BIN / HPCC_REF_DIR)", file=sys.stderr)
        return 2
    by_name = {sc.name: sc for sc in S.scenarios(1.0)}
    if args.only not in by_name or args.settings not in S.SETTINGS or args.draws < 1:
        print(f"draws.py: --only must be one of {sorted(by_name)}, --settings one of {sorted(S.SETTINGS)}, "
              f"--draws >= 1 (got {args.only!r}, {args.settings!r}, {args.draws})", file=sys.stderr)
        return 2
    folder = Path(args.work) / args.only / args.settings
    t0 = time.perf_counter()
    config = S.write_run(folder, by_name[args.only], S.SETTINGS[args.settings])
    totals = {"reference": reference_totals(binary, folder, args.draws),
              "mvopt": mvopt_totals(folder, config, args.draws, args.backend)}
    for name, xs in totals.items():
        print(f"{name:18s} {_stats(xs)}  draws: {' '.join(f'{x / 1e3:.1f}' for x in xs)}")
    command = (f"python experiments/hpcc_ref/draws.py --only {args.only} --settings {args.settings} "
               f"--draws {args.draws}")
    from _report import provenance
    doc = {"command": command, "provenance": provenance(command), "scenario": args.only, "setting": args.settings,
           "wall_s": round(time.perf_counter() - t0, 1), "totals_ns": totals}
    out = Path(args.out) if args.out else RESULTS / f"{args.only}-{args.settings}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
