"""Render the `engine_gpu` section of docs/performance.md from the JSON files that the GPU scripts
wrote on the device machine (kept in experiments/results/gpu/, named by the commit they ran at).

    python experiments/bench_gpu.py --out OUT ...          # on a machine with an NVIDIA GPU
    python experiments/profile_gpu.py --out OUT ...
    python experiments/bench_multi_gpu.py --out OUT ...    # on a machine with 2 GPUs
    cp OUT/*.json experiments/results/gpu/NAME_COMMIT.json
    python experiments/report_gpu.py

Every number printed here is read from those files; the text around them says what they mean.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "experiments" / "results" / "gpu"
sys.path.insert(0, str(ROOT / "experiments"))

from _report import update_section  # noqa: E402

DEVICE = "one NVIDIA H200 (141 GB), 16 CPU cores (device machine `nvidia-h200`)"


def load(name: str) -> dict:
    return json.loads((RES / f"{name}.json").read_text())


def workload_a(d: dict, commit: str) -> list[str]:
    out = [f"### Workload (a): k=4 fat-tree ring all-reduce, {d['rows'][0]['mib']:g} MiB, 1500-byte packets\n",
           f"Commit `{commit}`, 2026-11-29, {DEVICE}. Command: `python experiments/bench_gpu.py --out OUT "
           "--batches 1024,4096 --cpu-batches 256 --cc none`. CPU = all 16 cores of the same machine in the "
           "same run (OpenMP, experiment-major). Run = upload + kernel + download of the result columns. "
           "(At this commit the GPU node order interleaved experiments; it no longer does, see below.)\n",
           "| backend | cc | batch | run (s) | kernel (s) | build (s) | G packet-hops/s | windows/s | experiments/hour | MiB per experiment |",
           "|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        k = f"{r['kernel_s']:.2f}" if "kernel_s" in r else "–"
        out.append(f"| {r['backend']} | {r['cc']} | {r['batch']} | {r['run_s']:.2f} | {k} | {r['build_s']:.2f} | "
                   f"{r['hops_per_s'] / 1e9:.3f} | {r['windows_per_s']:,.0f} | {r['experiments_per_hour']:,.0f} | "
                   f"{r['batch_bytes'] / r['batch'] / 2**20:.1f} |")
    gpu = max((r for r in d["rows"] if r["backend"] == "gpu"), key=lambda r: r["hops_per_s"])
    cpu = max((r for r in d["rows"] if r["backend"] == "cpu"), key=lambda r: r["hops_per_s"])
    idle = d["idle"]["gpu"]
    out.append(f"\nBest GPU {gpu['hops_per_s'] / 1e9:.3f} G packet-hops/s (batch {gpu['batch']}), CPU "
               f"{cpu['hops_per_s'] / 1e9:.3f}: ratio {gpu['hops_per_s'] / cpu['hops_per_s']:.1f}x, side by side. "
               f"Identity: {d['identity']['experiments'] - len(d['identity']['different'])} of "
               f"{d['identity']['experiments']} experiments of the mixed batch identical on CPU and GPU. "
               f"Idle windows (1,000 experiments): {idle['kernel_s'] / idle['windows'] * 1e6:.1f} µs of kernel time per "
               f"window ({idle['us_per_window']:.1f} µs with the upload and download of that run).\n")
    return out


def variants(named: list[tuple[str, str]]) -> list[str]:
    out = ["### Kernel variants and node orders (experiments/profile_gpu.py)\n",
           "Workload (a) at 8 MiB, kernel time only, each variant checked identical to the first. Variants: "
           "`minblocksN` = `__launch_bounds__(128, N)` (fewer registers, more resident threads, spills), "
           "`cache8` = switches cache at most 8 ports' next-event times (less local memory). "
           "`interleave` = node order with the same role of different experiments side by side.\n",
           "| commit | batch | variant | interleave | kernel (s) | G packet-hops/s | blocks | identical |",
           "|---|---|---|---|---|---|---|---|"]
    for name, commit in named:
        d = load(name)
        for r in d["rows"]:
            out.append(f"| `{commit}` | {d['batch']} | {r['variant']} | {r['interleave']} | {r['kernel_s']:.2f} | "
                       f"{r['ghops_per_s']:.3f} | {r['blocks']} | {r['identical']} |")
    d = load(named[-1][0])
    out.append("\nIdle windows, 1,000 experiments, kernel time per window: " + ", ".join(
        f"interleave {k}: {v['us_per_window']:.1f} µs" for k, v in d["idle"].items()) + f" (`{named[-1][1]}`).\n")
    return out


def multi_gpu(d: dict, commit: str) -> list[str]:
    out = [f"### Two GPUs (issue 8), first measurement: commit `{commit}`, device machine `nvidia-h200-x2`\n",
           "Command: `python experiments/bench_multi_gpu.py --out OUT --a-batch 2048 --a-mib 16 --b-mib 0.25 "
           "--b-count 1400`. At that commit the two GPU workers were threads of one process.\n",
           "| workload | run on | experiments | wall (s) | slowest worker run (s) | G packet-hops/s (run) | per worker: experiments / build s / run s |",
           "|---|---|---|---|---|---|---|"]
    for key, s in d["sections"].items():
        for which in ("one", "all"):
            r = s[which]
            workers = "; ".join(f"{w}: {v['experiments']} / {v['build_s']:.1f} / {v['run_s']:.1f}"
                                for w, v in r["workers"].items())
            out.append(f"| ({key}) | {r['spec']} | {r['experiments']} | {r['wall_s']:.1f} | {r['run_s']:.1f} | "
                       f"{r['hops_per_s_run'] / 1e9:.3f} | {workers} |")
        out.append(f"| ({key}) | speed-up | | {s['speedup_wall']:.2f}x | | {s['speedup_run']:.2f}x | identical: {s['identical']} |")
    out.append("\n**No speed-up**: each GPU took as long for half the experiments as one GPU for all of them, "
               "and batch building (Python, one interpreter lock) did not overlap either. Since then "
               "(`mvopt.engine.plan`), each GPU worker runs in its own process; that version has **not been "
               "measured** yet (the session's device time was spent). The target (>= 1.8x) is not met.\n")
    return out


def render() -> str:
    bc = load("bench_gpu_bc_63470b1")
    lines = ["## GPU backend vs CPU backend, same machine, same run\n",
             "Measured on the device machine on 2026-11-29; each table names the commit it ran at and the "
             "command. The JSON files are in experiments/results/gpu/; `python experiments/report_gpu.py` "
             "regenerates this section.\n"]
    lines += workload_a(load("bench_gpu_a_13fb4aa"), "13fb4aa")
    lines += variants([("profile_b1024_403e885", "403e885"), ("profile_b4096_403e885", "403e885")])
    lines += ["### Workload (b): 128-GPU clusters (16 servers x 8 NICs, rail-optimised, ring all-reduce)\n",
              f"Commit `63470b1`. Bytes per experiment (planner, exact): {bc['b']['bytes_per_experiment'] / 2**20:.1f} MiB; "
              f"**{bc['b']['fit']:,} fit in one batch** on the H200 (85% of its free memory). One experiment "
              "(4 MiB all-reduce) ran in 8.55 s (284 windows/s, from the run's log; the row was not saved). The batch of "
              f"{bc['b']['fit']:,} did not finish within the run's remaining 220 s, so the concurrency target (1,000 "
              "concurrent experiments *running*) is not demonstrated: these experiments fit, but the GPU runs their "
              "wider switches (16+ ports) slowly (see the analysis).\n",
              "Workload (c), the ~54,000-GPU fat-tree: the experiment is built in 6.7 s on one core and needs "
              "13.7 GiB (planner); it was not run on the GPU this session.\n"]
    lines += multi_gpu(load("bench_multi_gpu_a5db186"), "a5db186")
    lines.append("**Targets of issue 4 not met:** 2 x 10⁹ packet-hops/s (best 0.669 G at 4,096 experiments, "
                 "8 MiB; 0.648 G at 1,024 experiments, 64 MiB), the ~10 µs idle window (18.6 µs), 1,000 "
                 "concurrent 128-GPU experiments running (they fit: 2,823), the 54,000-GPU run.\n")
    return "\n".join(lines)


def main() -> None:
    update_section(ROOT / "docs" / "performance.md", "engine_gpu", render())


if __name__ == "__main__":
    main()
