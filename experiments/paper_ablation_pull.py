"""Ablation: pull-based synchronisation vs locks (the paper's Fig. 16).

    python experiments/paper_ablation_pull.py                      # CPU; writes section ablation_pull of docs/performance.md
    python experiments/paper_ablation_pull.py --backend gpu --batch 1024,4096 --mib 8   # on a GPU machine
    python experiments/paper_ablation_pull.py --batch 4 --mib 1 --no-write               # quick

In mvopt a sender appends a packet to the ring of its own port and the receiver reads that ring
(pull): no system writes another's rows, so no lock and no atomic is needed. The alternative the
paper measures pushes packets into the receiver's structures, which several senders share, so
every write takes a lock. This script runs the same batches three ways, built from the same
kernel sources (`MV_PUSH_LOCK`, kernels/mv_common.cuh):

* *pull*: the model;
* *receiver lock*: every packet written under its receiver's lock (a spin lock per node);
* *global lock*: every packet written under its experiment's one lock.

The data written are the same in all three, so the results must be identical (checked); only
the synchronisation differs. This is the lock cost of a push design alone: a real one would
also merge its senders' packets into one queue per receiver and sort them for determinism.

Workloads: (a) k=4 fat-tree ring all-reduces (1500-byte packets, `--mib`), as batches of
`--batch` experiments (on the CPU each experiment runs on one thread, so its locks are never
contended; on the GPU the nodes of an experiment run in parallel); (b) one larger experiment,
a k=`--k` fat-tree ring all-reduce, whose nodes share the CPU's threads (contended). Reported:
the median of `--repeats` runs, packet-hops/s and the time relative to pull.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _report import provenance, update_section  # noqa: E402
from mvopt.bench import allreduce_config  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.config import load_config  # noqa: E402
from mvopt.engine import build_batch  # noqa: E402
from mvopt.engine.batch import extract_results  # noqa: E402

VARIANTS = (("pull", 0), ("receiver lock", 1), ("global lock", 2))


def backend_for(kind: str, lock: int):
    """A backend object built with MV_PUSH_LOCK=lock."""
    if kind == "gpu":
        from mvopt.engine._gpu import GpuBackend
        return GpuBackend(defines={"MV_PUSH_LOCK": lock})
    from mvopt.engine._cpu import CpuBackend
    return CpuBackend(defines={"MV_PUSH_LOCK": lock})


def measure(backends: dict, exps: list, repeats: int):
    """Each variant's median run time over `repeats` runs (variants alternate within a repeat, so
    that drifts of the machine hit them alike), with the results compared to pull's. Yields one
    row per variant as soon as its last run ended (pull first), so a cut-short run keeps them."""
    times: dict[str, list[float]] = {name: [] for name in backends}
    ref = hops = None
    for k in range(repeats):
        for name, be in backends.items():
            batch = build_batch(exps)
            t = time.perf_counter()
            iters = be.run(batch)
            times[name].append(time.perf_counter() - t)
            if k < repeats - 1:
                continue
            results = extract_results(batch, iters)
            if ref is None:
                ref, hops = results, sum(r.counters["packet_hops"] for r in results)
            med = statistics.median(times[name])
            yield {"variant": name, "run_s": med, "hops_per_s": hops / med,
                   "vs_pull": med / statistics.median(times["pull"]),
                   "identical": all(a.same_as(b) for a, b in zip(ref, results))}


def warm_up(backends: dict, exp) -> None:
    """Compile every variant (the GPU's NVRTC build is seconds to minutes on a fresh machine)
    before anything is timed, and say how long each took."""
    for name, be in backends.items():
        t = time.perf_counter()
        be.run(build_batch([exp]))
        print(f"{name}: compiled and ran one experiment in {time.perf_counter() - t:.1f} s", flush=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--backend", choices=("cpu", "gpu"), default="cpu")
    ap.add_argument("--batch", default="16", help="batch sizes of workload (a), comma-separated (default 16)")
    ap.add_argument("--mib", type=float, default=4.0, help="all-reduce MiB per host of workload (a) (default 4)")
    ap.add_argument("--k", type=int, default=16, help="fat-tree radix of workload (b); 0 leaves it out (default 16)")
    ap.add_argument("--k-mib", type=float, default=1.0, help="all-reduce MiB per host of workload (b) (default 1)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--no-write", action="store_true", help="print only; leave docs/performance.md alone")
    args = ap.parse_args()
    backends = {name: backend_for(args.backend, lock) for name, lock in VARIANTS}
    small = build_experiment(allreduce_config("none", int(args.mib * 2**20)))
    cases = [(f"(a) {n} x k=4 fat-tree, {args.mib:g} MiB", [small] * int(n)) for n in args.batch.split(",")]
    if args.k:
        big = build_experiment(load_config({"cluster": {"topology": "fat_tree", "k": args.k},
                                            "network": {"cc": "none", "payload_bytes": 1452, "header_bytes": 48},
                                            "workload": {"kind": "collective"},
                                            "collective": {"op": "all_reduce", "bytes": int(args.k_mib * 2**20),
                                                           "algorithm": "ring", "channels": 1}}))
        cases.append((f"(b) 1 x k={args.k} fat-tree ({big.topology.n_host} hosts), {args.k_mib:g} MiB", [big]))
    warm_up(backends, build_experiment(allreduce_config("none", 65536)))
    lines = ["| workload | variant | run (s) | M packet-hops/s | time vs pull | results |", "|---|---|---|---|---|---|"]
    bad = False
    for label, exps in cases:
        for r in measure(backends, exps, args.repeats):
            bad |= not r["identical"]
            lines.append(f"| {label} | {r['variant']} | {r['run_s']:.3f} | {r['hops_per_s'] / 1e6:,.1f} | "
                         f"{r['vs_pull']:.2f}x | {'identical' if r['identical'] else 'DIFFERENT'} |")
            print(lines[-1], flush=True)
    cmd = ("python experiments/paper_ablation_pull.py " + " ".join(sys.argv[1:])).strip()
    text = "\n".join([f"## Pull vs locks, {args.backend.upper()} backend (paper Fig. 16)\n", provenance(cmd) + "\n",
                      "The same batches with every packet written under a lock (the receiver's, or the "
                      "experiment's one lock) against mvopt's lock-free pull design; median of "
                      f"{args.repeats} alternating runs; script docstring for what is and is not modelled.\n",
                      *lines])
    if not args.no_write:
        update_section(ROOT / "docs" / "performance.md", f"ablation_pull_{args.backend}", text)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
