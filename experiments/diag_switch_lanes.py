"""How many of a switch's windows could run its egress ports on separate lanes (docs/performance.md,
"Next steps": a busy switch's window over several lanes), on workload (a) run window by window
on the CPU backend.

A window passes when no decision of the switch in it can depend on the order of its ports'
events, judged from the state at the window's start and the packets that will arrive in it
(all visible then): no headroom in use, and every ingress port's bytes plus all its arrivals
below the dynamic threshold computed as if every arrival of the window were shared; with PFC,
no port paused or asked to pause and no PFC frame pending; without PFC, the buffer holds every
arrival. (The kernel's check, switch_lanes_apply, also wants no monitor sample due: not checked
here; and never-used pool slots for every arrival: counted apart, last column.) Prints, per kind
of switch, the busy windows (an arrival or a transmission), the share that passes, the share of
the switches' events (arrivals and transmissions) in windows that pass, and of those in windows
that also pass the pool condition.

    PYTHONPATH=. python experiments/diag_switch_lanes.py --mib 4
    PYTHONPATH=. python experiments/diag_switch_lanes.py --mib 1 --incast
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine._cpu import CpuBackend  # noqa: E402
from mvopt.engine.batch import ST_RUN, exp_int  # noqa: E402
from mvopt.engine.schema import LK, NLK, NPI, NPT, PFC, PI, PKT_DTYPE, PT  # noqa: E402
from mvopt.testing.scenarios import fat_tree_flows  # noqa: E402

PK_DATA = 0


def window_arrivals(c: dict, pkt: np.ndarray, v: int, te: int, par: int) -> tuple[np.ndarray, np.ndarray]:
    """Packets and data bytes arriving at switch v in the window ending at te, per port."""
    lo, hi = int(c["node_port_lo"][v]), int(c["node_port_hi"][v])
    tx, wire = c["port_tx"].reshape(-1, NPT), c["port_wire"].reshape(-1, 4)
    count, data = np.zeros(hi - lo, np.int64), np.zeros(hi - lo, np.int64)
    for k, i in enumerate(range(lo, hi)):
        q = int(c["port_peer"][i])
        head, tail = int(c["port_head"][q * 2 + par]), int(tx[q, PT["tail"] + (par ^ 1)])
        for pos in range(head, tail):
            p = pkt[int(wire[q, 0]) + (pos & (int(wire[q, 1]) - 1))]
            if p["t"] >= te:
                break
            count[k] += 1
            if p["type"] == PK_DATA:
                data[k] += int(p["bytes"])
    return count, data


def order_free(c: dict, v: int, data: np.ndarray, pfc: bool, reserve: int) -> bool:
    """Whether no MMU or PFC decision of switch v's window can depend on its events' order (the
    kernel's switch_lanes_apply without its pool (counted apart) and monitor conditions; its
    per-packet admission margin, for headroom smaller than a packet, is left out too)."""
    lo, hi = int(c["node_port_lo"][v]), int(c["node_port_hi"][v])
    rec = c["port_in"].reshape(-1, NPI)[lo:hi]
    if (rec[:, PI["in_hdrm"]] != 0).any():
        return False
    if pfc and (rec[:, PI["pfc"]] & (PFC["in_paused"] | PFC["sent"]) != 0).any():
        return False
    if not pfc and int(c["node_data_bytes"][v]) + int(data.sum()) > int(c["node_buffer"][v]):
        return False
    shared = int(c["node_shared_used"][v]) + int(data.sum())
    free = max(0, int(c["node_buffer"][v]) - int(c["node_reserved"][v]) - shared)
    for k in range(hi - lo):
        shift = int(c["link"].reshape(-1, NLK)[c["port_wire"].reshape(-1, 4)[lo + k, 2], LK["shift"]])
        if data[k] and max(0, rec[k, PI["in_bytes"]] + data[k] - reserve) >= free >> shift:
            return False
    return True


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=2.0, help="all-reduce size per host (MiB)")
    ap.add_argument("--cc", default="none")
    ap.add_argument("--incast", action="store_true", help="a 15-to-1 incast instead (deep queues, PFC)")
    args = ap.parse_args()
    if args.incast:
        exp = fat_tree_flows([(s, 0) for s in range(1, 16)], int(args.mib * 2**20), cc=args.cc)
    else:
        exp = build_experiment(allreduce_config(args.cc, int(args.mib * 2**20)))
    batch = build_batch([exp])
    c = batch.cols
    backend = CpuBackend()
    pfc, reserve = bool(exp_int(c, "pfc")[0]), int(exp_int(c, "reserve")[0])
    switches = np.flatnonzero(c["node_is_host"] == 0)
    hosts_on = np.bincount(c["port_node"], weights=c["node_is_host"][c["port_node"][c["port_peer"]]],
                           minlength=c["node_is_host"].size)
    kind = {int(v): "top-of-rack" if hosts_on[v] else "other" for v in switches}
    busy, passed, events, events_passed, pooled = (defaultdict(int) for _ in range(5))
    tx = c["port_tx"].reshape(-1, NPT)
    windows = 0
    backend.run(batch, max_iters=0)          # (the packet slots now live on the batch)
    while c["exp_status"][0] == ST_RUN:
        te = int(c["exp_T_ps"][0] + c["exp_window_ps"][0])
        par = int(c["exp_iter"][0]) & 1
        pkt = batch.scratch["pkt"].view(PKT_DTYPE)
        before = {int(v): (window_arrivals(c, pkt, int(v), te, par),
                           # packets its ports sent so far (the window writes the tails of its parity)
                           int(tx[c["node_port_lo"][v]:c["node_port_hi"][v], PT["tail"] + (par ^ 1)].sum()))
                  for v in switches}
        ok = {v: order_free(c, v, arr[1], pfc, reserve) for v, (arr, _) in before.items()}
        # the kernel also wants a never-used pool slot for every arrival (lanes take slots by a
        # shared bump pointer): counted apart, to show what that condition costs
        room = {v: int(c["node_pool_hi"][v]) - int(c["node_pool_next"][v]) >= int(arr[0].sum())
                for v, (arr, _) in before.items()}
        backend.run(batch, max_iters=1)
        windows += 1
        for v, ((count, _), sent0) in before.items():
            lo, hi = int(c["node_port_lo"][v]), int(c["node_port_hi"][v])
            n = int(count.sum()) + int(tx[lo:hi, PT["tail"] + par].sum()) - sent0
            if n:
                busy[kind[v]] += 1
                events[kind[v]] += n
                if ok[v]:
                    passed[kind[v]] += 1
                    events_passed[kind[v]] += n
                    pooled[kind[v]] += n if room[v] else 0
    what = "a 15-to-1 incast" if args.incast else "workload (a)"
    print(f"{what}, {args.mib:g} MiB, cc {args.cc}, PFC {'on' if pfc else 'off'}: {windows} windows")
    print("switches       busy windows   events per busy window   pass   events in windows that pass   and pool room")
    for k in sorted(busy):
        print(f"{k:<14} {busy[k]:12d}  {events[k] / busy[k]:22.1f}  {passed[k] / busy[k]:6.1%}  "
              f"{events_passed[k] / max(1, events[k]):6.1%}  {pooled[k] / max(1, events[k]):28.1%}")


if __name__ == "__main__":
    main()
