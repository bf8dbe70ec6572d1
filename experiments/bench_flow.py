"""Flow-level speed: trials per second on one CPU core, a generation on every core, or one GPU (CuPy).

    OMP_NUM_THREADS=1 python experiments/bench_flow.py                 # topology.yaml's base trial, one core
    python experiments/bench_flow.py --generation 1000                 # a generation of 1,000, every core
    python experiments/bench_flow.py --backend gpu --batch 1000        # 1,000 as one batch on a GPU (array path)
    python experiments/bench_flow.py --trial small --batch 8           # a toy (a k=4 fat-tree all-reduce)

The trial is topology.yaml's base experiment (GPT-3 13B on 512 GPUs, a k=8 fat-tree with ECMP:
``--trial base``), or a 64 MB ring all-reduce on a k=4 fat-tree (``--trial small``). A batch
holds ``--batch`` copies with seeds 1, 2, ... (different ECMP paths, so that the copies are not
one experiment). Building the experiment (topology, task graph: what the optimizer's build
workers do) is timed once as ``experiment_build_cpu_s``; the flow level's own batch building
(paths, latencies) is, as ``build_s`` (wall) and ``build_cpu_s``; the run and the results as
``run_s`` (wall) and ``run_cpu_s`` (this process's CPU time: one core's work with
OMP_NUM_THREADS=1, however busy the machine). With one trial, a second one (``simulation.seed``
2) is then timed in the same process, as a worker runs every trial after its first (``next_*``:
the topology's and the loop's caches warm). Prints its lines and writes experiments/results/bench_flow.json
(``--json``).

``--generation N`` measures what the optimizer does with a generation of N flow-level trials
(:func:`mvopt.build.evaluate`, the evaluator itself): the N configurations (the trial with
``simulation.seed`` 1..N), each built and simulated in one worker process from 16 trials on
(:mod:`mvopt.build.flow_trials`), ``wall_s`` from configurations to evaluations; ``phases``
sums each phase's CPU time over the trials (``build_cpu_s`` the experiment, ``batch_cpu_s`` the
flow batch, ``loop_cpu_s`` the compiled loop, ``results_cpu_s`` results and evaluation; also
``*_per_trial``), with the workers' wall time on trials (``busy_s``) and on none (``idle_s``:
start-up, waiting, the end), the main process's CPU time (``main_cpu_s``: handing out and
collecting), and the peak resident set of the main process and of the largest worker. Its phases and the
trials done are logged to stderr as they go. ``--threads`` sets the workers (default every
usable core).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "experiments"))
sys.path.insert(0, str(ROOT))

from _report import provenance  # noqa: E402


def trial_config(kind: str):
    """The configuration of one trial."""
    from mvopt.config import load_config
    from mvopt.optimize.space_file import load_space

    if kind == "small":
        return load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none"},
                            "workload": {"kind": "collective"}, "collective": {"bytes": 64 << 20}})
    space = load_space(ROOT / "search_spaces" / "topology.yaml")
    cand = space.candidate({"cluster.topology": "fat_tree", "cluster.k": 8, "network.lb": "ecmp"})
    if not cand.feasible:
        raise SystemExit(f"topology.yaml's base trial is not feasible: {cand.reason}")
    return cand.config


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trial", choices=("base", "small"), default="base")
    ap.add_argument("--batch", type=int, default=1, help="trials simulated as one batch (default 1)")
    ap.add_argument("--backend", default="cpu", help="cpu or gpu (default cpu)")
    ap.add_argument("--generation", type=int, default=0, metavar="N",
                    help="time a generation of N trials through the optimizer's evaluator on every core")
    ap.add_argument("--threads", type=int, default=None, help="threads of --generation's simulation")
    ap.add_argument("--json", type=Path, default=ROOT / "experiments" / "results" / "bench_flow.json")
    args = ap.parse_args()
    if args.batch < 1:
        ap.error(f"--batch must be >= 1, not {args.batch}")
    if args.generation < 0 or (args.threads is not None and args.threads < 1):
        ap.error("--generation and --threads must be >= 1")
    if args.generation:
        return generation(args)
    from mvopt.engine import FLOW
    from mvopt.build import build_experiment
    from mvopt.flow.batch import build_flow_batch
    from mvopt.flow import flow_runner
    from mvopt.flow.results import extract_results

    cfg = trial_config(args.trial)
    c = time.process_time()
    base = build_experiment(cfg)
    experiment_build_cpu_s = time.process_time() - c
    exps = [dataclasses.replace(base, seed=s + 1, name=f"{base.name}-seed{s + 1}") for s in range(args.batch)]
    run = flow_runner(args.backend)
    t0, c0 = time.perf_counter(), time.process_time()
    batch = build_flow_batch(exps)
    t1, c1 = time.perf_counter(), time.process_time()
    state = run(batch)
    results = extract_results(batch, state)
    t2, c2 = time.perf_counter(), time.process_time()
    nxt = next_trial(cfg, run) if args.batch == 1 else {}
    done = sum(r.ok for r in results)
    steps = max(r.windows for r in results)
    times = sorted(r.makespan_s for r in results if r.ok)
    command = "python experiments/bench_flow.py " + " ".join(sys.argv[1:])
    record = {"command": command.strip(), "provenance": provenance(command.strip()), "trial": args.trial,
              "backend": args.backend, "batch": args.batch, "done": done,
              "experiment_build_cpu_s": experiment_build_cpu_s, "build_s": t1 - t0, "build_cpu_s": c1 - c0,
              "run_s": t2 - t1, "run_cpu_s": c2 - c1, "steps_per_cpu_s": sum(r.windows for r in results) / max(c2 - c1, 1e-9),
              "s_per_trial": (t2 - t0) / args.batch, "trials_per_s": args.batch / (t2 - t0), "steps": steps,
              "flows_per_trial": int((base.tasks.kind == FLOW).sum()), "makespan_s": times, **nxt}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=1) + "\n")
    print(f"{args.trial} x {args.batch} on {args.backend}: experiment {experiment_build_cpu_s:.2f} s of CPU, "
          f"flow batch {t1 - t0:.2f} s ({c1 - c0:.2f} s of CPU), run {t2 - t1:.2f} s ({c2 - c1:.2f} s of CPU), "
          f"{record['s_per_trial']:.3f} s per trial ({record['trials_per_s']:.3f} trials/s), {steps} steps "
          f"({record['steps_per_cpu_s']:,.0f} per CPU second), {done} done, makespan {times[0] if times else float('nan'):.6f} s")
    if nxt:
        print(f"the next trial (seed 2) in this process: experiment {nxt['next_experiment_cpu_s']:.2f} s of CPU, "
              f"flow batch {nxt['next_build_cpu_s']:.2f} s, run {nxt['next_run_cpu_s']:.2f} s, "
              f"{nxt['next_cpu_s']:.3f} s of CPU in all")


def next_trial(cfg, run) -> dict:
    """CPU times of a second trial (simulation.seed 2) in the same process, as a worker runs the
    trials after its first (caches of the topology and the compiled loop warm)."""
    from mvopt.build import build_experiment
    from mvopt.config import with_overrides
    from mvopt.flow.batch import build_flow_batch
    from mvopt.flow.results import extract_results

    c0 = time.process_time()
    exp = build_experiment(with_overrides(cfg, {"simulation.seed": 2}))
    c1 = time.process_time()
    batch = build_flow_batch([exp])
    c2 = time.process_time()
    extract_results(batch, run(batch))
    c3 = time.process_time()
    return {"next_experiment_cpu_s": c1 - c0, "next_build_cpu_s": c2 - c1, "next_run_cpu_s": c3 - c2,
            "next_cpu_s": c3 - c0}


def generation(args: argparse.Namespace) -> None:
    """--generation: N configurations to N evaluations, as the optimizer runs a generation; its
    phases logged to stderr as they go (so that a run cut short shows where it was)."""
    import logging
    import os
    import resource

    from mvopt.build import evaluate
    from mvopt.build.flow_trials import PHASES
    from mvopt.config import with_overrides
    from mvopt.procpool import usable_cores

    logging.basicConfig(stream=sys.stderr, level=logging.INFO, format="%(asctime)s %(message)s")
    say = logging.getLogger("bench_flow").info
    if args.threads:
        os.environ["OMP_NUM_THREADS"] = str(args.threads)     # what the flow level's workers follow
    say("generation of %d: configurations", args.generation)
    base = trial_config(args.trial)
    cfgs = [with_overrides(base, {"simulation.fidelity": "flow", "simulation.seed": s + 1})
            for s in range(args.generation)]
    say("generation of %d: evaluate", args.generation)
    report: dict = {}
    t0, c0 = time.perf_counter(), time.process_time()
    evals = evaluate(cfgs, backend="cpu", report=report)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    say("generation of %d: done in %.1f s", args.generation, wall)
    ok = [e for e in evals if e.ok]
    times = sorted(e.iteration_time_s for e in ok)
    flow = report.get("flow", {})
    per_trial = {f"{k}_per_trial": flow[k] / args.generation for k in PHASES if k in flow}
    command = ("python experiments/bench_flow.py " + " ".join(sys.argv[1:])).strip()
    record = {"command": command, "provenance": provenance(command), "trial": args.trial, "generation": args.generation,
              "cores": usable_cores(), "workers": flow.get("workers"), "done": len(ok), "wall_s": wall,
              "main_process_cpu_s": cpu, "phases": flow, **per_trial,
              "main_max_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
              "worker_max_rss_mib": max(_children_peak_rss_mib(), default=None),
              "s_per_trial": wall / args.generation, "trials_per_s": args.generation / wall,
              "iteration_time_s": times}
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(record, indent=1) + "\n")
    phases = ", ".join(f"{k} {v:.1f}" for k, v in flow.items() if k not in ("trials", "workers", "wall_s"))
    phases += " (per trial: " + ", ".join(f"{k.split('_cpu')[0]} {v:.3f}" for k, v in per_trial.items()) + ")"
    print(f"{args.trial}: generation of {args.generation} on {record['workers']} workers ({record['cores']} cores): "
          f"{wall:.1f} s ({args.generation / wall:.2f} trials/s), {len(ok)} done; seconds summed over the trials: "
          f"{phases}; iteration {times[0] if times else float('nan'):.6f}-{times[-1] if times else float('nan'):.6f} s; "
          f"peak RSS: main {record['main_max_rss_mib']:.0f} MiB, a worker {record['worker_max_rss_mib'] or 0:.0f} MiB")


def _children_peak_rss_mib() -> list[float]:
    """Peak resident set (VmHWM) of each child process of this one (the worker pools), in MiB."""
    import glob

    out = []
    for path in glob.glob("/proc/self/task/*/children"):
        for pid in open(path).read().split():
            try:
                hwm = [ln for ln in open(f"/proc/{pid}/status") if ln.startswith("VmHWM:")]
            except OSError:
                continue
            out += [int(ln.split()[1]) / 1024 for ln in hwm]
    return out


if __name__ == "__main__":
    main()
