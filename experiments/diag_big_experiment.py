"""Where one large training experiment's windows go, on the CPU backend: every CHUNK windows,
the packets each node put on the wire per window (the busiest nodes, their port counts) and the
active flows per NIC (their mean and maximum), for a rail-sampled GPT-3 175B iteration
(bench_taskgraph_54k's configuration) of SERVERS servers and DP groups. A GPU runs one thread
per node, so the busiest node's serial events set the pace of a window.

    OMP_NUM_THREADS=1 PYTHONPATH=. python experiments/diag_big_experiment.py --servers 448 --dp 28 --groups-per-pod 2

Prints only.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--servers", type=int, default=448)
    ap.add_argument("--dp", type=int, default=28)
    ap.add_argument("--groups-per-pod", type=int, default=2)
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--chunk", type=int, default=500, help="windows per line")
    args = ap.parse_args()
    from bench_taskgraph_54k import config
    from mvopt.build import build_experiment
    from mvopt.engine import build_batch
    from mvopt.engine._cpu import CpuBackend
    from mvopt.engine.batch import node_packets_sent

    size = {"servers": args.servers, "dp": args.dp, "groups_per_pod": args.groups_per_pod}
    batch = build_batch([build_experiment(config(size, True, {}, {}))], compact=True)
    cols, be = batch.cols, CpuBackend(threads=1)
    ports = cols["node_port_hi"] - cols["node_port_lo"]
    host = cols["node_is_host"] == 1
    kinds, counts = np.unique(ports[~host], return_counts=True)
    print(f"{int(host.sum())} NICs; switches by port count: "
          + ", ".join(f"{int(c)} of {int(k)}" for k, c in zip(kinds, counts)))
    before = node_packets_sent(cols).copy()
    for _ in range(args.chunks):
        windows = be.run(batch, max_iters=args.chunk, resumable=True)
        if not windows:
            break
        sent = node_packets_sent(cols)
        per = (sent - before) / windows
        before = sent.copy()
        top = np.argsort(per)[::-1][:3]
        act = cols["node_act_n"][host]
        print(f"T {int(cols['exp_T_ps'][0]) // 10**6:>6} us: packets put on the wire per window {per.sum():,.0f}; "
              f"busiest nodes {', '.join(f'{per[v]:.0f} ({int(ports[v])} ports)' for v in top)}; "
              f"a busy node's mean {per[per > 0].mean():.1f}; active flows per NIC mean {act.mean():.2f}, max {int(act.max())}",
              flush=True)


if __name__ == "__main__":
    main()
