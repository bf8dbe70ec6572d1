"""Run mvopt and ns-3 on the same scenarios and print a side-by-side table.

    python experiments/ns3/compare.py                  # every scenario, small sizes (~2 min on 2 cores)
    python experiments/ns3/compare.py --only exact     # the line-rate scenarios only
    python experiments/ns3/compare.py --scale 4        # 4x the bytes
    python experiments/ns3/compare.py --write-docs     # also put the tables into docs/validation.md

Each scenario is an mvopt configuration (built with ``build_experiment(load_config(...))``); the
same topology (ports, rates, delays), routing tables, ECMP seed and task graph are written to a
text file that ``mvopt_ns3`` (experiments/ns3/mvopt_ns3.cc, compiled by build.py) simulates.

* **exact** (``cc: none``): single flows across 2, 4 and 6 hops of a k=4 fat-tree and a
  host-order ring all-reduce over every host of a k=4 and a k=8 fat-tree (one chunk of S/n per
  step, step t+1 sent when step t was received). Both simulators must give every flow the same
  start, last-byte delivery and last-ACK time, to the picosecond.
* **contended** (mvopt ``cc: dctcp``, rate-based as RDMA NICs; ns-3 TCP with TcpDctcp and RED/ECN
  switch queues): an incast and a random permutation; total completion and FCT percentiles,
  with ECN mark counts and the bottleneck queue of both. See README.md for the model
  differences these numbers show.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import build as ns3build  # noqa: E402  (experiments/ns3/build.py)

from mvopt.config import load_config  # noqa: E402
from mvopt.engine import FLOW, simulate  # noqa: E402
from mvopt.experiment import build_experiment  # noqa: E402

DOC = REPO / "docs" / "validation.md"
NET_EXACT = {"cc": "none", "lb": "ecmp", "payload_bytes": 1000, "header_bytes": 48, "ack_bytes": 60,
             "ecn": {"enabled": False}}


# ------------------------------------------------------------------------------------ scenarios


@dataclass
class Scenario:
    name: str
    mode: str                    # exact | tcp
    config: dict
    note: str = ""
    traced: tuple[int, ...] = ()  # tcp: ports whose queue is sampled (the bottleneck)
    extra: dict = field(default_factory=dict)


def fat_tree(k: int) -> dict:
    return {"topology": "fat_tree", "k": k, "link_gbps": [100], "link_delay_ns": [1000]}


def exact_scenarios(scale: float) -> list[Scenario]:
    size = int(100_007 * scale)            # 101 packets, the last one short (7 B)
    out = []
    for dst, hops, where in ((1, 2, "same edge"), (2, 4, "same pod"), (4, 6, "other pod")):
        out.append(Scenario(
            f"single flow, {hops} hops", "exact",
            {"name": f"single{hops}", "cluster": fat_tree(4), "network": NET_EXACT,
             "workload": {"kind": "tasks", "tasks": [{"id": "f", "src": 0, "dst": dst, "bytes": size}]}},
            note=f"{size} B, host 0 -> {dst} ({where})"))
    for k, step in ((4, int(32_000 * scale)), (8, int(4_000 * scale))):
        n = k**3 // 4
        out.append(Scenario(
            f"ring all-reduce, k={k} fat-tree", "exact",
            {"name": f"ring{k}", "cluster": fat_tree(k), "network": NET_EXACT,
             "workload": {"kind": "collective"},
             "collective": {"op": "all_reduce", "bytes": n * step, "channels": 1}},
            note=f"{n} hosts, S = {n * step} B, {2 * (n - 1)} steps of {step} B"))
    return out


# the contended scenarios: DCTCP on both sides; headers sized as ns-3 TCP without options
# (PPP 2 + IPv4 20 + TCP 20 = 42 B; a pure ACK is 42 B), PFC off (ns-3 has none)
K_KB = 100.0


def net_dctcp() -> dict:
    return {"cc": "dctcp", "lb": "ecmp", "payload_bytes": 1000, "header_bytes": 42, "ack_bytes": 42,
            "ecn": {"enabled": True, "kmin_kb": K_KB, "kmax_kb": K_KB, "pmax": 1.0},
            "pfc": {"enabled": False}}


def contended_scenarios(scale: float, seed: int = 1) -> list[Scenario]:
    size = int(1_000_000 * scale)
    out = []
    senders = list(range(1, 16))
    tasks = [{"id": f"s{s}", "src": s, "dst": 0, "bytes": size} for s in senders]
    out.append(Scenario(
        "incast 15 -> 1, k=4 fat-tree", "tcp",
        {"name": "incast", "cluster": fat_tree(4), "network": net_dctcp(),
         "workload": {"kind": "tasks", "tasks": tasks}},
        note=f"hosts 1..15 send {size} B each to host 0 at t=0"))
    rng = np.random.default_rng(seed)
    n = 16
    while True:
        perm = rng.permutation(n)
        if not (perm == np.arange(n)).any():
            break
    tasks = [{"id": f"p{i}", "src": i, "dst": int(perm[i]), "bytes": size} for i in range(n)]
    out.append(Scenario(
        "permutation, k=4 fat-tree", "tcp",
        {"name": "permutation", "cluster": fat_tree(4), "network": net_dctcp(),
         "workload": {"kind": "tasks", "tasks": tasks}},
        note=f"every host sends {size} B to a distinct other host (random derangement, seed {seed})"))
    return out


# ------------------------------------------------------------------------------------ ns-3 side


def write_scenario(path: Path, exp, mode: str, traced: tuple[int, ...] = ()) -> None:
    topo, net, g, p = exp.topology, exp.network, exp.tasks, exp.params
    lines = [f"mode {mode}", f"seed {exp.seed}", f"window_ps {p.window_ps}",
             f"net {net.payload_bytes} {net.header_bytes} {net.ack_bytes}"]
    if mode == "tcp":
        k = int(round(net.ecn.kmin_kb * 1000))
        buffer = int(round((net.buffer_mb or 32) * 1e6))
        lines.append(f"tcp {k} {net.dctcp.g} {net.rto_us} {buffer} {WARMUP_PS}")
    lines.append(f"nodes {topo.n_host} {topo.n_node}")
    for q in range(topo.n_port):
        lines.append(f"port {q} {topo.port_node[q]} {topo.port_peer_node[q]} {topo.port_peer_port[q]} "
                     f"{topo.port_rate_bps[q]} {topo.port_delay_ps[q]}")
    for sw in range(topo.n_host, topo.n_node):
        for dst in range(topo.n_host):
            nh = topo.next_hop_ports(sw, dst)
            lines.append(f"route {sw} {dst} {len(nh)} " + " ".join(map(str, nh)))
    for t in range(g.n):
        preds = g.preds_of(t)
        lines.append(f"task {t} {0 if g.kind[t] == FLOW else 1} {g.src[t]} {g.dst[t]} {g.size_bytes[t]} "
                     f"{g.duration_ps[t]} {g.start_ps[t]} {len(preds)} " + " ".join(map(str, preds)))
    lines += [f"trace {q}" for q in traced]
    path.write_text("\n".join(lines) + "\n")


WARMUP_PS = 50_000_000   # tcp mode: connections are set up during 50 us before t = 0


@dataclass
class Ns3Result:
    start: np.ndarray
    finish: np.ndarray
    fct_end: np.ndarray
    counters: dict
    qtrace: dict
    wall_s: float
    events: int


def run_ns3(exp, mode: str, traced: tuple[int, ...] = (), binary: Path | None = None,
            keep: str | None = None) -> Ns3Result:
    binary = binary or ns3build.build()
    with tempfile.TemporaryDirectory(prefix="mvopt_ns3_") as tmp:
        path = Path(tmp) / "scenario.txt"
        write_scenario(path, exp, mode, traced)
        if keep:
            Path(keep).write_text(path.read_text())
        r = subprocess.run([str(binary), str(path)], capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"mvopt_ns3 failed ({r.returncode}):\n{r.stderr[-3000:]}")
    n = exp.tasks.n
    start, finish, fct_end = (np.full(n, -1, np.int64) for _ in range(3))
    counters, qtrace, wall, events = {}, {}, 0.0, 0
    for line in r.stdout.splitlines():
        f = line.split()
        if not f:
            continue
        if f[0] == "task":
            t = int(f[1])
            start[t], finish[t], fct_end[t] = int(f[2]), int(f[3]), int(f[4])
        elif f[0] == "counter":
            counters[f[1]] = int(f[2])
        elif f[0] == "qtrace":
            qtrace.setdefault(int(f[1]), []).append((int(f[2]), int(f[3])))
        elif f[0] == "done":
            wall, events = float(f[1]), int(f[2])
    return Ns3Result(start, finish, fct_end, counters, qtrace, wall, events)


# ------------------------------------------------------------------------------------ comparison


def fmt_us(ps: float) -> str:
    return f"{ps / 1e6:,.3f}"


def compare_exact(sc: Scenario, binary: Path) -> dict:
    exp = build_experiment(load_config(sc.config))
    t0 = time.perf_counter()
    res, = simulate([exp])
    mv_wall = time.perf_counter() - t0
    assert res.status == "done", res.diagnostic
    c = res.counters
    assert c["data_packets_dropped"] == 0 and c["pfc_pauses"] == 0, "exact scenarios must not congest"
    ns = run_ns3(exp, "exact", binary=binary)
    flows = res.flow_ids
    mv_fct_end = res.task_start_ps[flows] + res.flow_fct_ps
    d_start = np.abs(res.task_start_ps - ns.start)
    d_fin = np.abs(res.task_finish_ps - ns.finish)
    d_fct = np.abs(mv_fct_end - ns.fct_end[flows])
    exact = int(((d_fin[flows] == 0) & (d_fct == 0) & (d_start[flows] == 0)).sum())
    return {
        "scenario": sc.name, "note": sc.note, "flows": len(flows),
        "mv_makespan": int(res.makespan_ps), "ns_makespan": int(ns.finish.max()),
        "mv_end": int(mv_fct_end.max()), "ns_end": int(ns.fct_end[flows].max()),
        "max_d_start": int(d_start.max()), "max_d_finish": int(d_fin.max()), "max_d_fct": int(d_fct.max()),
        "exact": exact, "mv_wall": mv_wall, "ns_wall": ns.wall_s, "ns_events": ns.events,
        "ok": exact == len(flows),
    }


def exact_table(rows: list[dict]) -> str:
    out = ["| scenario | flows | last byte delivered, mvopt (us) | ns-3 (us) | last ACK, mvopt (us) | ns-3 (us) "
           "| max abs diff start / delivery / last ACK (ps) | flows identical | wall mvopt / ns-3 (s) |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        out.append(f"| {r['scenario']} ({r['note']}) | {r['flows']} | {fmt_us(r['mv_makespan'])} | "
                   f"{fmt_us(r['ns_makespan'])} | {fmt_us(r['mv_end'])} | {fmt_us(r['ns_end'])} | "
                   f"{r['max_d_start']} / {r['max_d_finish']} / {r['max_d_fct']} | "
                   f"{r['exact']}/{r['flows']} | {r['mv_wall']:.1f} / {r['ns_wall']:.1f} |")
    return "\n".join(out)


def percentiles(x: np.ndarray) -> dict:
    return {q: float(np.percentile(x, q)) for q in (50, 95, 99)} | {"max": float(x.max())}


def compare_tcp(sc: Scenario, binary: Path) -> dict:
    exp = build_experiment(load_config(sc.config))
    topo = exp.topology
    g = exp.tasks
    # the bottleneck: the egress towards the most loaded destination host
    dsts = np.bincount(g.dst[g.kind == FLOW], minlength=topo.n_host)
    hot = int(np.argmax(dsts))
    hot_port = int(topo.port_peer_port[topo.host_port(hot)])     # the switch port into `hot`
    t0 = time.perf_counter()
    res, = simulate([exp])
    mv_wall = time.perf_counter() - t0
    ns = run_ns3(exp, "tcp", traced=(hot_port,), binary=binary)
    flows = res.flow_ids
    mv_fct = res.flow_fct_ps.astype(float)
    ns_fct = (ns.fct_end[flows] - ns.start[flows]).astype(float)
    mv_done = res.task_finish_ps[flows].astype(float)
    ns_done = ns.finish[flows].astype(float)
    q = ns.qtrace.get(hot_port, [])
    return {
        "scenario": sc.name, "note": sc.note, "flows": len(flows), "status": res.status,
        "mv_total": float(mv_done.max()), "ns_total": float(ns_done.max()),
        "mv_fct": percentiles(mv_fct), "ns_fct": percentiles(ns_fct),
        "mv_marks": int(res.counters["ecn_marks"]), "ns_marks": ns.counters.get("ecn_marks", 0),
        "mv_drops": int(res.counters["data_packets_dropped"]), "ns_drops": ns.counters.get("queue_disc_drops", 0),
        "mv_maxq": int(res.port_max_queue_bytes[hot_port]), "ns_maxq": max((b for _, b in q), default=0),
        "ns_meanq": float(np.mean([b for _, b in q])) if q else 0.0,
        "mv_data_pkts": int(res.counters["data_packets_sent"]),
        "mv_wall": mv_wall, "ns_wall": ns.wall_s,
    }


def tcp_table(rows: list[dict]) -> str:
    out = ["| scenario | metric | mvopt (RDMA DCTCP) | ns-3 (TCP DCTCP) | ns-3 / mvopt - 1 |",
           "|---|---|---:|---:|---:|"]
    for r in rows:
        items = [("total completion (us)", r["mv_total"], r["ns_total"])]
        for k in (50, 95, 99, "max"):
            items.append((f"FCT p{k} (us)" if k != "max" else "FCT max (us)", r["mv_fct"][k], r["ns_fct"][k]))
        for i, (m, a, b) in enumerate(items):
            name = f"{r['scenario']} ({r['note']})" if i == 0 else ""
            out.append(f"| {name} | {m} | {fmt_us(a)} | {fmt_us(b)} | {100 * (b / a - 1):+.1f} % |")
        out.append(f"| | ECN marks (packets) | {r['mv_marks']:,} | {r['ns_marks']:,} | |")
        out.append(f"| | drops | {r['mv_drops']} | {r['ns_drops']} | |")
        out.append(f"| | bottleneck queue max (KB) | {r['mv_maxq'] / 1e3:,.1f} | {r['ns_maxq'] / 1e3:,.1f} | |")
    return "\n".join(out)


# ------------------------------------------------------------------------------------ main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", choices=("exact", "contended"), help="run one group of scenarios")
    ap.add_argument("--scale", type=float, default=1.0, help="multiply every byte count (default 1)")
    ap.add_argument("--write-docs", action="store_true", help="write the tables into docs/validation.md")
    args = ap.parse_args(argv)
    reason = ns3build.unavailable_reason()
    if reason:
        print(f"cannot run the ns-3 side: {reason}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    binary = ns3build.build()
    print(f"ns-3 scenario binary: {binary} ({time.perf_counter() - t0:.1f} s)", flush=True)
    sections = []
    ok = True
    if args.only in (None, "exact"):
        rows = []
        for sc in exact_scenarios(args.scale):
            rows.append(compare_exact(sc, binary))
            r = rows[-1]
            print(f"  {sc.name}: {r['exact']}/{r['flows']} flows identical "
                  f"(max diff {r['max_d_finish']} ps delivery, {r['max_d_fct']} ps last ACK)", flush=True)
            ok &= r["ok"]
        sections.append(("exact", exact_table(rows)))
        print("\nLine rate (cc none): mvopt vs ns-3, every flow compared\n" + exact_table(rows) + "\n", flush=True)
    if args.only in (None, "contended"):
        rows = []
        for sc in contended_scenarios(args.scale):
            rows.append(compare_tcp(sc, binary))
            print(f"  {sc.name}: done", flush=True)
        sections.append(("contended", tcp_table(rows)))
        print("\nContended (DCTCP): mvopt vs ns-3\n" + tcp_table(rows) + "\n", flush=True)
    if args.write_docs:
        write_docs(sections, args)
    return 0 if ok else 1


def write_docs(sections, args) -> None:
    sys.path.insert(0, str(REPO / "experiments"))
    from _report import provenance, update_section
    cmd = "python experiments/ns3/compare.py --write-docs" + (f" --only {args.only}" if args.only else "") \
        + (f" --scale {args.scale:g}" if args.scale != 1 else "")
    parts = ["## ns-3 cross-validation", "",
             "Harness: `experiments/ns3/` (README there: install, build, run). The same topology, "
             "routing tables, ECMP seed and task graph run in mvopt (CPU backend) and in mainline "
             "ns-3.44 (`pip install --no-deps ns3==3.44.post0`, scenario program "
             "`experiments/ns3/mvopt_ns3.cc`).", "", provenance(cmd), ""]
    for name, table in sections:
        if name == "exact":
            parts += ["### Line rate (`cc: none`): identical to the picosecond", "",
                      EXACT_TEXT, "", table, ""]
        else:
            parts += ["### Contended traffic (DCTCP): where the models differ by design", "",
                      CONTENDED_TEXT, "", table, ""]
    update_section(DOC, "ns3", "\n".join(parts))
    print(f"wrote {DOC.relative_to(REPO)} (section ns3)")


EXACT_TEXT = (
    "ns-3 side: PointToPoint links (store-and-forward, serialization at picosecond resolution), "
    "IPv4 + UDP, one datagram per packet sized so that its wire bytes (PPP 2 + IPv4 20 + UDP 8 + "
    "18 B app header + payload) are mvopt's 1000 + 48 B, a 60 B ACK datagram per in-order packet, "
    "per-flow ECMP with mvopt's hash, strict priority for ACKs at every egress, hosts serving "
    "their active flows round robin. Compared: every flow's start, last-byte delivery and the "
    "sender's receipt of the last ACK.")
CONTENDED_TEXT = "(see experiments/ns3/README.md)"


if __name__ == "__main__":
    sys.exit(main())
