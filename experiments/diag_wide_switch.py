"""Why a wide, busy switch paces a GPU batch: time per window and per event of its thread.

    python experiments/diag_wide_switch.py --backend gpu --batches 1,16,200 --mib 2,8
    python experiments/diag_wide_switch.py --backend cpu --batches 1 --mib 2        # the CPU's figure

The topology space's slowest configurations on the GPU are rail-optimised clusters of 4
servers per group: 64 servers x 8 NICs, 128-port spines that forward ~570 packets per 500 ns
window at 8 MiB per NIC (all-reduce ring over all 512 NICs). One GPU thread runs one node, so a
window lasts at least as long as that spine's thread takes for its ~1,100 events (arrivals and
transmissions). This runs ``--batches`` copies of that configuration as one batch and reports,
per batch: windows, kernel time (GPU) or run time (CPU) per window, the busiest switch's events per
window (arrivals + transmissions = twice its packets sent, from the per-node counters), and the
time per such event.
Batch 1 gives the thread's own latency per event (the spine has an SM to itself); larger batches
show what sharing the SMs with other nodes costs it. Prints only; copies are identical, which is
checked.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from bench_optimizer import space_data  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.engine import build_batch, get_backend  # noqa: E402
from mvopt.engine.batch import extract_results, node_order, node_packets_sent  # noqa: E402
from mvopt.optimize import load_space  # noqa: E402

# diag_generation's configuration #11 (seed 0): the slowest of its 40 on one CPU core
PARAMS = {"cluster.topology": "rail_optimized", "cluster.oversubscription": 2.0, "cluster.servers_per_group": 4,
          "network.lb": "ecmp", "network.ecn.kmin_kb": 1360.0, "ecn_span": 2.17, "network.buffer_mb": 25.9}


def experiment(nbytes: int):
    args = argparse.Namespace(space=ROOT / "search_spaces" / "topology.yaml", backend="diag", distinct=True,
                              small=True, small_bytes=nbytes)
    cand = load_space(space_data(args)).candidate(PARAMS)
    if not cand.feasible:
        raise SystemExit(f"diag_wide_switch: the configuration is infeasible: {cand.reason}")
    return build_experiment(cand.config)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="gpu", choices=("cpu", "gpu"))
    ap.add_argument("--batches", default="1,16,200")
    ap.add_argument("--mib", default="2", help="all-reduce MiB per NIC, comma-separated (default 2)")
    ap.add_argument("--orders", default="default,widest-first",
                    help="GPU node orders to compare (mvopt.engine.batch.node_order; results do not depend on it)")
    args = ap.parse_args()
    be = get_backend(args.backend)
    print("| MiB | batch | node order | windows | time per window (ms) | busiest switch: ports / events per window | "
          "µs per busiest-switch event | identical copies |")
    print("|---|---:|---|---:|---:|---|---:|---|")
    for mib in (float(m) for m in args.mib.split(",")):
        exp = experiment(int(mib * 2**20))
        for n, order in ((int(b), o) for b in args.batches.split(",") for o in args.orders.split(",")):
            batch = build_batch([exp] * n)
            batch.cols["node_order"][:] = node_order(batch.cols, widest_first=order == "widest-first")
            t = time.perf_counter()
            iters = be.run(batch)
            wall = time.perf_counter() - t
            secs = getattr(be, "last_timing", {}).get("kernel_s", wall)   # the GPU's kernel time
            res = extract_results(batch, iters)
            topo = exp.topology
            nn = int(topo.n_node)
            sent = node_packets_sent(batch.cols)[:nn]
            # a switch's events: each packet it sends arrived first (lossless; its own PFC frames
            # aside), so arrivals + transmissions = 2 x sends
            busiest = int(np.argmax(np.where(np.arange(nn) >= int(topo.n_host), sent, -1)))
            windows = res[0].windows
            ev_per_window = 2.0 * float(sent[busiest]) / windows
            ports = int(np.diff(np.asarray(topo.node_port_offset))[busiest])
            same = all(r.same_as(res[0]) for r in res[1:])
            print(f"| {mib:g} | {n} | {order} | {windows:,} | {secs / windows * 1e3:.3f} | {ports} / {ev_per_window:,.0f} | "
                  f"{secs / windows / ev_per_window * 1e6:.2f} | {'yes' if same else 'NO'} |", flush=True)


if __name__ == "__main__":
    main()
