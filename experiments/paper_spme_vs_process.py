"""SPME batching vs one process per experiment, same hardware (the idea of the paper's Fig. 3 / 10).

    python experiments/paper_spme_vs_process.py              # CPU, 48 experiments of 4 and of 32 MiB; writes docs/performance.md
    python experiments/paper_spme_vs_process.py --n 8 --mib 1 --no-write           # quick
    python experiments/paper_spme_vs_process.py --backend gpu --n 1024 --mib 4,32 --jobs 16   # on a GPU machine
    # modes too long for one call: run some, save them, then the others and merge (same --n/--mib/--cc)
    python experiments/paper_spme_vs_process.py --backend gpu --n 128 --mib 32 --modes batch,split,sequential --save A.json
    python experiments/paper_spme_vs_process.py --backend gpu --n 128 --mib 32 --modes processes --merge A.json

N experiments, each a ring all-reduce over the 16 hosts of a k=4 fat-tree (1500-byte packets),
congestion control cycling through ``--cc`` and a different seed each (so ECMP paths differ),
are written as N scenario files and run three ways, every way in fresh processes exactly as a
user would run them:

(i)   **SPME batch**: one ``python -m mvopt simulate f1.yaml ... fN.yaml`` (one process, one batch);
(ii)  **one process per experiment**: N ``python -m mvopt simulate fi.yaml`` processes, ``--jobs``
      of them at a time (default: one per core; each with ``OMP_NUM_THREADS=1`` on the CPU so that
      the jobs do not oversubscribe the cores; on the GPU they share the device);
(iii) **sequential, one process**: one process that builds and simulates the experiments one
      after another (``--worker sequential``, the same calls as ``mvopt simulate``);
(i')  **SPME, two batches**: one process, the HPCC experiments in one batch and the others in
      another (``--worker split``): what mixing HPCC (whose packets carry in-band telemetry
      records) with the other algorithms in one batch costs.

``--threads N`` sets ``OMP_NUM_THREADS`` for the single-process modes (default: every core).

Wall time counts everything a user waits for (interpreter start, imports, loading the compiled
engine, building, simulating, printing); *engine* is the ``simulate`` call alone (the ``wall_s``
that ``mvopt simulate --json`` reports, summed over processes). Results must be identical between
the modes: every experiment's status, makespan, simulated end, windows, all counters, FCT and
slowdown percentiles and largest queue (the ``--json`` summary) are compared; a difference
fails the run (exit 1) and is listed.

Writes section ``spme_vs_process`` (``spme_vs_process_gpu`` with ``--backend gpu``) of
docs/performance.md (``--no-write``: print only).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _report import provenance, update_section  # noqa: E402


def scenario(i: int, cc: str, nbytes: int) -> dict:
    """Experiment i: k=4 fat-tree ring all-reduce (the benchmark workload of mvopt.bench), seed i+1."""
    return {
        "name": f"exp{i:05d}-{cc}",
        "cluster": {"topology": "fat_tree", "k": 4},
        "network": {"cc": cc, "payload_bytes": 1452, "header_bytes": 48, "switch_packet_slots": 4096},
        "workload": {"kind": "collective"},
        "collective": {"op": "all_reduce", "bytes": nbytes, "algorithm": "ring", "channels": 1},
        "simulation": {"seed": i + 1},
    }


def write_scenarios(directory: Path, n: int, ccs: list[str], nbytes: int) -> list[Path]:
    import yaml

    paths = []
    for i in range(n):
        p = directory / f"exp{i:05d}.yaml"
        p.write_text(yaml.safe_dump(scenario(i, ccs[i % len(ccs)], nbytes), sort_keys=False))
        paths.append(p)
    return paths


def _env(threads: int | None) -> dict:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    if threads is not None:
        env["OMP_NUM_THREADS"] = str(threads)
    return env


def _run_json(cmd: list[str], env: dict) -> tuple[dict, float]:
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=ROOT)
    wall = time.perf_counter() - t0
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} ... exited {out.returncode}: {out.stderr.strip()[-2000:]}")
    return json.loads(out.stdout), wall


def mode_batch(paths: list[Path], backend: str, threads: int | None) -> dict:
    data, wall = _run_json([sys.executable, "-m", "mvopt", "simulate", *map(str, paths), "--json",
                            "--backend", backend], _env(threads))
    return {"wall_s": wall, "engine_s": data["wall_s"], "processes": 1, "summaries": data["experiments"]}


def mode_processes(paths: list[Path], backend: str, jobs: int) -> dict:
    env = _env(1 if backend == "cpu" else None)

    def one(p: Path):
        return _run_json([sys.executable, "-m", "mvopt", "simulate", str(p), "--json", "--backend", backend], env)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        outs = list(pool.map(one, paths))
    wall = time.perf_counter() - t0
    return {"wall_s": wall, "engine_s": sum(d["wall_s"] for d, _ in outs), "processes": len(paths),
            "process_wall_s": [w for _, w in outs], "summaries": [d["experiments"][0] for d, _ in outs]}


def mode_sequential(paths: list[Path], backend: str, threads: int | None) -> dict:
    data, wall = _run_json([sys.executable, str(Path(__file__).resolve()), "--worker", "sequential",
                            "--backend", backend, *map(str, paths)], _env(threads))
    return {"wall_s": wall, "engine_s": data["wall_s"], "processes": 1, "summaries": data["experiments"]}


def mode_split(paths: list[Path], backend: str, threads: int | None) -> dict:
    data, wall = _run_json([sys.executable, str(Path(__file__).resolve()), "--worker", "split",
                            "--backend", backend, *map(str, paths)], _env(threads))
    return {"wall_s": wall, "engine_s": data["wall_s"], "processes": 1, "summaries": data["experiments"]}


def worker(kind: str, paths: list[str], backend: str) -> None:
    """``--worker sequential``: the calls of ``mvopt simulate``, one experiment at a time;
    ``--worker split``: one process, two batches: the HPCC experiments and the others."""
    from mvopt.build import build
    from mvopt.commands.simulate import summary
    from mvopt.config import load_config
    from mvopt.engine import simulate

    exps = [build(load_config(p)).experiment for p in paths]
    if kind == "sequential":
        groups = [[i] for i in range(len(exps))]
    else:
        hpcc = [i for i, e in enumerate(exps) if e.network.cc == "hpcc"]
        groups = [g for g in (hpcc, [i for i in range(len(exps)) if i not in set(hpcc)]) if g]
    engine, out = 0.0, [None] * len(exps)
    for g in groups:
        t0 = time.perf_counter()
        results = simulate([exps[i] for i in g], backend=backend)
        engine += time.perf_counter() - t0
        for i, r in zip(g, results):
            out[i] = summary(r)
    json.dump({"backend": backend, "wall_s": engine, "experiments": out}, sys.stdout)


def compare(modes: dict[str, dict]) -> list[str]:
    """Differences between the modes' summaries (empty: identical)."""
    names = list(modes)
    ref = modes[names[0]]["summaries"]
    diffs = []
    for m in names[1:]:
        for a, b in zip(ref, modes[m]["summaries"], strict=True):
            if a != b:
                keys = sorted(k for k in a if a.get(k) != b.get(k))
                diffs.append(f"{a['name']}: {names[0]} vs {m} differ in {', '.join(keys)}")
    return diffs


LABELS = {"batch": "(i) SPME: one process, one batch",
          "processes": "(ii) one process per experiment",
          "sequential": "(iii) one process, experiments one after another",
          "split": "(i') SPME, two batches: HPCC / the others"}


def run_size(args, mib: float) -> tuple[dict[str, dict], list[str]]:
    """Every mode for one all-reduce size; the modes' results and their differences."""
    modes: dict[str, dict] = {}
    with tempfile.TemporaryDirectory(prefix="mvopt-spme-") as tmp:
        paths = write_scenarios(Path(tmp), args.n, args.cc.split(","), int(mib * 2**20))
        # warm-up: compile (or load) the engine once so that no mode pays the first compilation
        _run_json([sys.executable, "-m", "mvopt", "simulate", str(paths[0]), "--json", "--backend", args.backend],
                  _env(None))
        for key in args.modes.split(","):
            fn = {"batch": lambda: mode_batch(paths, args.backend, args.threads),
                  "processes": lambda: mode_processes(paths, args.backend, args.jobs),
                  "sequential": lambda: mode_sequential(paths, args.backend, args.threads),
                  "split": lambda: mode_split(paths, args.backend, args.threads)}[key]
            modes[key] = fn()
            print(f"{mib:g} MiB {LABELS[key]}: wall {modes[key]['wall_s']:.2f} s, "
                  f"engine {modes[key]['engine_s']:.2f} s", flush=True)
    return modes, compare(modes)


def report(args, runs: list[tuple[float, dict[str, dict], list[str]]], cmd: str, merged: list[str] = ()) -> str:
    """The section's text; `merged`: where the modes merged from saved runs were measured."""
    cores = os.cpu_count() or 1
    lines = ["| size | mode | processes | wall (s) | engine (s) | outside the engine (s) | experiments/hour | "
             "wall vs SPME | results |", "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    facts = []
    all_diffs = []
    for mib, modes, diffs in runs:
        base = modes["batch"]["wall_s"]
        same = "identical" if not diffs else f"{len(diffs)} differ"
        for key, m in modes.items():
            process_s = sum(m.get("process_wall_s", [m["wall_s"]]))
            lines.append(f"| {mib:g} MiB | {LABELS[key]} | {m['processes']:,} | {m['wall_s']:.2f} | "
                         f"{m['engine_s']:.2f} | {max(0.0, process_s - m['engine_s']):.2f} | "
                         f"{args.n / m['wall_s'] * 3600:,.0f} | {m['wall_s'] / base:.2f}x | "
                         f"{same if key != 'batch' else 'reference'} |")
        sums = modes["batch"]["summaries"]
        n_done = sum(s["status"] == "done" for s in sums)
        hops = sum(s["counters"]["packet_hops"] for s in sums)
        pw = modes["processes"]["process_wall_s"]
        facts.append(f"| {mib:g} MiB | {n_done} of {args.n} | {hops:,} | "
                     f"{min(s['makespan_ps'] for s in sums) / 1e6:,.1f}–{max(s['makespan_ps'] for s in sums) / 1e6:,.1f} | "
                     f"{sum(pw) / len(pw):.2f} / {modes['processes']['engine_s'] / len(pw):.3f} |")
        all_diffs += [f"{mib:g} MiB: {d}" for d in diffs]
    s0 = runs[0][1]["batch"]["summaries"][0]
    text = f"""## SPME batch vs one process per experiment, {args.backend.upper()} backend (paper Fig. 3 / Fig. 10)

{provenance(cmd)}{"".join(chr(10) + "Merged: " + m for m in merged)}

{args.n} experiments per size: ring all-reduce over the 16 hosts of a k=4 fat-tree, 1500-byte
packets, congestion control cycling through {', '.join(args.cc.split(','))}, seeds 1..{args.n}; backend
`{args.backend}`, {cores} cores ({f'`OMP_NUM_THREADS={args.threads}` in the single-process modes' if args.threads else 'all of them in the single-process modes'}); mode (ii) runs {args.jobs} processes at a time
({'`OMP_NUM_THREADS=1` each' if args.backend == 'cpu' else 'sharing the GPU'}). Every mode runs in fresh
processes, as a user would run `python -m mvopt simulate` (script docstring). *Engine* is the
`simulate` call (loading the compiled engine, building the batch, running it) and *outside the
engine* the rest of each process's life (interpreter start, imports, building the experiments,
printing), both summed over the processes: mode (ii) runs {args.jobs} processes at a time, so its
sums can exceed its wall time. *Results*: every experiment's status, makespan, simulated end,
windows, all {len(s0['counters'])} counters, FCT and slowdown percentiles and largest queue compared with
mode (i).

| size | experiments done | packet-hops (all) | makespan range (us) | mode (ii): mean wall of a process / its engine time (s) |
|---|---|---:|---|---|
""" + "\n".join(facts) + "\n\n" + "\n".join(lines) + "\n"
    if all_diffs:
        text += "\nDifferences:\n\n" + "\n".join(f"- {d}" for d in all_diffs[:50]) + "\n"
    return text


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=48, help="experiments per size (default 48)")
    ap.add_argument("--mib", default="4,32", help="all-reduce sizes per rank in MiB, comma-separated (default 4,32)")
    ap.add_argument("--cc", default="none,dcqcn,hpcc,dctcp", help="congestion controls, cycled")
    ap.add_argument("--backend", default="cpu", choices=("cpu", "gpu"))
    ap.add_argument("--jobs", type=int, default=None, help="mode (ii): processes at a time (default: cores)")
    ap.add_argument("--threads", type=int, default=None,
                    help="OMP_NUM_THREADS of the single-process modes (default: unset, every core)")
    ap.add_argument("--modes", default="batch,split,processes,sequential",
                    help="modes to run (default all: batch,split,processes,sequential)")
    ap.add_argument("--save", metavar="JSON", help="also write this run's modes (times, results) to JSON, for --merge")
    ap.add_argument("--merge", metavar="JSON", nargs="*", default=[],
                    help="modes saved (--save) by runs of the same experiments, e.g. on separate device calls")
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    ap.add_argument("--worker", choices=("sequential", "split"), help=argparse.SUPPRESS)
    ap.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        worker(args.worker, args.paths, args.backend)
        return 0
    args.jobs = args.jobs or (os.cpu_count() or 1)
    sized: dict[float, dict[str, dict]] = {}
    for mib in (float(x) for x in args.mib.split(",")):
        sized[mib], _ = run_size(args, mib)
    same = {"n": args.n, "cc": args.cc, "backend": args.backend}
    if args.save:
        Path(args.save).write_text(json.dumps({**same, "jobs": args.jobs, "threads": args.threads,
                                               "provenance": provenance("").splitlines()[0],
                                               "modes": args.modes, "sizes": list(sized.items())}))
    for path in args.merge:
        other = json.loads(Path(path).read_text())
        if {k: other[k] for k in same} != same:
            raise SystemExit(f"{path}: other experiments ({ {k: other[k] for k in same} }), not {same}")
        for mib, modes in other["sizes"]:
            sized.setdefault(float(mib), {}).update({k: v for k, v in modes.items() if k not in sized[float(mib)]})
    # mode (i) first: the reference of the comparison
    runs = [(mib, {k: modes[k] for k in LABELS if k in modes}) for mib, modes in sized.items()]
    runs = [(mib, modes, compare(modes)) for mib, modes in runs]
    all_diffs = [d for _, _, ds in runs for d in ds]
    if any(set(modes) != set(LABELS) for _, modes, _ in runs):
        print("\n".join(all_diffs) or "results identical")
        return 1 if all_diffs else 0
    cmd = (f"python experiments/paper_spme_vs_process.py --n {args.n} --mib {args.mib} --cc {args.cc} "
           f"--backend {args.backend} --jobs {args.jobs}" + (f" --threads {args.threads}" if args.threads else "")
           + (f" --modes {args.modes}" if args.merge else "")
           + "".join(f" --merge {Path(p).name}" for p in args.merge))
    merged = [f"modes {o['modes']} from `{Path(p).name}`: {o['provenance']}"
              for p, o in ((p, json.loads(Path(p).read_text())) for p in args.merge)]
    text = report(args, runs, cmd, merged)
    print(text)
    if not args.no_write:
        section = "spme_vs_process" if args.backend == "cpu" else f"spme_vs_process_{args.backend}"
        update_section(ROOT / "docs" / "performance.md", section, text)
    return 1 if all_diffs else 0


if __name__ == "__main__":
    sys.exit(main())
