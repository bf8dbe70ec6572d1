"""GPU backend check and benchmark (tracker issue 4), side by side with the CPU backend.

    python experiments/bench_gpu.py --out DIR [--batches 1,16,256,1024,4096] [--mib 64]

1. CPU == GPU, bit for bit, on a mixed batch (topologies, CC, LB, PFC on/off, task graphs).
2. Workload (a): k=4 fat-tree ring all-reduce, 1500-byte packets, each CC, batch sizes 1..4096 on
   the GPU; the CPU backend on all cores of the same machine for the smaller batches.
3. Workload (b): a 128-GPU cluster (16 servers x 8 NICs, rail-optimised) running a flat ring
   all-reduce: one experiment, then as many as fit in the GPU's memory in one batch.
4. Workload (c): one ~54,000-GPU cluster (fat-tree k=60: 54,000 hosts, 4,500 switches) running a
   neighbour exchange across pods (every host sends to the host one pod over: one step of a ring
   all-reduce whose ring crosses the core), the paper's scale.
5. The overhead floor: windows in which every experiment of a batch of 1,000 is idle.
The CPU backend (all cores of the same machine) runs beside each GPU figure; for (b) and (c) it
runs a fixed number of windows (a partial run) and its rates are compared. Writes
DIR/bench_gpu.json; experiments/report_gpu.py turns it into docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.bench import allreduce_config, rail_allreduce_spec  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.cluster import build_topology  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt.engine import Experiment, TaskGraphBuilder, build_batch, get_backend  # noqa: E402
from mvopt.engine.batch import extract_results  # noqa: E402
from mvopt.engine.sizing import batch_bytes, experiment_counts  # noqa: E402


def mixed_batch() -> list[Experiment]:
    exps = []
    topos = [{"topology": "fat_tree", "k": 4},
             {"topology": "leaf_spine", "leaves": 4, "hosts_per_leaf": 4, "oversubscription": 2.0},
             {"topology": "torus", "torus_dims": [3, 3]},
             {"topology": "dragonfly", "groups": 3, "routers_per_group": 2, "hosts_per_router": 2}]
    i = 0
    for t in topos:
        for cc in ("none", "dcqcn", "hpcc", "dctcp"):
            for lb in ("ecmp", "spray"):
                for pfc in (True, False):
                    cfg = load_config({"cluster": t, "network": {"cc": cc, "lb": lb, "pfc": {"enabled": pfc},
                                                                 "buffer_mb": 0.3}})
                    topo = build_topology(cfg.cluster)
                    g = TaskGraphBuilder()
                    n = topo.n_host
                    first = g.delay(0, 2_000_000)
                    for s in range(1, min(n, 7)):
                        g.flow(s, 0, 150_000 + 1000 * s, after=[first] if s % 2 else [])
                    g.flow(n - 1, 1, 400_000 + i)
                    exps.append(Experiment(topology=topo, network=cfg.network, tasks=g.build(), seed=i,
                                           name=f"{t['topology']}-{cc}-{lb}-{pfc}"))
                    i += 1
    return exps


def cluster128_config(mib: float) -> dict:
    """128 GPUs: 16 servers of 8 NICs on a 2-tier rail-optimised network, flat ring all-reduce."""
    return rail_allreduce_spec(int(mib * 2**20), 16, name="cluster128-ring", cc="dcqcn", switch_packet_slots=4096)


def cluster54k_experiment(kib: int) -> Experiment:
    """Fat-tree k=60 (54,000 hosts); every host sends `kib` KiB to the host one pod over. Switch
    packet pools keep their default size: with 4,096 slots per switch the pools run out, the last
    packets of some flows are dropped, and lossless (PFC) mode, which has no retransmission
    timeout, leaves those flows stuck (docs/engine.md, "A descriptor limit the model does not have")."""
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 60}, "network": {"cc": "dcqcn"}})
    topo = build_topology(cfg.cluster)
    n, pod = int(topo.n_host), 60 * 60 // 4
    g = TaskGraphBuilder()
    for h in range(n):
        g.flow(h, (h + pod) % n, kib * 1024)
    return Experiment(topology=topo, network=cfg.network, tasks=g.build(), name="fat-tree-k60-neighbour")


def idle_experiments(n: int, tasks: int = 2000) -> list[Experiment]:
    """`n` k=4 fat-trees whose host 0 runs a chain of `tasks` delay tasks of 1 us: every window
    is idle in the network (the overhead floor)."""
    cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}})
    topo = build_topology(cfg.cluster)
    g = TaskGraphBuilder()
    prev = None
    for _ in range(tasks):
        prev = g.delay(0, 1_000_000, after=[prev] if prev is not None else [])
    graph = g.build()
    return [Experiment(topology=topo, network=cfg.network, tasks=graph) for _ in range(n)]


def timed(backend: str, exps: list[Experiment], max_iters: int | None = None, deadline_s: float | None = None):
    be = get_backend(backend)
    t0 = time.perf_counter()
    batch = build_batch(exps)
    built = time.perf_counter() - t0
    be.prepare(batch)        # the kernels, compiled on first use: neither build nor run
    t1 = time.perf_counter()
    iters = be.run(batch, max_iters=max_iters, resumable=False, **({"deadline_s": deadline_s} if backend == "gpu" else {}))
    t2 = time.perf_counter()
    gpu_timing = dict(getattr(be, "last_timing", {}))   # GPU: upload / kernel / download seconds
    return extract_results(batch, iters), built, t2 - t1, batch.nbytes, gpu_timing


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", default="1,16,256,1024,4096")
    ap.add_argument("--cpu-batches", default="1,16,256")
    ap.add_argument("--cc", default="none,dcqcn,hpcc,dctcp")
    ap.add_argument("--mib", type=float, default=64.0)
    ap.add_argument("--budget-s", type=float, default=420.0)
    ap.add_argument("--sections", default="identity,a,b,c,idle", help="what to run (comma-separated)")
    ap.add_argument("--b-mib", type=float, default=16.0, help="(b): all-reduce size per GPU")
    ap.add_argument("--b-max", type=int, default=100_000, help="(b): at most this many experiments in the big batch")
    ap.add_argument("--c-kib", type=int, default=256, help="(c): bytes each host sends")
    ap.add_argument("--cpu-windows", type=int, default=300, help="(b), (c): windows the CPU runs (partial run)")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report: dict = {"rows": [], "identity": None, "idle": {}, "cores": os.cpu_count(),
                    "env": {k: os.environ.get(k, "") for k in ("MVOPT_COMMIT", "MVOPT_GPU_LAUNCH")}}
    start = time.time()

    args.sections = set(args.sections.split(","))
    args.cores = os.cpu_count() or 1

    def row_of(backend: str, what: str, exps: list[Experiment], max_iters: int | None) -> dict:
        left = args.budget_s - (time.time() - start)
        res, tb, tr, nbytes, gpu_timing = timed(backend, exps, max_iters, deadline_s=max(5.0, left))
        hops = sum(r.counters["packet_hops"] for r in res)
        wins = max(r.windows for r in res)
        row = {"backend": backend, "workload": what, "batch": len(exps), "build_s": tb, "run_s": tr,
               "packet_hops": hops, "windows": wins, "hops_per_s": hops / tr, "windows_per_s": wins / tr,
               "status": sorted({r.status for r in res}),
               "partial": max_iters is not None or any(r.status == "running" for r in res),
               "makespan_us": res[0].makespan_ps / 1e6, "batch_bytes": nbytes, **gpu_timing}
        print(f"  {backend} {what} x{len(exps)}: run {tr:.2f}s build {tb:.2f}s {hops / tr / 1e9:.3f} Ghops/s "
              f"{wins / tr:,.0f} windows/s status {row['status']}{' (partial)' if row['partial'] else ''} "
              f"mem {nbytes / len(exps) / 2**20:.1f} MiB/exp", flush=True)
        (out / "bench_gpu.json").write_text(json.dumps(report, indent=1))
        return row

    # 1. bit identity
    exps = mixed_batch() if "identity" in args.sections else []
    rc, *_ = timed("cpu", exps) if exps else ([],)
    rg, *_ = timed("gpu", exps) if exps else ([],)
    bad = [e.name for e, a, b in zip(exps, rc, rg) if not a.same_as(b)] if exps else ["(not run)"]
    report["identity"] = {"experiments": len(exps), "different": bad,
                          "statuses": sorted({r.status for r in rc})}
    print(f"identity: {len(exps) - len(bad)}/{len(exps)} identical; statuses {report['identity']['statuses']}", flush=True)

    # 2. workload (a)
    size = int(args.mib * 2**20)
    batches = [int(b) for b in args.batches.split(",")]
    cpu_batches = [int(b) for b in args.cpu_batches.split(",") if b]   # ("": no CPU rows)
    for cc in args.cc.split(",") if "a" in args.sections else ():
        exp = build_experiment(allreduce_config(cc, size))
        for backend, bl in (("gpu", batches), ("cpu", cpu_batches)):
            for b in bl:
                if time.time() - start > args.budget_s:
                    print(f"budget reached: skipping {backend} {cc} batch {b}", flush=True)
                    continue
                res, tb, tr, nbytes, gpu_timing = timed(backend, [exp] * b)
                hops = sum(r.counters["packet_hops"] for r in res)
                wins = sum(r.windows for r in res)
                row = {"backend": backend, "cc": cc, "batch": b, "mib": args.mib, "build_s": tb, "run_s": tr,
                       "packet_hops": hops, "windows": wins, "status": res[0].status,
                       "makespan_us": res[0].makespan_ps / 1e6, "batch_bytes": nbytes,
                       "hops_per_s": hops / tr, "windows_per_s": wins / tr,
                       "experiments_per_hour": b / (tr + tb) * 3600,
                       "same_as_first": all(r.same_as(res[0]) for r in res), **gpu_timing}
                report["rows"].append(row)
                print(f"{backend} {cc} B={b}: run {tr:.2f}s build {tb:.2f}s {hops / tr / 1e9:.3f} Ghops/s "
                      f"{wins / tr:,.0f} windows/s {row['experiments_per_hour']:,.0f} exp/h "
                      f"mem {nbytes / b / 2**20:.1f} MiB/exp status {row['status']}", flush=True)
                (out / "bench_gpu.json").write_text(json.dumps(report, indent=1))

    # 3. workload (b): 128-GPU clusters, one, then as many as fit
    if "b" in args.sections:
        exp = build_experiment(load_config(cluster128_config(args.b_mib)))
        per = batch_bytes(experiment_counts(exp))
        small = batch_bytes(experiment_counts(exp, compact=True))     # compact packet slots (engine.md)
        limit = get_backend("gpu").batch_memory_limit()
        fit = int(limit // per)
        report["b"] = {"bytes_per_experiment": per, "fit": fit, "compact_bytes_per_experiment": small,
                       "compact_fit": int(limit // small), "rows": []}
        print(f"(b) 128-GPU cluster: {per / 2**20:.1f} MiB per experiment, {fit} fit in one batch "
              f"({small / 2**20:.1f} MiB and {int(limit // small)} with compact packet slots)", flush=True)
        for backend, b, cap in (("gpu", 1, None), ("gpu", min(fit, args.b_max), None), ("cpu", 1, None),
                                ("cpu", args.cores, args.cpu_windows)):
            if time.time() - start > args.budget_s:
                print(f"budget reached: skipping (b) {backend} {b}", flush=True)
                continue
            report["b"]["rows"].append(row_of(backend, f"128-GPU ring {args.b_mib:g} MiB", [exp] * b, cap))
    # 4. workload (c): one ~54,000-GPU cluster
    if "c" in args.sections and time.time() - start < args.budget_s:
        t = time.perf_counter()
        exp = cluster54k_experiment(args.c_kib)
        print(f"(c) 54,000-GPU experiment built in {time.perf_counter() - t:.1f} s "
              f"({batch_bytes(experiment_counts(exp)) / 2**30:.2f} GiB)", flush=True)
        report["c"] = {"build_experiment_s": time.perf_counter() - t, "rows": []}
        for backend, cap in (("gpu", None), ("cpu", args.cpu_windows)):
            report["c"]["rows"].append(row_of(backend, f"54k neighbour exchange {args.c_kib} KiB", [exp], cap))
        (out / "bench_gpu.json").write_text(json.dumps(report, indent=1))

    # 5. idle windows: 1,000 experiments whose hosts only run chains of 1 us delay tasks
    idle = idle_experiments(1000) if "idle" in args.sections else []
    for backend in ("gpu", "cpu") if idle else ():
        res, tb, tr, _, gpu_timing = timed(backend, idle)
        w = res[0].windows
        report["idle"][backend] = {"windows": w, "run_s": tr, "us_per_window": tr / w * 1e6, **gpu_timing}
        print(f"idle {backend}: {w} windows of 1000 idle experiments, {tr / w * 1e6:.1f} us per window", flush=True)
    (out / "bench_gpu.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
