"""DCQCN events of one run in mvopt's reference simulator: ECN marks, CNPs and rate changes.

    python experiments/hpcc_ref/trace_dcqcn.py /tmp/mvopt-hpcc-ref-draws/ft-permutation/shipped-dcqcn --flow 76,21

FOLDER holds a run's topology.txt, flow.txt and config.txt (compare.py or draws.py writes
them). The run goes through mvopt.engine.reference (event by event, the engine's oracle; about
40 s for ft-permutation) with ``simulation.seed`` ``--seed``, and prints, in microseconds after
the first flow's start, each packet newly marked CE (switch, port, bytes left in its data queue,
flow, packet index), each CE echo the sender receives (a CNP in the HPCC simulator's terms) and
each DCQCN rate decrease or increase: the lines the HPCC simulator's ``PRINT_LOG`` build of
rdma-hw.cc prints for the same events. ``--flow SRC,DST`` keeps the lines of that flow.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path
from types import SimpleNamespace


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("folder", help="a run's folder (topology.txt, flow.txt, config.txt)")
    ap.add_argument("--seed", type=int, default=1, help="simulation.seed (default 1)")
    ap.add_argument("--flow", help="SRC,DST host ids: only this flow's lines")
    args = ap.parse_args(argv)
    from mvopt.commands.simulate import _hpcc_built, _hpcc_config
    from mvopt.engine import reference as R

    folder = Path(args.folder)
    paths = SimpleNamespace(hpcc_topology=str(folder / "topology.txt"), hpcc_flows=str(folder / "flow.txt"),
                            hpcc_config=str(folder / "config.txt"), hpcc_paths=None)
    cfg, topo, flows, _ = _hpcc_config(paths)
    cfg = dataclasses.replace(cfg, simulation=dataclasses.replace(cfg.simulation, seed=args.seed))
    exp = _hpcc_built(cfg, topo, flows, paths).experiment
    want = tuple(int(x) for x in args.flow.split(",")) if args.flow else None
    ends = {i: (f.src, f.dst) for i, f in enumerate(flows)}
    t0 = min(f.start_ps for f in flows)

    def show(now: int, fid: int, text: str) -> None:
        if want is None or ends.get(fid) == want:
            print(f"{(now - t0) / 1e6:10.3f} us  flow {fid} {ends[fid][0]}->{ends[fid][1]}  {text}")

    dequeue, feedback, timer = R.ReferenceSimulator._switch_dequeue, R.Dcqcn.on_feedback, R.Dcqcn.on_timer

    def traced_dequeue(sim, sw, port):
        pkt = dequeue(sim, sw, port)
        if pkt.ce and not getattr(pkt, "_traced", False):       # marked here, not upstream
            pkt._traced = True
            show(sim.now, pkt.flow, f"CE mark at switch {port.node} port {port.id}, {port.data_bytes} B left, "
                                    f"packet {pkt.seq}")
        return pkt

    def traced_feedback(cc, flow, fb, now):
        if fb.ce:
            show(now, flow.id, f"CNP (CE echo on the ACK of {fb.seq} packets), rate {flow.rate / 1e9:.3f} Gb/s")
        feedback(cc, flow, fb, now)

    def traced_timer(cc, flow, kind, now):
        before = flow.rate
        timer(cc, flow, kind, now)
        if kind != R.T_ALPHA and flow.rate != before:
            what = "decrease" if kind == R.T_DECREASE else "increase"
            show(now, flow.id, f"rate {what} {before / 1e9:.3f} -> {flow.rate / 1e9:.3f} Gb/s, alpha {cc.alpha:.4f}")

    R.ReferenceSimulator._switch_dequeue = traced_dequeue
    R.Dcqcn.on_feedback = traced_feedback
    R.Dcqcn.on_timer = traced_timer
    res = R.simulate_reference(exp)
    print(f"end {(res.end_ps - t0) / 1e6:.3f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
