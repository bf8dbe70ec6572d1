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
Then models of switch lanes (the groups kernel's switch windows) with their costs: a routing step (an arrival
routed, --alpha events) and a barrier (--beta events); an egress port's task handles the arrivals
routed to it (about the packets it sends) and its transmissions:
  lanes as built: hosts' windows beside the switches routing every arrival on their own thread,
           a barrier, the port tasks, a barrier, the ends;
  routed on lanes: the same, the routing of each in-ring on a lane of its own;
  hosts beside: routed on lanes, the hosts' windows beside both switch phases (a host depends
           on no switch within a window), one barrier between the routing and the port tasks.

    PYTHONPATH=. python experiments/diag_window_sync.py --mib 8 --skip 300 --windows 600
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
from mvopt.engine.batch import port_packets_sent  # noqa: E402


def port_events(c: dict) -> np.ndarray:
    """Packets each port has sent and received (on its in-ring) so far: [2, ports]."""
    head = c["port_head"].reshape(-1, 2).max(axis=1)      # packets consumed of port q's ring
    return np.stack([port_packets_sent(c), head[c["port_peer"]]]).astype(np.float64)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=8.0)
    ap.add_argument("--cc", default="none")
    ap.add_argument("--skip", type=int, default=300)
    ap.add_argument("--windows", type=int, default=600)
    ap.add_argument("--fixed", type=float, default=2.0, help="a node-window's cost beside its events, in events")
    ap.add_argument("--alpha", type=float, action="append", help="a routing step's cost, in events (repeatable)")
    ap.add_argument("--beta", type=float, action="append", help="a barrier's cost, in events (repeatable)")
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
    pev = np.array(rows)                     # windows x 2 x ports: sent, received
    sent, recv = pev[:, 0], pev[:, 1]
    node = c["port_node"]
    host = c["node_is_host"] == 1

    def per_node(x: np.ndarray) -> np.ndarray:       # windows x ports -> windows x nodes
        return np.stack([np.bincount(node, weights=w, minlength=n) for w in x])

    ev = per_node(sent + recv)                                                     # windows x nodes
    busiest_port = np.stack([np.maximum.reduceat(w, c["node_port_lo"]) for w in sent + recv])
    lanes = np.where(host, ev, busiest_port) + args.fixed
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
    sw_ports = ~host[node]
    hosts_max = np.where(host, cost, 0).max(axis=1)
    arrivals = np.where(host, 0, per_node(recv)).max(axis=1)            # the most a switch routes
    inring = np.where(sw_ports, recv, 0).max(axis=1)                     # the most one in-ring holds
    port_task = (np.where(sw_ports, 2 * sent, 0)).max(axis=1) + args.fixed
    for alpha in args.alpha or [0.5, 1.0]:
        for beta in args.beta or [0.0, 4.0]:
            built = (np.maximum(hosts_max, args.fixed + alpha * arrivals) + port_task + 2 * beta).sum()
            routed = (np.maximum(hosts_max, args.fixed + alpha * inring) + port_task + 2 * beta).sum()
            beside = (np.maximum(hosts_max, args.fixed + alpha * inring + beta + port_task) + beta).sum()
            print(f"routing step {alpha:g}, barrier {beta:g}: lanes as built {barrier / built:.3f}x, "
                  f"routed on lanes {barrier / routed:.3f}x, hosts beside {barrier / beside:.3f}x "
                  "(against the serial windows)")


if __name__ == "__main__":
    main()
