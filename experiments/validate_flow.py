"""Flow level against packet level on random trials of the shipped use-case spaces.

    python experiments/validate_flow.py                        # 200 trials per space, packet level on the CPU
    python experiments/validate_flow.py --backend gpu --flow-backend gpu   # on a GPU machine
    python experiments/validate_flow.py --spaces quickstart --trials 40    # a toy-size check (minutes)

For each space, ``--trials`` points are sampled uniformly with the space's own sampler
(:meth:`mvopt.optimize.space.SearchSpace.sample`, seed ``--seed``); the feasible ones (valid,
within the space's constraints, fitting in GPU memory) are simulated at flow level
(:func:`mvopt.flow.simulate`) and at packet level (:func:`mvopt.engine.simulate`, ``--backend``),
each level as one batch. The objective compared is the one the optimizer sees: a training
workload's iteration time, any other workload's makespan. Reported per space: the relative error
|flow - packet| / packet (median, 90th percentile, worst), Spearman's rho between the two
levels' values, and how many of the packet level's best 10 are among the flow level's best 30
(of the trials both levels finished). Results go to experiments/results/validate_flow.json and
a markdown table (``--markdown``, default experiments/results/validate_flow.md), from which the
flow-level section of docs/validation.md is written.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
sys.path.insert(0, str(ROOT))

from _report import provenance  # noqa: E402

SPACES = ("topology", "parallelism", "collective", "congestion_control")    # the use cases (default)
CHOICES = SPACES + ("quickstart",)
RESULTS = ROOT / "experiments" / "results"


def objective(built, result) -> float | None:
    """Iteration time (training) or makespan (other workloads) in seconds; None unless done."""
    from mvopt.build import training_report

    if result.status != "done":
        return None
    if built.plan is not None:
        return float(training_report(built.plan, result)["iteration_time_s"])
    return result.makespan_s


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Spearman's rank correlation (ties get their average rank)."""
    from scipy.stats import spearmanr

    return float(spearmanr(a, b).statistic) if a.size > 2 else float("nan")


def top_overlap(flow: np.ndarray, packet: np.ndarray, best: int = 10, among: int = 30) -> int:
    """How many of the packet level's `best` lowest values are among the flow level's `among` lowest."""
    return len(set(np.argsort(packet, kind="stable")[:best].tolist())
               & set(np.argsort(flow, kind="stable")[:among].tolist()))


def validate_space(name: str, trials: int, seed: int, backend: str, flow_backend: str) -> dict:
    """Sample, build and simulate one space at both levels; the per-trial records and summary."""
    from mvopt.engine import simulate as packet_simulate
    from mvopt.build import build_all
    from mvopt.flow import simulate as flow_simulate
    from mvopt.optimize.space_file import load_space

    space = load_space(ROOT / "search_spaces" / f"{name}.yaml")
    cands = [c for c in space.sample(trials, seed=seed) if c.feasible]
    built = [(c, b) for c, (b, _reason, _v) in zip(cands, build_all([c.config for c in cands])) if b is not None]
    exps = [b.experiment for _, b in built]
    t0 = time.perf_counter()
    flow = flow_simulate(exps, backend=flow_backend)
    flow_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    packet = packet_simulate(exps, backend=backend)
    packet_s = time.perf_counter() - t0
    records = []
    for (c, b), fr, pr in zip(built, flow, packet):
        records.append({"params": c.params, "flow_s": objective(b, fr), "packet_s": objective(b, pr),
                        "flow_status": fr.status, "packet_status": pr.status})
    both = [r for r in records if r["flow_s"] is not None and r["packet_s"] is not None]
    f = np.asarray([r["flow_s"] for r in both])
    p = np.asarray([r["packet_s"] for r in both])
    err = np.abs(f - p) / p if both else np.zeros(0)
    summary = {
        "space": name, "sampled": trials, "simulated": len(records), "compared": len(both),
        "median_error": float(np.median(err)) if err.size else None,
        "p90_error": float(np.percentile(err, 90)) if err.size else None,
        "worst_error": float(err.max()) if err.size else None,
        "mean_signed_error": float(np.mean((f - p) / p)) if err.size else None,
        "spearman_rho": spearman(f, p) if err.size else None,
        "best10_in_flow_best30": top_overlap(f, p) if err.size >= 30 else None,
        "flow_wall_s": flow_s, "packet_wall_s": packet_s,
    }
    return {"summary": summary, "records": records}


def markdown(summaries: list[dict], prov: str) -> str:
    """The table the docs' section is written from."""
    def pct(x):
        return "n/a" if x is None else f"{100 * x:.1f} %"

    lines = ["| space | trials compared | median error | p90 error | worst error | Spearman's rho | "
             "packet best 10 in flow best 30 | flow / packet wall |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for s in summaries:
        rho = "n/a" if s["spearman_rho"] is None else f"{s['spearman_rho']:.3f}"
        top = "n/a" if s["best10_in_flow_best30"] is None else f"{s['best10_in_flow_best30']} / 10"
        lines.append(f"| {s['space']} | {s['compared']} of {s['sampled']} | {pct(s['median_error'])} | "
                     f"{pct(s['p90_error'])} | {pct(s['worst_error'])} | {rho} | {top} | "
                     f"{s['flow_wall_s']:.1f} s / {s['packet_wall_s']:.1f} s |")
    lines += ["", prov]
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spaces", default=",".join(SPACES), help=f"comma-separated (default: {','.join(SPACES)})")
    ap.add_argument("--trials", type=int, default=200, help="points sampled per space (default 200)")
    ap.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    ap.add_argument("--backend", default="cpu", help="packet-level backend: cpu, gpu, auto (default cpu)")
    ap.add_argument("--flow-backend", default="cpu", help="flow-level backend: cpu, gpu, auto (default cpu)")
    ap.add_argument("--json", type=Path, default=RESULTS / "validate_flow.json")
    ap.add_argument("--markdown", type=Path, default=RESULTS / "validate_flow.md")
    args = ap.parse_args()
    names = [s for s in args.spaces.split(",") if s]
    unknown = sorted(set(names) - set(CHOICES))
    if unknown or args.trials < 1:
        ap.error(f"--spaces: {', '.join(unknown)} not among {', '.join(CHOICES)}" if unknown
                 else f"--trials must be >= 1, not {args.trials}")
    command = "python experiments/validate_flow.py " + " ".join(sys.argv[1:])
    out = {name: validate_space(name, args.trials, args.seed, args.backend, args.flow_backend) for name in names}
    prov = provenance(command.strip())
    summaries = [v["summary"] for v in out.values()]
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"command": command.strip(), "provenance": prov, "spaces": out}, indent=1,
                                    default=str) + "\n")
    text = markdown(summaries, prov)
    args.markdown.write_text(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
