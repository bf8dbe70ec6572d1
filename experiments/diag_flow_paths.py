"""What the flows' ECMP paths (routes.flow_paths, docs/engine.md, "Routing") add to building a
batch: build_batch's seconds for N experiments of workload (a), and flow_paths' own on that batch.

    PYTHONPATH=. python experiments/diag_flow_paths.py --n 2048
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.engine import build_batch, routes, schema  # noqa: E402
from mvopt.engine.batch import exp_int  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2048, help="experiments in the batch")
    args = ap.parse_args()
    exp = build_experiment(allreduce_config("none", 2**20))
    t = time.perf_counter()
    cols = build_batch([exp] * args.n).cols
    build_s = time.perf_counter() - t
    t = time.perf_counter()
    routes.flow_paths(cols, exp_int(cols, "spray"), schema.NPATH)
    paths_s = time.perf_counter() - t
    print(f"{args.n} experiments, {cols['f_local'].size:,} flows: build_batch {build_s:.2f} s, "
          f"of which flow_paths {paths_s:.3f} s")


if __name__ == "__main__":
    main()
