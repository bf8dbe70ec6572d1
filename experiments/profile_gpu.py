"""Where the GPU backend's time goes: its launch modes side by side (the megakernel-vs-launches
ablation, docs/engine.md "Ablations") and the cost of an idle window.

Runs workload (a) (k=4 fat-tree ring all-reduce, 1500-byte packets; `--workload b`: bench_gpu's
128-GPU rail-optimised clusters) as one batch under each launch mode (groups: the megakernel;
graph: one launch per phase, replayed as a CUDA graph), checks that both give identical
results, and reports kernel time, packet-hops/s and the upload / download times; then the
marginal cost of an idle window under each. With ``--ncu-once`` it runs one short launch only,
for Nsight Compute, with the kernels compiled with a line table (-lineinfo) for its source view:

    ncu --clock-control none --set full -k mv_run_groups --launch-skip 1 -c 1 \\
        -o prof python experiments/profile_gpu.py --ncu-once --batch 256 --iters 300

`--space NAME --topology KIND [--set PATH=VALUE]` profiles a shipped search space's candidates
of one cluster kind instead (the distinct ones of its first generation, up to `--batch`), as
built for the optimizer; e.g. the busy part of a leaf-spine candidate's iteration, in Nsight
Compute:

    ncu ... -k mv_run_groups --launch-skip 100 -c 1 -o prof python experiments/profile_gpu.py \
        --ncu-once --space topology --topology leaf_spine --set network.payload_bytes=32000 \
        --batch 16 --iters 400000

Writes DIR/profile_gpu.json. Needs CuPy and a GPU.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import cluster128_config, idle_experiments  # noqa: E402
from mvopt.bench import allreduce_config, parse_set, sample_generation  # noqa: E402
from mvopt.build import build_all, build_experiment  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt.engine import _gpu, build_batch  # noqa: E402
from mvopt.engine._gpu import GpuBackend  # noqa: E402
from mvopt.engine.batch import extract_results  # noqa: E402

MODES = ("groups", "graph")


def run_once(be: GpuBackend, exps, max_iters: int | None = None):
    batch = build_batch(exps)
    iters = be.run(batch, max_iters=max_iters, resumable=False)
    return extract_results(batch, iters), dict(be.last_timing)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default=".")
    ap.add_argument("--workload", choices=("a", "b"), default="a",
                    help="a: the k=4 fat-tree ring all-reduce (--cc, --seeds); b: bench_gpu's 128-GPU "
                         "rail-optimised cluster (DCQCN; rail switches of 32 ports), --mib per GPU")
    ap.add_argument("--mib", type=float, default=8.0)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--cc", default="none")
    ap.add_argument("--modes", default=",".join(MODES), help="launch modes to compare (groups, graph, auto)")
    ap.add_argument("--ncu-once", action="store_true")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--seeds", choices=("same", "distinct"), default="same",
                    help="same: the batch is one experiment repeated; distinct: experiment i has seed i + 1 "
                         "(ECMP paths differ, as in an optimizer's generation)")
    ap.add_argument("--no-idle", action="store_true", help="skip the idle windows' costs")
    ap.add_argument("--space", help="a shipped search space (with --topology): its candidates instead of --workload")
    ap.add_argument("--topology", help="the cluster kind of --space's candidates")
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE", help="--space's base experiment")
    args = ap.parse_args()
    nbytes = int(args.mib * 2**20)
    if args.space:
        if not args.topology:
            ap.error("--space needs --topology")
        configs, _, _, _ = sample_generation(args.space, args.batch, 0, parse_set(args.set), args.topology)
        distinct = [b.experiment for b, _, _ in build_all(configs) if b is not None]
        exps = [distinct[i % len(distinct)] for i in range(args.batch)]
    elif args.workload == "b":
        exps = [build_experiment(load_config(cluster128_config(args.mib)))] * args.batch
    elif args.seeds == "same":
        exps = [build_experiment(allreduce_config(args.cc, nbytes))] * args.batch
    else:
        exps = [build_experiment(allreduce_config(args.cc, nbytes, seed=i + 1)) for i in range(args.batch)]
    modes = args.modes.split(",")
    if args.ncu_once:
        # a line table maps Nsight Compute's samples to source lines; it leaves the machine code as it is
        options = _gpu.nvrtc_options
        _gpu.nvrtc_options = lambda *a, **k: options(*a, **k) + ("-lineinfo",)
        be = GpuBackend(launch=modes[0])
        run_once(be, exps[:1], max_iters=10)           # warm-up launch (skip it: --launch-skip 1)
        run_once(be, exps, max_iters=args.iters)
        return
    rows, ref = [], None
    for mode in modes:
        t = time.perf_counter()
        be = GpuBackend(launch=mode)
        be.prepare(build_batch(exps[:1]))               # the kernels, compiled now: not run time
        compile_s = time.perf_counter() - t
        run_once(be, exps[:64], max_iters=200)          # module load, first-launch costs, clocks up
        res, tm = run_once(be, exps)
        hops = sum(r.counters["packet_hops"] for r in res)
        same = ref is None or all(a.same_as(b) for a, b in zip(res, ref))
        ref = ref or res
        row = {"mode": mode, "compile_s": compile_s, **tm, "hops": hops, "ghops_per_s": hops / tm["kernel_s"] / 1e9,
               "windows": res[0].windows, "us_per_window": tm["kernel_s"] / res[0].windows * 1e6,
               "identical": same, "status": res[0].status}
        rows.append(row)
        print(f"{mode:>7} kernel {tm['kernel_s']:7.3f} s  {row['ghops_per_s']:.3f} G hops/s  upload {tm['upload_s']:.3f} s  "
              f"download {tm['download_s']:.3f} s  blocks {tm['blocks']}  identical {same}", flush=True)
    idle = {}
    # the marginal cost of an idle window: 1,000 experiments of 6,000 delay tasks against 2,000,
    # so that what a run pays once (graph capture, the polls, the empty windows after its end)
    # cancels out; the median of three pairs
    for mode in ([] if args.no_idle else modes):
        be = GpuBackend(launch=mode)
        marginal = []
        for _ in range(3):
            (r2, t2), (r6, t6) = [run_once(be, idle_experiments(1000, tasks=k)) for k in (2000, 6000)]
            marginal.append((t6["kernel_s"] - t2["kernel_s"]) / (r6[0].windows - r2[0].windows) * 1e6)
        idle[mode] = {"us_per_window": sorted(marginal)[1], "runs_us": marginal}
        print(f"idle 1000 exps {mode}, marginal (6,000 against 2,000 tasks): "
              f"{' / '.join(f'{m:.2f}' for m in marginal)} us per window", flush=True)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "profile_gpu.json").write_text(json.dumps({"rows": rows, "idle": idle, "mib": args.mib,
                                                                  "workload": args.workload, "seeds": args.seeds,
                                                                  "batch": args.batch, "cc": args.cc}, indent=1))


if __name__ == "__main__":
    main()
