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
from mvopt.build import build_experiment  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._gpu import LAUNCH_MODES, GpuBackend  # noqa: E402
from mvopt.engine.batch import extract_results, node_order  # noqa: E402

VARIANTS = {"base": {}, "async": {"launch": "async"}, "minblocks2": {"MV_MIN_BLOCKS": 2}, "minblocks4": {"MV_MIN_BLOCKS": 4}, "minblocks6": {"MV_MIN_BLOCKS": 6}, "cache8": {"MV_CACHE_PORTS": 8},
            "minblocks6+cache8": {"MV_MIN_BLOCKS": 6, "MV_CACHE_PORTS": 8},
            "minblocks8": {"MV_MIN_BLOCKS": 8}, "minblocks8+cache8": {"MV_MIN_BLOCKS": 8, "MV_CACHE_PORTS": 8},
            "minblocks4+cache8": {"MV_MIN_BLOCKS": 4, "MV_CACHE_PORTS": 8},
            "coop": {"launch": "coop"},     # grid-wide barriers between phases, one launch
            "graph": {"launch": "graph"},   # one launch per phase, replayed as a CUDA graph
            # the window kernel bounded for 3 blocks per SM, as before the read-only parameters (it
            # then may use more registers): side by side with graph, 4 blocks
            "graph-window3": {"launch": "graph", "MV_WINDOW_MIN_BLOCKS": 3},
            # graph with a full grid in the default order (before the default stole rows on a
            # batch of several waves, widest first), then each half of that
            "graph-fullgrid": {"launch": "graph", "steal": False, "order": "default"},
            "graph-widest": {"launch": "graph", "steal": False, "order": "widest"},
            "graph-steal": {"launch": "graph", "steal": True, "order": "default"},
            # blocks of 64 threads (8 per SM: the same registers)
            "graph-t64": {"launch": "graph", "MV_THREADS": 64, "MV_WINDOW_MIN_BLOCKS": 8},
            # the window kernel bounded for 3 blocks per SM, now with row stealing; 4-port switches
            # on the persisted caches and trees (MV_TREE_PORTS 2). Both measured at 8b3a370 (no
            # gain), like the ring prefetch variants (MV_RING_PREFETCH, MV_PORT_PREFETCH), removed since
            "graph-window3-steal": {"launch": "graph", "MV_WINDOW_MIN_BLOCKS": 3},
            "graph-tree2": {"launch": "graph", "MV_TREE_PORTS": 2},
            # (measured at 9e6a198) the per-event writes the kernels no longer make (a node's hop counter:
            # the host sums the ports' ring tails instead; its last event time: once per window)
            "graph-eventwrites": {"launch": "graph", "MV_PER_EVENT_WRITES": 1},
            # (measured at 9e6a198) the L2's maximum fetch granularity set to 32 / 64 bytes during the run
            # (the default is printed): scattered 4- and 8-byte reads may fetch fewer DRAM bytes
            "graph-l2fetch32": {"launch": "graph", "l2_fetch": 32},
            "graph-l2fetch64": {"launch": "graph", "l2_fetch": 64},
            # row stealing on 4 / 3 / 2 / 1 resident blocks per SM of an H200's 132 (3 is the
            # default since 74e0054 measured it best): fewer nodes in flight, so more of their
            # state stays in the L2 between their events
            "graph-grid4": {"launch": "graph", "steal": True, "window_blocks": 528},
            "graph-grid3": {"launch": "graph", "steal": True, "window_blocks": 396},
            "graph-grid2": {"launch": "graph", "steal": True, "window_blocks": 264},
            "graph-grid1": {"launch": "graph", "steal": True, "window_blocks": 132},
            # (tenth session) with the switches' direct path (the CPU's default), and bounded for 3
            # blocks per SM; without the eager start of delay tasks
            "graph-direct": {"launch": "graph", "MV_DIRECT": 1},
            "graph-direct-window3": {"launch": "graph", "MV_DIRECT": 1, "MV_WINDOW_MIN_BLOCKS": 3},
            "graph-noeager": {"launch": "graph", "MV_EAGER_DELAY": 0},
            # ring packets through the L2 with the default eviction priority, not evict-first
            "graph-nostream": {"launch": "graph", "MV_RING_STREAM": 0},
            # compact packet slots (rings and pools sized for traffic as it is: docs/engine.md,
            # "Packet slots"), the CPU's default since the tenth session: a smaller footprint
            "graph-compact": {"launch": "graph", "compact": True},
            # silent hosts take their task events without the network checks (the CPU's default;
            # 44 bytes of spills in the window kernel at 128 registers), and bounded for 3 blocks
            "graph-silent": {"launch": "graph", "MV_SILENT_HOST": 1},
            "graph-silent-window3": {"launch": "graph", "MV_SILENT_HOST": 1, "MV_WINDOW_MIN_BLOCKS": 3},
            # (eleventh session) each experiment's nodes in one block, a block per group of
            # experiments, the block's barrier between the phases: no launch between windows
            "groups": {"launch": "groups"},
            "groups-silent": {"launch": "groups", "MV_SILENT_HOST": 1},
            # the default launch (groups in one wave, else graph); switches' range search instead
            # of the dense routing tables (engine/routes.py); the silent hosts off (the GPU's
            # default before the eleventh session)
            "auto": {"launch": "auto"},
            "graph-search": {"launch": "graph", "MV_DENSE_ROUTES": 0},
            "graph-nosilent": {"launch": "graph", "MV_SILENT_HOST": 0},
            "groups-search": {"launch": "groups", "MV_DENSE_ROUTES": 0},
            # (eleventh session, measured in the twelfth: docs/performance.md) a group's port records
            # in shared memory and 3 blocks per SM (both removed since); slices of 64 windows
            "groups-slice64": {"launch": "groups", "group_slice_windows": 64},
            # a group's switches first (the widest first, top-of-rack switches first since
            # 4a01ccc), then its hosts: warps of one kind of node (the default since the twelfth
            # session); groups-plain: the nodes in their order
            "groups-roles": {"launch": "groups", "group_order": True},
            "groups-plain": {"launch": "groups", "group_order": False},
            # (twelfth session) the groups kernel bounded for 6 / 8 blocks of 128 threads per SM
            # (80 / 64 registers, more spills) instead of 4 (128): more warps to hide the latency
            "groups-6sm": {"launch": "groups", "MV_GROUP_THREADS": 128, "MV_GROUP_MIN_BLOCKS": 6},
            "groups-8sm": {"launch": "groups", "MV_GROUP_THREADS": 128, "MV_GROUP_MIN_BLOCKS": 8},
            # (twelfth session; "warps", a group per warp, was measured at 6cbc114 and removed:
            # docs/performance.md) the switches' direct path (MV_DIRECT, the CPU's default) in the
            # groups mode; blocks of 96 / 64 threads (2 / 1 experiments of (a) per block, 5 / 8
            # blocks per SM: fewer experiments' state per SM's L1); ring packets as ordinary loads
            # and stores (MV_RING_STREAM 0)
            "groups-direct": {"launch": "groups", "MV_DIRECT": 1},
            "groups-t96": {"launch": "groups", "MV_GROUP_BLOCK": 96},   # (MV_THREADS 96 when measured)
            "groups-t64": {"launch": "groups", "MV_GROUP_BLOCK": 64},
            "groups-nostream": {"launch": "groups", "MV_RING_STREAM": 0},
            # the switches' hashes computed from the seed per packet (before node_hash)
            "groups-fullhash": {"launch": "groups", "MV_HASH_PREFIX": 0},
            # (twelfth session; thirteenth: 1.140 against 1.232 G) every packet routed by its
            # switch, as before the flows' ECMP paths (f_path, MV_FLOW_PATHS)
            "groups-nopaths": {"launch": "groups", "MV_FLOW_PATHS": 0},
            # (twelfth session; thirteenth: 1.236 against 1.232 G) a switch arrival caches its
            # in-ring's next arrival time after the arrival, so that the load overlaps its own
            "groups-late": {"launch": "groups", "MV_LATE_NEXT_ARRIVAL": 1},
            # (twelfth session; thirteenth: 1.248 against 1.232 G, the default since) a
            # transmission whose start was not moved takes its port's cached class
            "groups-classcache": {"launch": "groups", "MV_PORT_CLASS_AGAIN": 0},
            # (thirteenth session; the cached class is the default since) each transmission's
            # class decided again, in both launch modes
            "groups-classagain": {"launch": "groups", "MV_PORT_CLASS_AGAIN": 1},
            "graph-classagain": {"launch": "graph", "MV_PORT_CLASS_AGAIN": 1},
            # (thirteenth session) one event per turn of a switch's event loop instead of an
            # arrival and the transmission after it (MV_EVENT_PAIRS, the GPU's default)
            "groups-onebyone": {"launch": "groups", "MV_EVENT_PAIRS": 0},
            "graph-onebyone": {"launch": "graph", "MV_EVENT_PAIRS": 0},
            # (thirteenth session) the groups mode's blocks of 128 / 160 / 192 / 224 / 256 / 480
            # threads (GROUP_BLOCK_THREADS 160 when measured first, 224 since): 3 / 4 / 5 / 6 / 7 /
            # 13 experiments of (a) per block, 4 / 3 / 2 / 2 / 2 / 1 blocks per SM
            "groups-b128": {"launch": "groups", "MV_GROUP_BLOCK": 128},
            "groups-b160": {"launch": "groups", "MV_GROUP_BLOCK": 160},
            "groups-b192": {"launch": "groups", "MV_GROUP_BLOCK": 192},
            "groups-b224": {"launch": "groups", "MV_GROUP_BLOCK": 224},
            "groups-b256": {"launch": "groups", "MV_GROUP_BLOCK": 256},
            # switches of at most 4 ports on thread-local caches of 4 (the groups kernel's stack frame
            # 96 bytes instead of 224, spills 12 / 12 bytes instead of 52 / 156; 5-8 port switches
            # then take the trees)
            "groups-tree4": {"launch": "groups", "MV_TREE_PORTS": 4},
            "groups-tree4-b256": {"launch": "groups", "MV_TREE_PORTS": 4, "MV_GROUP_BLOCK": 256},
            "groups-b480": {"launch": "groups", "MV_GROUP_BLOCK": 480},
            # (thirteenth session; slower on (a) when run in the fourteenth, docs/performance.md)
            # switch windows port by port where no decision depends on their ports' order
            # (MV_SWITCH_LANES, docs/engine.md "Switch lanes"): on the switch's thread (1), or
            # each port's events on whichever warp of the block is free (2: the groups kernel in
            # three phases per window)
            "groups-lanes1": {"launch": "groups", "MV_SWITCH_LANES": 1},
            "groups-lanes": {"launch": "groups", "MV_SWITCH_LANES": 2},
            # (seventeenth session) the same without the plain windows of calm blocks
            "groups-lanes-nocalm": {"launch": "groups", "MV_SWITCH_LANES": 2, "MV_LANES_CALM": 0},
            # (seventeenth session) lanes for switches of at most 4 ports only (wider ones serially;
            # at 745723f this also sized the records for 4 ports: 72 bytes instead of 96, +2.2 %)
            "groups-lanes-p4": {"launch": "groups", "MV_SWITCH_LANES": 2, "MV_LANE_PORTS": 4},
            # (eighteenth session) lanes for switches of at most 8 ports, as before 32 (the rail
            # switches of workload b, 32 ports, then run serially: --workload b)
            "groups-lanes-p8": {"launch": "groups", "MV_SWITCH_LANES": 2, "MV_LANE_PORTS": 8},
            # (eighteenth session: the lanes are the default, so every variant without
            # MV_SWITCH_LANES runs them) the groups kernel with its switch windows serial
            "groups-serial": {"launch": "groups", "MV_SWITCH_LANES": 0},
            # (eighteenth session; nineteenth: 1.741 / 1.740 against 1.746 / 1.747 G) a port task keeps its in-rings' next arrival times
            "groups-lanes-times": {"launch": "groups", "MV_LANE_TIMES": 1},
            # (nineteenth session: the GPU's default since) ... and without them
            "groups-lanes-notimes": {"launch": "groups", "MV_LANE_TIMES": 0},
            # (eighteenth session; nineteenth: 1.701 / 1.700 against 1.746 / 1.747 G, and removed
            # in the twentieth: MV_LANES_WINDOW_CALL) the nodes' own windows beside the port tasks
            # through a call
            # (nineteenth session) every port task's in-rings in arrays (local memory), as before
            # MV_LANE_SMALL (the tasks of switches of at most 4 ports in registers)
            "groups-lanes-big": {"launch": "groups", "MV_LANE_SMALL": 0},
            # (nineteenth session; twentieth: 1.956 / 1.947 against 1.895 / 1.891 G, the GPU's
            # default since 53da0c7) the in-ring scans of those switches in registers too
            "groups-scan-small": {"launch": "groups", "MV_SCAN_SMALL": 1},
            # (nineteenth session; twentieth: 2.108 / 2.103 against 2.077 / 2.080 G, the GPU's
            # default since 65a911c) the hosts' windows inlined, the switches' serial windows
            # through a call (nvcc, nineteenth session: the kernel spills 120 / 320 bytes instead of
            # 168 / 572; at 65a911c 104 / 288 instead of 140 / 544)
            "groups-lanes-switch-call": {"launch": "groups", "MV_LANES_SWITCH_CALL": 1},
            "groups-scan-small-switch-call": {"launch": "groups", "MV_SCAN_SMALL": 1, "MV_LANES_SWITCH_CALL": 1},
            # (nineteenth session; twentieth: 2.171 / 2.166 against 2.077 / 2.080 G, the GPU's
            # default since 65a911c) the lanes' rows switch-major: the busiest switches' ports
            # first, the lightest last
            "groups-rows-by-switch": {"launch": "groups", "MV_LANES_ROWS_BY_SWITCH": 1},
            # (nineteenth session; twentieth: 1.898 / 1.895 against 1.895 / 1.891 G) a port task
            # reads its port's wire parameters once, not at every transmission. (Measured in the
            # twentieth session and removed: MV_LANE_NEXT_EARLY, a port's next transmission from
            # the loads before the ring store, 1.848 / 1.846; MV_LANE_WIDE_CALL, the wide
            # switches' port tasks through a call, 1.885 / 1.884, and on (b) 0.260 against 0.268.)
            "groups-wire-once": {"launch": "groups", "MV_LANE_WIRE_ONCE": 1},
            # (nineteenth session; twentieth: 2.005 / 2.014 against 1.895 / 1.891 G, the GPU's
            # default since 53da0c7) a port task's own free list in registers
            "groups-pool-regs": {"launch": "groups", "MV_LANE_POOL_REGS": 1},
            # (twentieth session: MV_LANE_POOL_REGS and MV_SCAN_SMALL the GPU's default since) the
            # default before them, and each alone
            "groups-nopool-noscan": {"launch": "groups", "MV_LANE_POOL_REGS": 0, "MV_SCAN_SMALL": 0},
            "groups-nopool": {"launch": "groups", "MV_LANE_POOL_REGS": 0},
            "groups-noscan": {"launch": "groups", "MV_SCAN_SMALL": 0},
            # (twentieth session) rows switch-major with the switches' serial windows through a call
            # (2.224 / 2.219 G; the default since 65a911c, so now the same as groups); without
            # either; and the nineteenth session's defaults (none of the four above)
            "groups-rows-switch-call": {"launch": "groups", "MV_LANES_ROWS_BY_SWITCH": 1, "MV_LANES_SWITCH_CALL": 1},
            "groups-port-major": {"launch": "groups", "MV_LANES_ROWS_BY_SWITCH": 0},
            "groups-inline": {"launch": "groups", "MV_LANES_SWITCH_CALL": 0},
            "groups-defaults19": {"launch": "groups", "MV_LANE_POOL_REGS": 0, "MV_SCAN_SMALL": 0,
                                  "MV_LANES_ROWS_BY_SWITCH": 0, "MV_LANES_SWITCH_CALL": 0},
            # (fourteenth session) more blocks per SM, fewer registers (more spills): blocks of
            # 192 threads, 3 per SM (96 registers); of 160, 4 per SM (96)
            "groups-192x3": {"launch": "groups", "MV_GROUP_BLOCK": 192, "MV_GROUP_THREADS": 192, "MV_GROUP_MIN_BLOCKS": 3},
            "groups-160x4": {"launch": "groups", "MV_GROUP_BLOCK": 160, "MV_GROUP_THREADS": 160, "MV_GROUP_MIN_BLOCKS": 4},
            # (fifteenth session) one resident block per SM instead of two (six experiments of (a)
            # per SM, not twelve): how much faster a window is with less company (the L1, the
            # L2's queues), the default kernel and the switch lanes
            "groups-1sm": {"launch": "groups", "blocks_per_sm": 1},
            "groups-lanes-1sm": {"launch": "groups", "MV_SWITCH_LANES": 2, "blocks_per_sm": 1},
            # (fifteenth session) the groups kernel with 24 KB more dynamic shared memory per block,
            # unused: the driver's carveout leaves the L1 192 KB (64 KB shared) instead of about 248:
            # how much a window slows with less L1 for the same state (more than 48 KB per block
            # would need the kernel's opt-in attribute)
            "groups-l1-192": {"launch": "groups", "extra_smem": 24 << 10},
            # (fifteenth session) a ring packet's arrival time read ahead as an ordinary load (the
            # default since: evict-first, as the packet itself)
            "groups-ringt0": {"launch": "groups", "MV_RING_T_STREAM": 0}}
# (the other variants use the default launch, per-experiment windows in one launch: "async")


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
        # the order and grid a run gets (before 1cd2b51 this profiled the interleaved order)
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
