"""Optimizer bookkeeping vs simulation, per generation (tracker issue 6).

    python experiments/bench_optimizer.py --backend gpu --out DIR                   # 3 generations of 1,000
    python experiments/bench_optimizer.py --backend cpu --small --generation 64 --generations 3 --out DIR
    python experiments/bench_optimizer.py --backend null --generation 1000 --out DIR  # the optimizer alone

Runs the topology search space (search_spaces/topology.yaml) through the product's generation loop
(``GenerationLoop``: the sampler proposes a generation, the new configurations are simulated as
one batch, the outcomes are stored) on a fresh study, and reports for every generation:

* ask: the whole ask phase (recovery sweep, the sampler's proposals, parameters -> configurations,
  creating the RUNNING trials), with the sampler's own share and the storage's;
* build: building the experiments (topology, routes, task graphs), as the evaluator reports it;
* simulation: the evaluator's batch minus the build;
* tell: claims and storing the outcomes;
* trials/s over the whole generation, and the ratio (ask + tell) / simulation — the requirement
  is < 10 % for GPU generations of >= 1,000 trials.

By default every trial is a distinct configuration: the shipped space has only ~50 distinct
points (a generation of 1,000 would simulate at most those, then nothing), so ``--distinct``
(on by default) adds three continuous network parameters (ECN kmin, kmax = kmin x span, switch
buffer). ``--small`` (for CPUs) replaces the training workload by an all-reduce of
``--small-bytes`` per host over every NIC of the cluster; the topology part of the search is
unchanged. ``--backend null`` simulates nothing (every configuration gets a made-up time): the
optimizer's own cost. Storage: a fresh SQLite file in DIR (``--storage journal`` a journal file,
or any URL). Writes DIR/bench_optimizer_<backend>.json and .md, and the table into
docs/performance.md (section ``optimizer``, one sub-section per backend) unless ``--no-write``.
Output is plain lines, flushed (no terminal control), so it can run under nohup or a scheduler.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import sys
import time
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _report import provenance, update_section  # noqa: E402

SPACE = ROOT / "search_spaces" / "topology.yaml"
DOC = ROOT / "docs" / "performance.md"

# continuous parameters that make every proposal a distinct configuration (--distinct)
DISTINCT_PARAMETERS = {
    "network.ecn.kmin_kb": {"low": 20.0, "high": 2000.0, "log": True},
    "ecn_span": {"low": 1.0, "high": 10.0},
    "network.buffer_mb": {"low": 8.0, "high": 128.0, "log": True},
}
DISTINCT_DERIVED = {"network.ecn.kmax_kb": "network.ecn.kmin_kb * ecn_span"}


def say(msg: str) -> None:
    print(msg, flush=True)


def space_data(args: argparse.Namespace) -> dict:
    """The topology space, widened (--distinct) and with the small workload (--small) as asked."""
    from mvopt.optimize import load_space

    data = load_space(str(args.space)).to_data()
    data["name"] = f"bench-{args.backend}-{int(time.time())}"
    if args.distinct:
        data["parameters"] = {**data["parameters"], **DISTINCT_PARAMETERS}
        data["derived"] = {**data.get("derived", {}), **DISTINCT_DERIVED}
    if args.small:
        base = dict(data["base"])
        base["workload"] = {"kind": "collective"}
        base["collective"] = {"op": "all_reduce", "bytes": args.small_bytes, "algorithm": "ring", "channels": 1}
        data["base"] = base
    data.pop("run", None)
    return data


class NullEvaluator:
    """Simulates nothing: every configuration gets a made-up time (the optimizer's own cost)."""

    name = "null"

    def evaluate(self, configs):
        from mvopt.optimize.evaluator import Evaluation
        return [Evaluation(feasible=True, iteration_time_s=1e-3 * (1 + (hash(c.name) % 997) / 997), status="ok",
                           breakdown={"compute": 1e-3}, sim_stats={"build_s": 0.0}) for c in configs]


class Recorder:
    """Keeps every GenerationReport, prints one plain line per generation and (``save``) writes
    the rows so far after each generation, so an interrupted run keeps what it measured."""

    def __init__(self, null: bool = False, save=None, engine=None) -> None:
        self.reports = []
        self.engine_reports: list[dict] = []   # per generation: the engine's figures per worker (below)
        self.null = null
        self.save = save
        self.engine = engine   # () -> the evaluator's last engine report, or None

    def rows(self) -> list[dict]:
        """One row per generation, with the engine's figures where the evaluator reported them."""
        return [dict(row_of(r), **({"engine": e} if e else {})) for r, e in zip(self.reports, self.engine_reports)]

    def generation(self, r, budget) -> None:
        self.reports.append(r)
        engine = dict(self.engine() or {}) if self.engine is not None else {}
        self.engine_reports.append(engine)
        row = row_of(r)
        if self.null:
            row["ratio"] = None
        say(f"gen {r.index}: {r.told} trials ({r.simulated} simulated, {r.cached} cached, {r.infeasible} infeasible) | "
            f"ask {row['ask_s']:.2f} s (sampler {row['sampler_s']:.2f}, storage {row['ask_storage_s']:.2f}) | "
            f"build {row['build_s']:.2f} s | simulation {row['simulation_s']:.2f} s | tell {row['tell_s']:.2f} s | "
            f"{row['trials_per_s']:.1f} trials/s | bookkeeping/simulation {fmt_ratio(row['ratio'])}")
        for worker, st in engine.items():
            say(f"    engine {worker}: {describe_engine(st)}")
        if self.save is not None:
            self.save(self)


def describe_engine(st: dict) -> str:
    """One line of a worker's figures (mvopt.engine.split.run_share): its sub-batches in order, and
    the CPU racer's, where it raced."""
    subs = "; ".join(f"{b['experiments']} {'compact' if b['compact'] else 'full'} at {b['start_s']:.1f} s: "
                     f"build {b['build_s']:.1f} s, run {b['run_s']:.1f} s" for b in st.get("timeline", []))
    text = (f"planning {st.get('plan_s', 0.0):.1f} s, sub-batches [{subs}], results {st.get('extract_s', 0.0):.1f} s, "
            f"busy {st.get('busy_s', 0.0):.1f} s")
    if "cpu_runs" in st:
        text += (f"; CPU racer ready after {st['cpu_ready_s']:.1f} s, {st['cpu_runs']} runs "
                 f"({st['cpu_busy_s']:.1f} s), won {st['cpu_won']}, abandoned {st['cpu_abandoned']}")
    return text


def row_of(r) -> dict:
    sim = max(r.simulate_s - r.build_s, 0.0)
    total = r.sampler_s + r.simulate_s + r.tell_s
    book = r.sampler_s + r.tell_s
    return {"generation": r.index, "trials": r.told, "simulated": r.simulated, "cached": r.cached,
            "infeasible": r.infeasible, "ask_s": r.sampler_s, "sampler_s": r.propose_s, "map_s": r.map_s,
            "ask_storage_s": r.create_s, "tell_storage_s": r.finish_s,
            "build_s": r.build_s, "simulation_s": sim, "evaluate_s": r.simulate_s, "tell_s": r.tell_s,
            "bookkeeping_s": book, "total_s": total, "trials_per_s": r.told / total if total > 0 else 0.0,
            "ratio": book / sim if sim > 0 else None,
            "ratio_with_build": book / r.simulate_s if r.simulate_s > 0 else None}


def fmt_ratio(x) -> str:
    return "n/a" if x is None else f"{100 * x:.1f} %"


def table(rows: list[dict]) -> str:
    lines = ["| gen | trials | simulated | cached / infeasible | ask (s) | of which sampler / mapping / storage (s) | "
             "build (s) | simulation (s) | tell (s) | trials/s | (ask+tell) / simulation | (ask+tell) / (build+simulation) |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['generation']} | {r['trials']} | {r['simulated']} | {r['cached']} / {r['infeasible']} | "
                     f"{r['ask_s']:.2f} | {r['sampler_s']:.2f} / {r['map_s']:.2f} / {r['ask_storage_s']:.2f} | "
                     f"{r['build_s']:.2f} | {r['simulation_s']:.2f} | {r['tell_s']:.2f} | {r['trials_per_s']:.1f} | "
                     f"{fmt_ratio(r['ratio'])} | {fmt_ratio(r['ratio_with_build'])} |")
    return "\n".join(lines)


def file_stem(backend: str) -> str:
    """A file name for a backend spec: no ':' ',' '+' (gpu:0+cpu), which some tools refuse."""
    return "bench_optimizer_" + "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in backend)


def storage_url(args: argparse.Namespace, out: Path) -> str:
    if args.storage in (None, "sqlite"):
        path = out / f"{file_stem(args.backend)}.db"
        for suffix in ("", "-wal", "-shm"):
            Path(f"{path}{suffix}").unlink(missing_ok=True)
        return f"sqlite:///{path}"
    if args.storage == "journal":
        path = out / f"{file_stem(args.backend)}.log"
        path.unlink(missing_ok=True)
        Path(f"{path}.lock").unlink(missing_ok=True)
        return str(path)
    return args.storage


def write_docs(backend: str, text: str) -> None:
    """Put ``text`` into sub-section ``optimizer-<backend>`` of section ``optimizer`` (others kept)."""
    doc = DOC.read_text() if DOC.exists() else ""
    m = re.search(r"<!-- begin:optimizer -->\n(.*?)<!-- end:optimizer -->", doc, re.S)
    current = m.group(1) if m else ("## Optimizer bookkeeping vs simulation (topology space)\n\n"
                                    "Produced by `experiments/bench_optimizer.py`; one sub-section per backend.\n")
    begin, end = f"<!-- begin:optimizer-{backend} -->", f"<!-- end:optimizer-{backend} -->"
    block = f"{begin}\n{text.strip()}\n{end}"
    inner = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.S)
    current = inner.sub(lambda _: block, current, count=1) if inner.search(current) else current.rstrip() + "\n\n" + block
    update_section(DOC, "optimizer", current)


def _terminate(signum, frame) -> None:
    raise KeyboardInterrupt


def main(argv: list[str] | None = None) -> int:
    from mvopt.optimize.samplers import sampler_names

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", default="cpu",
                    help="cpu, gpu, an engine spec (gpu:0,1, cpu:N, auto), null (no simulation) or module:factory "
                         "(default cpu)")
    ap.add_argument("--generation", type=int, default=1000, metavar="N", help="trials per generation (default 1000)")
    ap.add_argument("--generations", type=int, default=3, metavar="G", help="generations to run (default 3)")
    ap.add_argument("--sampler", choices=sampler_names(), default=None, help="sampler (default: the space's, nsga2)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--space", type=Path, default=SPACE, help="search space file (default search_spaces/topology.yaml)")
    ap.add_argument("--storage", default=None, help="sqlite (default: a fresh file in --out), journal, or an Optuna URL")
    ap.add_argument("--no-distinct", dest="distinct", action="store_false",
                    help="the space as shipped (~50 distinct points: later generations simulate nothing)")
    ap.add_argument("--small", action="store_true",
                    help="replace the training workload by a small all-reduce over every NIC (for CPUs)")
    ap.add_argument("--small-bytes", type=int, default=65536, metavar="B", help="all-reduce bytes per host with --small")
    ap.add_argument("--out", type=Path, required=True, metavar="DIR")
    ap.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    args = ap.parse_args(argv)
    if args.generation < 1 or args.generations < 1:
        ap.error("--generation and --generations must be >= 1")
    from mvopt.errors import MvoptError
    try:
        return run(args, argv)
    except MvoptError as e:  # a bad space, storage or backend: one line, no traceback
        say(f"bench_optimizer: error: {e}")
        return 1


def run(args: argparse.Namespace, argv: list[str] | None) -> int:
    from mvopt.optimize import Budget, GenerationLoop, create_or_resume, load_space, make_storage
    from mvopt.optimize.evaluator import make_evaluator
    from mvopt.optimize.storage import describe_storage
    from mvopt.optimize.writer import trial_writer

    from mvopt.errors import MvoptError
    from mvopt.optimize.evaluator import SimulatorEvaluator
    from mvopt.optimize.progress import ConsoleProgress

    from mvopt.optimize.cli import quiet_optuna
    quiet_optuna()            # and the engine's notes (experiments run again with full packet slots)
    args.out.mkdir(parents=True, exist_ok=True)
    space = load_space(space_data(args))
    sampler = args.sampler or load_space(str(args.space)).run.sampler or "tpe"
    if args.backend == "null":
        evaluator = NullEvaluator()
    elif args.backend.partition(":")[0] in ("cpu", "gpu", "auto"):  # engine specs: gpu:0,1, cpu:N
        evaluator = SimulatorEvaluator(args.backend)
        evaluator.on_progress = lambda p: say(ConsoleProgress.simulating_line(p))   # a long batch is not silent
    else:
        evaluator = make_evaluator(args.backend)
    url = storage_url(args, args.out)
    study = create_or_resume(make_storage(url), space, sampler=sampler, generation_size=args.generation, seed=args.seed)
    writer = trial_writer(study._storage)
    stem = args.out / file_stem(args.backend)
    argv_text = " ".join(a if a.strip() and " " not in a else repr(a) for a in (argv if argv is not None else sys.argv[1:]))
    cmd = f"python experiments/bench_optimizer.py {argv_text}".strip()
    meta = {"command": cmd, "provenance": provenance(cmd), "backend": evaluator.name, "sampler": sampler,
            "generation": args.generation, "generations": args.generations, "small": args.small,
            "small_bytes": args.small_bytes if args.small else None, "distinct": args.distinct,
            "storage": describe_storage(url), "writer": writer.kind}

    def save_partial(rec) -> None:
        Path(f"{stem}.json").write_text(json.dumps({**meta, "complete": False, "rows": rec.rows()},
                                                   indent=2) + "\n")
    say(f"bench_optimizer: {args.space.name}{' + distinct' if args.distinct else ''}{' (small workload)' if args.small else ''}, "
        f"{len(space.parameters)} parameters, sampler {sampler}, generations {args.generations} x {args.generation}, "
        f"backend {evaluator.name}, storage {describe_storage(url)} ({writer.kind} writer)")
    rec = Recorder(null=args.backend == "null", save=save_partial, engine=lambda: getattr(evaluator, "last_report", None))
    loop = GenerationLoop(study, space, evaluator, generation_size=args.generation, progress=rec,
                          artifact_dir=str(args.out / "artifacts"), writer=writer)
    t0 = time.perf_counter()
    previous = signal.signal(signal.SIGTERM, _terminate)  # a scheduler's SIGTERM: running trials released
    try:
        summary = loop.run(Budget(n_trials=args.generation * args.generations))
    except (MvoptError, KeyboardInterrupt) as e:
        say(f"bench_optimizer: stopped after {len(rec.reports)} generation(s): {e or type(e).__name__} "
            f"(rows so far in {stem}.json)")
        return 1
    finally:
        signal.signal(signal.SIGTERM, previous)
    wall = time.perf_counter() - t0
    rows = rec.rows()
    if args.backend == "null":  # nothing was simulated: a ratio would only measure the made-up evaluator
        for r in rows:
            r["ratio"] = r["ratio_with_build"] = None

    later = [r for r in rows[1:] if r["ratio"] is not None] or [r for r in rows if r["ratio"] is not None]
    worst = max((r["ratio"] for r in later), default=None)
    text = (f"### Backend `{evaluator.name}`: {args.generations} generations of {args.generation} trials, sampler "
            f"`{sampler}`{', small workload (all-reduce of ' + str(args.small_bytes) + ' B per host)' if args.small else ''}\n\n"
            f"{provenance(cmd)}\nStorage: {writer.kind} writer on {'SQLite' if url.startswith('sqlite') else describe_storage(url)}; "
            f"space: {args.space.name}{' + 3 continuous ECN/buffer parameters (every trial distinct)' if args.distinct else ' as shipped'}. "
            f"Whole run {wall:.1f} s, {summary.told} trials ({summary.simulated} simulated).\n\n"
            f"{table(rows)}\n\n"
            + ("No simulation (backend null): the columns are the optimizer's own cost per generation.\n"
               if args.backend == "null" else
               f"Worst (ask + tell) / simulation after the first generation: {fmt_ratio(worst)} (requirement: < 10 % "
               "for GPU generations of >= 1,000 trials). Generation 0 includes one-time costs (engine compilation, "
               "first imports).\n"))
    say(text)
    result = {**meta, "complete": True, "wall_s": wall, "rows": rows, "summary": asdict(summary),
              "worst_ratio_after_first": worst}
    Path(f"{stem}.json").write_text(json.dumps(result, indent=2) + "\n")
    Path(f"{stem}.md").write_text(text)
    say(f"wrote {stem}.json and {stem}.md")
    if not args.no_write:
        write_docs(evaluator.name, text)
        say(f"updated {DOC} (section optimizer, sub-section optimizer-{evaluator.name})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
