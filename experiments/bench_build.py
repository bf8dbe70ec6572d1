"""Seconds build_batch takes for N copies of workload (a) (k=4 fat-tree, 16-host ring
all-reduce, 480 flows) and of workload (b) (a 128-GPU rail-optimised cluster's ring all-reduce,
32,512 flows): the host's share of an SPME run (the optimizer builds every generation's batch).
Median of --repeats runs, the machine's usable cores.

    PYTHONPATH=. python experiments/bench_build.py --a 1024 --b 256
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import cluster128_config  # noqa: E402

from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--a", type=int, default=1024, help="copies of workload (a)")
    ap.add_argument("--b", type=int, default=256, help="copies of workload (b)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    for name, cfg, n in (("(a) 64 MiB", allreduce_config("none", 64 << 20), args.a),
                         ("(b) 128 GPUs, 0.25 MiB", load_config(cluster128_config(0.25)), args.b)):
        exp = build_experiment(cfg)
        exp.params      # resolved once, as a generation's experiments are before their batch
        times = []
        for _ in range(args.repeats):
            t = time.perf_counter()
            build_batch([exp] * n)
            times.append(time.perf_counter() - t)
        med = statistics.median(times)
        print(f"{name}: build_batch of {n} copies {med:.3f} s (median of {args.repeats}), "
              f"{med / n * 1e3:.2f} ms per experiment")


if __name__ == "__main__":
    main()
