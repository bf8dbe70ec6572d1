"""What an experiment of workload (a) writes per window, by column: the distinct 128-byte lines
(a GPU L1 line) whose bytes changed in one window, in the steady state, run window by window on
the CPU backend. The written lines approximate the hot state an SM must hold per experiment (what
one window writes, the next one's peers read: ring packets, queues, port records), and so
which records to shrink first (docs/performance.md, "Where the time goes").

    PYTHONPATH=. python experiments/diag_window_footprint.py --mib 8 --skip 300 --windows 200
    PYTHONPATH=. python experiments/diag_window_footprint.py --mib 8 --skip 300 --windows 200 \
        --switch-schedule serial
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
from mvopt.engine._cpu import SWITCH_SCHEDULES, CpuBackend  # noqa: E402
from mvopt.engine.batch import ST_RUN  # noqa: E402

LINE = 128


def state(batch) -> dict[str, np.ndarray]:
    """Every column and scratch array, as bytes (copies)."""
    arrays = dict(batch.cols)
    arrays.update({f"scratch {k}": v for k, v in (batch.scratch or {}).items()})
    return {k: np.frombuffer(np.ascontiguousarray(v).tobytes(), np.uint8) for k, v in arrays.items()}


def changed_lines(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The distinct LINE-byte lines in which a and b differ."""
    return np.unique(np.flatnonzero(a != b) // LINE)


def ring_slots(batch) -> np.ndarray:
    """Whether each packet slot belongs to a wire ring (else to a node's pool)."""
    wire = batch.cols["port_wire"].reshape(-1, 4)
    slots = np.zeros(batch.counts["n_slot"], bool)
    for lo, cap in zip(wire[:, 0].tolist(), wire[:, 1].tolist()):
        slots[lo:lo + cap] = True
    return slots


def ring_lines(batch) -> np.ndarray:
    """Which LINE-byte lines of the packet slots belong to wire rings (the rest: pools)."""
    from mvopt.engine.schema import PKT_DTYPE
    return ring_slots(batch)[::LINE // PKT_DTYPE.itemsize]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=2.0, help="all-reduce size per host (MiB)")
    ap.add_argument("--cc", default="none")
    ap.add_argument("--skip", type=int, default=100, help="windows run first (the start-up)")
    ap.add_argument("--windows", type=int, default=200, help="windows measured")
    ap.add_argument("--switch-schedule", choices=SWITCH_SCHEDULES, default="lanes",
                    help="how a switch's window is scheduled: lanes (port by port, the groups kernel's) or "
                         "serial (events in time order, the graph kernel's)")
    args = ap.parse_args()
    batch = build_batch([build_experiment(allreduce_config(args.cc, int(args.mib * 2**20)))])
    backend = CpuBackend(switch_schedule=args.switch_schedule)
    backend.run(batch, max_iters=args.skip)
    totals: dict[str, int] = {}
    measured = 0
    before = state(batch)
    in_ring = ring_lines(batch)
    for _ in range(args.windows):
        if batch.cols["exp_status"][0] != ST_RUN:
            break
        backend.run(batch, max_iters=1)
        after = state(batch)
        for k, v in after.items():
            if k in before and before[k].size == v.size:
                lines = changed_lines(before[k], v)
                if k == "scratch pkt":   # packet slots: wire rings apart from pools
                    ring = in_ring[lines]
                    totals["packets: ring slots"] = totals.get("packets: ring slots", 0) + int(ring.sum())
                    totals["packets: pool slots"] = totals.get("packets: pool slots", 0) + int((~ring).sum())
                else:
                    totals[k] = totals.get(k, 0) + int(lines.size)
        before = after
        measured += 1
    if not measured:
        sys.exit("the experiment ended before the measured windows: lower --skip or raise --mib")
    rows = sorted(((n / measured, k) for k, n in totals.items() if n), reverse=True)
    total = sum(n for n, _ in rows)
    print(f"workload (a), {args.mib:g} MiB, cc {args.cc}, switch schedule {args.switch_schedule}: {measured} windows "
          f"after {args.skip}")
    print(f"{'column':<28} {'lines/window':>12} {'KiB/window':>10} {'share':>6}")
    for n, k in rows:
        print(f"{k:<28} {n:12.1f} {n * LINE / 1024:10.1f} {n / total:6.1%}")
    print(f"{'total':<28} {total:12.1f} {total * LINE / 1024:10.1f}")


if __name__ == "__main__":
    main()
