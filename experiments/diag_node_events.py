"""Events per node per window of workload (a) (k=4 fat-tree ring all-reduce, 1500-byte packets)
on the CPU backend: packets each node put on the wire and received (its ports' ring tails and
its peers'), divided by the experiment's windows. On the GPU a window of a block lasts as long
as its busiest node's events (docs/performance.md, "Where the time goes").

    PYTHONPATH=. python experiments/diag_node_events.py --mib 8
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
from mvopt.engine.schema import NPT, PT  # noqa: E402


def node_packets(cols: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per port the packets it put on the wire; per node the packets it sent and received, from a
    single experiment's batch columns after a run (its ports' ring tails and its peers')."""
    tx = cols["port_tx"].reshape(-1, NPT)
    sent = np.maximum(tx[:, PT["tail"]], tx[:, PT["tail"] + 1])        # packets each port put on the wire
    n = cols["node_is_host"].size
    out = np.bincount(cols["port_node"], weights=sent, minlength=n)
    into = np.bincount(cols["port_node"], weights=sent[cols["port_peer"]], minlength=n)
    return sent, out, into


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=8.0, help="all-reduce size per host (MiB)")
    ap.add_argument("--cc", default="none")
    args = ap.parse_args()
    batch = build_batch([build_experiment(allreduce_config(args.cc, int(args.mib * 2**20)))])
    CpuBackend().run(batch)
    c = batch.cols
    sent, out, into = node_packets(c)
    n = c["node_is_host"].size
    windows = int(c["exp_iter"][0])
    ports = c["node_port_hi"] - c["node_port_lo"]
    hosts_on = np.bincount(c["port_node"], weights=c["node_is_host"][c["port_node"][c["port_peer"]]], minlength=n)
    print(f"{windows} windows, {int(sent.sum())} packet-hops, {sent.sum() / windows:.1f} per window")
    print("node  kind                 sent/window  received/window  events/window")
    for v in range(n):
        kind = "host" if c["node_is_host"][v] else f"switch, {ports[v]} ports, {int(hosts_on[v])} to hosts"
        print(f"{v:4d}  {kind:<22} {out[v] / windows:9.2f}  {into[v] / windows:15.2f}  {(out[v] + into[v]) / windows:13.2f}")


if __name__ == "__main__":
    main()
