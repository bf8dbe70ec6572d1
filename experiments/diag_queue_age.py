"""How long packets wait in the switches' queues on workload (a), in windows, and how far their
in-ring has moved on meanwhile, run window by window on the CPU backend: whether a switch could
queue a packet by its in-ring slot instead of copying it into a pool slot (docs/performance.md,
"Next steps": fewer packet bytes per hop). A ring slot is safe to queue while its ring has not
come round to it again: at most `cap` packets later on the same link.

At each window's end it walks every switch port's queues (pool slots, `t` = arrival time) and
prints, over the measured windows: the queued packets per switch and window, their age in
windows (the window's end minus the arrival), and the packets their in-ring carried since (from
the ring's consumed count when the packet arrived, tracked per packet); then the share that
would still be within a ring of 128 (compact) and of 1,024 slots (full).

    PYTHONPATH=. python experiments/diag_queue_age.py --mib 8 --skip 300 --windows 200
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._cpu import CpuBackend  # noqa: E402
from mvopt.engine.batch import ST_RUN  # noqa: E402
from mvopt.engine.schema import PKT_DTYPE  # noqa: E402


def queued(c: dict, pkt: np.ndarray, switches: np.ndarray) -> list[tuple[int, int]]:
    """(pool slot, ingress port's peer port: the in-ring) of every packet in a switch queue."""
    q = c["port_q"].reshape(-1, 4)
    out = []
    for v in switches:
        lo, hi = int(c["node_port_lo"][v]), int(c["node_port_hi"][v])
        for p in range(lo, hi):
            for cls in (0, 1):
                s = int(q[p, cls])
                while s >= 0:
                    ring = int(c["port_peer"][lo + int(pkt[s]["in_port"])])
                    out.append((s, ring))
                    s = int(pkt[s]["next"])
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=8.0, help="all-reduce size per host (MiB)")
    ap.add_argument("--cc", default="none")
    ap.add_argument("--skip", type=int, default=300, help="windows run first (the start-up)")
    ap.add_argument("--windows", type=int, default=200, help="windows measured")
    args = ap.parse_args()
    batch = build_batch([build_experiment(allreduce_config(args.cc, int(args.mib * 2**20)))])
    c = batch.cols
    backend = CpuBackend()
    backend.run(batch, max_iters=args.skip)
    switches = np.flatnonzero(c["node_is_host"] == 0)
    window = int(c["exp_window_ps"][0])
    seen: dict[tuple[int, int], int] = {}   # (slot, arrival time) -> its ring's consumed count then
    ages, later, counts = [], [], []
    for _ in range(args.windows):
        if c["exp_status"][0] != ST_RUN:
            break
        backend.run(batch, max_iters=1)
        pkt = batch.scratch["pkt"].view(PKT_DTYPE)
        end = int(c["exp_T_ps"][0])   # (the next window's start: this one's end)
        consumed = c["port_head"].reshape(-1, 2).sum(axis=1)
        now_q = queued(c, pkt, switches)
        counts.append(len(now_q))
        keep = {}
        for s, ring in now_q:
            key = (s, int(pkt[s]["t"]))
            base = seen.get(key, int(consumed[ring]))
            keep[key] = base
            ages.append((end - key[1]) / window)
            later.append(int(consumed[ring]) - base)
        seen = keep
    if not counts:
        sys.exit("the experiment ended before the measured windows: lower --skip or raise --mib")
    ages, later = np.asarray(ages), np.asarray(later)
    print(f"workload (a), {args.mib:g} MiB, cc {args.cc}: {len(counts)} windows after {args.skip}, "
          f"{switches.size} switches")
    print(f"queued packets per window (all switches): mean {np.mean(counts):.1f}, max {max(counts)}")
    if ages.size:
        qs = np.percentile(ages, [50, 90, 99, 100])
        print("age in windows (p50 / p90 / p99 / max): " + " / ".join(f"{x:.1f}" for x in qs))
        qs = np.percentile(later, [50, 90, 99, 100])
        print("packets on its in-ring since, a lower bound (p50 / p90 / p99 / max): "
              + " / ".join(f"{x:.0f}" for x in qs))
        for cap in (128, 1024):
            print(f"within a ring of {cap} slots: {np.mean(later < cap):.1%} of queued packet-windows")


if __name__ == "__main__":
    main()
