"""Simulator speed benchmark: simulated packet-hops/s, windows/s and experiments/hour.

Workload (a) of the tracker: a ring all-reduce over all 16 hosts of a k=4 fat-tree, 1500-byte
packets (1452 B payload + 48 B header), one experiment per batch slot, for several batch sizes
and congestion-control algorithms. Identical experiments are simulated as independent rows (the
engine does not deduplicate), so a batch of B costs B experiments' work.
"""

from __future__ import annotations

import os
import time
from dataclasses import asdict, dataclass
from typing import Iterable

from mvopt.config import load_config

__all__ = ["BenchRow", "allreduce_config", "bench_allreduce", "format_table"]


@dataclass
class BenchRow:
    backend: str
    threads: int
    cc: str
    batch: int
    size_bytes: int
    build_s: float          # batch construction on the host
    run_s: float            # simulation (median over repeats)
    packet_hops: int        # per batch
    windows: int            # summed over the experiments
    status: str             # status of the first experiment (all are identical)
    makespan_us: float

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


def allreduce_config(cc: str, size_bytes: int):
    """The benchmark experiment: k=4 fat-tree, 16-host ring all-reduce, 1500-byte packets."""
    return load_config({
        "name": f"bench-allreduce-{cc}",
        "cluster": {"topology": "fat_tree", "k": 4},
        # 4,096 packet descriptors per switch (6 MB of 1,500-byte packets) keep
        # the batch small in memory; the benchmark's collective never queues a tenth of that
        # (the result rows report drops, which must stay 0).
        "network": {"cc": cc, "payload_bytes": 1452, "header_bytes": 48, "switch_packet_slots": 4096},
        "workload": {"kind": "collective"},
        "collective": {"op": "all_reduce", "bytes": size_bytes, "algorithm": "ring", "channels": 1},
    })


def bench_allreduce(batches: Iterable[int], ccs: Iterable[str], size_bytes: int = 64 * 2**20,
                    backend: str = "cpu", repeats: int = 1) -> list[BenchRow]:
    """Time each (cc, batch size) pair; returns one row each."""
    from mvopt.engine import build_batch, get_backend
    from mvopt.engine.batch import extract_results
    from mvopt.experiment import build_experiment

    be = get_backend(backend)
    rows = []
    for cc in ccs:
        exp = build_experiment(allreduce_config(cc, size_bytes))
        for b in batches:
            times, build = [], 0.0
            for _ in range(repeats):
                t0 = time.perf_counter()
                batch = build_batch([exp] * b)
                t1 = time.perf_counter()
                iters = be.run(batch)
                t2 = time.perf_counter()
                times.append(t2 - t1)
                build = t1 - t0
            results = extract_results(batch, iters)
            threads = be.threads_for(batch) if hasattr(be, "threads_for") else 1
            times.sort()
            rows.append(BenchRow(backend=backend, threads=threads, cc=cc, batch=b, size_bytes=size_bytes,
                                 build_s=build, run_s=times[len(times) // 2],
                                 packet_hops=sum(r.counters["packet_hops"] for r in results),
                                 windows=sum(r.windows for r in results), status=results[0].status,
                                 makespan_us=results[0].makespan_ps / 1e6))
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
