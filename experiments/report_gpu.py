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



def load(name: str) -> dict:
    return json.loads((RES / f"{name}.json").read_text())


def workload_a(d: dict, commit: str, machine: str, before: list[tuple[dict, str, str]] = (),
               options: str = "--sections identity,idle,a,b,c {batches} --cpu-batches 256 --cc none --mib 64 "
                              "--b-mib 0.25 --b-max 1200 --budget-s 250") -> list[str]:
    """`options`: the bench_gpu.py command's options ({batches}: its --batches)."""
    cores = d.get("cores", 32)
    gpu_batches = sorted({r["batch"] for r in d["rows"] if r["backend"] == "gpu"})
    batches = f"--batches {','.join(str(b) for b in gpu_batches)}"
    out = [f"### Workload (a): k=4 fat-tree ring all-reduce, {d['rows'][0]['mib']:g} MiB, 1500-byte packets\n",
           f"Commit `{commit}`, {machine}. Command: `python experiments/bench_gpu.py --out OUT "
           f"{options.format(batches=batches)}`. CPU = all {cores} cores of the same machine in the same run (OpenMP, experiment-major). "
           "Run = upload + kernel + download of the result columns. Launch = the GPU launch mode that ran.\n",
           "| backend | cc | batch | launch | run (s) | kernel (s) | build (s) | G packet-hops/s | windows/s | experiments/hour | MiB per experiment |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in d["rows"]:
        k = f"{r['kernel_s']:.2f}" if "kernel_s" in r else "–"
        out.append(f"| {r['backend']} | {r['cc']} | {r['batch']} | {r.get('launch', '–')} | {r['run_s']:.2f} | {k} | "
                   f"{r['build_s']:.2f} | {r['hops_per_s'] / 1e9:.3f} | {r['windows_per_s']:,.0f} | "
                   f"{r['experiments_per_hour']:,.0f} | {r['batch_bytes'] / r['batch'] / 2**20:.1f} |")
    gpu = max((r for r in d["rows"] if r["backend"] == "gpu"), key=lambda r: r["hops_per_s"])
    cpu = max((r for r in d["rows"] if r["backend"] == "cpu"), key=lambda r: r["hops_per_s"])
    idle = d["idle"]["gpu"]
    out.append(f"\nBest GPU {gpu['hops_per_s'] / 1e9:.3f} G packet-hops/s (batch {gpu['batch']}), CPU "
               f"{cpu['hops_per_s'] / 1e9:.3f} on {cores} cores: ratio {gpu['hops_per_s'] / cpu['hops_per_s']:.1f}x, side by "
               "side. " + (f"Identity: {d['identity']['experiments'] - len(d['identity']['different'])} of "
                           f"{d['identity']['experiments']} experiments of the mixed batch identical on CPU and GPU. "
                           if d["identity"]["experiments"] else "") +
               f"Idle windows (1,000 experiments, launch {idle.get('launch')}): "
               f"{idle['kernel_s'] / idle['windows'] * 1e6:.1f} µs of kernel time per window "
               f"({idle['us_per_window']:.1f} µs with the upload and download of that run); CPU "
               f"{d['idle']['cpu']['us_per_window']:.1f} µs.")
    for old_d, old_commit, what in before:
        old = max((r for r in old_d["rows"] if r["backend"] == "gpu"), key=lambda r: r["hops_per_s"])
        idle_old = old_d["idle"].get("gpu")
        idle_text = (f"idle {idle_old['kernel_s'] / idle_old['windows'] * 1e6:.1f} µs of kernel time per window"
                     if idle_old else "no idle windows in that run")
        out.append(f"Workload (a) in the same benchmark at `{old_commit}` ({what}): best GPU {old['hops_per_s'] / 1e9:.3f} G "
                   f"packet-hops/s (batch {old['batch']}); {idle_text}.")
    out.append("")
    return out


def block_sizes(runs: list[tuple[dict, str]], commit: str, machine: str) -> list[str]:
    """Workload (a) benchmarked with the groups mode's blocks of each size (MVOPT_GROUP_BLOCK), one
    run after the other in one device session."""
    out = [f"Blocks of the groups launch mode, workload (a) 64 MiB, commit `{commit}`, {machine}, one run after "
           "the other in one device session: `MVOPT_GROUP_BLOCK=N python experiments/bench_gpu.py --out OUT "
           "--sections a --batches 4096 --cpu-batches 256 --cc none --mib 64 --budget-s 60`.\n",
           "| threads per block | GPU batch | G packet-hops/s | CPU (256, all cores) G packet-hops/s | ratio |",
           "|---|---|---|---|---|"]
    for d, threads in runs:
        gpu = max((r for r in d["rows"] if r["backend"] == "gpu"), key=lambda r: r["hops_per_s"])
        cpu = max((r for r in d["rows"] if r["backend"] == "cpu"), key=lambda r: r["hops_per_s"])
        out.append(f"| {threads} | {gpu['batch']} | {gpu['hops_per_s'] / 1e9:.3f} | {cpu['hops_per_s'] / 1e9:.3f} | "
                   f"{gpu['hops_per_s'] / cpu['hops_per_s']:.1f}x |")
    out.append("")
    return out


def launch_modes(named: list[tuple[str, str, dict[str, str]]]) -> list[str]:
    """Rows of the profile files `named` (file, commit, {variant at that commit: its name now})."""
    out = ["### Launch modes and kernel variants (experiments/profile_gpu.py)\n",
           "Workload (a) at 8 MiB, kernel time only, every variant checked identical to the first. Launch modes: "
           "`graph` = one launch per phase, 64 windows per replayed CUDA graph (the default until `174da19`); `coop` = one "
           "cooperative launch, grid-wide barriers between the two phases; `async` = one launch without grid-wide "
           "barriers, each experiment advancing when its own nodes finished a window (the last node to report "
           "advances it); `groups` = one launch, each experiment's nodes in one block whose barrier separates "
           "the phases, the blocks of a resident grid taking slices of groups of experiments from a queue (the "
           "default, `auto`, since `174da19`, for batches whose experiments have at most 128 nodes). "
           "`minblocks4` = async capped to 128 registers for 4 blocks per SM (spills). Blocks = "
           "resident blocks of the one-launch kernels; for graph, a full grid's blocks (the rows at `1cd2b51` and "
           "`7e0e891` that steal rows ran 528 resident blocks: 4 per SM; from `8b3a370` on the rows show the grid "
           "that ran: 528 resident blocks when stealing on 4 per SM, the default until `76897a4`, 396 on 3 per SM). "
           "Measured and removed: `graph-split` (the window phase as two "
           "kernels, hosts then switches, so that the switch kernel needs 96 registers: 5 blocks per SM instead of "
           "3) and `graph, advance inside` (one launch per window, the last node of each experiment to finish "
           "advancing it, no advance launch).\n",
           "| commit | batch | variant | kernel (s) | G packet-hops/s | blocks | identical |",
           "|---|---|---|---|---|---|---|"]
    for name, commit, renames in named:
        d = load(name)
        for r in d["rows"]:
            if r["interleave"]:
                continue
            out.append(f"| `{commit}` | {d['batch']} | {renames.get(r['variant'], r['variant'])} | {r['kernel_s']:.2f} | "
                       f"{r['ghops_per_s']:.3f} | {r['blocks']} | {r['identical']} |")
    # the idle windows of the last file that measured them
    name, commit, renames = next(n for n in reversed(named) if load(n[0])["idle"])
    d = load(name)

    def label(key: str) -> str:     # "VARIANT interleave=False", or "graph, 1 experiment" (no batch)
        name = key.split(" interleave=")[0]
        return "graph, one experiment alone" if name == "graph, 1 experiment" else renames.get(name, name)

    out.append("\nIdle windows (1,000 experiments, kernel time per window, `" + commit + "`): " + ", ".join(
        f"{label(k)} {v['us_per_window']:.1f} µs" for k, v in d["idle"].items()
        if "False" in k or "experiment" in k) + ".")
    marginal = {k.split(", marginal")[0]: v for k, v in d["idle"].items() if k.endswith(", marginal")}
    if marginal:
        out.append("Marginal cost of an idle window (a run of 6,000 windows against one of 2,000, 1,000 experiments "
                   "each, so that what a run pays once, its graph capture, polls and the empty windows after its "
                   "end, cancels out; median of three pairs): " + ", ".join(
                       f"{renames.get(k, k)} {v['us_per_window']:.1f} µs" for k, v in marginal.items()) + ".")
    out.append("")
    return out


def node_orders(named: list[tuple[str, str]]) -> list[str]:
    """Rows of the profile files `named` (file, commit) that compare node orders."""
    out = ["### Node orders (experiments/profile_gpu.py --interleave)\n",
           "Workload (a) at 8 MiB, kernel time only, identical results in every order. *backend's*: the default "
           "(one experiment's nodes side by side, widest first); *role-major*: the same role of every experiment "
           "side by side (a warp's lanes then run the same code, and in a batch of one experiment repeated, the "
           "same events); *tiles of N*: role-major within groups of N consecutive experiments. *same seed*: the "
           "batch is one experiment repeated; *seeds 1..N*: ECMP paths differ, as in an optimizer's generation.\n",
           "| commit | batch | seeds | order | kernel (s) | G packet-hops/s |", "|---|---|---|---|---|---|"]
    for name, commit in named:
        d = load(name)
        seeds = "same seed" if d.get("seeds", "same") == "same" else f"seeds 1..{d['batch']}"
        for r in d["rows"]:
            order = {False: "backend's", True: "role-major"}.get(r["interleave"], f"tiles of {r['interleave']}")
            out.append(f"| `{commit}` | {d['batch']} | {seeds} | {order} | {r['kernel_s']:.2f} | {r['ghops_per_s']:.3f} |")
    out.append("")
    return out


def workload_b(runs: list[tuple[dict, str, str]]) -> list[str]:
    b = runs[0][0]["b"]
    out = ["### Workload (b): 128-GPU clusters (16 servers x 8 NICs, rail-optimised, ring all-reduce of 0.25 MiB)\n",
           "Commands: as (a) at `e446fa3`, `5c3c2fa`, `1ad0f11`, `6697865`, `7e0e891`, `84b9fed`, `76897a4` and `9500e4d`; `python experiments/bench_gpu.py --out OUT --sections "
           "identity,idle,b,c --b-mib 0.25 --b-max 1200 --budget-s 300` at `accee17`. Bytes per experiment (planner, exact): "
           f"{b['bytes_per_experiment'] / 2**20:.1f} MiB; **{b['fit']:,} fit in one batch** (85% of the free "
           "memory). CPU rows: 32 (x2 machine) or 16 cores; the row with one experiment per core is a partial run "
           "(its first windows only).\n",
           "| commit | machine | backend | experiments | launch | status | run (s) | upload / kernel (s) | build (s) | G packet-hops/s | windows/s |",
           "|---|---|---|---|---|---|---|---|---|---|---|"]
    for d, commit, machine in runs:
        for r in d["b"]["rows"]:
            uk = f"{r['upload_s']:.2f} / {r['kernel_s']:.2f}" if "kernel_s" in r else "–"
            out.append(f"| `{commit}` | {machine} | {r['backend']} | {r['batch']} | {r.get('launch', '–')} | "
                       f"{', '.join(r['status'])}{' (partial)' if r['partial'] else ''} | {r['run_s']:.2f} | {uk} | "
                       f"{r['build_s']:.2f} | {r['hops_per_s'] / 1e9:.3f} | {r['windows_per_s']:,.0f} |")
    big = [max((r for r in d["b"]["rows"] if r["backend"] == "gpu"), key=lambda r: r["batch"]) for d, _, _ in runs]
    now, now_compact = current_bytes_128(), current_bytes_128(compact=True)
    out.append(f"\n**{big[0]['batch']:,} concurrent 128-GPU experiments run to the end in one batch** on one H200. "
               f"The first run spent {big[0]['upload_s']:.1f} s of {big[0]['run_s']:.1f} s copying the batch to the GPU; "
               f"since then all-zero columns (for these clusters mostly the flows' congestion-control state) are set "
               f"on the GPU instead of copied: {big[-1]['upload_s']:.1f} s in the last run. Kernel times: "
               + ", ".join(f"{b['kernel_s']:.1f} s at `{c}`" for b, (_, c, _) in zip(big, runs))
               + " (the one at `accee17`, on another machine whose run loop still used CuPy element-wise operations, is "
               "the outlier). At the current commit the planner counts "
               f"{now / 2**20:.1f} MiB per experiment (compact flow state: flow columns for flows only, int32 packet "
               "indices, 32-byte packet records, congestion-control state 120 B per flow without HPCC), so about "
               f"{int(b['fit'] * b['bytes_per_experiment'] / now):,} would fit in the same memory; with compact "
               f"packet slots (docs/engine.md, \"Packet slots\", what `simulate` uses when full ones need more than "
               f"one batch) {now_compact / 2**20:.1f} MiB, about "
               f"{int(b['fit'] * b['bytes_per_experiment'] / now_compact):,}.\n")
    return out


def current_bytes_128(compact: bool = False) -> int:
    """The planner's bytes for workload (b)'s experiment at the checked-out commit (`compact`:
    with compact packet slots)."""
    from bench_gpu import cluster128_config
    from mvopt.build import build_experiment
    from mvopt.config import load_config
    from mvopt.engine.sizing import batch_bytes, experiment_counts
    return batch_bytes(experiment_counts(build_experiment(load_config(cluster128_config(0.25))), compact=compact))


def workload_c(d: dict, commit: str, machine: str) -> list[str]:
    c = d["c"]
    out = ["### Workload (c): one ~54,000-GPU cluster (fat-tree k=60, 54,000 hosts, DCQCN)\n",
           f"Commit `{commit}`, {machine}, the command of (a). Every host sends 256 KiB to the host one pod over. "
           f"Experiment built in {c['build_experiment_s']:.1f} s. The CPU row is the same run on all cores of the "
           "machine (here it also ran to the end within its window budget).\n",
           "| backend | status | windows | run (s) | G packet-hops/s | windows/s | GiB |",
           "|---|---|---|---|---|---|---|"]
    for r in c["rows"]:
        out.append(f"| {r['backend']} | {', '.join(r['status'])} | "
                   f"{r['windows']} | {r['run_s']:.2f} | {r['hops_per_s'] / 1e9:.3f} | {r['windows_per_s']:,.0f} | "
                   f"{r['batch_bytes'] / 2**30:.2f} |")
    g, cpu = c["rows"][0], c["rows"][1]
    out.append(f"\n**The 54,000-GPU experiment runs on one H200**: {g['run_s']:.1f} s on the GPU, "
               f"{cpu['run_s']:.1f} s on the CPU's cores ({cpu['run_s'] / g['run_s']:.1f}x). An earlier version of "
               "the scenario limited switch pools to 4,096 packet slots (13.7 GiB): the pools ran out, the last "
               "packets of 70 flows were dropped, and since lossless (PFC) mode has no retransmission timeout the "
               "experiment ended `stuck` after 355 windows, with the same packet count on the GPU (`e446fa3`) and "
               "on the CPU (run here to the end) and a diagnostic naming the flows. The default pool size "
               "(buffer / packet + 64 per port) avoids it.\n")
    return out


def multi_gpu(d: dict, commit: str) -> list[str]:
    out = [f"### Two GPUs (issue 8): commit `{commit}`, device machine `nvidia-h200-x2`\n",
           "Command: `python experiments/bench_multi_gpu.py --out OUT --a-batch 2048 --a-mib 16 --b-mib 0.25 "
           "--b-count 2800`. One GPU = the batch on `gpu:0` in this process; two = `gpu:0,1`, one worker process "
           "per GPU, experiments balanced by estimated cost, results merged in input order and compared with the "
           "one-GPU results. Run = the slowest worker's simulation time (its sub-batches' upload, kernels and "
           "download); wall = the whole call, with building the batches and sending the experiments to the worker "
           "processes; busy = a worker's build + run.\n",
           "| workload | run on | experiments | wall (s) | run (s) | G packet-hops/s (run) | per worker: experiments / sub-batches / build s / run s / busy s |",
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
    out.append("\nSimulated packet-hops/s scale by 2.12x and 1.94x (target >= 1.8x), the workers' busy times "
               "within 1.05x and 1.09x of each other. The wall-clock speed-up is lower (1.63x, 1.68x): it also counts "
               "building the experiments' batches in Python and sending the experiments to the worker processes. "
               "In (b) the two-GPU worker on GPU 0 cut its 1,400 experiments into 4 sub-batches, the other into 1: "
               "the calling process still held GPU 0's memory in CuPy's pool after the one-GPU run (a GPU run now "
               "returns its memory to the driver when it ends).\n")
    return out


def render() -> str:
    commit, middle, previous, sixth, seventh, stealing, skips, grid3, latest = (
        "e446fa3", "5c3c2fa", "1ad0f11", "6697865", "3e3ffc2", "7e0e891", "84b9fed", "76897a4", "9500e4d")
    bench, mid, prev, six, seven, steal, skip, g3, now = (load(f"bench_gpu_{c}") for c in (
        commit, middle, previous, sixth, seventh, stealing, skips, grid3, latest))
    later = load("bench_gpu_bc_accee17")
    x2, one = "`nvidia-h200-x2` (GPU 0)", "`nvidia-h200`"
    lines = ["## GPU backend vs CPU backend, same machine, same run\n",
             "Measured on the device machines from 2026-11-29 to 2026-12-01; each table names the commit it ran at and the "
             "command. The JSON files are in experiments/results/gpu/; `python experiments/report_gpu.py` "
             "regenerates this section.\n"]
    lines += workload_a(load("bench_gpu_a_65a911c"), "65a911c",
                        "`nvidia-h200`, the switch lanes' rows switch-major and the switches' serial windows "
                        "through a call (MV_LANES_ROWS_BY_SWITCH, MV_LANES_SWITCH_CALL)",
                        options="--sections a,idle {batches} --cpu-batches 256 --cc none --mib 64 --budget-s 160", before=[
        (load("bench_gpu_a_53da0c7"), "53da0c7", "a port task's own free list and the small switches' scans in "
                                                "registers (MV_LANE_POOL_REGS, MV_SCAN_SMALL), the loads of a "
                                                "transmission before its ring store; an earlier call, its CPU "
                                                "0.273 G"),
        (load("bench_gpu_a_525253f"), "525253f", "the port tasks of switches of at most 4 ports with their "
                                                "in-rings' next arrivals and times in registers (MV_LANE_SMALL, "
                                                "MV_LANE_TIMES), another `nvidia-h200`"),
        (load("bench_gpu_a_a71a5d8"), "a71a5d8", "the switch lanes' records packed by switch width and lanes for "
                                                "switches of up to 32 ports, another `nvidia-h200` (its CPU 0.275 "
                                                "against 0.231 G here)"),
        (load("bench_gpu_a_d25a6ba_lanes"), "d25a6ba", "`MVOPT_SWITCH_LANES=2` (the switch lanes, the default since "
                                                      "`745723f`), records of 96 bytes a port, lanes for switches "
                                                      "of up to 8 ports"),
        (load("bench_gpu_a_d25a6ba_serial"), "d25a6ba", "the same device call, right after, `MVOPT_SWITCH_LANES=0`: "
                                                       "the switch windows serial, the default until `745723f`; a "
                                                       "second pair in that call: 1.685 against 1.606"),
        (load("bench_gpu_a_eb85605_b256"), "eb85605", "serial switch windows, blocks of 256 threads, `nvidia-h200`"),
        (load("bench_gpu_a_609315a"), "609315a", "serial switch windows, blocks of 224 threads, `nvidia-h200`"),
        (load("bench_gpu_a_bb9ef57"), "bb9ef57", "before the link classes, the 32-byte ingress record and the "
                                                "evict-first arrival times read ahead; there 2,048 experiments: "
                                                "1.370, `nvidia-h200`"),
        (load("bench_gpu_a_b4e062d"), "b4e062d", "before the flows' paths, event pairs, the cached transmission "
                                                "class and the groups mode's blocks of 224 threads, `nvidia-h200`"),
        (load("bench_gpu_a_dddce04"), "dddce04", "the groups launch mode's nodes in their order, hashes from the "
                                                "seed per packet, `nvidia-h200`"),
        (now, latest, "the graph launch mode by default, switches' range search, no silent hosts on the GPU, "
                      "`nvidia-h200`"),
        (g3, grid3, "before ring packets went through the L2 as evict-first lines, `nvidia-h200`"),
        (skip, skips, "with the switch skips, before the kernels dropped their per-event writes (hop counter, last "
                      "event time) and row stealing moved to 3 blocks per SM, `nvidia-h200`"),
        (steal, stealing, "row stealing, before the switch skips (an arrival recomputes its ingress port only if its "
                          "PFC state changed, its egress port only if the packet became a queue head), `nvidia-h200`"),
        (seven, seventh, "read-only parameter columns and quiet switches, before row stealing, `nvidia-h200`"),
        (six, sixth, "before the read-only parameter columns and the quiet switches, `nvidia-h200`"),
        (prev, previous, "before the 64-byte port records `port_tx` / `port_in` and the ECMP mask, `nvidia-h200`"),
        (mid, middle, "before the persisted switch caches, the port records and the 256-port cache limit, `nvidia-h200`"),
        (bench, commit, "40-byte packet records, 64-bit indices, on an `nvidia-h200-x2`")])
    lines += launch_modes([("profile_b1024_e446fa3", "e446fa3", {}), ("profile_b4096_07518f9", "07518f9", {}),
                           ("profile_b4096_d547d4d", "d547d4d", {}),
                           ("profile_b4096_d32a7c7", "d32a7c7", {"graph": "graph, advance inside",
                                                                 "graph-2phase": "graph"}),
                           ("profile_b4096_3e3ffc2", "3e3ffc2", {"graph": "graph, window kernel in 128 registers (4 blocks/SM)",
                                                                 "graph-window3": "graph, window kernel bounded for 3 blocks/SM"}),
                           ("profile_b4096_variants_1cd2b51", "1cd2b51", {
                               "graph": "graph, full grid, default order", "graph-widest": "graph, full grid, widest first",
                               "graph-steal": "graph, row stealing", "graph-steal-widest": "graph, row stealing, widest first",
                               "graph-t64": "graph, blocks of 64, default order",
                               "graph-t64-widest": "graph, blocks of 64, widest first"}),
                           ("profile_b4096_7e0e891", "7e0e891", {
                               "graph": "graph (the default: row stealing and widest first on a batch of several waves)",
                               "graph-fullgrid": "graph, full grid, default order",
                               "graph-pkt16": "graph, 16-byte aligned packets (a variant removed since)"}),
                           ("profile_b4096_8b3a370", "8b3a370", {
                               "graph": "graph (the default), with the switch skips",
                               "graph-window3-steal": "graph, window kernel bounded for 3 blocks/SM",
                               "graph-tree2": "graph, tournament trees from 3 ports (MV_TREE_PORTS=2)",
                               "graph-prefetch4": "graph, ring prefetch 4 (MV_RING_PREFETCH=4, removed since)",
                               "graph-prefetch8": "graph, ring prefetch 8 (removed since)",
                               "graph-prefetch8-ports": "graph, ring prefetch 8 and port records (MV_PORT_PREFETCH=1, removed since)"}),
                           ("profile_b4096_9e6a198", "9e6a198", {
                               "graph": "graph (the default), no per-event writes",
                               "graph-eventwrites": "graph, per-event writes (hop counter, last event time) as before",
                               "graph-l2fetch32": "graph, L2 fetch granularity 32 B",
                               "graph-l2fetch64": "graph, L2 fetch granularity 64 B (the device's default)",
                               "graph-grid2": "graph, row stealing on 2 blocks/SM",
                               "graph-grid1": "graph, row stealing on 1 block/SM"}),
                           ("profile_b2048_74e0054", "74e0054", {
                               "graph": "graph, row stealing on 4 blocks/SM (the default then)",
                               "graph-grid3": "graph, row stealing on 3 blocks/SM",
                               "graph-grid2": "graph, row stealing on 2 blocks/SM"}),
                           ("profile_b4096_74e0054", "74e0054", {
                               "graph": "graph, row stealing on 4 blocks/SM (the default then)",
                               "graph-grid3": "graph, row stealing on 3 blocks/SM",
                               "graph-grid2": "graph, row stealing on 2 blocks/SM"}),
                           ("profile_b4096_pdl_85fa03e", "85fa03e", {
                               "graph": "graph, programmatic dependent launch (reverted)",
                               "graph-nopdl": "graph, plain launches",
                               "graph-pdl-notrigger": "graph, dependent launch without the early trigger"}),
                           ("profile_b4096_sharedcache_050b2d1", "050b2d1", {
                               "graph": "graph, small switches' port cache in shared memory (reverted)",
                               "graph-localcache": "graph, port cache in thread-local arrays (as before and since)",
                               "graph-window3-steal": "graph, shared-memory cache, window kernel bounded for 3 blocks/SM"}),
                           ("profile_b4096_graph1_dde8dad", "dde8dad", {
                               "graph": "graph (two launches per window)",
                               "graph1": "graph1: one launch per window, each node advancing its experiment (reverted)"}),
                           ("profile_b4096_76897a4", "76897a4", {
                               "graph": "graph (the default: row stealing on 3 blocks/SM)",
                               "graph-grid4": "graph, row stealing on 4 blocks/SM",
                               "graph-window3-steal": "graph, window kernel bounded for 3 blocks/SM, stealing on 3"}),
                           ("profile_b4096_direct_475e9d6", "475e9d6", {
                               "graph": "graph, switches' direct path (60 bytes of spills)",
                               "graph-nodirect": "graph, every packet through its egress queue",
                               "graph-direct-window3": "graph, direct path, window kernel bounded for 3 blocks/SM",
                               "graph-noeager": "graph, direct path, no eager start of delay tasks"}),
                           ("profile_b4096_stream_214a7a0", "214a7a0", {
                               "graph": "graph, ring packets evict-first (MV_RING_STREAM), direct path",
                               "graph-nostream": "graph, ring packets with the default L2 priority, direct path",
                               "graph-nodirect": "graph, ring packets evict-first, no direct path",
                               "graph-noeager": "graph, ring packets evict-first, direct path, no eager delay tasks"}),
                           ("profile_b4096_grid_c033686", "c033686", {
                               "graph-grid3": "graph, row stealing on 3 blocks/SM (the default)",
                               "graph-grid4": "graph, row stealing on 4 blocks/SM"}),
                           ("profile_b4096_9500e4d", "9500e4d", {
                               "graph": "graph (the default: ring packets evict-first, no direct path on the GPU)",
                               "graph-direct": "graph, with the direct path (the CPU's default)"}),
                           ("profile_b4096_compact_silent_309b2d1", "309b2d1", {
                               "graph": "graph (the default then)",
                               "graph-compact": "graph, compact packet slots",
                               "graph-silent": "graph, silent hosts",
                               "graph-silent-window3": "graph, silent hosts, window kernel bounded for 3 blocks/SM"}),
                           ("profile_b4096_groups_8072a30", "8072a30", {
                               "groups": "groups, first version (reports by global atomics, a block per group)",
                               "groups-t256": "groups, first version, blocks of 256 threads"}),
                           ("profile_b4096_groups_7e790a1", "7e790a1", {
                               "groups": "groups, reports in shared memory, no device-wide fence",
                               "groups-silent": "groups, reports in shared memory, silent hosts"}),
                           ("profile_b1024_acd1d75", "acd1d75", {
                               "graph": "graph (dense routing tables, silent hosts)",
                               "groups": "groups on a resident grid (the default since 174da19)"}),
                           ("profile_b4096_acd1d75", "acd1d75", {
                               "graph": "graph (dense routing tables, silent hosts)",
                               "groups": "groups on a resident grid, slices of 16 windows (the default since 174da19)",
                               "graph-search": "graph, the switches' range search instead of dense tables",
                               "auto": "auto (runs groups)"}),
                           ("profile_b4096_f127d09", "f127d09", {
                               "groups": "groups, nodes in their order (the default until f127d09)",
                               "groups-roles": "groups, a group's switches first, the widest first, then its hosts (the default since)",
                               "groups-smem": "groups, the group's port records in shared memory (removed)",
                               "groups-3sm": "groups, 3 resident blocks per SM (removed)",
                               "groups-slice64": "groups, slices of 64 windows",
                               "groups-6sm": "groups, kernel bounded for 6 blocks/SM (80 registers)",
                               "groups-8sm": "groups, kernel bounded for 8 blocks/SM (64 registers)"}),
                           ("profile_b4096_variants13a_fa8aa26", "fa8aa26", {
                               "groups": "groups, blocks of 128 threads, the flows' paths (the default since 03e33f9)",
                               "groups-nopaths": "groups, every packet routed by its switch",
                               "groups-late": "groups, next arrival cached after the arrival",
                               "groups-classcache": "groups, the cached transmission class (the default since 8c20e08)",
                               "groups-t160": "groups, blocks of 160 threads"}),
                           ("profile_b4096_variants13b_8c20e08", "8c20e08", {
                               "groups": "groups, event pairs, cached class, blocks of 160 threads",
                               "groups-onebyone": "groups, one event per turn",
                               "groups-b128": "groups, blocks of 128 threads",
                               "groups-b224": "groups, blocks of 224 threads (the default since bb9ef57)",
                               "groups-b480": "groups, blocks of 480 threads",
                               "groups-classagain": "groups, each transmission's class decided again",
                               "graph": "graph, event pairs, cached class",
                               "graph-classagain": "graph, each transmission's class decided again",
                               "graph-onebyone": "graph, one event per turn"}),
                           ("profile_b4096_blocks13c_bb9ef57", "bb9ef57", {
                               "groups": "groups, blocks of 224 threads (the default)",
                               "groups-b160": "groups, blocks of 160 threads",
                               "groups-b192": "groups, blocks of 192 threads (5 experiments, 2 blocks/SM)",
                               "groups-b256": "groups, blocks of 256 threads (7 experiments, 2 blocks/SM)"}),
                           ("profile_lanes_b4096_fef8d49", "fef8d49", {
                               "groups": "groups, blocks of 224 threads (the default)",
                               "groups-lanes": "groups, switch lanes: each port's events on any warp (MV_SWITCH_LANES 2)",
                               "groups-lanes1": "groups, switch lanes on the switch's thread (MV_SWITCH_LANES 1)"}),
                           ("profile_lanes_deferredmmu_b4096", "fef8d49 with lanes_deferredmmu_vs_9385470.patch", {
                               "groups": "groups, blocks of 224 threads (the default)",
                               "groups-lanes": "groups, switch lanes, MMU totals and freed slots once per port (reverted)"}),
                           ("profile_occupancy_b4096_fef8d49", "fef8d49", {
                               "groups": "groups, blocks of 224 threads, 2 per SM (128 registers, the default)",
                               "groups-192x3": "groups, blocks of 192 threads, 3 per SM (96 registers)",
                               "groups-160x4": "groups, blocks of 160 threads, 4 per SM (96 registers)"}),
                           ("profile_footprint_b4096_c865478", "c865478", {
                               "groups": "groups, before the link classes (a process of its own, beside the next)"}),
                           ("profile_footprint_b4096_609315a", "609315a", {
                               "groups": "groups, link classes, 32-byte port_in, evict-first arrival times (the default)",
                               "groups-ringt0": "groups, as the default but the arrival times read ahead as ordinary loads",
                               "groups-b256": "groups, as the default, blocks of 256 threads (7 experiments, 2 blocks/SM)"}),
                           ("profile_inhead_b4096_609315a_same_session", "609315a", {
                               "groups": "groups, blocks of 224 (sixteenth session, beside the next)"}),
                           ("profile_inhead_b4096_a6babcc", "a6babcc", {
                               "groups": "groups, the peer in the wire record, the ring heads in the ingress record (reverted)",
                               "groups-b256": "groups, as the row above, blocks of 256 threads"}),
                           ("profile_portrec_b4096_609315a_same_session", "609315a", {
                               "groups": "groups, blocks of 224 (sixteenth session, beside the next)"}),
                           ("profile_portrec_b4096_16d8e9d", "16d8e9d", {
                               "groups": "groups, one 128-byte record per port (reverted)"}),
                           ("profile_tree4_b4096_eb85605", "eb85605", {
                               "groups": "groups, blocks of 224 threads (the default then)",
                               "groups-tree4": "groups, blocks of 224, switches' local caches of 4 ports (MV_TREE_PORTS 4)"}),
                           ("profile_lanesglobal_b4096_92a76a6", "92a76a6", {
                               "groups": "groups, blocks of 256 threads (the default; seventeenth session)",
                               "groups-lanes": "groups, switch lanes as built in the thirteenth session, their tables "
                                               "in global memory instead of 24.6 KB of shared memory per block"}),
                           ("profile_lanes_b4096_8f60017", "8f60017", {
                               "groups-lanes": "groups, switch lanes rebuilt: a scan per in-ring, a task per port, "
                                               "the hosts' windows beside the port tasks"}),
                           ("profile_lanes_b4096_691b929", "691b929", {
                               "groups-lanes": "groups, switch lanes, the last scan of a switch decides and its last "
                                               "port task ends the window (counters per switch; reverted)"}),
                           ("profile_lanes_b4096_e295cb8", "e295cb8", {
                               "groups-lanes": "groups, switch lanes as at 8f60017, calm blocks' windows plain, "
                                               "partial warps take every entry"}),
                           ("profile_lanescalm_b4096_cf19582", "cf19582", {
                               "groups-lanes": "groups, switch lanes as at e295cb8 (another machine)",
                               "groups-lanes-nocalm": "groups, switch lanes, every window in lanes (MV_LANES_CALM 0)"}),
                           ("profile_lanesmasks_b4096_9bf263f", "9bf263f", {
                               "groups": "groups, serial switch windows (eighteenth session)",
                               "groups-lanes": "groups, switch lanes, arrivals as mask bits in the records (reverted)"}),
                           ("profile_laneschains_b4096_c4f84c0", "c4f84c0", {
                               "groups-lanes": "groups, switch lanes, arrivals chained through the ring packets "
                                               "(the same device call, alternating with the row above)"}),
                           ("profile_lanesdefault_b4096_745723f", "745723f", {
                               "groups": "groups, switch lanes (the default since 745723f)",
                               "groups-lanes-p4": "groups, switch lanes, records for switches of at most 4 ports "
                                                  "(MV_LANE_PORTS 4: 72 bytes instead of 96)",
                               "groups-serial": "groups, serial switch windows (MV_SWITCH_LANES 0)"}),
                           ("profile_lanesp4_b4096_745723f", "745723f", {
                               "groups": "groups, switch lanes (the default)",
                               "groups-lanes-p4": "groups, switch lanes, records of 72 bytes (MV_LANE_PORTS 4)"}),
                           ("profile_lanes19_b4096_a71a5d8", "a71a5d8", {
                               "groups": "groups, switch lanes, records packed by switch width (the default since aab59ce)",
                               "groups-lanes-times": "groups, switch lanes, each in-ring's next arrival time kept (MV_LANE_TIMES 1)",
                               "groups-lanes-call": "groups, switch lanes, the nodes' own windows through a call (MV_LANES_WINDOW_CALL 1)",
                               "groups-serial": "groups, serial switch windows (MV_SWITCH_LANES 0)"}),
                           ("profile_lanespairs_b4096_3387d8a", "3387d8a", {
                               "groups": "groups, switch lanes, a port task's turn an arrival and the transmission after it, "
                                         "scans loading a packet ahead (reverted)",
                               "groups-lanes-onebyone": "groups, switch lanes, a port task's turn one event (as before), scans ahead",
                               "groups-scan-plain": "groups, event pairs in port tasks, plain scans",
                               "groups-nodes-first": "groups, event pairs, the hosts' windows in the scans' phase (reverted)",
                               "groups-lanes-times": "groups, event pairs, each in-ring's next arrival time kept"}),
                           ("profile_lanessmall_b4096_274a889", "274a889", {
                               "groups": "groups, switch lanes, port tasks of switches of at most 4 ports in registers "
                                         "(MV_LANE_SMALL 4)",
                               "groups-lanes-big": "groups, switch lanes, every port task's in-rings in arrays (MV_LANE_SMALL 0)",
                               "groups-lanes-times": "groups, MV_LANE_SMALL 4 and the next arrival times kept "
                                                     "(MV_LANE_TIMES 1, the default since 525253f)"}),
                           ("profile_lanes20_b4096_f062d4d", "f062d4d", {
                               "groups": "groups, switch lanes, a transmission's loads before its ring store "
                                         "(the default since a50db7f)",
                               "groups-scan-small": "groups, the small switches' scans in registers (MV_SCAN_SMALL 1)",
                               "groups-lanes-switch-call": "groups, the switches' serial windows through a call "
                                                           "(MV_LANES_SWITCH_CALL 1)",
                               "groups-rows-by-switch": "groups, lane rows switch-major (MV_LANES_ROWS_BY_SWITCH 1)",
                               "groups-next-early": "groups, a port's next transmission from loads before the "
                                                    "ring store (MV_LANE_NEXT_EARLY 1)",
                               "groups-wide-call": "groups, the wide switches' port tasks through a call "
                                                   "(MV_LANE_WIDE_CALL 1)",
                               "groups-wire-once": "groups, a port task's wire parameters read once "
                                                   "(MV_LANE_WIRE_ONCE 1)",
                               "groups-pool-regs": "groups, a port task's own free list in registers "
                                                   "(MV_LANE_POOL_REGS 1)",
                               "groups-port-regs": "groups, MV_LANE_POOL_REGS, MV_LANE_WIRE_ONCE and "
                                                   "MV_LANE_NEXT_EARLY together"}),
                           ("profile_lanes20_b4096_53da0c7", "53da0c7", {
                               "groups": "groups, MV_LANE_POOL_REGS 1 and MV_SCAN_SMALL 1 (the GPU's defaults since)",
                               "groups-nopool-noscan": "groups, both 0 (the default before)",
                               "groups-rows-by-switch": "groups, lane rows switch-major (MV_LANES_ROWS_BY_SWITCH 1)",
                               "groups-lanes-switch-call": "groups, the switches' serial windows through a call "
                                                           "(MV_LANES_SWITCH_CALL 1)",
                               "groups-rows-switch-call": "groups, both (the defaults since 65a911c)",
                               "groups-wire-once": "groups, a port task's wire parameters read once "
                                                   "(MV_LANE_WIRE_ONCE 1)"})])
    lines += block_sizes([(load("bench_gpu_a_eb85605_b256"), "256"), (load("bench_gpu_a_eb85605_b224"), "224")],
                         "eb85605", one)
    lines += node_orders([("profile_b4096_orders_same_7c43062", "7c43062"),
                          ("profile_b4096_orders_distinct_7c43062", "7c43062")])
    lines.append("Idle windows on a fresh machine, every mode in turn in one process (`python "
                 "experiments/diag_launch.py`, `d1c39d3`, `nvidia-h200`; experiments/results/gpu/diag_launch_d1c39d3.txt): "
                 "graph 15.7–16.0 µs, coop 15.8 µs, async 23.4 µs per window of 1,000 experiments. One commit "
                 "earlier the first graph run of a process took 2,962 µs per window: the run loop used CuPy "
                 "element-wise operations, which CuPy compiles at their first use; it now checks on the host.\n")
    lines += workload_b([(bench, commit, x2), (later, "accee17", one), (mid, middle, one), (prev, previous, one),
                         (six, sixth, one), (steal, stealing, one), (skip, skips, one), (g3, grid3, one), (now, latest, one)])
    lines += workload_c(now, latest, one)
    lines += multi_gpu(load(f"bench_multi_gpu_{commit}"), commit)
    return "\n".join(lines)


def main() -> None:
    update_section(ROOT / "docs" / "performance.md", "engine_gpu", render())


if __name__ == "__main__":
    main()
