"""Why do two GPU workers not scale? The same batch on GPU 0 alone, GPU 1 alone, both from two
threads of one process, and both from two processes; kernel seconds of each.

    python experiments/diag_multi_gpu.py [--batch 1024] [--mib 16]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.engine import build_batch, get_backend  # noqa: E402


def one(device: int, batch_n: int, mib: float, out: dict, barrier=None) -> None:
    be = get_backend("gpu", device=device)
    batch = build_batch([build_experiment(allreduce_config("dcqcn", int(mib * 2**20)))] * batch_n)
    if barrier is not None:
        barrier.wait()
    t = time.perf_counter()
    be.run(batch)
    out[device] = (time.perf_counter() - t, dict(be.last_timing))


def proc(device: int, batch_n: int, mib: float, q, barrier) -> None:
    out: dict = {}
    one(device, batch_n, mib, out, barrier)
    q.put((device, out[device]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--mib", type=float, default=16.0)
    args = ap.parse_args()
    for d in (0, 1):
        one(d, 64, 1.0, {})                                   # compile, load, warm
    for d in (0, 1):
        r: dict = {}
        one(d, args.batch, args.mib, r)
        print(f"alone gpu{d}: run {r[d][0]:.2f} s, kernel {r[d][1]['kernel_s']:.2f} s", flush=True)
    r = {}
    bar = threading.Barrier(2)
    ts = [threading.Thread(target=one, args=(d, args.batch, args.mib, r, bar)) for d in (0, 1)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    print("threads: " + ", ".join(f"gpu{d} run {r[d][0]:.2f} s kernel {r[d][1]['kernel_s']:.2f} s" for d in (0, 1)), flush=True)
    ctx = mp.get_context("spawn")
    q, bar = ctx.Queue(), ctx.Barrier(2)
    ps = [ctx.Process(target=proc, args=(d, args.batch, args.mib, q, bar)) for d in (0, 1)]
    for p in ps:
        p.start()
    got = dict(q.get() for _ in ps)
    for p in ps:
        p.join()
    print("processes: " + ", ".join(f"gpu{d} run {got[d][0]:.2f} s kernel {got[d][1]['kernel_s']:.2f} s" for d in (0, 1)), flush=True)


if __name__ == "__main__":
    main()
