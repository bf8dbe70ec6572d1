"""The CPU backend's experiment order, side by side in one process: a batch of N topology-space
configurations (bench_optimizer's space, small workload) run on T threads with the experiments
taken in batch order and costliest first (`mvopt.engine._cpu.experiment_order`), alternating,
R times each; prints each run and the sorted times.

    OMP_NUM_THREADS=2 python experiments/ab_cpu_order.py --n 16 --seed 5
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=16, help="configurations sampled")
    ap.add_argument("--seed", type=int, default=5)
    ap.add_argument("--small-bytes", type=int, default=2097152, help="all-reduce bytes per NIC")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    os.environ.setdefault("MVOPT_BUILD_WORKERS", "1")
    import numpy as np

    from bench_optimizer import space_data
    from mvopt.build import build_all
    from mvopt.engine import _cpu, build_batch
    from mvopt.optimize import load_space

    ns = argparse.Namespace(backend="cpu", small=True, small_bytes=args.small_bytes, distinct=True,
                            space=ROOT / "search_spaces" / "topology.yaml")
    configs = [c.config for c in load_space(space_data(ns)).sample(args.n, seed=args.seed) if c.feasible]
    exps = [b.experiment for b, _, _ in build_all(configs) if b is not None]
    backend = _cpu.CpuBackend(threads=args.threads)
    orders = {"batch order": lambda batch: np.arange(len(batch.experiments), dtype=np.int64),
              "costliest first": _cpu.experiment_order}
    times: dict[str, list[float]] = {name: [] for name in orders}
    for _ in range(args.repeat):
        for name, order in orders.items():
            _cpu.experiment_order = order
            batch = build_batch(exps, compact=True)
            t = time.perf_counter()
            backend.run(batch)
            times[name].append(time.perf_counter() - t)
            print(f"{name}: {times[name][-1]:.2f} s", flush=True)
    print(f"{len(exps)} experiments, {args.threads} threads: " +
          "; ".join(f"{name} {', '.join(f'{t:.2f}' for t in sorted(ts))} s" for name, ts in times.items()))


if __name__ == "__main__":
    main()
