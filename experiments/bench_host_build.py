"""The host's part of an optimizer generation: building the experiments (in worker processes)
and the engine's batch, for N configurations of bench_optimizer's topology space.

    python experiments/bench_host_build.py --n 100 --workers 2        # prints one line per step

Steps: `build_all` (the evaluator's parallel experiment build, `--workers` processes; the main
process's CPU time says how much of it the main process spent receiving the experiments), then
`build_batch` of the feasible ones with compact slots (one process; peak RSS). For before/after
comparisons run it from two checkouts (`cd OLD && python /path/to/this/script ...`: it imports
mvopt from the current directory), alternating. Prints only.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, os.getcwd())
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100, help="configurations sampled (seed 0)")
    ap.add_argument("--workers", type=int, default=2, help="build processes (1: in this process)")
    ap.add_argument("--small-bytes", type=int, default=2097152, help="all-reduce bytes per NIC")
    args = ap.parse_args()
    os.environ["MVOPT_BUILD_WORKERS"] = str(args.workers)
    from bench_optimizer import space_data
    from mvopt.build import build_all
    from mvopt.engine import build_batch
    from mvopt.optimize import load_space

    ns = argparse.Namespace(backend="cpu", small=True, small_bytes=args.small_bytes, distinct=True,
                            space=Path(__file__).resolve().parents[1] / "search_spaces" / "topology.yaml")
    space = load_space(space_data(ns))
    configs = [c.config for c in space.sample(args.n, seed=0) if c.feasible]
    build_all(configs[:args.workers])                 # start the worker processes
    t, c = time.perf_counter(), time.process_time()
    built = [b for b, _, _ in build_all(configs) if b is not None]
    print(f"build_all: {len(built)} experiments, {args.workers} workers: {time.perf_counter() - t:.2f} s wall, "
          f"main process CPU {time.process_time() - c:.2f} s", flush=True)
    exps = [b.experiment for b in built]
    t = time.perf_counter()
    batch = build_batch(exps, compact=True)
    print(f"build_batch: {time.perf_counter() - t:.2f} s, {batch.nbytes / 2**30:.2f} GiB, "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6:.2f} GB")


if __name__ == "__main__":
    main()
