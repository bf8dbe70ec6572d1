"""The benchmark that matters: generations of the shipped use-case search spaces, as a user runs them.

    python experiments/bench_search.py [--spaces topology,parallelism,collective,congestion_control]
        [--backend gpu|cpu] [--n N] [--seed S] [--set PATH=VALUE ...] [--budget-s S]
        [--topology KIND] [--k4-batch 2048 --k4-mib 8 | --no-k4] [--out FILE.json]
    python experiments/bench_search.py --markdown RUN.json [RUN.json ...]   # the docs' table

For each space it samples one generation (the space's own `run.generation_size` candidates unless
`--n` says otherwise; the first generation of every shipped sampler is random), builds the
feasible ones exactly as the optimizer's evaluator does, and simulates them as ONE batch on the
backend. Without `--budget-s` that is the user's path (`mvopt.engine.simulate`: capacity
planning, sub-batches, racing under `auto`). With `--budget-s` the batch runs directly on the
backend for at most that many seconds (the output says so), so that a generation that takes an
hour can still be measured; what the figures cover is then the part simulated.

Reported per generation: trials/hour (only when the generation ended), wall and build time,
packet-hops/s, windows/s, the tail (experiments ended over time), the simulated time each
experiment reached, the share of simulated time covered by windows (the rest was idle time
skipped at once), and on a GPU the kernel's share of the wall time. In the same run, unless
`--no-k4`, the k=4 fat-tree ring all-reduce benchmark (`mvopt.bench`) gives the ceiling the
use-case rates are measured against. `--set` changes every space's base experiment (e.g.
`network.payload_bytes=32000`) and is printed with the results.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mvopt.bench import bench_allreduce  # noqa: E402
from mvopt.engine import build_batch, get_backend, simulate  # noqa: E402
from mvopt.engine.batch import ST_RUN, extract_results  # noqa: E402
from mvopt.build import build_all  # noqa: E402
from mvopt.optimize import load_space  # noqa: E402

SPACES = ("topology", "parallelism", "collective", "congestion_control")


def parse_set(items: list[str]) -> dict[str, object]:
    """`PATH=VALUE` pairs, VALUE read as YAML (numbers, lists, strings)."""
    import yaml

    out: dict[str, object] = {}
    for item in items:
        path, sep, value = item.partition("=")
        if not sep or not path:
            raise SystemExit(f"--set {item!r}: expected PATH=VALUE")
        out[path] = yaml.safe_load(value)
    return out


def sample_generation(space_name: str, n: int | None, seed: int, overrides: dict,
                      topology: str | None = None) -> tuple[list, int, int]:
    """The generation's feasible configurations, how many were sampled, the generation size;
    with `topology`, only candidates of that cluster kind (sampled until `n` are found)."""
    space = load_space(ROOT / "search_spaces" / f"{space_name}.yaml", base_overrides=overrides or None)
    size = n or space.run.generation_size or 128
    if topology is None:
        cands = space.sample(size, seed=seed)
        return [c.config for c in cands if c.feasible], len(cands), size
    configs = [c.config for c in space.sample(size * 50, seed=seed)
               if c.feasible and c.config.cluster.topology == topology]
    return configs[:size], size * 50, size


def run_budget(experiments: list, backend: str, budget_s: float) -> dict:
    """Run the batch directly on one backend for at most `budget_s` seconds; the tail and rates."""
    be = get_backend(backend)
    t0 = time.perf_counter()
    batch = build_batch(experiments)
    batch_s = time.perf_counter() - t0
    tail: list[tuple[float, int, int]] = []
    t_run = time.perf_counter()

    def progress(done: int, windows: int, slowest_ps: int = 0, ended_ps: int | None = None) -> None:
        tail.append((round(time.perf_counter() - t_run, 3), int(done), int(windows), int(slowest_ps)))

    if backend.startswith("gpu"):
        be.run(batch, deadline_s=budget_s, progress=progress, resumable=False)
        timing = dict(getattr(be, "last_timing", {}) or {})
    else:
        timing = {}
        while time.perf_counter() - t_run < budget_s and (batch.cols["exp_status"] == ST_RUN).any():
            be.run(batch, max_iters=2000, progress=progress)
    run_s = time.perf_counter() - t_run
    results = extract_results(batch, 0)
    return {"results": results, "run_s": run_s, "batch_build_s": batch_s, "tail": tail, "timing": timing}


def summarise(results: list, experiments: list, run_s: float) -> dict:
    hops = sum(int(r.counters["packet_hops"]) for r in results)
    windows = sum(int(r.windows) for r in results)
    ended = [r for r in results if r.status != "running"]
    reached_ms = [r.end_ps / 1e9 for r in results]
    covered = []
    for r, e in zip(results, experiments):
        w_ps = int(e.params.window_ps)
        if w_ps and r.end_ps > 0:
            covered.append(min(1.0, r.windows * w_ps / r.end_ps))
    return {
        "experiments": len(results), "ended": len(ended),
        "status": {s: sum(1 for r in results if r.status == s) for s in sorted({r.status for r in results})},
        "packet_hops": hops, "packet_hops_per_s": hops / run_s if run_s else 0.0,
        "windows": windows, "windows_per_s": windows / run_s if run_s else 0.0,
        "simulated_ms_reached": {"min": min(reached_ms, default=0), "median": statistics.median(reached_ms or [0]),
                                 "max": max(reached_ms, default=0)},
        "window_share_of_simulated_time": statistics.median(covered) if covered else None,
    }


def by_topology(results: list, kinds: list[str]) -> dict:
    """Per topology kind: experiments, how many ended, the median simulated time reached and
    windows run (where a generation's tail comes from)."""
    out = {}
    for kind in sorted(set(kinds)):
        rs = [r for r, k in zip(results, kinds) if k == kind]
        out[kind] = {"n": len(rs), "ended": sum(r.status != "running" for r in rs),
                     "reached_ms_median": statistics.median(r.end_ps / 1e9 for r in rs),
                     "windows_median": statistics.median(r.windows for r in rs)}
    return out


def bench_space(name: str, args, overrides: dict) -> dict:
    t0 = time.perf_counter()
    configs, sampled, size = sample_generation(name, args.n, args.seed, overrides, args.topology)
    t1 = time.perf_counter()
    built = build_all(configs)
    kinds = [c.cluster.topology for c, (b, _, _) in zip(configs, built) if b is not None]
    experiments = [b.experiment for b, _, _ in built if b is not None]
    build_s = time.perf_counter() - t1
    row: dict = {"space": name, "generation_size": size, "sampled": sampled, "feasible": len(configs),
                 "simulated": len(experiments), "sample_s": t1 - t0, "build_s": build_s,
                 "nodes_max": max((int(e.topology.n_node) for e in experiments), default=0),
                 "mode": "budget" if args.budget_s else "user"}
    if not experiments:
        return row
    if args.budget_s:
        out = run_budget(experiments, args.backend, args.budget_s)
        row.update(run_s=out["run_s"], batch_build_s=out["batch_build_s"], tail=out["tail"][-200:],
                   timing=out["timing"])
        results = out["results"]
        if out["timing"].get("kernel_s"):
            row["gpu_busy_share"] = out["timing"]["kernel_s"] / max(out["run_s"], 1e-9)
    else:
        tail: list = []
        report: dict = {}
        t2 = time.perf_counter()
        results = simulate(experiments, backend=args.backend, report=report,
                           progress=lambda p: tail.append((round(p.elapsed_s, 1), p.done, p.windows, p.simulated_ps)))
        row.update(run_s=time.perf_counter() - t2, tail=tail)
    row.update(summarise(results, experiments, row["run_s"]))
    row["by_topology"] = by_topology(results, kinds)
    if row["ended"] == row["experiments"]:
        row["trials_per_hour"] = size / (row["build_s"] + row["run_s"]) * 3600
    return row


def markdown(docs: list[dict]) -> str:
    """A docs table of saved runs (their JSON), one row per space and run."""
    lines = ["| space | packets | trials | mode | wall s | ended | simulated ms reached (median) | "
             "G packet-hops/s | share of k=4 | GPU busy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for doc in docs:
        payload = doc.get("set", {}).get("network.payload_bytes", "space's")
        for row in doc["spaces"]:
            share = row.get("share_of_k4")
            busy = row.get("gpu_busy_share")
            lines.append(
                f"| {row['space']} | {payload} | {row.get('simulated', 0)} | "
                f"{row['mode']}{' ' + str(int(doc['budget_s'])) + ' s' if doc.get('budget_s') else ''} | "
                f"{row.get('run_s', 0):.0f} | {row.get('ended', 0)} | "
                f"{row.get('simulated_ms_reached', {}).get('median', 0):.1f} | "
                f"{row.get('packet_hops_per_s', 0) / 1e9:.4f} | "
                f"{'' if share is None else f'{share:.4f}'} | {'' if busy is None else f'{busy:.2f}'} |")
    k4 = next((d["k4"] for d in docs if d.get("k4")), None)
    if k4:
        lines.append(f"\nk=4 ceiling of the same run: {k4['hops_per_s'] / 1e9:.3f} G packet-hops/s "
                     f"({k4['batch']} experiments, {k4['size_bytes'] / 2**20:.0f} MiB all-reduce).")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--spaces", default=",".join(SPACES))
    ap.add_argument("--backend", default="gpu")
    ap.add_argument("--n", type=int, default=None, help="candidates per generation (default: the space's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--topology", default=None, help="only candidates of this cluster.topology (e.g. one trial alone)")
    ap.add_argument("--set", action="append", default=[], metavar="PATH=VALUE")
    ap.add_argument("--budget-s", type=float, default=None, help="stop each generation after this long")
    ap.add_argument("--k4-batch", type=int, default=2048)
    ap.add_argument("--k4-mib", type=float, default=8.0)
    ap.add_argument("--no-k4", action="store_true")
    ap.add_argument("--out", default=None)
    ap.add_argument("--markdown", nargs="+", metavar="RUN.json", help="print the docs table of saved runs and exit")
    args = ap.parse_args(argv)
    if args.markdown:
        print(markdown([json.loads(Path(p).read_text()) for p in args.markdown]))
        return 0
    overrides = parse_set(args.set)
    rows = []
    for name in [s for s in args.spaces.split(",") if s]:
        row = bench_space(name, args, overrides)
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "tail"}), flush=True)
    k4 = None
    if not args.no_k4:
        r = bench_allreduce([args.k4_batch], ["none"], int(args.k4_mib * 2**20), backend=args.backend)[0]
        k4 = r.as_dict()
        k4.pop("balance", None)
        print(json.dumps({"k4": k4}), flush=True)
        for row in rows:
            row["share_of_k4"] = row.get("packet_hops_per_s", 0.0) / k4["hops_per_s"]
    doc = {"backend": args.backend, "set": overrides, "seed": args.seed, "budget_s": args.budget_s,
           "spaces": rows, "k4": k4}
    if args.out:
        Path(args.out).write_text(json.dumps(doc, indent=1, default=str))
    for row in rows:
        print(f"{row['space']:20s} {row.get('simulated', 0):4d} exps  ended {row.get('ended', 0):4d}  "
              f"run {row.get('run_s', 0):7.1f} s  {row.get('packet_hops_per_s', 0) / 1e9:7.4f} G hops/s  "
              f"{row.get('windows_per_s', 0) / 1e6:7.3f} M windows/s  reached "
              f"{row.get('simulated_ms_reached', {}).get('median', 0):.2f} ms (median)  "
              f"k4 share {row.get('share_of_k4', float('nan')):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
