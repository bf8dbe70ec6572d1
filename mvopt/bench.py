"""Simulator speed benchmarks: the use-case search spaces as users run them (the figure that
matters, :func:`bench_space`), and the k=4 fat-tree ring all-reduce that is their ceiling
(:func:`bench_allreduce`).

Workload (a) of the ceiling: a ring all-reduce over all 16 hosts of a k=4 fat-tree, 1500-byte
packets (1452 B payload + 48 B header), one experiment per batch slot, for several batch sizes
and congestion-control algorithms. Identical experiments are simulated as independent rows (the
engine does not deduplicate), so a batch of B costs B experiments' work.
"""


from __future__ import annotations

import statistics
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable

from mvopt.config import load_config

__all__ = ["BenchRow", "allreduce_config", "bench_allreduce", "format_table", "rail_allreduce_spec", "SPACES",
           "bench_space", "markdown", "parse_set", "space_path"]


@dataclass
class BenchRow:
    backend: str
    threads: int
    cc: str
    batch: int
    size_bytes: int
    build_s: float          # batch construction on the host (summed over workers)
    run_s: float            # simulation: the slowest worker (median over repeats)
    packet_hops: int        # per batch
    windows: int            # summed over the experiments
    status: str             # status of the first experiment (all are identical)
    makespan_us: float
    wall_s: float = 0.0     # build + run as a user waits for it (workers overlap)
    balance: dict | None = None   # per worker: experiments, sub-batches, build_s, run_s, busy_s

    @property
    def hops_per_s(self) -> float:
        return self.packet_hops / self.run_s

    @property
    def hops_per_s_per_thread(self) -> float:
        return self.hops_per_s / self.threads

    @property
    def windows_per_s(self) -> float:
        return self.windows / self.run_s

    @property
    def experiments_per_hour(self) -> float:
        return self.batch / (self.run_s + self.build_s) * 3600

    def as_dict(self) -> dict:
        d = asdict(self)
        d.update(hops_per_s=self.hops_per_s, hops_per_s_per_thread=self.hops_per_s_per_thread,
                 windows_per_s=self.windows_per_s, experiments_per_hour=self.experiments_per_hour)
        return d


def allreduce_config(cc: str, size_bytes: int, seed: int | None = None):
    """The benchmark experiment: k=4 fat-tree, 16-host ring all-reduce, 1500-byte packets (and
    the given simulation seed: ECMP's hashes)."""
    return load_config({
        **({"simulation": {"seed": seed}} if seed is not None else {}),
        "name": f"bench-allreduce-{cc}",
        "cluster": {"topology": "fat_tree", "k": 4},
        # 4,096 packet descriptors per switch (6 MB of 1,500-byte packets) keep
        # the batch small in memory; the benchmark's collective never queues a tenth of that
        # (the result rows report drops, which must stay 0).
        "network": {"cc": cc, "payload_bytes": 1452, "header_bytes": 48, "switch_packet_slots": 4096},
        "workload": {"kind": "collective"},
        "collective": {"op": "all_reduce", "bytes": size_bytes, "algorithm": "ring", "channels": 1},
    })


def rail_allreduce_spec(size_bytes: int, servers: int = 16, *, name: str | None = None, **network) -> dict:
    """A ring all-reduce of `size_bytes` per GPU on a 2-tier rail-optimised cluster of `servers`
    servers of 8 NICs, one group (rail switches of 2 x `servers` ports), as a configuration
    mapping (load_config takes it); `network`: that section's fields."""
    return {"name": name or f"rail{servers}-allreduce",
            "cluster": {"topology": "rail_optimized", "servers": servers, "servers_per_group": servers},
            "network": dict(network), "workload": {"kind": "collective"},
            "collective": {"op": "all_reduce", "bytes": int(size_bytes), "algorithm": "ring", "channels": 1}}


def bench_allreduce(batches: Iterable[int], ccs: Iterable[str], size_bytes: int = 64 * 2**20,
                    backend: str = "cpu", repeats: int = 1) -> list[BenchRow]:
    """Time each (cc, batch size) pair on a backend spec ('cpu', 'gpu', 'gpu:0,1', ...); returns
    one row each. With several workers, run time is the slowest worker's (they run at once) and
    `balance` holds each worker's figures."""
    from mvopt.build import build_experiment
    from mvopt.engine import get_backend
    from mvopt.engine.balance import run_experiments
    from mvopt.engine.workers import parse_backend

    workers = parse_backend(backend)
    rows = []
    for cc in ccs:
        exp = build_experiment(allreduce_config(cc, size_bytes))
        for b in batches:
            runs = []
            for _ in range(repeats):
                stats: dict = {}
                t0 = time.perf_counter()
                results = run_experiments([exp] * b, backend, report=stats)
                wall = time.perf_counter() - t0
                runs.append((max(s["run_s"] for s in stats.values()), wall, stats))
            runs.sort(key=lambda r: r[0])
            run_s, wall, stats = runs[len(runs) // 2]
            if workers[0].kind == "cpu" and len(workers) == 1:
                threads = get_backend("cpu").threads_for_counts(b, b * int(exp.topology.n_node))
            else:
                threads = len(workers)
            rows.append(BenchRow(backend=backend, threads=threads, cc=cc, batch=b, size_bytes=size_bytes,
                                 build_s=sum(s["build_s"] for s in stats.values()), run_s=run_s,
                                 packet_hops=sum(r.counters["packet_hops"] for r in results),
                                 windows=sum(r.windows for r in results), status=results[0].status,
                                 makespan_us=results[0].makespan_ps / 1e6, wall_s=wall, balance=stats))
    return rows


def format_table(rows: list[BenchRow]) -> str:
    """A markdown table of benchmark rows."""
    out = ["| backend | threads | cc | batch | status | makespan (us) | packet-hops | run (s) | "
           "Mhops/s | Mhops/s per thread | windows/s | experiments/hour |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r.backend} | {r.threads} | {r.cc} | {r.batch} | {r.status} | {r.makespan_us:.1f} | "
                   f"{r.packet_hops:,} | {r.run_s:.2f} | {r.hops_per_s / 1e6:.2f} | "
                   f"{r.hops_per_s_per_thread / 1e6:.2f} | {r.windows_per_s:,.0f} | {r.experiments_per_hour:,.0f} |")
    return "\n".join(out)


# ---- the use-case search spaces ------------------------------------------------------------

SPACES_DIR = Path(__file__).resolve().parents[1] / "search_spaces"
SPACES = ("topology", "parallelism", "collective", "congestion_control")


def parse_set(items: list[str]) -> dict[str, object]:
    """`PATH=VALUE` pairs, VALUE read as YAML (numbers, lists, strings)."""
    import yaml

    from mvopt.errors import MvoptError

    out: dict[str, object] = {}
    for item in items:
        path, sep, value = item.partition("=")
        if not sep or not path:
            raise MvoptError(f"--set {item!r}: expected PATH=VALUE")
        out[path] = yaml.safe_load(value)
    return out


def space_path(space: str) -> Path:
    """A space file's path: a shipped space's name (``topology``) or a path to a YAML file."""
    p = Path(space)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return p
    here = Path("search_spaces") / f"{space}.yaml"      # run from a checkout, installed or not
    return here if here.exists() else SPACES_DIR / f"{space}.yaml"


def sample_generation(space: str, n: int | None, seed: int, overrides: dict,
                      topology: str | None = None) -> tuple[list, int, int, int]:
    """The generation's distinct feasible configurations (the optimizer simulates each distinct
    configuration once and tells its duplicates the same result: optimize/loop.py), how many
    candidates were sampled, the generation size and how many of its trials were feasible; with
    `topology`, only candidates of that cluster kind (sampled until `n` distinct ones are found)."""
    from mvopt.optimize import load_space

    space = load_space(space_path(space), base_overrides=overrides or None)
    size = n or space.run.generation_size or 128
    if topology is None:
        cands = [c for c in space.sample(size, seed=seed) if c.feasible]
        sampled, feasible = size, len(cands)
    else:
        cands = [c for c in space.sample(size * 50, seed=seed)
                 if c.feasible and c.config.cluster.topology == topology]
        sampled, feasible = size * 50, min(size, len(cands))
    distinct = list({c.key: c.config for c in cands}.values())
    return (distinct if topology is None else distinct[:size]), sampled, size, feasible


def run_budget(experiments: list, backend: str, budget_s: float) -> dict:
    """Run the batch directly on one backend for at most `budget_s` seconds; the tail and rates."""
    from mvopt.engine import build_batch, get_backend
    from mvopt.engine.batch import ST_RUN, extract_results

    be = get_backend(backend)
    t0 = time.perf_counter()
    batch = build_batch(experiments)
    batch_s = time.perf_counter() - t0
    be.prepare(batch)         # the kernels, compiled on first use: not run time
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
            be.run(batch, max_iters=500, progress=progress)
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


def bench_space(name: str, *, backend: str, n: int | None = None, seed: int = 0, overrides: dict | None = None,
                topology: str | None = None, budget_s: float | None = None) -> dict:
    """One generation of a search space (a shipped space's name or a YAML path), sampled as its
    first generation, built as the optimizer builds it and simulated as one batch: as a user runs
    it, or with `budget_s` directly on the backend for at most that long. A JSON-ready row."""
    from mvopt.build import build_all
    from mvopt.engine import simulate

    overrides = overrides or {}
    t0 = time.perf_counter()
    configs, sampled, size, feasible = sample_generation(name, n, seed, overrides, topology)
    t1 = time.perf_counter()
    built = build_all(configs)
    kinds = [c.cluster.topology for c, (b, _, _) in zip(configs, built) if b is not None]
    experiments = [b.experiment for b, _, _ in built if b is not None]
    build_s = time.perf_counter() - t1
    row: dict = {"space": name, "generation_size": size, "sampled": sampled, "feasible": feasible,
                 "distinct": len(configs), "simulated": len(experiments), "sample_s": t1 - t0, "build_s": build_s,
                 "nodes_max": max((int(e.topology.n_node) for e in experiments), default=0),
                 "mode": "budget" if budget_s else "user"}
    if not experiments:
        return row
    if budget_s:
        out = run_budget(experiments, backend, budget_s)
        row.update(run_s=out["run_s"], batch_build_s=out["batch_build_s"], tail=out["tail"][-200:],
                   timing=out["timing"])
        results = out["results"]
        if out["timing"].get("kernel_s"):
            row["gpu_busy_share"] = out["timing"]["kernel_s"] / max(out["run_s"], 1e-9)
    else:
        tail: list = []
        report: dict = {}
        t2 = time.perf_counter()
        def progress(p) -> None:      # on stderr as it comes, so that a run cut short still shows its tail
            tail.append((round(p.elapsed_s, 1), p.done, p.windows, p.simulated_ps))
            print(f"  {name}: {p.describe()}", file=sys.stderr, flush=True)

        results = simulate(experiments, backend=backend, report=report, progress=progress)
        row.update(run_s=time.perf_counter() - t2, tail=tail)
    row.update(summarise(results, experiments, row["run_s"]))
    row["by_topology"] = by_topology(results, kinds)
    if row["ended"] == row["experiments"]:
        row["trials_per_hour"] = size / (row["build_s"] + row["run_s"]) * 3600
    return row


def _trials(row: dict) -> str:
    """A generation's feasible trials and, where fewer, the distinct configurations simulated."""
    feasible, simulated = row.get("feasible", 0), row.get("simulated", 0)
    return f"{feasible} ({simulated})" if "distinct" in row and simulated != feasible else str(simulated)


def markdown(docs: list[dict]) -> str:
    """A docs table of saved runs (their JSON), one row per space and run."""
    lines = ["| space | packets | trials (simulated) | mode | wall s | ended | simulated ms reached (median) | "
             "G packet-hops/s | share of k=4 | GPU busy |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for doc in docs:
        payload = doc.get("set", {}).get("network.payload_bytes", "space's")
        for row in doc["spaces"]:
            share = row.get("share_of_k4")
            busy = row.get("gpu_busy_share")
            lines.append(
                f"| {row['space']} | {payload} | {_trials(row)} | "
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


