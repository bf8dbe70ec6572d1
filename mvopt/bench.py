"""Simulator speed benchmark: simulated packet-hops/s, windows/s and experiments/hour.

Workload (a) of docs/performance.md: a ring all-reduce over all 16 hosts of a k=4 fat-tree, 1500-byte
packets (1452 B payload + 48 B header), one experiment per batch slot, for several batch sizes
and congestion-control algorithms. Identical experiments are simulated as independent rows (the
engine does not deduplicate), so a batch of B costs B experiments' work.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Iterable

from mvopt.config import load_config

__all__ = ["BenchRow", "allreduce_config", "bench_allreduce", "format_table", "rail_allreduce_spec"]


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
