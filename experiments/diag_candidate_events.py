"""Events per node per window of one candidate of a shipped search space, on the CPU backend: the
space's first candidate of a cluster kind (as `mvopt bench --space` samples it), simulated alone
for a number of windows; its busiest nodes (packets put on the wire and received per window),
the switches' port counts and the CPU time per window. On the GPU a window lasts as long as its
busiest node's events, or its switches' fixed costs (docs/performance.md, "Use-case searches").

    PYTHONPATH=. python experiments/diag_candidate_events.py --space topology --topology dragonfly \\
        --set network.payload_bytes=32000 --windows 20000 [--schedule serial]

Prints only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from mvopt.bench import parse_set, sample_generation  # noqa: E402
from mvopt.build import build_all  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._cpu import SWITCH_SCHEDULES, CpuBackend  # noqa: E402
from diag_node_events import node_packets  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--space", default="topology")
    ap.add_argument("--topology", required=True, help="cluster kind, e.g. dragonfly")
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    ap.add_argument("--windows", type=int, default=20000)
    ap.add_argument("--schedule", choices=SWITCH_SCHEDULES, default="lanes")
    ap.add_argument("--top", type=int, default=8, help="busiest nodes listed")
    args = ap.parse_args()
    configs, _, _, _ = sample_generation(args.space, 1, 0, parse_set(args.set), args.topology)
    if not configs:
        sys.exit(f"no feasible {args.topology} candidate of {args.space}")
    batch = build_batch([build_all(configs)[0][0].experiment])
    backend = CpuBackend(threads=1, switch_schedule=args.schedule)
    t0 = time.process_time()
    backend.run(batch, max_iters=args.windows)
    cpu_s = time.process_time() - t0
    c = batch.cols
    sent, out, into = node_packets(c)
    n = c["node_is_host"].size
    windows = int(c["exp_iter"][0])
    ports = c["node_port_hi"] - c["node_port_lo"]
    print(f"{args.topology}: {n} nodes, {windows} windows, {int(c['exp_T_ps'][0]) / 1e9:.2f} ms simulated, "
          f"{sent.sum() / windows:.1f} packet-hops a window, {1e6 * cpu_s / windows:.1f} µs of CPU a window "
          f"({args.schedule})")
    switches = c["node_is_host"] == 0
    widths, counts = np.unique(ports[switches], return_counts=True)
    print("switches by ports: " + ", ".join(f"{k} x {w}" for w, k in zip(widths, counts)))
    events = (out + into) / windows
    for v in np.argsort(-events)[:args.top]:
        kind = "host" if c["node_is_host"][v] else f"switch, {ports[v]} ports"
        print(f"  node {v:5d}  {kind:<18} {events[v]:7.2f} events a window")


if __name__ == "__main__":
    main()
