"""One timing of workload (a) on one CPU core, for side-by-side comparisons of two checkouts:
the run time (s) of N k=4 fat-tree ring all-reduces of MIB MiB in one batch (`--incast`: N
15-to-1 incasts of MIB MiB per sender in the same fat-tree instead: deep queues; `--rail`: N
128-GPU rail-optimised clusters of workload (b)).

    git worktree add /tmp/ab_old REV
    for i in 1 2 3; do
      (cd /tmp/ab_old && OMP_NUM_THREADS=1 PYTHONPATH=. python experiments/ab_cpu_engine.py none)
      OMP_NUM_THREADS=1 PYTHONPATH=. python experiments/ab_cpu_engine.py none
    done

Alternate the two (this machine is shared and noisy) and compare medians. Within one checkout,
`--switch-schedule serial` times a switch's window as events in time order against port by port
(the default), and `--define` takes the kernel defines a backend accepts.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_gpu import cluster128_config  # noqa: E402
from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._cpu import SWITCH_SCHEDULES, CpuBackend  # noqa: E402
from mvopt.engine.backend_defaults import check_defines  # noqa: E402
from mvopt.testing.scenarios import fat_tree_flows  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cc", nargs="?", default="none", help="congestion control (none, dcqcn, hpcc, dctcp)")
    ap.add_argument("--n", type=int, default=8, help="experiments in the batch")
    ap.add_argument("--mib", type=float, default=16.0, help="all-reduce size per host (MiB)")
    ap.add_argument("--incast", action="store_true", help="15-to-1 incasts instead")
    ap.add_argument("--rail", action="store_true",
                    help="workload (b) instead: bench_gpu's 128-GPU rail-optimised cluster, DCQCN (cc ignored), "
                         "ring all-reduce of MIB MiB per GPU (rail switches of 32 ports)")
    ap.add_argument("--switch-schedule", choices=SWITCH_SCHEDULES, default="lanes",
                    help="how a switch's window is scheduled: lanes (port by port where exact) or serial")
    ap.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                    help="a kernel define (backend_defaults.KERNEL_DEFINES, e.g. MV_PUSH_LOCK=1)")
    args = ap.parse_args()
    try:
        defines = check_defines({k: int(v) for k, v in (d.split("=", 1) for d in args.define)})
    except ValueError as e:
        ap.error(f"--define: {e}")
    if args.rail:
        exp = build_experiment(load_config(cluster128_config(args.mib)))
    elif args.incast:
        exp = fat_tree_flows([(s, 0) for s in range(1, 16)], int(args.mib * 2**20), cc=args.cc)
    else:
        exp = build_experiment(allreduce_config(args.cc, int(args.mib * 2**20)))
    batch = build_batch([exp] * args.n)
    be = CpuBackend(threads=1, defines=defines, switch_schedule=args.switch_schedule)
    t = time.perf_counter()
    be.run(batch)
    print(f"{time.perf_counter() - t:.3f}")


if __name__ == "__main__":
    main()
