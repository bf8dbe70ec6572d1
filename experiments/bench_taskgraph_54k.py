"""A training experiment of a ~54,000-GPU cluster: task-graph size, generation time, host memory
and engine batch bytes; does it fit one H200?

    python experiments/bench_taskgraph_54k.py              # writes docs/performance.md (section taskgraph_54k)
    python experiments/bench_taskgraph_54k.py --no-write
    python experiments/bench_taskgraph_54k.py --no-write --cases rail_run     # on a GPU machine (> 64 GB
                                   # of host memory): build it and simulate it, $MVOPT_54K_BUDGET_S seconds at most
    MVOPT_54K_BACKEND=cpu python experiments/bench_taskgraph_54k.py --no-write --cases scaled_run
                                   # DP 140 (17,920 GPUs, ~16 GB) simulated on one CPU core for
                                   # $MVOPT_54K_CPU_WINDOWS windows: the same kind of experiment, a third the size
    python experiments/bench_taskgraph_54k.py --no-write --cases rail_graph   # on a machine with > 32 GB:
                                   # build the rail-sampled 53,760-GPU graph itself; its JSON row can then
                                   # be merged into a run here: --merge experiments/results/taskgraph_54k_graph.json

The experiment: GPT-3 175B, TP 8 x PP 16 x DP 420 = 53,760 GPUs on 6,720 DGX H100 servers of a
3-tier rail-optimised fabric (8 rails, 32 servers per rail group, 14 groups per pod, 15 pods,
400 Gb/s links, 0.5 / 1 / 1 us), DCQCN, 4 KiB packets; global batch 6,720 sequences (16
micro-batches per pipeline, 13.8 M tokens, about the 16 M tokens of Llama 3 405B's batches),
micro-batch 1, sequence parallelism, selective recomputation, distributed optimizer, 160 MB
buckets overlapped with the backward (reduce-scatter) and the forward (parameter all-gather), ring
DP collectives (the defaults). Every DP group has one member per server (TP 8 fills a server), so
each DP collective is a flat ring over 420 NICs.

Cases, each in its own process pinned to one core (peak RSS is the case's own):

* *count*: :func:`mvopt.workload.taskgraph.training_counts` sizes the graph without building its
  columns (templates built and placed, nothing copied); a test holds it equal to the built graph.
  The engine batch bytes are then ``batch_bytes`` of these counts plus the topology's counts
  (``experiment_counts`` of the same cluster with a one-task graph): exact but for the remote
  predecessors of anchored dependencies, which are bounded (the low and high figures);
* *build*: ``build_training`` + ``TaskGraph`` + the engine ``Experiment`` and
  ``experiment_counts`` / ``batch_bytes`` (the planner's exact count) on a cluster scaled down to
  DP 140 (2,240 servers, 17,920 GPUs, 5 pods), rail-sampled, which fits this machine; it also
  checks the count-based bytes against the exact ones; *graph*: ``build_training`` + ``TaskGraph``
  only, at DP 280 (4,480 servers, 35,840 GPUs) and, given a machine with > 32 GB of memory, at the
  full DP 420 (``rail_graph``, not in the default cases). Generation time and peak memory of the
  full rail-sampled graph are extrapolated from the DP 140 and 280 builds, linearly in tasks;
* what-ifs (counts, rail-sampled): other DP collective settings, to show what the graph's size
  depends on. They change the simulated system, so they are not reductions of this experiment.

H200: 139 GiB usable per GPU (nvidia-smi on the lent H200s), of which the planner puts at most
85 % in one batch (``mvopt.engine.sizing.GPU_MEMORY_FRACTION``); the kernels index every table with
int32 (``INT32_LIMIT``).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

H200_GIB = 139.0
PLANNER_GIB = 0.85 * H200_GIB     # what the planner lets one batch take on an H200 (85% of its free memory)
FULL = {"servers": 6720, "dp": 420, "groups_per_pod": 14}
SCALED = {"servers": 2240, "dp": 140, "groups_per_pod": 14}
SCALED2 = {"servers": 4480, "dp": 280, "groups_per_pod": 14}
TINY = {"servers": 64, "dp": 4, "groups_per_pod": 1}
MICRO_BATCHES = 16

CASES = {   # name: (label, size, rail_sample, parallelism overrides, collective overrides, mode)
    "full": ("every GPU", FULL, False, {}, {}, "count"),
    "rail": ("rail-sampled (GPUs of local index 0)", FULL, True, {}, {}, "count"),
    "rail_graph": ("rail-sampled, graph built (no engine experiment)", FULL, True, {}, {}, "graph"),
    "scaled_build": ("rail-sampled, DP 140 (17,920 GPUs), built", SCALED, True, {}, {}, "build"),
    "scaled_count": ("rail-sampled, DP 140 (17,920 GPUs)", SCALED, True, {}, {}, "count"),
    "scaled2_graph": ("rail-sampled, DP 280 (35,840 GPUs), graph built", SCALED2, True, {}, {}, "graph"),
    # simulate it (on a GPU machine; MVOPT_54K_BACKEND, MVOPT_54K_BUDGET_S; not in the default cases)
    "rail_run": ("rail-sampled, simulated", FULL, True, {}, {}, "run"),
    "tiny_run": ("rail-sampled, DP 4 (512 GPUs), simulated (smoke test)", TINY, True, {}, {}, "run"),
    "scaled_run": ("rail-sampled, DP 140 (17,920 GPUs), simulated", SCALED, True, {}, {}, "run"),
    "whatif_bucket": ("what-if: 640 MB buckets (4x fewer DP collectives)", FULL, True, {"bucket_mb": 640.0}, {},
                      "count"),
    "whatif_tree": ("what-if: all-reduce, NCCL tree (no distributed optimizer)", FULL, True,
                    {"distributed_optimizer": False}, {"algorithm": "tree"}, "count"),
}


def config(size: dict, rail: bool, par_extra: dict, coll: dict):
    from mvopt.config import load_config

    par = {"tp": 8, "pp": 16, "dp": size["dp"], "global_batch": size["dp"] * MICRO_BATCHES, "micro_batch": 1,
           "sequence_parallel": True, "recompute": "selective", "distributed_optimizer": True, **par_extra}
    return load_config({
        "cluster": {"topology": "rail_optimized", "servers": size["servers"], "servers_per_group": 32, "tiers": 3,
                    "groups_per_pod": size["groups_per_pod"], "gpus_per_server": 8, "gpu": "H100",
                    "link_gbps": [400, 400, 400], "link_delay_ns": [500, 1000, 1000],
                    **({"nics_per_server": 1} if rail else {})},     # rail-sampled: rail 0 alone
        "network": {"cc": "dcqcn", "payload_bytes": 4096},
        "workload": {"kind": "training", "model": "gpt3-175b", "rail_sample": rail},
        "collective": coll,
        "parallelism": par})


def topology_counts(cfg, topo, flow_sizes) -> dict:
    """experiment_counts of the cluster with a graph of one flow per distinct size of the counted
    graph: the rows that do not depend on tasks, with the wire rings sized for the graph's
    smallest packet (the last packet of the flow with the smallest remainder)."""
    from mvopt.engine import Experiment
    from mvopt.engine.sizing import experiment_counts
    from mvopt.engine.tasks import TaskGraphBuilder

    b = TaskGraphBuilder()
    for size in flow_sizes:
        b.flow(0, 1, int(size))
    return experiment_counts(Experiment(topology=topo, network=cfg.network, tasks=b.build()))


def bytes_from_counts(cnt: dict, topo_counts: dict) -> tuple[int, int, dict]:
    """Engine batch bytes (low, high) from training_counts and the topology's counts."""
    from mvopt.engine.sizing import batch_bytes

    base = dict(topo_counts)
    base.update(n_task=cnt["tasks"], n_flow=cnt["flows"], n_succ=cnt["edges"],
                n_heap=2 * cnt["tasks"] + topo_counts["n_node"])
    lo = dict(base, n_pred=cnt["remote_edges"], n_list=cnt["remote_owners"])
    hi = dict(base, n_pred=cnt["remote_edges"] + cnt["anchored_edges"],
              n_list=cnt["remote_owners"] + cnt["anchored_owners"])
    return batch_bytes(lo), batch_bytes(hi), hi


def rss_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6


def measure(name: str) -> dict:
    from mvopt.build import training_setup
    from mvopt.cluster import build_topology
    from mvopt.engine.sizing import batch_bytes, experiment_counts, INT32_LIMIT
    from mvopt.workload.taskgraph import build_training, training_counts

    label, size, rail, par_extra, coll, mode = CASES[name]
    cfg = config(size, rail, par_extra, coll)
    t0 = time.perf_counter()
    topo = build_topology(cfg.cluster)
    from _report import machine_description

    out = {"case": name, "label": label, "mode": mode, "gpus": int(topo.n_gpu), "nics": int(topo.n_host),
           "machine": machine_description(),
           "topology_s": time.perf_counter() - t0, "rss_topology_gb": rss_gb()}
    t0 = time.perf_counter()
    setup = training_setup(cfg, topo)
    out["checks_s"] = time.perf_counter() - t0
    c0, t0 = time.process_time(), time.perf_counter()
    cnt = training_counts(setup)
    out.update(count_cpu_s=time.process_time() - c0, count_wall_s=time.perf_counter() - t0)
    sizes = cnt.pop("flow_sizes")
    payload = cfg.network.payload_bytes
    out["smallest_last_payload"] = int(((sizes - 1) % payload + 1).min()) if sizes.size else None
    tc = topology_counts(cfg, topo, sizes)
    out["topology_bytes"] = batch_bytes(dict(tc, n_task=0, n_flow=0, n_succ=0, n_pred=0, n_list=0,
                                             n_heap=tc["n_node"]))
    lo, hi, hi_counts = bytes_from_counts(cnt, tc)
    out.update({k: v for k, v in cnt.items()}, bytes_low=lo, bytes_high=hi,
               int32_over=sorted(k for k, v in hi_counts.items() if v > INT32_LIMIT))
    if mode in ("build", "graph", "run"):
        from mvopt.engine import Experiment, TaskGraph

        del cnt
        c0, t0 = time.process_time(), time.perf_counter()
        plan = build_training(setup)
        graph = TaskGraph(**plan.columns)
        out.update(build_cpu_s=time.process_time() - c0, build_wall_s=time.perf_counter() - t0,
                   rss_after_graph_gb=rss_gb(),
                   graph_host_bytes=sum(getattr(graph, f).nbytes for f in (
                       "kind", "src", "dst", "size_bytes", "duration_ps", "start_ps", "pred_offset", "pred",
                       "category")))
        if mode != "run":
            del plan
        if mode in ("build", "run"):
            t0 = time.perf_counter()
            exp = Experiment(topology=topo, network=cfg.network, tasks=graph)
            ec = experiment_counts(exp)
            out.update(exact_bytes=batch_bytes(ec), exact_counts=ec, experiment_s=time.perf_counter() - t0)
        if mode == "run":
            out.update(simulate_case(exp, plan))
    out["rss_gb"] = rss_gb()
    return out


def simulate_case(exp, plan) -> dict:
    """Run the experiment on $MVOPT_54K_BACKEND (default gpu) for at most $MVOPT_54K_BUDGET_S wall
    seconds (default 300; the CPU backend stops after $MVOPT_54K_CPU_WINDOWS windows instead;
    $MVOPT_54K_WINDOWS stops either after that many windows, for side-by-side runs;
    $MVOPT_54K_COMPACT=1 gives it compact packet slots): how far the iteration got, or its time
    when it ended."""
    from mvopt.build import training_report
    from mvopt.engine import build_batch, get_backend
    from mvopt.engine.batch import extract_results

    backend = os.environ.get("MVOPT_54K_BACKEND", "gpu")
    be = get_backend(backend)
    t0 = time.perf_counter()
    compact = os.environ.get("MVOPT_54K_COMPACT") == "1"    # compact packet slots (the CPU's default)
    batch = build_batch([exp], compact=compact)
    out = {"run_backend": backend, "batch_build_s": time.perf_counter() - t0, "compact_slots": compact}
    if backend == "cpu":
        out["run_threads"] = int(os.environ.get("OMP_NUM_THREADS", "1"))
    be.prepare(batch)        # the kernels, compiled on first use: not run time
    t0 = time.perf_counter()
    if os.environ.get("MVOPT_54K_WINDOWS"):
        iters = be.run(batch, max_iters=int(os.environ["MVOPT_54K_WINDOWS"]), resumable=False)
    elif backend == "cpu":
        iters = be.run(batch, max_iters=int(os.environ.get("MVOPT_54K_CPU_WINDOWS", "2000")), resumable=False)
    else:
        iters = be.run(batch, deadline_s=float(os.environ.get("MVOPT_54K_BUDGET_S", "300")), resumable=False)
    out["run_s"] = time.perf_counter() - t0
    r = extract_results(batch, iters)[0]
    clock = int(batch.cols["exp_T_ps"][0])           # the experiment's clock when it stopped
    out.update(run_status=r.status, run_windows=r.windows, run_simulated_ms=max(clock, r.end_ps) / 1e9,
               run_packet_hops=r.counters["packet_hops"], run_timing=dict(getattr(be, "last_timing", {})))
    if r.status == "done":
        out["iteration_time_s"] = training_report(plan, r)["iteration_time_s"]
    return out


def child(name: str) -> dict:
    """Measure case `name` in a process of its own, pinned to one core, or on
    $MVOPT_54K_CPU_THREADS threads (the CPU backend's simulation on many cores)."""
    threads = os.environ.get("MVOPT_54K_CPU_THREADS", "")
    env = dict(os.environ, OMP_NUM_THREADS=threads or "1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1",
               PYTHONPATH=str(ROOT))
    cmd = [sys.executable, __file__, "--child", name]
    if hasattr(os, "sched_setaffinity") and not threads:
        cmd = ["taskset", "-c", "0"] + cmd
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if out.returncode:
        return {"case": name, "label": CASES[name][0], "error": (out.stderr.strip().splitlines() or ["?"])[-1],
                "returncode": out.returncode}
    return json.loads(out.stdout.strip().splitlines()[-1])


def engine_bytes_per_task() -> dict[str, int]:
    """Bytes per row of the engine's per-task and per-flow tables, by role (mvopt.engine.schema)."""
    from mvopt.engine import schema

    groups = {"task": 0, "heap (2 rows per task)": 0, "flow transport (per flow)": 0,
              "flow congestion control (per flow)": 0}
    for col in schema.COLUMNS:
        b = col.mult * schema.numpy_dtype(col).itemsize
        if col.length == "n_task":
            groups["task"] += b
        elif col.length == "n_heap":
            groups["heap (2 rows per task)"] += 2 * b
        elif col.length == "n_flow":      # (HPCC's per-hop state, f_hop, only in batches with HPCC)
            groups["flow congestion control (per flow)" if col.name in ("f_ccd", "f_cci")
                   else "flow transport (per flow)"] += b
    return groups


GiB = 2**30


def markdown(rows: list[dict], command: str, prov: str, per: dict[str, int], here: str) -> str:
    per_task = per["task"] + per["heap (2 rows per task)"]
    per_flow = per["flow transport (per flow)"] + per["flow congestion control (per flow)"]
    cap = H200_GIB * GiB
    planner = PLANNER_GIB * GiB
    ok = [r for r in rows if "error" not in r]
    t = ["| case | GPUs simulated / cluster | tasks | of which DP collectives | flows | dependencies | "
         "engine batch (GiB) | fits one H200 (139 GiB / planner's 118 GiB) | int32 rows exceeded | "
         "sizing: CPU (s) / peak RSS (GB) |",
         "|---|---|---:|---:|---:|---:|---:|---|---|---|"]
    for r in rows:
        if "error" in r:
            t.append(f"| {r['label']} | failed: {r['error'][:120]} | | | | | | | | |")
            continue
        if r["mode"] == "graph":
            continue
        dp = r["tasks_by_category"].get("dp_comm", 0)
        lo, hi = r["bytes_low"] / GiB, r["bytes_high"] / GiB
        b = f"{lo:,.1f}" if abs(hi - lo) < 0.05 else f"{lo:,.1f}-{hi:,.1f}"
        if r.get("exact_bytes"):
            b += f" (planner's exact count: {r['exact_bytes'] / GiB:,.1f})"
        fits = "yes / yes" if r["bytes_high"] <= planner else ("yes / no" if r["bytes_high"] <= cap else "no / no")
        if r["int32_over"]:
            fits = "no (int32)"
        t.append(f"| {r['label']} | {r['simulated_gpus']:,} / {r['gpus']:,} | {r['tasks']:,} | "
                 f"{dp:,} ({100 * dp / max(1, r['tasks']):.1f} %) | {r['flows']:,} | {r['edges']:,} | {b} | {fits} | "
                 f"{', '.join(r['int32_over']) or '-'} | {r['count_cpu_s']:.1f} / {r['rss_gb']:.2f} |")
    builds = [r for r in ok if r["mode"] in ("build", "graph")]
    bt = ["| case | tasks | generation: CPU (s) / wall (s) | graph columns on the host (GB) | peak RSS after the "
          "graph (GB) | engine experiment + planner's count (s) | peak RSS at the end (GB) | machine |",
          "|---|---:|---|---:|---:|---:|---:|---|"]
    for r in builds:
        exp = f"{r['experiment_s']:.0f}" if "experiment_s" in r else "not built"
        bt.append(f"| {r['label']} | {r['tasks']:,} | {r['build_cpu_s']:.1f} / {r['build_wall_s']:.1f} | "
                  f"{r['graph_host_bytes'] / 1e9:.2f} | {r['rss_after_graph_gb']:.2f} | {exp} | {r['rss_gb']:.2f} | "
                  f"{'this one' if r.get('machine') == here else r.get('machine', '?')} |")
    full = next((r for r in ok if r["case"] == "full"), None)
    rail = next((r for r in ok if r["case"] == "rail"), None)
    topo_full = full["topology_bytes"] if full else 0
    topo_b = rail["topology_bytes"] if rail else topo_full      # the rail-sampled cases: rail 0 alone
    per_rows = "\n".join(f"| {k} | {v} |" for k, v in per.items())
    text = [f"## Training experiment of a ~54,000-GPU cluster: graph size and memory\n\n{prov}\n",
            "GPT-3 175B, TP 8 x PP 16 x DP 420 = 53,760 GPUs on 6,720 DGX H100 servers, 3-tier rail-optimised "
            "fabric (8 rails, 210 rail groups of 32 servers, 15 pods), global batch 6,720 (16 micro-batches per "
            "pipeline), micro-batch 1, sequence parallelism, selective recomputation, distributed optimizer, "
            "160 MB buckets, ring DP collectives (one member per server: a flat ring over 420 NICs); DCQCN, 4 KiB "
            "packets; the script's docstring has the details. *Sizing* uses `training_counts` (the templates are "
            "built and placed, the graph's columns are not); the engine bytes are `batch_bytes` of those counts "
            f"plus the topology's own rows, mostly packet slots: {topo_full / GiB:,.1f} GiB for the whole fabric "
            f"(8 rails, 53,760 NICs), {topo_b / GiB:,.1f} GiB for rail 0 alone (`nics_per_server: 1`: the rail-0 "
            "leaves and NICs with the whole fabric's spines and cores, docs/topologies.md), which the rail-sampled "
            "cases use; wire rings sized for the graph's smallest packet (an ACK, or the last packet of the flow "
            "with the smallest remainder: the distinct flow sizes are counted too). A range only where remote "
            "predecessors of anchored dependencies are "
            "unresolved. Each case ran in its own process on one core.\n",
            "\n".join(t), ""]
    if builds:
        text += ["Graphs actually built (`build_training` + `TaskGraph`; for *built* cases also the engine "
                 "`Experiment` and the planner's `experiment_counts` / `batch_bytes`, equal to the sized count "
                 "above):\n", "\n".join(bt), ""]
        rail = next((r for r in ok if r["case"] == "rail"), None)
        pts = sorted((r for r in builds if r["case"] != "rail_graph"), key=lambda r: r["tasks"])
        if rail and len(pts) >= 2 and not any(r["case"] == "rail_graph" for r in builds):
            a, z = pts[0], pts[-1]

            def extra(key: str) -> float:
                slope = (z[key] - a[key]) / (z["tasks"] - a["tasks"])
                return z[key] + slope * (rail["tasks"] - z["tasks"])
            text += [f"The rail-sampled 53,760-GPU graph itself ({rail['tasks']:,} tasks) was not built. "
                     "Extrapolated linearly in tasks from the two builds above, it takes about "
                     f"{extra('build_cpu_s'):.0f} s of one core and a peak RSS of about "
                     f"{extra('rss_after_graph_gb'):.0f} GB after the graph (graph columns "
                     f"{extra('graph_host_bytes') / 1e9:.0f} GB), most of this shared 24 GiB machine, and the "
                     "engine experiment and the planner's count would add about "
                     f"{(a['rss_gb'] - a['rss_after_graph_gb']) * rail['tasks'] / a['tasks']:.0f} GB more (the DP 140 "
                     f"build's {a['rss_gb'] - a['rss_after_graph_gb']:.1f} GB for {a['tasks']:,} tasks, scaled). "
                     "`--cases rail_graph` measures the graph on a larger machine.\n"]
    runs = [r for r in ok if r["mode"] == "run"]
    if runs:
        text += ["Simulated (`--cases rail_run` on a GPU machine, for $MVOPT_54K_BUDGET_S seconds; on the CPU "
                 "backend, e.g. `scaled_run`, a third the size, for $MVOPT_54K_CPU_WINDOWS windows on the one core "
                 "the case is pinned to, or on $MVOPT_54K_CPU_THREADS threads; `bash experiments/device_session.sh "
                 "scaled54k` runs it for the same windows on the GPU and on every core of the GPU's machine, 16, one "
                 "after the other). Run = upload + kernel + download on the GPU; per second of run:\n",
                 "| case | backend | status | windows | simulated (ms) | iteration time (s) | run (s) | "
                 "packet-hops | M packet-hops/s | windows/s | machine |",
                 "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---|"]
        for r in runs:
            it = f"{r['iteration_time_s']:.3f}" if "iteration_time_s" in r else "–"
            backend = f"{r['run_backend']} ({r['run_threads']} threads)" if "run_threads" in r else r["run_backend"]
            text.append(f"| {r['label']} | {backend} | {r['run_status']} | {r['run_windows']:,} | "
                        f"{r['run_simulated_ms']:.3f} | {it} | {r['run_s']:.1f} | {r['run_packet_hops']:,} | "
                        f"{r['run_packet_hops'] / r['run_s'] / 1e6:.1f} | {r['run_windows'] / r['run_s']:.0f} | "
                        f"{'this one' if r.get('machine') == here else r.get('machine', '?')} |")
        text.append("")
    text += ["Engine bytes per task (`mvopt/engine/schema.py`; plus 4 B per dependency and per remote "
             f"predecessor): {per_task} B for every task, and {per_flow} B more for every flow (a flow's "
             "columns exist for flows only):\n",
             "| part | bytes per task |", "|---|---:|", per_rows, ""]
    if rail and full:
        n, f = rail["tasks"], rail["flows"]
        dpn = rail["tasks_by_category"].get("dp_comm", 0)
        task_part = rail["bytes_low"] - topo_b
        flows_part = f * per_flow
        text.append(
            f"**Reading.** *What fills the graph*: {100 * dpn / n:.1f} % of the tasks are DP collectives. A ring "
            "reduce-scatter or all-gather over D = 420 members is D(D-1) = 175,980 flows, each with its in-order "
            f"gate (a delay task), and one iteration runs {rail['dp_collectives']:,} of them on the sampled rail "
            "(16 stages x ~52 buckets of 160 MB); the pipelines (compute, TP and PP tasks of every rank) are "
            f"{n - dpn:,} tasks. *Full graph*: {full['tasks']:,} tasks and {full['edges']:,} dependencies, "
            + ("beyond the int32 indices of the engine's tables: it cannot be one engine experiment. "
               if full["int32_over"] else "within the engine's int32 indices. ")
            + f"*Rail-sampled*: {n:,} tasks, {rail['bytes_high'] / GiB:,.0f} GiB ({task_part / GiB:,.0f} GiB "
            f"of tasks and dependencies, {topo_b / GiB:,.0f} GiB of topology for rail 0 alone): "
            + ("**it fits one H200** within the planner's share of its memory. " if rail["bytes_high"] <= planner
               else "it does not fit one H200. ")
            + "The rail sample is not exact on this 3-tier fabric: its pod spines and cores carry every "
            "rail (`mvopt/cluster/clos.py`), and most pipeline transfers (stages 420 servers apart, pods of "
            "448) cross pods, so rails share core links; it is exact on a 2-tier rail-optimised fabric, whose "
            "links each belong to one rail. *Where the memory goes*: the per-rank schedules are already built "
            f"once per distinct schedule and replicated (templates: {rail['template_tasks']:,} tasks, "
            f"{rail['count_cpu_s']:.0f} s of one core to size the whole graph); the rest is the engine's flat "
            f"tables: {per_task} B for every task and {per_flow} B more for every flow "
            f"({flows_part / GiB:,.0f} GiB for the {f:,} flows). Sharing the rows of ranks that run identical "
            "schedules would shrink the pipelines' 0.4 %, not the DP rings: their flows are distinct network "
            "flows, each with its own transport state. The topology of the whole fabric would add "
            f"{(topo_full - topo_b) / GiB:,.0f} GiB. Flow columns exist for flow tasks only: the rings' gates, "
            "half the tasks, are delay tasks without them (docs/decisions/0003-port-and-flow-state-as-records.md). "
            "*On the workload side* "
            "nothing else shrinks this graph without changing what is simulated: sampling a subset of the DP "
            "replicas would shorten the rings (a k-member ring has k-1 steps, not 419, so its latency terms "
            "change).")
        wb = next((r for r in ok if r["case"] == "whatif_bucket"), None)
        wt = next((r for r in ok if r["case"] == "whatif_tree"), None)
        if wb and wt:
            text[-1] += (f" The what-if rows show what the size depends on: 4x larger buckets cut the tasks "
                         f"{n / wb['tasks']:.1f}x, an NCCL tree all-reduce (2(D-1) flows per tree instead of "
                         f"D(D-1) per ring) {n / wt['tasks']:.0f}x; both fit one H200, but they are different "
                         "systems, not a cheaper way to simulate this one.")
    return "\n".join(text) + "\n"


def merge_rows(rows: list[dict], path: str, cmd: str) -> str:
    """Add the rows of the run saved at `path` whose (case, backend, machine) `rows` lacks (each keeps its machine
    and says where it came from, `merged_from`: its command and provenance); the command with
    `--merge path`."""
    other = json.loads(Path(path).read_text())

    def key(r: dict) -> tuple:     # a case may be run on several backends and machines
        return r["case"], r.get("run_backend"), r.get("machine")

    theirs = {key(o) for o in other["rows"]}
    rows[:] = [r for r in rows if key(r) not in theirs or "merged_from" not in r]   # a merge again replaces
    have = {key(r) for r in rows}
    for r in other["rows"]:
        if key(r) not in have:
            r["merged_from"] = other.get("provenance", other["command"])
            rows.append(r)
    flag = f" --merge {Path(path).relative_to(ROOT) if Path(path).is_absolute() else path}"
    return cmd if flag in cmd else cmd + flag


DEFAULT_OUT = ROOT / "experiments" / "results" / "taskgraph_54k.json"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--no-write", action="store_true",
                    help="leave docs/performance.md and the saved run alone (write the rows to --out only if given)")
    ap.add_argument("--cases", default="", help="comma-separated case names (default: all but rail_graph, which "
                    "needs ~25 GB of host memory)")
    ap.add_argument("--merge", metavar="JSON", help="add the rows of another run (e.g. rail_graph measured on a "
                    "larger machine), each with its machine")
    ap.add_argument("--out", help="where to save the rows as JSON (default: experiments/results/taskgraph_54k.json, "
                    "except with --no-write: nowhere)")
    ap.add_argument("--from-json", metavar="PATH", help="do not measure: rewrite the section from a saved run "
                    "(the default run saves experiments/results/taskgraph_54k.json)")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(measure(args.child), default=int))
        return
    if args.from_json:
        saved = json.loads(Path(args.from_json).read_text())
        if args.merge:      # e.g. rail_run measured on a GPU machine, into the saved run of the other cases
            saved["command"] = merge_rows(saved["rows"], args.merge, saved["command"])
            if not args.no_write:
                Path(args.from_json).write_text(json.dumps(saved, indent=1, default=int) + "\n")
        text = markdown(saved["rows"], saved["command"], saved["provenance"], saved["engine_bytes_per_task"],
                        saved["machine"])
        print(text)
        if not args.no_write:
            from _report import update_section
            update_section(ROOT / "docs" / "performance.md", "taskgraph_54k", text)
        return
    names = [c for c in args.cases.split(",") if c] or [c for c in CASES if c != "rail_graph"
                                                           and CASES[c][5] != "run"]
    rows = []
    for name in names:
        rows.append(child(name))
        print({k: v for k, v in rows[-1].items() if k != "exact_counts"}, flush=True)
    cmd = "python experiments/bench_taskgraph_54k.py" + (f" --cases {args.cases}" if args.cases else "")
    from _report import machine_description, provenance
    saved = {"command": cmd, "provenance": provenance(cmd), "machine": machine_description(),
             "engine_bytes_per_task": engine_bytes_per_task(), "rows": rows}
    if args.merge:
        cmd = merge_rows(rows, args.merge, cmd)
    saved["command"], saved["rows"], saved["provenance"] = cmd, rows, provenance(cmd)
    # a --no-write run (a trial, a single case) must not replace the saved run the docs come from
    out = Path(args.out) if args.out else None if args.no_write else DEFAULT_OUT
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(saved, indent=1, default=int) + "\n")
    text = markdown(rows, cmd, saved["provenance"], saved["engine_bytes_per_task"], saved["machine"])
    print(text)
    if not args.no_write:
        from _report import update_section
        update_section(ROOT / "docs" / "performance.md", "taskgraph_54k", text)


if __name__ == "__main__":
    main()
