"""Multi-GPU scaling (tracker issue 8): the same batches on one GPU and on all GPUs, in one run.

    python experiments/bench_multi_gpu.py --out DIR [--a-batch 4096] [--b-fill 2.0]

(a) workload (a) of bench_gpu.py (k=4 fat-tree ring all-reduce, 1500-byte packets);
(b) 128-GPU clusters (bench_gpu.cluster128_config), as many as fill `--b-fill` GPUs' memory, so
    that one GPU needs several sub-batches and the GPUs each take their share.
For each: results must be identical between the runs; reports simulated packet-hops/s of the
whole run (wall clock, builds included: what a user waits for) and of the simulation alone (the
slowest worker's run time), the speed-up, and each GPU's busy time (load balance). Writes
DIR/bench_multi_gpu.json; experiments/report_gpu.py renders it into docs/performance.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import cluster128_config  # noqa: E402
from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt.engine import get_backend  # noqa: E402
from mvopt.engine._gpu import gpu_count  # noqa: E402
from mvopt.engine.balance import run_experiments  # noqa: E402
from mvopt.engine.sizing import batch_bytes, experiment_counts


def measure(spec: str, exps) -> tuple[dict, list]:
    stats: dict = {}
    t0 = time.perf_counter()
    res = run_experiments(exps, spec, report=stats)
    wall = time.perf_counter() - t0
    hops = sum(r.counters["packet_hops"] for r in res)
    run_s = max(s["run_s"] for s in stats.values())
    row = {"spec": spec, "experiments": len(exps), "wall_s": wall, "run_s": run_s, "packet_hops": hops,
           "hops_per_s_wall": hops / wall, "hops_per_s_run": hops / run_s, "workers": stats}
    print(f"  {spec:>10}: {len(exps)} experiments, wall {wall:.1f} s, slowest worker run {run_s:.1f} s, "
          f"{hops / wall / 1e9:.3f} G hops/s wall, {hops / run_s / 1e9:.3f} G hops/s run; "
          + "; ".join(f"{k}: {v['experiments']} exps, {v['sub_batches']} sub-batches, busy {v['busy_s']:.1f} s"
                      for k, v in stats.items()), flush=True)
    return row, res


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--a-batch", type=int, default=4096)
    ap.add_argument("--a-mib", type=float, default=64.0)
    ap.add_argument("--b-mib", type=float, default=4.0)
    ap.add_argument("--b-fill", type=float, default=2.0, help="(b): experiments for this many GPUs' memory")
    ap.add_argument("--b-count", type=int, default=None, help="(b): this many experiments instead of --b-fill")
    ap.add_argument("--sections", default="a,b")
    args = ap.parse_args()
    n = gpu_count()
    all_gpus = "gpu:" + ",".join(str(d) for d in range(n))
    report: dict = {"gpus": n, "sections": {}}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    work = {}
    if "a" in args.sections:
        work["a"] = [build_experiment(allreduce_config("dcqcn", int(args.a_mib * 2**20)))] * args.a_batch
    if "b" in args.sections:
        exp = build_experiment(load_config(cluster128_config(args.b_mib)))
        fit = get_backend("gpu", device=0).batch_memory_limit() // batch_bytes(experiment_counts(exp))
        work["b"] = [exp] * (args.b_count or int(fit * args.b_fill))
    for name, exps in work.items():
        print(f"({name}) {len(exps)} experiments on gpu:0 and on {all_gpus}", flush=True)
        one, r1 = measure("gpu:0", exps)
        many, r2 = measure(all_gpus, exps)
        same = all(a.same_as(b) for a, b in zip(r1, r2))
        report["sections"][name] = {"one": one, "all": many, "identical": same,
                                    "speedup_wall": many["hops_per_s_wall"] / one["hops_per_s_wall"],
                                    "speedup_run": many["hops_per_s_run"] / one["hops_per_s_run"]}
        print(f"({name}) identical {same}; speed-up {report['sections'][name]['speedup_wall']:.2f}x wall, "
              f"{report['sections'][name]['speedup_run']:.2f}x run", flush=True)
        (out / "bench_multi_gpu.json").write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
