"""Render the `engine_gpu` section of docs/performance.md from the JSON files that the GPU scripts
wrote on the device machine (kept in experiments/results/gpu/, named by the commit they ran at).

    bash experiments/device_session.sh bench_a,bench       # on a machine with an NVIDIA GPU
    cp OUT/bench_a/bench_gpu.json experiments/results/gpu/bench_gpu_a_COMMIT.json
    python experiments/report_gpu.py

To show a new measurement, copy its JSON here under the name of the commit it ran at, point
`SOURCES` at it, and delete the file it replaces. Every number printed is read from those files
(and, for the bytes of workload (b) at the checked-out commit, from the planner).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RES = ROOT / "experiments" / "results" / "gpu"
sys.path.insert(0, str(ROOT / "experiments"))

from _report import update_section  # noqa: E402

# The file behind each table (experiments/results/gpu/NAME.json) and the commit it ran at.
SOURCES = {
    "a": ("bench_gpu_a_65a911c", "65a911c"),
    "idle_by_mode": ("profile_lanes_b4096_e295cb8", "e295cb8"),
    # the variant of that file that ran today's default (there the switch lanes were a variant)
    "idle_default_variant": "groups-lanes",
    "b_c": ("bench_gpu_9500e4d", "9500e4d"),
    "b_now": ("profile_lanes20_b_65a911c", "65a911c"),
    "multi": ("bench_multi_gpu_e446fa3", "e446fa3"),
}
H200 = "`nvidia-h200` (one H200, 16 CPU cores)"


def load(name: str) -> dict:
    return json.loads((RES / f"{name}.json").read_text())


def best(rows: list[dict], backend: str) -> dict:
    return max((r for r in rows if r["backend"] == backend), key=lambda r: r["hops_per_s"])


def workload_a() -> list[str]:
    name, commit = SOURCES["a"]
    d = load(name)
    cores = d["cores"]
    gpu_batches = ",".join(str(b) for b in sorted({r["batch"] for r in d["rows"] if r["backend"] == "gpu"}))
    out = [f"### Workload (a): k=4 fat-tree ring all-reduce, {d['rows'][0]['mib']:g} MiB, 1500-byte packets\n",
           f"Commit `{commit}`, {H200}; `{name}.json`. Command: `python experiments/bench_gpu.py --out OUT "
           f"--sections a,idle --batches {gpu_batches} --cpu-batches 256 --cc none --mib 64 --budget-s 160` "
           f"(device step `bench_a`). CPU = all {cores} cores of the same machine in the same run (OpenMP, "
           "experiment-major). Run = upload + kernel + download of the result columns. Launch = the GPU "
           "launch mode that ran.\n",
           "| backend | cc | batch | launch | run (s) | kernel (s) | build (s) | G packet-hops/s | windows/s | "
           "experiments/hour | MiB per experiment |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        k = f"{r['kernel_s']:.2f}" if "kernel_s" in r else "–"
        out.append(f"| {r['backend']} | {r['cc']} | {r['batch']} | {r.get('launch', '–')} | {r['run_s']:.2f} | {k} | "
                   f"{r['build_s']:.2f} | {r['hops_per_s'] / 1e9:.3f} | {r['windows_per_s']:,.0f} | "
                   f"{r['experiments_per_hour']:,.0f} | {r['batch_bytes'] / r['batch'] / 2**20:.1f} |")
    gpu, cpu = best(d["rows"], "gpu"), best(d["rows"], "cpu")
    idle = d["idle"]["gpu"]
    out.append(f"\nBest GPU **{gpu['hops_per_s'] / 1e9:.3f} G packet-hops/s** (batch {gpu['batch']}), CPU "
               f"{cpu['hops_per_s'] / 1e9:.3f} on {cores} cores: **{gpu['hops_per_s'] / cpu['hops_per_s']:.1f}x**, "
               f"side by side. Idle windows (1,000 experiments, launch {idle['launch']}): "
               f"**{idle['kernel_s'] / idle['windows'] * 1e6:.1f} µs** of kernel time per window "
               f"({idle['us_per_window']:.1f} µs with the upload and download of that run); CPU "
               f"{d['idle']['cpu']['us_per_window']:.1f} µs.\n")
    return out


def idle_by_mode() -> list[str]:
    """The idle window of 1,000 experiments under each launch mode, from a profile_gpu.py run."""
    name, commit = SOURCES["idle_by_mode"]
    default = SOURCES["idle_default_variant"]
    idle = load(name)["idle"]
    # the launch modes there are (that file measured two more, removed since: decisions/0020)
    labels = {"auto interleave=False": "auto (runs groups)", f"{default} interleave=False": "groups (the default)",
              "graph interleave=False": "graph", "graph, 1 experiment": "graph, one experiment alone"}
    marginal = idle[f"{default}, marginal"]
    out = ["### The idle window by launch mode\n",
           f"Commit `{commit}`, {H200}; `{name}.json`. Command at that commit: `python experiments/profile_gpu.py "
           "--out OUT --mib 8 --batch 4096 --variants groups --idle-variants groups`; today `python "
           "experiments/profile_gpu.py --out OUT --mib 8 --batch 4096` (device step `profile`) measures each "
           "launch mode's marginal idle window. 1,000 experiments of 2,000 delay tasks each, no packet: what a "
           "window costs when nothing is sent (docs/engine.md, \"How the kernels run a window\"). The modes `coop` "
           "and `async` of that run no longer exist ([decisions/0020](decisions/0020-gpu-launch-modes-coop-and-"
           "async-removed.md)).\n",
           "| launch mode | kernel time per window (µs) |", "|---|---:|"]
    for key, label in labels.items():
        out.append(f"| {label} | {idle[key]['us_per_window']:.1f} |")
    out.append(f"\nMarginal cost of an idle window under the default (a run of 6,000 windows against one of "
               f"2,000, so that what a run pays once cancels out; median of three pairs): "
               f"**{marginal['us_per_window']:.1f} µs**.\n")
    return out


def current_bytes_128(compact: bool = False) -> int:
    """The planner's bytes for workload (b)'s experiment at the checked-out commit (`compact`:
    with compact packet slots)."""
    from bench_gpu import cluster128_config
    from mvopt.build import build_experiment
    from mvopt.config import load_config
    from mvopt.engine.sizing import batch_bytes, experiment_counts
    return batch_bytes(experiment_counts(build_experiment(load_config(cluster128_config(0.25))), compact=compact))


def workload_b() -> list[str]:
    name, commit = SOURCES["b_c"]
    d = load(name)
    b = d["b"]
    gpu_batches = ",".join(str(x) for x in sorted({r["batch"] for r in d["rows"] if r["backend"] == "gpu"}))
    out = ["### Workload (b): 128-GPU clusters (16 servers x 8 NICs, rail-optimised, ring all-reduce of 0.25 MiB)\n",
           f"Commit `{commit}`, {H200}; `{name}.json`. Command: `python experiments/bench_gpu.py --out OUT "
           f"--sections identity,idle,a,b,c --batches {gpu_batches} --cpu-batches 256 --cc none --mib 64 "
           f"--b-mib 0.25 --b-max 1200 --budget-s 250` (device step `bench`). Bytes per experiment at that commit (planner, "
           f"exact): {b['bytes_per_experiment'] / 2**20:.1f} MiB. The CPU row with one experiment per core is a "
           "partial run (its first windows only).\n",
           "| backend | experiments | launch | status | run (s) | upload / kernel (s) | build (s) | G packet-hops/s | windows/s |",
           "|---|---|---|---|---|---|---|---|---|"]
    for r in b["rows"]:
        uk = f"{r['upload_s']:.2f} / {r['kernel_s']:.2f}" if "kernel_s" in r else "–"
        out.append(f"| {r['backend']} | {r['batch']} | {r.get('launch', '–')} | "
                   f"{', '.join(r['status'])}{' (partial)' if r['partial'] else ''} | {r['run_s']:.2f} | {uk} | "
                   f"{r['build_s']:.2f} | {r['hops_per_s'] / 1e9:.3f} | {r['windows_per_s']:,.0f} |")
    identity = d["identity"]
    big = max((r for r in b["rows"] if r["backend"] == "gpu"), key=lambda r: r["batch"])
    now_name, now_commit = SOURCES["b_now"]
    now_rows = load(now_name)["rows"]
    # profile_gpu.py names a row by its launch mode ("mode"; files measured before: "variant")
    now = max(r["ghops_per_s"] for r in now_rows if r.get("mode", r.get("variant")) == "groups")
    full, compact = current_bytes_128(), current_bytes_128(compact=True)
    free = b["fit"] * b["bytes_per_experiment"]     # the planner's share of the GPU's free memory
    out.append(f"\n**{big['batch']:,} concurrent 128-GPU experiments run to the end in one batch** on one H200, "
               f"{big['kernel_s']:.1f} s of kernel time. In the same run "
               f"{identity['experiments'] - len(identity['different'])} of {identity['experiments']} experiments "
               "of a mixed batch (four topology kinds, every congestion control, ECMP and spraying, PFC on and off) were identical on the CPU and the GPU. "
               f"At `{now_commit}` (the groups launch mode and switch lanes; `{now_name}.json`, `python "
               f"experiments/profile_gpu.py --out OUT --workload b --mib 0.25 --batch {load(now_name)['batch']} "
               f"--modes groups --no-idle`) the same batch runs at **{now:.3f} G packet-hops/s** of "
               f"kernel time. At the checked-out commit the planner counts {full / 2**20:.1f} MiB per experiment, "
               f"so about {int(free / full):,} fit in the same memory; with compact packet slots (docs/engine.md, "
               f"\"Packet slots\") {compact / 2**20:.1f} MiB, about {int(free / compact):,}.\n")
    return out


def workload_c() -> list[str]:
    name, commit = SOURCES["b_c"]
    c = load(name)["c"]
    out = ["### Workload (c): one ~54,000-GPU cluster (fat-tree k=60, 54,000 hosts, DCQCN)\n",
           f"Commit `{commit}`, {H200}; `{name}.json`, the command of (b). Every host sends 256 KiB to the "
           f"host one pod over. Experiment built in {c['build_experiment_s']:.1f} s. The CPU row is the same "
           "experiment on all cores of the machine.\n",
           "| backend | status | windows | run (s) | G packet-hops/s | windows/s | GiB |",
           "|---|---|---|---|---|---|---|"]
    for r in c["rows"]:
        out.append(f"| {r['backend']} | {', '.join(r['status'])} | {r['windows']} | {r['run_s']:.2f} | "
                   f"{r['hops_per_s'] / 1e9:.3f} | {r['windows_per_s']:,.0f} | {r['batch_bytes'] / 2**30:.2f} |")
    g, cpu = c["rows"][0], c["rows"][1]
    out.append(f"\n**The 54,000-GPU experiment runs on one H200**: {g['run_s']:.1f} s on the GPU, "
               f"{cpu['run_s']:.1f} s on the CPU's cores ({cpu['run_s'] / g['run_s']:.1f}x).\n")
    return out


def multi_gpu() -> list[str]:
    name, commit = SOURCES["multi"]
    d = load(name)
    out = ["### Two GPUs\n",
           f"Commit `{commit}`, `nvidia-h200-x2`; `{name}.json`. Command: `python experiments/bench_multi_gpu.py "
           "--out OUT --a-batch 2048 --a-mib 16 --b-mib 0.25 --b-count 2800` (device step `multi`). One GPU = the "
           "batch on `gpu:0`; two = `gpu:0,1`, one worker process per GPU, experiments balanced by estimated "
           "cost, results merged in input order and compared with the one-GPU results. Run = the slowest "
           "worker's simulation time (its sub-batches' upload, kernels and download); wall = the whole call, "
           "with building the batches and sending the experiments to the worker processes; busy = a worker's "
           "build + run.\n",
           "| workload | run on | experiments | wall (s) | run (s) | G packet-hops/s (run) | per worker: "
           "experiments / sub-batches / build s / run s / busy s |",
           "|---|---|---|---|---|---|---|"]
    for key, s in d["sections"].items():
        for which in ("one", "all"):
            r = s[which]
            workers = "; ".join(f"{w}: {v['experiments']} / {v['sub_batches']} / {v['build_s']:.1f} / {v['run_s']:.1f} / "
                                f"{v['busy_s']:.1f}" for w, v in r["workers"].items())
            out.append(f"| ({key}) | {r['spec']} | {r['experiments']} | {r['wall_s']:.1f} | {r['run_s']:.1f} | "
                       f"{r['hops_per_s_run'] / 1e9:.3f} | {workers} |")
        out.append(f"| ({key}) | speed-up | | {s['speedup_wall']:.2f}x | | **{s['speedup_run']:.2f}x** | "
                   f"identical: {s['identical']} |")
    run = " and ".join(f"{s['speedup_run']:.2f}x" for s in d["sections"].values())
    wall = " and ".join(f"{s['speedup_wall']:.2f}x" for s in d["sections"].values())
    out.append(f"\nSimulated packet-hops/s scale by {run} on two GPUs; the wall-clock speed-up ({wall}) also "
               "counts building the batches in Python and sending the experiments to the worker processes.\n")
    return out


def render() -> str:
    lines = ["## GPU backend vs CPU backend, same machine, same run\n",
             "Each table names the commit it ran at, the JSON file in experiments/results/gpu/ it is read from "
             "and the command; `python experiments/report_gpu.py` regenerates this section.\n"]
    for part in (workload_a, idle_by_mode, workload_b, workload_c, multi_gpu):
        lines += part()
    return "\n".join(lines)


def main() -> None:
    update_section(ROOT / "docs" / "performance.md", "engine_gpu", render())


if __name__ == "__main__":
    main()
