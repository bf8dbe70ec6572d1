"""Full against compact packet slots on the CPU backend, side by side: wall time of `simulate`
(build, run, reruns with full slots of the experiments that ran out of compact ones) for
workload (a), 15-to-1 incasts and a rail-sampled training iteration, alternating the two
modes. Why `auto` gives the CPU compact slots (docs/engine.md, "Packet slots").

    OMP_NUM_THREADS=2 PYTHONPATH=. python experiments/ab_cpu_capacities.py --repeats 2
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def workloads(training_windows: int) -> dict:
    """name: (experiments, max windows or None)."""
    from bench_taskgraph_54k import config as training_config
    from mvopt.bench import allreduce_config
    from mvopt.build import build_experiment
    from mvopt.testing.scenarios import fat_tree_flows

    incast = [fat_tree_flows([(s, 0) for s in range(1, 16)], 16 << 20, cc=cc) for cc in ("dcqcn", "none", "dctcp", "hpcc")]
    train = build_experiment(training_config({"servers": 448, "dp": 28, "groups_per_pod": 2}, True, {}, {}))
    return {"(a) 8 x 16 MiB": ([build_experiment(allreduce_config("none", 16 << 20))] * 8, None),
            "incasts 4 x 15-to-1, 16 MiB": (incast, None),
            f"training, 448 servers DP 28, {training_windows} windows": ([train], training_windows)}


def timed(exps, mode: str, windows: int | None) -> tuple[float, int]:
    from mvopt.engine import build_batch, get_backend, simulate

    t = time.perf_counter()
    if windows is None:
        report: dict = {}
        simulate(exps, backend="cpu", capacities=mode, report=report)
        return time.perf_counter() - t, sum(w.get("rerun_full", 0) for w in report.values())
    # a part of a long run: the engine alone, as simulate would build it, for `windows` windows
    batch = build_batch(exps, compact=mode == "compact")
    get_backend("cpu").run(batch, max_iters=windows, resumable=False)
    return time.perf_counter() - t, 0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=2)
    ap.add_argument("--training-windows", type=int, default=3000)
    args = ap.parse_args()
    for name, (exps, windows) in workloads(args.training_windows).items():
        times: dict[str, list[float]] = {"full": [], "compact": []}
        reruns = 0
        for _ in range(args.repeats):
            for mode in ("full", "compact"):
                dt, again = timed(exps, mode, windows)
                times[mode].append(dt)
                if mode == "compact":
                    reruns = max(reruns, again)
        print(f"{name}: full {' / '.join(f'{x:.2f}' for x in times['full'])} s, compact "
              f"{' / '.join(f'{x:.2f}' for x in times['compact'])} s (median ratio "
              f"{statistics.median(times['full']) / statistics.median(times['compact']):.2f}x; "
              f"{reruns} experiments ran out of compact slots and ran again)", flush=True)


if __name__ == "__main__":
    main()
