"""How many experiments fit on one GPU, by cluster size (the paper's Fig. 13, concurrency limit).

    python experiments/paper_concurrency.py                      # every workload and size; writes docs/performance.md
    python experiments/paper_concurrency.py --gpus 16,64 --no-write
    python experiments/paper_concurrency.py --memory-gib 80      # an 80 GB H100
    python experiments/paper_concurrency.py --run --run-max 4096 --no-write   # on a GPU machine: run that many
    python experiments/paper_concurrency.py --run --run-slots compact --gpus 128 --workloads rail-training --run-budget-s 120

For each workload and cluster size (GPUs) one experiment is built as the optimizer would build
it (``mvopt.build.build``), then the engine batch of that one experiment
(``mvopt.engine.build_batch``) and of two copies of it; ``batch.nbytes`` is every column the
engine holds (the GPU backend uploads exactly these arrays, nothing else per experiment). The
bytes one more experiment adds are ``nbytes(2) - nbytes(1)``, what the batch holds once
``2 nbytes(1) - nbytes(2)`` (the distinct link classes and the dense routing table of a
topology, which a batch keeps once for all its experiments of that topology and parameters),
and the experiments that fit are ``(memory - reserve - once) // per experiment``.

Workloads (``--workloads``, default all three):

* ``fat-tree-allreduce``: the smallest k-ary fat-tree with at least that many hosts, one GPU per
  host, a flat ring all-reduce of ``--mib`` MiB over the first N hosts, 100 Gb/s links, 1000-byte
  packets (the configuration defaults);
* ``rail-allreduce``: rail-optimised 2-tier cluster of N/8 DGX-like servers (8 GPUs and 8 NICs
  each, 32 servers per rail group, 400 Gb/s), a hierarchical DP all-reduce of ``--mib`` MiB over
  every GPU (intra-server steps analytical, one ring per rail), 4096-byte packets;
* ``rail-training``: the same cluster running one training iteration of GPT-3 13B (TP 8, PP 2,
  DP N/16, sequence parallelism, distributed optimizer, micro-batch 1, 8 micro-batches per
  pipeline), every GPU simulated (no ``rail_sample``).

Congestion control ``--cc`` (default DCQCN); a batch holding any HPCC experiment also stores
5 in-band-telemetry records per packet slot, for every experiment in it (``--cc hpcc`` shows
the cost). ``--run`` (needs a GPU and CuPy) builds a batch of that many experiments (at most
``--run-max``, and at most the int32 cap of one batch) and runs it on the GPU backend, as one
batch (not through the planner), to confirm that it fits and to time it; ``--run-budget-s``
stops the batch after that many seconds (a training iteration is millions of windows) and
reports how far every experiment got: windows, simulated time, packet-hops.

Writes section ``concurrency`` of docs/performance.md, or with ``--run`` section
``concurrency_run`` (the GPU machine's runs, kept apart from the sizing table, which any machine
computes); ``--no-write``: print only.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _report import provenance, update_section  # noqa: E402

GIB = 2**30
MIB = 2**20
WORKLOADS = ("fat-tree-allreduce", "rail-allreduce", "rail-training")
PLANNER_FRACTION = 0.85     # mvopt.engine.sizing.GPU_MEMORY_FRACTION: the share of free GPU memory one batch may take
INT32_LIMIT = 2**31 - 1     # mvopt.engine.sizing.INT32_LIMIT: rows of one table in one batch (int32 indices)


def fat_tree_k(hosts: int) -> int:
    k = 2
    while k**3 // 4 < hosts:
        k += 2
    return k


def config(workload: str, gpus: int, cc: str, mib: float) -> dict:
    """The experiment configuration of one (workload, cluster size)."""
    nbytes = int(mib * MIB)
    if workload == "fat-tree-allreduce":
        k = fat_tree_k(gpus)
        return {"name": f"{workload}-{gpus}",
                "cluster": {"topology": "fat_tree", "k": k, "gpus_per_server": 1},
                "network": {"cc": cc},
                "workload": {"kind": "collective"},
                "collective": {"op": "all_reduce", "bytes": nbytes, "algorithm": "ring",
                               "hosts": list(range(gpus))}}
    if gpus % 16:
        raise SystemExit(f"{workload}: the cluster size must be a multiple of 16 GPUs, got {gpus}")
    servers = gpus // 8
    cluster = {"topology": "rail_optimized", "servers": servers, "servers_per_group": min(32, servers),
               "gpus_per_server": 8, "gpu": "H100", "link_gbps": [400, 400], "link_delay_ns": [500, 1000]}
    network = {"cc": cc, "payload_bytes": 4096}
    if workload == "rail-allreduce":
        return {"name": f"{workload}-{gpus}", "cluster": cluster, "network": network,
                "workload": {"kind": "collective"},
                "collective": {"op": "all_reduce", "bytes": nbytes, "algorithm": "ring", "hierarchical": True}}
    if workload == "rail-training":
        dp = gpus // 16
        return {"name": f"{workload}-{gpus}", "cluster": cluster, "network": network,
                "workload": {"kind": "training", "model": "gpt3-13b"},
                "parallelism": {"tp": 8, "pp": 2, "dp": dp, "micro_batch": 1, "global_batch": 8 * dp,
                                "sequence_parallel": True, "distributed_optimizer": True,
                                "recompute": "selective"}}
    raise SystemExit(f"unknown workload {workload!r} (choose from {', '.join(WORKLOADS)})")


GROUPS = {"n_slot": "packet slots", "n_int": "packet slots", "n_task": "tasks", "n_flow": "tasks", "n_hop": "tasks", "n_pred": "tasks",
          "n_succ": "tasks", "n_heap": "tasks", "n_list": "tasks", "n_fpath": "tasks", "n_port": "ports", "n_link": "ports",
          "n_node": "nodes", "n_route": "routes", "n_nh": "routes", "n_rtab": "routes", "n_rtnh": "routes",
          "n_monq": "monitors", "n_monw": "monitors", "n_exp": "experiment"}


def batch_bytes(exp, budget: float, compact: bool = False) -> dict:
    """Bytes of batches of one and two copies of ``exp`` and how many fit in ``budget`` bytes
    (`compact`: with compact packet slots, mvopt/engine/capacity.py)."""
    from mvopt.engine import build_batch
    from mvopt.engine.schema import COLUMNS, numpy_dtype
    from mvopt.engine.sizing import batch_bytes as planned_bytes, experiment_counts

    t0 = time.perf_counter()
    one = build_batch([exp], compact=compact)
    batch_s = time.perf_counter() - t0
    nb1, counts = one.nbytes, dict(one.counts)
    host1 = sum(a.nbytes for a in one.cols.values())
    del one
    by_group: dict[str, int] = {}
    for col in COLUMNS:                       # from the counts: scratch columns are not held by the batch
        g = GROUPS.get(col.length, col.length)
        by_group[g] = by_group.get(g, 0) + int(counts[col.length]) * col.mult * numpy_dtype(col).itemsize
    two = build_batch([exp, exp], compact=compact)
    nb2 = two.nbytes
    del two
    per, once = nb2 - nb1, 2 * nb1 - nb2
    fit = int((budget - max(0, once)) // per) if per > 0 else 0
    top = sorted(by_group.items(), key=lambda kv: -kv[1])[:3]
    per_exp = experiment_counts(exp, compact=compact)
    planned = planned_bytes(per_exp)
    # the kernels index rows with int32: a batch may hold at most INT32_LIMIT rows of any table
    binding = max((k for k in per_exp if per_exp[k] > 0), key=lambda k: per_exp[k])
    int32_cap = INT32_LIMIT // per_exp[binding]
    return {"nb1": nb1, "nb2": nb2, "per": per, "once": once, "fit": fit, "counts": counts, "batch_s": batch_s,
            "host1": host1, "planned": planned, "int32_cap": int32_cap, "int32_table": binding,
            "top": ", ".join(f"{k} {v / nb1 * 100:.0f} %" for k, v in top)}


def measure(workload: str, gpus: int, args) -> dict:
    from mvopt.build import build
    from mvopt.config import load_config
    from mvopt.engine import FLOW

    budget = (args.memory_gib - args.reserve_gib) * GIB
    data = config(workload, gpus, args.cc, args.mib)
    t0 = time.perf_counter()
    built = build(load_config(data))
    build_s = time.perf_counter() - t0
    b = batch_bytes(built.experiment, budget)
    small = batch_bytes(built.experiment, budget, compact=True)
    topo = built.experiment.topology
    counts = b["counts"]
    return {"workload": workload, "gpus": gpus, "hosts": int(topo.n_host), "nodes": int(topo.n_node),
            "ports": int(counts["n_port"]), "tasks": int(counts["n_task"]),
            "flows": int((built.experiment.tasks.kind == FLOW).sum()), "slots": int(counts["n_slot"]),
            "nb1": b["nb1"], "nb2": b["nb2"], "per": b["per"], "once": b["once"], "fit": b["fit"],
            "top": b["top"], "build_s": build_s, "batch_s": b["batch_s"], "host1": b["host1"],
            "planned": b["planned"], "planner_fit": int(args.memory_gib * GIB * PLANNER_FRACTION // b["per"]),
            "int32_cap": b["int32_cap"], "int32_table": b["int32_table"],
            "small_per": small["per"], "small_fit": small["fit"], "small_slots": int(small["counts"]["n_slot"]),
            "small_planned": small["planned"], "small_nb1": small["nb1"], "small_int32_cap": small["int32_cap"],
            "small_int32_table": small["int32_table"],
            "experiment": built.experiment}


def run_on_gpu(row: dict, args) -> dict:
    """Build a batch of min(fit, run_max) copies and run it on the GPU backend (for at most
    `args.run_budget_s` seconds: a partial run then, reported as such)."""
    import cupy as cp

    from mvopt.engine import build_batch, get_backend
    from mvopt.engine.batch import extract_results

    small = args.run_slots == "compact"
    n = min(row["small_fit" if small else "fit"], args.run_max, row["small_int32_cap" if small else "int32_cap"])
    be = get_backend("gpu")
    pool = cp.get_default_memory_pool()
    pool.free_all_blocks()
    t0 = time.perf_counter()
    batch = build_batch([row["experiment"]] * n, compact=small)
    t_built = time.perf_counter()
    be.prepare(batch)        # the kernels, compiled on first use: not run time
    t1 = time.perf_counter()
    try:
        iters = be.run(batch, deadline_s=args.run_budget_s, resumable=False)
    except cp.cuda.memory.OutOfMemoryError as e:
        return {"run_n": n, "run_status": f"out of memory ({e})", "run_s": time.perf_counter() - t1,
                "run_build_s": t_built - t0, "run_device_gib": pool.total_bytes() / GIB}
    t2 = time.perf_counter()
    res = extract_results(batch, iters)
    statuses = sorted({r.status for r in res})
    same = res[0].same_as(res[-1])
    timing = dict(getattr(be, "last_timing", {}))
    pool.free_all_blocks()
    done = all(r.status == "done" for r in res)
    hops = sum(r.counters["packet_hops"] for r in res)
    return {"run_n": n, "run_status": "/".join(statuses) + ("" if same else ", first != last"),
            "run_partial": not done, "run_s": t2 - t1, "run_build_s": t_built - t0, "run_device_gib": batch.nbytes / GIB,
            "run_windows": max(r.windows for r in res), "run_sim_us": min(r.end_ps for r in res) / 1e6,
            "run_hops": hops, "run_kernel_s": timing.get("kernel_s", float("nan")),
            "run_exp_per_h": n / (t2 - t0) * 3600 if done else float("nan")}


def report(rows: list[dict], args, cmd: str) -> str:
    budget = args.memory_gib - args.reserve_gib
    lines = ["| workload | GPUs | hosts / nodes / ports | tasks (flows) | packet slots | batch of 1 (MiB) | "
             "of 2 (MiB) | per experiment (MiB) | held once (B) | planner's count (MiB) | built on the host (MiB) | "
             "largest parts | build (s) | **experiments that fit** | under the planner's 85 % cap | int32 cap of one batch | "
             "compact slots: packet slots / MiB per experiment / **fit** / int32 cap |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['gpus']:,} | {r['hosts']:,} / {r['nodes']:,} / {r['ports']:,} | "
                     f"{r['tasks']:,} ({r['flows']:,}) | {r['slots']:,} | {r['nb1'] / MIB:,.1f} | {r['nb2'] / MIB:,.1f} | "
                     f"{r['per'] / MIB:,.2f} | {r['once']:,} | {r['planned'] / MIB:,.2f} | {r['host1'] / MIB:,.1f} | "
                     f"{r['top']} | {r['build_s'] + r['batch_s']:.2f} | **{r['fit']:,}** | {r['planner_fit']:,} | "
                     f"{r['int32_cap']:,} ({r['int32_table'][2:]}) | "
                     f"{r['small_slots']:,} / {r['small_per'] / MIB:,.2f} / **{r['small_fit']:,}** / "
                     f"{r['small_int32_cap']:,} ({r['small_int32_table'][2:]}) |")
    # the planner's per-experiment count is an upper bound of the built batch (a link class per
    # port, the routing table per experiment): it must never count less, or a sub-batch could not fit
    pairs = [(r["planned"], r["nb1"]) for r in rows] + [(r["small_planned"], r["small_nb1"]) for r in rows]
    covers = all(p >= b for p, b in pairs)
    excess = sorted(p - b for p, b in pairs)
    worst = max((p - b) / b for p, b in pairs)
    planner_text = (f"at least the built batch in every row, {excess[0]:,} to {excess[-1]:,} bytes (at most "
                    f"{worst * 100:.2f} %) above it: it counts a link class for every port and the topology's "
                    "routing table for every experiment, where a batch holds each distinct one once"
                    if covers else "BELOW the built batch in some rows (a bug: a sub-batch could outgrow its memory)")
    onces = sorted({r["once"] for r in rows})
    span = f"{onces[0]:,} bytes in every row" if len(onces) == 1 else f"{onces[0]:,} to {onces[-1]:,} bytes"
    once_text = (f"{span}: the distinct link classes and the dense routing table of the topology, held once by a "
                 "batch for all its experiments of that topology and parameters; apart from them a batch is "
                 "the concatenation of its experiments, so its bytes grow linearly with their number")
    text = f"""## Concurrency limit: experiments per GPU by cluster size (paper Fig. 13)

{provenance(cmd)}

Memory: {args.memory_gib:g} GiB per GPU, {args.reserve_gib:g} GiB reserved (CUDA context, CuPy pool,
the compiled module), so {budget:g} GiB for batches; congestion control `{args.cc}`; collectives of
{args.mib:g} MiB per rank. *Per experiment* = `nbytes(batch of 2) - nbytes(batch of 1)`,
*held once* = `2 nbytes(1) - nbytes(2)`: {once_text}.
*Experiments that fit* = ({budget:g} GiB - held once) // per experiment. *Build* = building the
experiment (topology, routes, task graph) and its batch on this machine's CPU. *Largest parts*:
share of the batch of the columns sized by packet slots (wire rings of every port, switch packet
pools, host ACK pools), by tasks (the task graph and its dependency lists), by ports, nodes and
routes (schema in `mvopt/engine/schema.py`). *Packet slots* follow
`network.switch_packet_slots`, by default the switch buffer in packets (`buffer / (payload +
header)` + 64 per port, buffer `16 x bw / 50` MB), and wire rings for back-to-back ACKs; the last
column gives the same experiment *compact* packet slots (docs/engine.md, "Packet slots": a first
try sized for traffic as it is, an experiment that runs out of them runs again with full ones,
the results never change), what `simulate` and the optimizer use when full slots need more than
one batch.
*Planner's count*: the bytes `mvopt.engine.sizing` computes for one experiment before building
anything (`batch_bytes(experiment_counts(exp))`, what decides how a run is cut into sub-batches):
{planner_text}. *Under the planner's
cap*: `simulate` and the optimizer put at most 85 % of the free GPU memory in one batch, so one
batch holds this many ({args.memory_gib:g} GiB x 0.85 // per experiment) and more experiments run as
further sub-batches. *int32 cap*: the kernels index every table with 32-bit integers, so one
batch holds at most 2^31 - 1 rows of any table (the planner splits there too); the table that
binds is named (`slot` = packet slots). *Built on the host*: the columns the batch builder fills in host memory
(numpy) and uploads; the packet slots are working memory allocated on the device only.
The workloads are in the script's docstring.

""" + "\n".join(lines) + "\n"
    return text


def run_report(rows: list[dict], args, cmd: str) -> str:
    """Section `concurrency_run`: the batches `--run` ran on the GPU."""
    text = f"""## Concurrency limit on the GPU: that many experiments in one batch (paper Fig. 13, `--run`)

{provenance(cmd)}

Each row is one batch of copies of the experiment of the sizing table's row (section *Concurrency
limit*), as many as fit one GPU by its count (at most {args.run_max:,}), {args.run_slots} packet
slots, run as one batch on the GPU backend{f" for at most {args.run_budget_s:g} s" if args.run_budget_s else ""}.
*Windows* and *simulated* say how far the experiments got (a partial run stops every experiment
at the same window; *simulated* is the earliest experiment's simulated time); *packet-hops/s*
counts every experiment's packet-hops over the run's wall time; *device memory* is the batch's
columns and working memory (`batch.nbytes`, all on the GPU during the run). *Status* lists the experiments' statuses
(`running`: stopped by the budget), and whether the first and the last copy ended identical.

| workload | GPUs | experiments in one batch | status | windows | simulated (us) | device memory (GiB) | build (s) | run (s) | kernel (s) | packet-hops/s | experiments/hour |
|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|
"""
    for r in (r for r in rows if "run_n" in r):
        rate = r["run_hops"] / r["run_s"] if r.get("run_hops") is not None and r["run_s"] > 0 else float("nan")
        text += (f"| {r['workload']} | {r['gpus']:,} | {r['run_n']:,} | {r['run_status']} | "
                 f"{r.get('run_windows', 0):,} | {r.get('run_sim_us', float('nan')):,.1f} | "
                 f"{r['run_device_gib']:.1f} | {r['run_build_s']:.1f} | {r['run_s']:.1f} | "
                 f"{r.get('run_kernel_s', float('nan')):.1f} | {rate:,.0f} | "
                 f"{'– (partial run)' if r.get('run_partial') else format(r['run_exp_per_h'], ',.0f')} |\n")
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gpus", default="16,32,64,128,256,512,1024", help="cluster sizes (GPUs)")
    ap.add_argument("--workloads", default=",".join(WORKLOADS))
    ap.add_argument("--cc", default="dcqcn", choices=("none", "dcqcn", "hpcc", "dctcp"))
    ap.add_argument("--mib", type=float, default=64.0, help="collective size per rank (MiB) of the all-reduce workloads")
    ap.add_argument("--memory-gib", type=float, default=141.0, help="GPU memory (default 141: an H200)")
    ap.add_argument("--reserve-gib", type=float, default=4.0, help="memory kept back (default 4)")
    ap.add_argument("--run", action="store_true", help="also run that many experiments on the GPU backend")
    ap.add_argument("--run-max", type=int, default=4096, help="with --run: at most this many per batch")
    ap.add_argument("--run-slots", choices=("full", "compact"), default="full",
                    help="with --run: packet slots of the batch run (compact: the last column's count; an "
                         "experiment that runs out of them shows status capacity)")
    ap.add_argument("--run-budget-s", type=float, default=None,
                    help="with --run: stop each batch after this many seconds and report how far it got")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = ap.parse_args(argv)
    rows = []
    for w in args.workloads.split(","):
        for g in (int(x) for x in args.gpus.split(",")):
            r = measure(w, g, args)
            print(f"{w} {g} GPUs: {r['per'] / MIB:.2f} MiB/experiment, fit {r['fit']:,} "
                  f"(build {r['build_s'] + r['batch_s']:.1f} s)", flush=True)
            if args.run and min(r["fit"], r["int32_cap"]) > 0:
                r.update(run_on_gpu(r, args))
                print(f"   ran {r['run_n']:,}: {r['run_status']} in {r['run_s']:.1f} s, "
                      f"{r.get('run_windows', 0):,} windows", flush=True)
            r.pop("experiment")
            rows.append(r)
    cmd = ("python experiments/paper_concurrency.py"
           + (f" --gpus {args.gpus}" if args.gpus != ap.get_default("gpus") else "")
           + (f" --workloads {args.workloads}" if args.workloads != ap.get_default("workloads") else "")
           + f" --cc {args.cc} --mib {args.mib:g} --memory-gib {args.memory_gib:g} --reserve-gib {args.reserve_gib:g}"
           + (f" --run --run-max {args.run_max} --run-slots {args.run_slots}" if args.run else "")
           + (f" --run-budget-s {args.run_budget_s:g}" if args.run and args.run_budget_s else ""))
    # the sizing table is any machine's; the runs are the GPU machine's, in a section of their own
    section, text = ("concurrency_run", run_report(rows, args, cmd)) if args.run else ("concurrency", report(rows, args, cmd))
    print(text)
    if not args.no_write:
        update_section(ROOT / "docs" / "performance.md", section, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
