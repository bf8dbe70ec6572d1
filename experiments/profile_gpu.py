"""Where the GPU backend's time goes: compile-time variants and node orders side by side.

Runs workload (a) (k=4 fat-tree ring all-reduce, 1500-byte packets; `--workload b`: bench_gpu's
128-GPU rail-optimised clusters) as one batch under each
variant of the kernels' tuning macros and of the network phase's node order, checks that every
variant gives identical results, and reports kernel time, packet-hops/s and the upload /
download times; then the all-idle window cost. With ``--ncu-once`` it runs one short launch
only, for Nsight Compute:

    MVOPT_LINEINFO=1 ncu --clock-control none --set full --import-source yes -k mv_run_async --launch-skip 1 -c 1 \\
        -o prof python experiments/profile_gpu.py --ncu-once --batch 256 --iters 300

Writes DIR/profile_gpu.json. Needs CuPy and a GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import cluster128_config, idle_experiments  # noqa: E402
from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._gpu import LAUNCH_MODES, GpuBackend  # noqa: E402
from mvopt.engine.batch import extract_results, node_order  # noqa: E402
from mvopt.experiment import build_experiment  # noqa: E402

# Each entry: kernel macros (MV_*), launch mode, grid, node order or packet slots of one variant;
# every variant's results must equal the first's. The measurements behind each group, and which
# setting is the default, are in docs/decisions/ (the file named beside the group).
VARIANTS = {
    # launch modes (0001-gpu-launch-modes.md); variants without "launch" run "async"
    "base": {}, "async": {"launch": "async"}, "coop": {"launch": "coop"}, "graph": {"launch": "graph"},
    "groups": {"launch": "groups"}, "auto": {"launch": "auto"},
    # registers, blocks per SM and block shape (0002-gpu-occupancy-and-block-shape.md)
    "minblocks2": {"MV_MIN_BLOCKS": 2}, "minblocks4": {"MV_MIN_BLOCKS": 4}, "minblocks6": {"MV_MIN_BLOCKS": 6},
    "minblocks8": {"MV_MIN_BLOCKS": 8}, "cache8": {"MV_CACHE_PORTS": 8},
    "minblocks4+cache8": {"MV_MIN_BLOCKS": 4, "MV_CACHE_PORTS": 8},
    "minblocks6+cache8": {"MV_MIN_BLOCKS": 6, "MV_CACHE_PORTS": 8},
    "minblocks8+cache8": {"MV_MIN_BLOCKS": 8, "MV_CACHE_PORTS": 8},
    "graph-window3": {"launch": "graph", "MV_WINDOW_MIN_BLOCKS": 3},
    "graph-window3-steal": {"launch": "graph", "MV_WINDOW_MIN_BLOCKS": 3},
    "graph-t64": {"launch": "graph", "MV_THREADS": 64, "MV_WINDOW_MIN_BLOCKS": 8},
    "graph-grid4": {"launch": "graph", "steal": True, "window_blocks": 528},
    "graph-grid3": {"launch": "graph", "steal": True, "window_blocks": 396},
    "graph-grid2": {"launch": "graph", "steal": True, "window_blocks": 264},
    "graph-grid1": {"launch": "graph", "steal": True, "window_blocks": 132},
    "groups-6sm": {"launch": "groups", "MV_GROUP_THREADS": 128, "MV_GROUP_MIN_BLOCKS": 6},
    "groups-8sm": {"launch": "groups", "MV_GROUP_THREADS": 128, "MV_GROUP_MIN_BLOCKS": 8},
    "groups-192x3": {"launch": "groups", "MV_GROUP_BLOCK": 192, "MV_GROUP_THREADS": 192, "MV_GROUP_MIN_BLOCKS": 3},
    "groups-160x4": {"launch": "groups", "MV_GROUP_BLOCK": 160, "MV_GROUP_THREADS": 160, "MV_GROUP_MIN_BLOCKS": 4},
    "groups-t96": {"launch": "groups", "MV_GROUP_BLOCK": 96}, "groups-t64": {"launch": "groups", "MV_GROUP_BLOCK": 64},
    "groups-b128": {"launch": "groups", "MV_GROUP_BLOCK": 128}, "groups-b160": {"launch": "groups", "MV_GROUP_BLOCK": 160},
    "groups-b192": {"launch": "groups", "MV_GROUP_BLOCK": 192}, "groups-b224": {"launch": "groups", "MV_GROUP_BLOCK": 224},
    "groups-b256": {"launch": "groups", "MV_GROUP_BLOCK": 256}, "groups-b480": {"launch": "groups", "MV_GROUP_BLOCK": 480},
    "groups-slice64": {"launch": "groups", "group_slice_windows": 64},
    # fewer experiments per SM, less L1 for the same state: how much company a window pays for
    "groups-1sm": {"launch": "groups", "blocks_per_sm": 1},
    "groups-lanes-1sm": {"launch": "groups", "MV_SWITCH_LANES": 2, "blocks_per_sm": 1},
    "groups-l1-192": {"launch": "groups", "extra_smem": 24 << 10},
    # node order (0007-gpu-node-order.md)
    "graph-fullgrid": {"launch": "graph", "steal": False, "order": "default"},
    "graph-widest": {"launch": "graph", "steal": False, "order": "widest"},
    "graph-steal": {"launch": "graph", "steal": True, "order": "default"},
    "groups-roles": {"launch": "groups", "group_order": True},
    "groups-plain": {"launch": "groups", "group_order": False},
    # switch lanes (0004-switch-lanes.md)
    "groups-lanes1": {"launch": "groups", "MV_SWITCH_LANES": 1},
    "groups-lanes": {"launch": "groups", "MV_SWITCH_LANES": 2},
    "groups-serial": {"launch": "groups", "MV_SWITCH_LANES": 0},
    "groups-lanes-nocalm": {"launch": "groups", "MV_SWITCH_LANES": 2, "MV_LANES_CALM": 0},
    "groups-lanes-p4": {"launch": "groups", "MV_SWITCH_LANES": 2, "MV_LANE_PORTS": 4},
    "groups-lanes-p8": {"launch": "groups", "MV_SWITCH_LANES": 2, "MV_LANE_PORTS": 8},
    "groups-lanes-times": {"launch": "groups", "MV_LANE_TIMES": 1},
    "groups-lanes-notimes": {"launch": "groups", "MV_LANE_TIMES": 0},
    "groups-lanes-big": {"launch": "groups", "MV_LANE_SMALL": 0},
    "groups-scan-small": {"launch": "groups", "MV_SCAN_SMALL": 1},
    "groups-lanes-switch-call": {"launch": "groups", "MV_LANES_SWITCH_CALL": 1},
    "groups-scan-small-switch-call": {"launch": "groups", "MV_SCAN_SMALL": 1, "MV_LANES_SWITCH_CALL": 1},
    "groups-rows-by-switch": {"launch": "groups", "MV_LANES_ROWS_BY_SWITCH": 1},
    "groups-wire-once": {"launch": "groups", "MV_LANE_WIRE_ONCE": 1},
    "groups-pool-regs": {"launch": "groups", "MV_LANE_POOL_REGS": 1},
    "groups-nopool-noscan": {"launch": "groups", "MV_LANE_POOL_REGS": 0, "MV_SCAN_SMALL": 0},
    "groups-nopool": {"launch": "groups", "MV_LANE_POOL_REGS": 0},
    "groups-noscan": {"launch": "groups", "MV_SCAN_SMALL": 0},
    "groups-rows-switch-call": {"launch": "groups", "MV_LANES_ROWS_BY_SWITCH": 1, "MV_LANES_SWITCH_CALL": 1},
    "groups-port-major": {"launch": "groups", "MV_LANES_ROWS_BY_SWITCH": 0},
    "groups-inline": {"launch": "groups", "MV_LANES_SWITCH_CALL": 0},
    "groups-defaults19": {"launch": "groups", "MV_LANE_POOL_REGS": 0, "MV_SCAN_SMALL": 0,
                          "MV_LANES_ROWS_BY_SWITCH": 0, "MV_LANES_SWITCH_CALL": 0},
    # memory placement (0005-memory-placement-on-the-gpu.md)
    "graph-nostream": {"launch": "graph", "MV_RING_STREAM": 0},
    "groups-nostream": {"launch": "groups", "MV_RING_STREAM": 0},
    "groups-ringt0": {"launch": "groups", "MV_RING_T_STREAM": 0},
    "graph-l2fetch32": {"launch": "graph", "l2_fetch": 32},
    "graph-l2fetch64": {"launch": "graph", "l2_fetch": 64},
    "groups-tree4": {"launch": "groups", "MV_TREE_PORTS": 4},
    "groups-tree4-b256": {"launch": "groups", "MV_TREE_PORTS": 4, "MV_GROUP_BLOCK": 256},
    # fewer loads per event (0006-fewer-loads-per-event.md)
    "graph-tree2": {"launch": "graph", "MV_TREE_PORTS": 2},
    "graph-eventwrites": {"launch": "graph", "MV_PER_EVENT_WRITES": 1},
    "graph-direct": {"launch": "graph", "MV_DIRECT": 1},
    "graph-direct-window3": {"launch": "graph", "MV_DIRECT": 1, "MV_WINDOW_MIN_BLOCKS": 3},
    "groups-direct": {"launch": "groups", "MV_DIRECT": 1},
    "graph-noeager": {"launch": "graph", "MV_EAGER_DELAY": 0},
    "graph-silent": {"launch": "graph", "MV_SILENT_HOST": 1},
    "graph-silent-window3": {"launch": "graph", "MV_SILENT_HOST": 1, "MV_WINDOW_MIN_BLOCKS": 3},
    "graph-nosilent": {"launch": "graph", "MV_SILENT_HOST": 0},
    "groups-silent": {"launch": "groups", "MV_SILENT_HOST": 1},
    "graph-search": {"launch": "graph", "MV_DENSE_ROUTES": 0},
    "groups-search": {"launch": "groups", "MV_DENSE_ROUTES": 0},
    "groups-fullhash": {"launch": "groups", "MV_HASH_PREFIX": 0},
    "groups-nopaths": {"launch": "groups", "MV_FLOW_PATHS": 0},
    "groups-late": {"launch": "groups", "MV_LATE_NEXT_ARRIVAL": 1},
    "groups-classcache": {"launch": "groups", "MV_PORT_CLASS_AGAIN": 0},
    "groups-classagain": {"launch": "groups", "MV_PORT_CLASS_AGAIN": 1},
    "graph-classagain": {"launch": "graph", "MV_PORT_CLASS_AGAIN": 1},
    "groups-onebyone": {"launch": "groups", "MV_EVENT_PAIRS": 0},
    "graph-onebyone": {"launch": "graph", "MV_EVENT_PAIRS": 0},
    # packet slots (0008-packet-slots.md)
    "graph-compact": {"launch": "graph", "compact": True},
}


ORDERS = {"auto": "auto", "default": "default", "widest": "widest-first"}   # a variant's "order": $MVOPT_NODE_ORDER


def variant(spec: dict, launch: str | None = None) -> tuple[GpuBackend, str, bool]:
    """The backend (kernel macros, launch mode, grid), node order and packet slots (compact or
    not) of a VARIANTS entry; `launch` unless the entry names one."""
    spec = dict(spec)
    order, compact = spec.pop("order", "auto"), spec.pop("compact", False)
    per_sm = spec.pop("blocks_per_sm", None)     # the groups mode's resident blocks per SM (default: all that fit)
    extra_smem = spec.pop("extra_smem", 0)        # unused dynamic shared memory per block of the groups kernel
    be = GpuBackend(launch=spec.pop("launch", None) or launch, steal=spec.pop("steal", None),
                    l2_fetch_bytes=spec.pop("l2_fetch", None), window_blocks=spec.pop("window_blocks", None),
                    group_slice_windows=spec.pop("group_slice_windows", None),
                    group_order=spec.pop("group_order", True), defines=spec)
    if per_sm:
        be._groups_resident = lambda kernel, threads, smem: be.sms * per_sm
    if extra_smem:
        be.groups_kernel = _MoreSharedMemory(be.groups_kernel, extra_smem)
    return be, order, compact


class _MoreSharedMemory:
    """A CuPy kernel launched with `extra` more bytes of dynamic shared memory than asked for."""

    def __init__(self, kernel, extra: int) -> None:
        self.kernel, self._launch, self.extra = kernel.kernel, kernel, extra

    def __call__(self, grid, block, args, shared_mem: int = 0):
        return self._launch(grid, block, args, shared_mem=shared_mem + self.extra)


def run_once(be: GpuBackend, exps, interleave, max_iters=None, order: str = "auto", compact: bool = False):
    """`interleave` (True, or a tile of experiments) overrides the order with
    node_order(interleave=True, tile=...) (and keeps it)."""
    os.environ["MVOPT_NODE_ORDER"] = "default" if interleave else ORDERS[order]
    batch = build_batch(exps, compact=compact)
    if interleave:
        tile = 0 if interleave is True else int(interleave)
        batch.cols["node_order"][:] = node_order(batch.cols, interleave=True, tile=tile)
    iters = be.run(batch, max_iters=max_iters, resumable=False)
    return extract_results(batch, iters), dict(be.last_timing)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=".")
    ap.add_argument("--workload", choices=("a", "b"), default="a",
                    help="a: the k=4 fat-tree ring all-reduce (--cc, --seeds); b: bench_gpu's 128-GPU "
                         "rail-optimised cluster (DCQCN; rail switches of 32 ports), --mib per GPU")
    ap.add_argument("--mib", type=float, default=8.0)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--cc", default="none")
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--ncu-once", action="store_true")
    ap.add_argument("--iters", type=int, default=300)
    ap.add_argument("--seeds", choices=("same", "distinct"), default="same",
                    help="same: the batch is one experiment repeated; distinct: experiment i has seed i + 1 "
                         "(ECMP paths differ, as in an optimizer's generation)")
    ap.add_argument("--interleave", default="true,false",
                    help="node orders of the base variant: true (role-major over the batch), false (the "
                         "backend's), or a tile size (role-major within tiles of that many experiments)")
    ap.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                    help="--ncu-once: a kernel tuning macro (e.g. MV_RING_STREAM=0)")
    ap.add_argument("--idle-variants", default=None,
                    help="variants whose idle window's marginal cost is measured (default: --variants; "
                         "'none': no idle section at all)")
    ap.add_argument("--window-blocks", type=int, default=None,
                    help="--ncu-once: the stealing grid's blocks (default: the backend's)")
    args = ap.parse_args()
    nbytes = int(args.mib * 2**20)
    if args.workload == "b":
        exps = [build_experiment(load_config(cluster128_config(args.mib)))] * args.batch
    elif args.seeds == "same":
        exps = [build_experiment(allreduce_config(args.cc, nbytes))] * args.batch
    else:
        exps = [build_experiment(allreduce_config(args.cc, nbytes, seed=i + 1)) for i in range(args.batch)]
    if args.ncu_once:
        be = GpuBackend(window_blocks=args.window_blocks,
                        defines={k: int(x) for k, x in (d.split("=", 1) for d in args.define)})
        run_once(be, exps[:1], False, max_iters=10)           # warm-up launch (skip it: --launch-skip 1)
        # the order and grid a run gets
        run_once(be, exps, False, max_iters=args.iters)
        return
    rows, ref = [], None
    for name in args.variants.split(","):
        t = time.perf_counter()
        be, order, compact = variant(VARIANTS[name])
        compile_s = time.perf_counter() - t
        run_once(be, exps[:64], True, max_iters=200)          # module load, first-launch costs, clocks up
        orders = [{"true": True, "false": False}.get(x, x) for x in args.interleave.split(",")]
        for interleave in (orders if name == "base" else (False,)):
            res, tm = run_once(be, exps, interleave, order=order, compact=compact)
            hops = sum(r.counters["packet_hops"] for r in res)
            same = ref is None or all(a.same_as(b) for a, b in zip(res, ref))
            ref = ref or res
            row = {"variant": name, "interleave": interleave, "compile_s": compile_s, **tm, "hops": hops,
                   "ghops_per_s": hops / tm["kernel_s"] / 1e9, "windows": res[0].windows,
                   "us_per_window": tm["kernel_s"] / res[0].windows * 1e6, "identical": same,
                   "status": res[0].status}
            rows.append(row)
            print(f"{name:>18} interleave={interleave!s:5} kernel {tm['kernel_s']:7.3f} s  "
                  f"{row['ghops_per_s']:.3f} G hops/s  upload {tm['upload_s']:.3f} s  download {tm['download_s']:.3f} s  "
                  f"blocks {tm['blocks']}  identical {same}", flush=True)
    idle = {}
    idle_names = (args.idle_variants or args.variants).split(",")
    if idle_names == ["none"]:
        write(args, rows, idle)
        return
    # the overhead floor under each launch mode, then under each variant asked for
    idle_runs = [(launch, {"launch": launch}) for launch in LAUNCH_MODES]
    idle_runs += [(name, VARIANTS[name]) for name in idle_names if name not in LAUNCH_MODES]
    for name, spec in idle_runs:
        be, order, _ = variant(spec, launch="graph")
        for interleave in ((True, False) if name == "async" else (False,)):
            res, tm = run_once(be, idle_experiments(1000), interleave, order=order)
            key = f"{name} interleave={interleave}"
            idle[key] = {"windows": res[0].windows, **tm, "us_per_window": tm["kernel_s"] / res[0].windows * 1e6}
            print(f"idle 1000 exps {key}: {idle[key]['us_per_window']:.1f} us per window "
                  f"(kernel {tm['kernel_s']:.3f} s, {res[0].windows} windows)", flush=True)
    # the marginal cost of an idle window under each variant asked for: 1,000 experiments of 6,000
    # delay tasks against 2,000, so that what a run pays once (graph capture, the polls, the empty
    # windows after its end) cancels out; the median of three pairs
    for name in idle_names:
        be, order, _ = variant(VARIANTS[name], launch="graph")
        marginal = []
        for _ in range(3):
            (r2, t2), (r6, t6) = [run_once(be, idle_experiments(1000, tasks=k), False, order=order) for k in (2000, 6000)]
            marginal.append((t6["kernel_s"] - t2["kernel_s"]) / (r6[0].windows - r2[0].windows) * 1e6)
        idle[f"{name}, marginal"] = {"us_per_window": sorted(marginal)[1], "runs_us": marginal}
        print(f"idle 1000 exps {name}, marginal (6,000 against 2,000 tasks): "
              f"{' / '.join(f'{m:.2f}' for m in marginal)} us per window", flush=True)
    # the floor without throughput: one idle experiment (one block: the two launches per window,
    # the host's polls between graphs and one host's chain of loads), beside graph's 1,000 above
    res, tm = run_once(GpuBackend(launch="graph"), idle_experiments(1), False)
    idle["graph, 1 experiment"] = {"windows": res[0].windows, **tm, "us_per_window": tm["kernel_s"] / res[0].windows * 1e6}
    print(f"idle 1 exp graph: {idle['graph, 1 experiment']['us_per_window']:.1f} us per window", flush=True)
    write(args, rows, idle)


def write(args, rows: list, idle: dict) -> None:
    """DIR/profile_gpu.json (and the device's L2 fetch granularity, printed)."""
    import cupy
    from mvopt.engine._gpu import L2_FETCH_LIMIT_ID
    fetch = int(cupy.cuda.runtime.deviceGetLimit(L2_FETCH_LIMIT_ID))
    print(f"L2 maximum fetch granularity, the device's default: {fetch} B")
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "profile_gpu.json").write_text(json.dumps({"rows": rows, "idle": idle, "mib": args.mib,
                                                                  "workload": args.workload,
                                                                  "seeds": args.seeds, "batch": args.batch,
                                                                  "cc": args.cc, "l2_fetch_default": fetch}, indent=1))


if __name__ == "__main__":
    main()
