"""How long the windows of workload (a) would take on the GPU if a node waited only for its
link peers' previous window instead of its whole block's (a barrier per window): per window and
node, the events (packets sent and received, from the ports' ring tails and heads of a CPU run,
one window at a time), a node-window costing `--fixed` events plus its events. Compares
  barrier: every window as long as its busiest node's (the groups kernel now),
  peers:   node v's window w starts when v's window w-1 and its peers' windows w-1 have ended,
  bound:   the busiest node's total (no waiting at all),
  lanes:   barrier, but a switch's window as long as its busiest port's events (arrivals on the
           port's in-ring and transmissions on it), as if each port ran on a lane of its own with
           nothing to share (an upper bound of switch lanes, docs/engine.md "Switch lanes").

    PYTHONPATH=. python experiments/diag_window_sync.py --mib 8 --skip 300 --windows 600
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._cpu import CpuBackend  # noqa: E402
from mvopt.engine.batch import port_packets_sent  # noqa: E402
from mvopt.experiment import build_experiment  # noqa: E402


def port_events(c: dict) -> np.ndarray:
    """Packets each port has sent and received (on its in-ring) so far."""
    head = c["port_head"].reshape(-1, 2).max(axis=1)      # packets consumed of port q's ring
    return port_packets_sent(c) + head[c["port_peer"]]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=8.0)
    ap.add_argument("--cc", default="none")
    ap.add_argument("--skip", type=int, default=300)
    ap.add_argument("--windows", type=int, default=600)
    ap.add_argument("--fixed", type=float, default=2.0, help="a node-window's cost beside its events, in events")
    args = ap.parse_args()
    batch = build_batch([build_experiment(allreduce_config(args.cc, int(args.mib * 2**20)))])
    be = CpuBackend(threads=1)
    be.run(batch, max_iters=args.skip)
    c = batch.cols
    n = c["node_is_host"].size
    before = port_events(c)
    rows = []
    for _ in range(args.windows):
        if be.run(batch, max_iters=1) == 0:
            break
        now = port_events(c)
        rows.append(now - before)
        before = now
    pev = np.array(rows)                     # windows x ports
    node = c["port_node"]
    ev = np.stack([np.bincount(node, weights=w, minlength=n) for w in pev])          # windows x nodes
    busiest_port = np.stack([np.maximum.reduceat(w, c["node_port_lo"]) for w in pev])
    lanes = np.where(c["node_is_host"] == 1, ev, busiest_port) + args.fixed
    cost = args.fixed + ev
    peers = [np.unique(c["port_node"][c["port_peer"][c["node_port_lo"][v]:c["node_port_hi"][v]]]) for v in range(n)]
    finish = np.zeros(n)
    for w in range(cost.shape[0]):
        start = np.array([max(finish[v], finish[peers[v]].max()) for v in range(n)])
        finish = start + cost[w]
    barrier = cost.max(axis=1).sum()
    print(f"{cost.shape[0]} windows after {args.skip}, {n} nodes, {ev.sum() / cost.shape[0]:.0f} events a window, "
          f"busiest node {ev.sum(axis=0).max() / cost.shape[0]:.1f} a window on average, "
          f"{ev.max(axis=1).mean():.1f} the busiest of each window")
    print(f"barrier {barrier:.0f}   peers {finish.max():.0f} ({barrier / finish.max():.3f}x faster)   "
          f"bound {cost.sum(axis=0).max():.0f} ({barrier / cost.sum(axis=0).max():.3f}x)   "
          f"lanes {lanes.max(axis=1).sum():.0f} ({barrier / lanes.max(axis=1).sum():.3f}x)")


if __name__ == "__main__":
    main()
