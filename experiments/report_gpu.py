"""Turn the JSON written by experiments/bench_gpu.py (on the GPU machine) into the `engine_gpu`
section of docs/performance.md.

    python experiments/bench_gpu.py --out OUT            # on a machine with an NVIDIA GPU
    cp OUT/bench_gpu.json experiments/results/bench_gpu.json
    python experiments/report_gpu.py --commit C --device "one NVIDIA H200, 16 CPU cores"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))

from _report import update_section  # noqa: E402


def render(d: dict, commit: str, device: str, date: str) -> str:
    ident = d["identity"]
    lines = [f"## GPU backend vs CPU backend, same machine, same run\n",
             f"Measured {date} at commit `{commit}` on {device}. Command: "
             f"`python experiments/bench_gpu.py --out OUT --batches 1,256,1024,4096 --cpu-batches 16,256 "
             f"--budget-s 380`, and for HPCC/DCTCP and the idle windows `--batches 1024 --cpu-batches 256 "
             f"--cc hpcc,dctcp --budget-s 200` (two runs, same machine kind; rows not listed were skipped "
             f"by the time budget).\n",
             f"**Bit identity:** {ident['experiments'] - len(ident['different'])} of {ident['experiments']} experiments of a mixed batch (fat-tree, leaf-spine, torus, dragonfly × "
             f"none/DCQCN/HPCC/DCTCP × ECMP/spray × PFC on/off, delay tasks and dependencies) gave identical "
             f"results on the CPU and the GPU (every task time, FCT, counter and max queue).\n",
             "Workload (a): k=4 fat-tree, ring all-reduce over 16 hosts, "
             f"{d['rows'][0]['mib']:g} MiB, 1500-byte packets. CPU = all {d.get('cores')} cores (OpenMP, "
             "experiment-major).\n",
             "| backend | cc | batch | run (s) | build (s) | G packet-hops/s | windows/s | experiments/hour | memory per experiment (MiB) | status |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        lines.append(f"| {r['backend']} | {r['cc']} | {r['batch']} | {r['run_s']:.2f} | {r['build_s']:.2f} | "
                     f"{r['hops_per_s'] / 1e9:.3f} | {r['windows_per_s']:,.0f} | {r['experiments_per_hour']:,.0f} | "
                     f"{r['batch_bytes'] / r['batch'] / 2**20:.1f} | {r['status']} |")
    best_gpu = max((r for r in d["rows"] if r["backend"] == "gpu"), key=lambda r: r["hops_per_s"])
    best_cpu = max((r for r in d["rows"] if r["backend"] == "cpu"), key=lambda r: r["hops_per_s"])
    lines.append(f"\nBest GPU figure {best_gpu['hops_per_s'] / 1e9:.3f} G packet-hops/s ({best_gpu['cc']}, batch "
                 f"{best_gpu['batch']}); best CPU figure {best_cpu['hops_per_s'] / 1e9:.3f} G packet-hops/s: "
                 f"ratio {best_gpu['hops_per_s'] / best_cpu['hops_per_s']:.1f}×. **The issue's target "
                 f"(2 × 10⁹ packet-hops/s) is not met** (see the analysis below).\n")
    idle = d.get("idle") or {}
    if idle:
        lines.append("**Overhead floor** (1,000 experiments whose hosts only run chains of 1 µs delay tasks: "
                     "every window idle in the network): " + "; ".join(
                         f"{b}: {v['us_per_window']:,.1f} µs per window ({v['windows']} windows)" for b, v in idle.items())
                     + ". The target (~10 µs on the GPU) is not met.\n")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", nargs="+", default=[str(ROOT / "experiments" / "results" / "bench_gpu.json"),
                                                  str(ROOT / "experiments" / "results" / "bench_gpu_hpcc_dctcp_idle.json")],
                    help="result files of bench_gpu.py runs (rows and idle figures are merged)")
    ap.add_argument("--commit", required=True)
    ap.add_argument("--device", required=True)
    ap.add_argument("--date", required=True)
    args = ap.parse_args()
    d: dict = {"rows": [], "idle": {}}
    for path in args.json:
        part = json.loads(Path(path).read_text())
        d["rows"] += part["rows"]
        d["idle"].update(part.get("idle") or {})
        d.setdefault("identity", part["identity"])
        d.setdefault("cores", part.get("cores"))
    update_section(ROOT / "docs" / "performance.md", "engine_gpu", render(d, args.commit, args.device, args.date))


if __name__ == "__main__":
    main()
