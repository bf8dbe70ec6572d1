"""Workload (a) on the GPU: the build of its features against the build with every feature.

The batch's own build (engine/features.py: no switch for workload (a)) and the build with every
feature run side by side in one process, alternating (docs/decisions/0028).

    PYTHONPATH=. python experiments/ab_gpu_features.py --n 4096 --mib 8 --rounds 3

Prints each run's kernel and wall time and G packet-hops/s (over the wall time, as `mvopt bench`),
then the medians; stops with an error if the two builds' results differ (they cannot: a build
leaves out only what the batch does not use).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._gpu import GpuBackend  # noqa: E402
from mvopt.engine.batch import extract_results  # noqa: E402
from mvopt.engine.features import SWITCHES, batch_features  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cc", nargs="?", default="none", help="congestion control (none, dcqcn, hpcc, dctcp)")
    ap.add_argument("--n", type=int, default=4096, help="experiments in the batch")
    ap.add_argument("--mib", type=float, default=8.0, help="all-reduce size per host (MiB)")
    ap.add_argument("--rounds", type=int, default=3, help="runs of each build, alternating")
    args = ap.parse_args()
    exp = build_experiment(allreduce_config(args.cc, int(args.mib * 2**20)))
    be = GpuBackend()
    own = batch_features(build_batch([exp]).cols)
    builds = {"own": be.kernels(own), "every": be.kernels(dict.fromkeys(SWITCHES, 1))}
    print(f"the batch's own build: {own}", flush=True)
    rates: dict[str, list[float]] = {name: [] for name in builds}
    first = None
    for r in range(args.rounds):
        for name, kernels in builds.items():
            batch = build_batch([exp] * args.n)
            be.prepare = lambda b, k=kernels: k       # this build for the run (it has what the batch needs)
            t = time.perf_counter()
            iters = be.run(batch, resumable=False)
            wall = time.perf_counter() - t
            results = extract_results(batch, iters)
            hops = sum(int(x.counters["packet_hops"]) for x in results)
            kernel_s = be.last_timing["kernel_s"]
            rates[name].append(hops / wall / 1e9)      # (as `mvopt bench`: the run's wall time)
            print(f"round {r} {name:5s}: kernel {kernel_s:.3f} s, wall {wall:.3f} s, "
                  f"{rates[name][-1]:.3f} G packet-hops/s", flush=True)
            if first is None:
                first = results
            elif not all(a.same_as(b) for a, b in zip(first, results)):
                sys.exit(f"ab_gpu_features: the {name} build's results differ (a bug)")
    for name, values in rates.items():
        print(f"median {name}: {statistics.median(values):.3f} G packet-hops/s")


if __name__ == "__main__":
    main()
