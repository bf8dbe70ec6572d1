"""``mvopt simulate``: run experiments on the packet-level engine and print what happened.

Two input styles (docs/simulate.md):

* ``mvopt simulate SCENARIO.yaml [MORE.yaml ...] [--json]`` — mvopt experiment files, simulated
  together as one batch;
* ``mvopt simulate --hpcc-topology topology.txt --hpcc-flows flow.txt [--hpcc-config config.txt]
  [--hpcc-paths paths.txt] --fct-out fct.txt`` — the HPCC ns-3 simulator's files, routed by its
  ECMP hash or by explicit paths; writes its fct.txt;
* ``mvopt simulate --from-study STORAGE --trial N [--study NAME] [--scenario NAME]`` — the exact
  experiment that trial N of an optimizer study simulated (its stored canonical configuration;
  under one of its search space's scenarios).

A training workload (``workload.kind: training``) also prints its iteration time with the
breakdown (compute, exposed TP / PP / DP communication, pipeline bubble), MFU and the peak memory
per GPU of every pipeline stage; ``--json`` puts the same under ``"training"``.

Exit codes: 0 every experiment finished; 1 bad input (one line on stderr); 2 usage error;
3 an experiment ended ``stuck`` or ``timeout`` (its diagnostic is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from mvopt.commands._backend import add_backend_options, backend_spec

EXIT_OK, EXIT_INPUT, EXIT_USAGE, EXIT_UNFINISHED = 0, 1, 2, 3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ``mvopt simulate``."""
    parser.add_argument("scenarios", nargs="*", metavar="SCENARIO.yaml",
                        help="experiment files (simulated together as one batch)")
    parser.add_argument("--json", action="store_true", help="print machine-readable JSON instead of text")
    add_backend_options(parser)
    hp = parser.add_argument_group("HPCC ns-3 inputs (instead of SCENARIO.yaml)")
    hp.add_argument("--hpcc-topology", metavar="FILE", help="topology.txt of the HPCC simulator")
    hp.add_argument("--hpcc-flows", metavar="FILE", help="flow.txt of the HPCC simulator")
    hp.add_argument("--hpcc-config", metavar="FILE", help="config.txt of the HPCC simulator (optional)")
    hp.add_argument("--hpcc-paths", metavar="FILE", help="explicit per-flow paths: first line N, then per flow of "
                    "flow.txt the switch ids its data passes (optional; default: the HPCC simulator's ECMP hash)")
    hp.add_argument("--fct-out", metavar="FILE", help="write the flow completion times here (fct.txt format)")
    st = parser.add_argument_group("a trial of an optimizer study (instead of SCENARIO.yaml)")
    st.add_argument("--from-study", metavar="STORAGE",
                    help="Optuna storage of the study (sqlite:///FILE, FILE.db, postgresql://..., a journal file)")
    st.add_argument("--trial", type=int, metavar="N", help="trial number to simulate again")
    st.add_argument("--study", metavar="NAME", help="study name (needed when the storage holds several)")
    st.add_argument("--scenario", metavar="NAME", help="the trial under this scenario of its search space "
                    "(a space with `scenarios:`)")
    parser.set_defaults(_simulate_parser=parser)


def _usage_error(args: argparse.Namespace, message: str) -> None:
    parser = getattr(args, "_simulate_parser", None)
    if parser is None:  # called without our parser: behave like argparse
        print(f"mvopt simulate: error: {message}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE)
    parser.error(message)


# ----------------------------------------------------------------------------------- summaries


def _percentiles(values: np.ndarray) -> dict[str, float] | None:
    if values.size == 0:
        return None
    p = np.percentile(values, [50, 90, 99])
    return {"p50": float(p[0]), "p90": float(p[1]), "p99": float(p[2]), "max": float(values.max())}


def summary(result, topology=None) -> dict[str, Any]:
    """Plain-data summary of one ExperimentResult (what ``--json`` prints). With monitors on
    (``simulation.queue_monitor_ns``), ``"monitors"`` holds every sample; `topology` adds which
    node each port belongs to and leads to."""
    fct = np.asarray(result.flow_fct_ps)
    done = fct >= 0
    slowdown = np.asarray(result.flow_slowdown)[done] if len(fct) else np.zeros(0)
    return {
        "name": result.name,
        "status": result.status,
        "makespan_ps": int(result.makespan_ps),
        "makespan_s": result.makespan_ps / 1e12,
        "end_ps": int(result.end_ps),
        "windows": int(result.windows),
        "tasks": int(len(result.task_finish_ps)),
        "flows": int(len(fct)),
        "flows_completed": int(done.sum()),
        "fct_ps": _percentiles(fct[done].astype(float)),
        "slowdown": _percentiles(slowdown.astype(float)),
        "max_queue_bytes": int(np.max(result.port_max_queue_bytes)) if len(result.port_max_queue_bytes) else 0,
        "counters": {k: int(v) for k, v in result.counters.items()},
        "diagnostic": result.diagnostic,
        **({"monitors": _monitors(result, topology)} if result.queue_samples is not None else {}),
    }


def _monitors(result, topology) -> dict[str, Any]:
    """The monitor samples: [port][sample] lists, sample k at k * interval_ps (docs/engine.md)."""
    q, w = result.queue_samples, result.link_tx_samples
    out: dict[str, Any] = {"interval_ps": int(result.monitor_interval_ps), "samples": int(q.shape[1]),
                           "samples_dropped": int(result.monitor_samples_dropped)}
    if topology is not None:
        out["ports"] = {"node": np.asarray(topology.port_node).tolist(),
                        "peer_node": np.asarray(topology.port_peer_node).tolist(),
                        "rate_bps": np.asarray(topology.port_rate_bps).tolist()}
    out["queue_bytes"] = q.tolist()
    out["link_tx_bytes"] = None if w is None else w.tolist()
    return out


def _fmt_time(ps: float) -> str:
    for unit, scale in (("s", 1e12), ("ms", 1e9), ("us", 1e6), ("ns", 1e3)):
        if abs(ps) >= scale:
            return f"{ps / scale:.6g} {unit}"
    return f"{ps:.0f} ps"


def _print_training(t: dict[str, Any], out) -> None:
    it = t["iteration_time_s"]
    print(f"  iteration     {_fmt_time(it * 1e12)}  (MFU {100 * t['mfu']:.1f} %, "
          f"{t['tflops_per_gpu']:.1f} TFLOP/s per GPU with recomputation)", file=out)
    for k, v in t["breakdown"].items():
        print(f"    {k:<12}{_fmt_time(v * 1e12):>14}  {100 * v / it if it else 0:5.1f} %", file=out)
    mem = ", ".join(f"{b / 2**30:.1f}" for b in t["memory_per_stage_bytes"])
    print(f"  memory/GPU    peak {t['peak_memory_bytes'] / 2**30:.1f} GiB of {t['memory_capacity_bytes'] / 2**30:.1f} "
          f"GiB (stage {t['peak_memory_stage']}); per stage: {mem} GiB", file=out)
    print(f"  GPUs          {t['gpus']} ({t['simulated_gpus']} simulated)", file=out)


def _print_text(s: dict[str, Any], out) -> None:
    print(f"experiment {s['name']}: {s['status']}", file=out)
    if s.get("training"):
        _print_training(s["training"], out)
    print(f"  makespan      {_fmt_time(s['makespan_ps'])} ({s['makespan_ps']} ps)", file=out)
    print(f"  simulated to  {_fmt_time(s['end_ps'])} in {s['windows']} windows", file=out)
    print(f"  tasks         {s['tasks']} ({s['flows']} flows, {s['flows_completed']} completed)", file=out)
    if s["fct_ps"]:
        f = s["fct_ps"]
        print("  FCT           " + "  ".join(f"{k} {_fmt_time(f[k])}" for k in ("p50", "p90", "p99", "max")), file=out)
    if s["slowdown"]:
        d = s["slowdown"]
        print("  slowdown      " + "  ".join(f"{k} {d[k]:.3f}" for k in ("p50", "p90", "p99", "max")), file=out)
    print(f"  max queue     {s['max_queue_bytes']} B", file=out)
    print("  counters", file=out)
    for k, v in s["counters"].items():
        print(f"    {k:<28}{v}", file=out)
    if s.get("monitors"):
        _print_monitors(s["monitors"], out)
    if s["diagnostic"]:
        print("  diagnostic", file=out)
        for line in s["diagnostic"].splitlines():
            print(f"    {line}", file=out)


def _print_monitors(m: dict[str, Any], out) -> None:
    """One line per monitor: the largest queue sample, the busiest link interval (all samples: --json)."""
    iv, n = m["interval_ps"], m["samples"]
    print(f"  monitors      every {_fmt_time(iv)}, {n} samples per port ({m['samples_dropped']} dropped; "
          "all of them in --json)", file=out)
    ports = m.get("ports")

    def where(p: int) -> str:
        return f"port {p}" + (f" (node {ports['node'][p]} -> {ports['peer_node'][p]})" if ports else "")

    q = np.asarray(m["queue_bytes"], np.int64)
    if q.size and q.max() > 0:
        p, k = np.unravel_index(int(np.argmax(q)), q.shape)
        print(f"    queue       largest sample {int(q[p, k])} B at {where(int(p))}, t = {_fmt_time(int(k) * iv)}", file=out)
    else:
        print("    queue       every sample 0 B", file=out)
    if m["link_tx_bytes"] is not None and ports and n > 1:
        w = np.asarray(m["link_tx_bytes"], np.int64)
        util = np.diff(w, axis=1) * 8e12 / (np.asarray(ports["rate_bps"], float)[:, None] * iv)
        p = int(np.argmax(util.mean(axis=1)))
        print(f"    links       busiest {where(p)}: mean utilisation {util[p].mean():.3f}, "
              f"highest interval {util[p].max():.3f}", file=out)


# ----------------------------------------------------------------------------------- HPCC style


def _hpcc_config(args: argparse.Namespace):
    """ExperimentConfig, topology and flows for the HPCC-style inputs."""
    from mvopt.cluster import read_hpcc_topology
    from mvopt.config import load_config
    from mvopt.io.hpcc import read_hpcc_config, read_hpcc_flows

    topo_path = os.path.abspath(args.hpcc_topology)
    flows_path = os.path.abspath(args.hpcc_flows)
    topo = read_hpcc_topology(topo_path)
    flows = read_hpcc_flows(flows_path)
    overrides: dict[str, Any] = {}
    if args.hpcc_config:
        off = np.asarray(topo.node_port_offset, np.int64)
        host_rate = int(np.asarray(topo.port_rate_bps)[off[0]]) if topo.n_host else 0
        settings = read_hpcc_config(args.hpcc_config, host_rate_bps=host_rate,
                                    warn=lambda msg: print(f"mvopt simulate: warning: {msg}", file=sys.stderr))
        overrides = settings.overrides
    # the HPCC simulator's switches queue ACK/NACKs with data, whatever its config says
    data = {"name": Path(flows_path).stem, "cluster": {"topology": "file", "topology_file": topo_path},
            "workload": {"kind": "hpcc_flows", "file": flows_path}, "network": {"switch_ack_queue": "data"}}
    cfg = load_config(data, **{k.replace(".", "__"): v for k, v in overrides.items()})
    return cfg, topo, flows, flows_path


def _hpcc_built(cfg, topo, flows, args: argparse.Namespace):
    """The experiment of the HPCC inputs, its flows on their paths: the path file's
    (--hpcc-paths), else the HPCC simulator's (network.ecmp_hash 'hpcc': its routing is part of
    what its files mean). Building the experiment first checks the flows' node ids."""
    import dataclasses

    from mvopt.build import build
    from mvopt.io.hpcc_paths import experiment_paths, read_hpcc_paths

    built = build(cfg, topology=topo)
    path_file = getattr(args, "hpcc_paths", None)
    explicit = read_hpcc_paths(path_file, topo, flows) if path_file else None
    paths, ack_paths = experiment_paths(topo, flows, explicit)
    exp = built.experiment
    network = exp.network if explicit is not None else dataclasses.replace(exp.network, ecmp_hash="hpcc")
    cfg = built.config and dataclasses.replace(built.config, network=network)
    return dataclasses.replace(built, config=cfg,
                               experiment=dataclasses.replace(exp, network=network, paths=paths, ack_paths=ack_paths))


def _trial_config(args: argparse.Namespace):
    """The configuration trial ``--trial`` of the study in ``--from-study`` recorded (stderr says which)."""
    import optuna

    from mvopt.errors import MvoptError
    from mvopt.optimize.storage import describe_storage, make_storage
    from mvopt.optimize.study import config_of_trial

    url = args.from_study
    try:         # a missing file: one line, and no empty database created
        storage = make_storage(url, heartbeat_s=None, must_exist=True)
    except MvoptError as e:
        raise MvoptError(f"--from-study: {e}") from None
    names = [s.study_name for s in storage.get_all_studies()]
    name = args.study
    if name is None:
        if len(names) != 1:
            raise MvoptError(f"{describe_storage(args.from_study)} holds {len(names)} studies"
                             f"{' (' + ', '.join(sorted(names)) + ')' if names else ''}: name one with --study")
        name = names[0]
    elif name not in names:
        raise MvoptError(f"no study named {name!r} in {describe_storage(args.from_study)}")
    study = optuna.load_study(study_name=name, storage=storage)
    scenario = getattr(args, "scenario", None)
    cfg = config_of_trial(study, args.trial, scenario)
    attrs = next(t.user_attrs for t in study.get_trials(deepcopy=False) if t.number == args.trial)
    import mvopt
    recorded = attrs.get("mvopt_version")
    note = "" if recorded in (None, mvopt.__version__) else f"; recorded by mvopt {recorded}, this is {mvopt.__version__}"
    under = f" under scenario {scenario!r}" if scenario else ""
    print(f"mvopt simulate: trial {args.trial} of study {name!r}{under} (config {attrs.get('config_key')}, "
          f"simulated on {attrs.get('backend', '?')}{note})", file=sys.stderr)
    return cfg


def run(args: argparse.Namespace) -> int:
    """Run ``mvopt simulate``; returns the exit code (MvoptError propagates: the CLI prints it)."""
    from mvopt.build import build, simulate_built, training_report
    from mvopt.config import load_config

    hpcc = any(getattr(args, a, None) for a in ("hpcc_topology", "hpcc_flows", "hpcc_config", "hpcc_paths", "fct_out"))
    from_study = getattr(args, "from_study", None) is not None or getattr(args, "trial", None) is not None
    if sum(map(bool, (hpcc, bool(args.scenarios), from_study))) > 1:
        _usage_error(args, "give one kind of input: SCENARIO.yaml files, --hpcc-* inputs or --from-study/--trial")
    if not hpcc and not args.scenarios and not from_study:
        _usage_error(args, "give SCENARIO.yaml files, or --hpcc-topology, --hpcc-flows and --fct-out, "
                           "or --from-study STORAGE --trial N")
    if from_study and (args.from_study is None or args.trial is None):
        _usage_error(args, "--from-study STORAGE and --trial N go together")
    if getattr(args, "scenario", None) is not None and not from_study:
        _usage_error(args, "--scenario NAME goes with --from-study STORAGE --trial N")
    if hpcc:
        missing = [f for f, a in (("--hpcc-topology", "hpcc_topology"), ("--hpcc-flows", "hpcc_flows"),
                                  ("--fct-out", "fct_out")) if not getattr(args, a, None)]
        if missing:
            _usage_error(args, f"HPCC inputs also need {', '.join(missing)}")
        cfg, topo, flows, flows_path = _hpcc_config(args)
        built = [_hpcc_built(cfg, topo, flows, args)]
    elif from_study:
        built = [build(_trial_config(args))]
    else:
        built = [build(load_config(p)) for p in args.scenarios]
    experiments = [b.experiment for b in built]

    spec = backend_spec(args)
    t0 = time.perf_counter()
    # a long run says how far it is, every few seconds, on stderr (stdout stays the results)
    results = simulate_built(built, backend=spec,
                             progress=lambda p: print(f"mvopt simulate: {p.describe()}", file=sys.stderr, flush=True))
    wall = time.perf_counter() - t0

    if hpcc:
        from mvopt.io.hpcc import write_fct

        n = write_fct(args.fct_out, flows, results[0])
        if not args.json:
            print(f"wrote {n} flow lines to {args.fct_out}")

    summaries = [summary(r, b.experiment.topology) for b, r in zip(built, results)]
    for b, r, s in zip(built, results, summaries):
        if b.plan is not None and r.status == "done":
            s["training"] = training_report(b.plan, r)
    if args.json:
        json.dump({"backend": spec, "wall_s": wall, "experiments": summaries}, sys.stdout, indent=2)
        print()
    else:
        for s in summaries:
            _print_text(s, sys.stdout)
        from mvopt.engine.workers import describe_backend
        print(f"{len(results)} experiment(s) simulated in {wall:.3f} s (backend {describe_backend(spec)})")
    unfinished = [s for s in summaries if s["status"] != "done"]
    for s in unfinished:
        print(f"mvopt simulate: experiment {s['name']} ended {s['status']}: "
              f"{(s['diagnostic'] or 'no diagnostic').splitlines()[0]}", file=sys.stderr)
    return EXIT_UNFINISHED if unfinished else EXIT_OK
