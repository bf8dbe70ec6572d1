"""Random stress of the GPU's groups launch mode against the CPU backend, for a device session:
random batches of the mixed test experiments (random seeds, 1-40 experiments), each run in the
groups mode under random conditions that cut it into many pieces: blocks of 32, 64, 128 or 224
threads, a resident grid forced down to 1-3 blocks (groups then take turns), slices of 1-16
windows, launch budgets of 1 ns to 0.3 s, first launches of 1-256 windows (the table of backend
defaults' group_block_threads, group_slice_windows, launch_budget_ns, chunk_windows). Every
result must equal the CPU's. One line per batch (its conditions, seconds, same or different).

    python experiments/stress_groups_gpu.py --seconds 200
    python experiments/stress_groups_gpu.py --seconds 60 --define MV_PUSH_LOCK=1

Prints a summary at the end; exits 1 on any mismatch. Needs CuPy and a GPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.engine import build_batch, simulate  # noqa: E402
from mvopt.engine._gpu import GpuBackend  # noqa: E402
from mvopt.engine.backend_defaults import GPU, check_defines  # noqa: E402
from mvopt.engine.batch import extract_results  # noqa: E402
from mvopt.testing.scenarios import mixed_experiments  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=200.0)
    ap.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                    help="a kernel define for every run (backend_defaults.KERNEL_DEFINES, e.g. MV_PUSH_LOCK=1)")
    args = ap.parse_args()
    try:
        defines = check_defines({k: int(x) for k, x in (d.split("=", 1) for d in args.define)})
    except ValueError as e:
        ap.error(f"--define: {e}")
    pool = mixed_experiments(12)
    # one compiled module serves every row of the table: the block size is the host's packing
    be = GpuBackend(launch="groups", defines=defines)
    t0, batches, bad = time.perf_counter(), 0, 0
    while time.perf_counter() - t0 < args.seconds:
        rng = np.random.default_rng(batches)
        exps = [dataclasses.replace(pool[j], seed=int(rng.integers(1, 99)))
                for j in rng.integers(0, len(pool), int(rng.integers(1, 41)))]
        be.defaults = dataclasses.replace(GPU, launch="groups",
                                          group_block_threads=int(rng.choice([32, 64, 128, 224])),
                                          group_slice_windows=int(rng.choice([1, 2, 3, 16])),
                                          launch_budget_ns=int(rng.choice([1, 5_000, 50_000, 300_000_000])))
        grid = int(rng.choice([0, 1, 2, 3]))
        be.__dict__.pop("_groups_resident", None)
        if grid:
            be._groups_resident = lambda kernel, threads, smem, grid=grid: grid
        d = be.defaults
        conditions = (f"{len(exps)} experiments, blocks of {d.group_block_threads}, grid {grid or 'full'}, "
                      f"slices of {d.group_slice_windows}, budget {d.launch_budget_ns} ns")
        t_batch = time.perf_counter()
        ref = simulate(exps, backend="cpu")
        batch = build_batch(exps)
        res = extract_results(batch, be.run(batch, chunk_iters=int(rng.choice([1, 7, 256]))))
        same = be.last_timing["launch"] == "groups" and all(a.same_as(b) for a, b in zip(ref, res))
        if not same:
            bad += 1
            print(f"MISMATCH batch {batches}: {conditions}", flush=True)
        print(f"batch {batches}: {conditions}: {time.perf_counter() - t_batch:.1f} s, "
              f"{'same' if same else 'DIFFERENT'}", flush=True)
        batches += 1
    print(f"groups stress: {batches} random batches in {time.perf_counter() - t0:.0f} s, {bad} different from the CPU")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
