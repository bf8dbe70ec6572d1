"""Build and route paper-scale clusters on one core; report wall time and peak memory.

    python experiments/bench_topology.py            # paper scale, writes docs/performance.md
    python experiments/bench_topology.py --toy --no-write   # seconds; what CI runs

Each case runs in its own process pinned to one CPU (so peak RSS is that case's own), timing
the builder's wiring and then validation + port numbering + routing (``compile_network``).
Target: under 60 s and 8 GB per case.
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

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from _report import provenance, update_section  # noqa: E402

TARGET_S, TARGET_GB = 60.0, 8.0

CASES = {
    "fat_tree_k60": ("fat-tree k=60", {"topology": "fat_tree", "k": 60}),
    "rail3_54k": ("rail-optimised, 3 tiers: 6750 servers x 8 NICs, 30 servers/group, 15 groups/pod",
                  {"topology": "rail_optimized", "servers": 6750, "servers_per_group": 30, "tiers": 3,
                   "groups_per_pod": 15}),
    "rail2_54k": ("rail-optimised, 2 tiers: 6720 servers x 8 NICs, 32 servers/group",
                  {"topology": "rail_optimized", "servers": 6720, "servers_per_group": 32}),
}
TOY = {
    "fat_tree_k8": ("fat-tree k=8", {"topology": "fat_tree", "k": 8}),
    "rail3_toy": ("rail-optimised, 3 tiers, 16 servers", {"topology": "rail_optimized", "servers": 16,
                  "servers_per_group": 2, "tiers": 3, "groups_per_pod": 2, "gpus_per_server": 4}),
}


def run_case(cluster: dict) -> dict:
    """Build one cluster in this process; wall times and peak RSS."""
    from mvopt.cluster.build import BUILDERS
    from mvopt.cluster.compile import compile_network
    from mvopt.config import load_config

    cfg = load_config({"cluster": cluster}).cluster
    t0 = time.perf_counter()
    spec = BUILDERS[cfg.topology](cfg)
    t1 = time.perf_counter()
    topo = compile_network(spec)
    t2 = time.perf_counter()
    return {"hosts": topo.n_host, "switches": topo.n_switch, "links": topo.n_link, "routes": topo.n_route,
            "nhsets": topo.n_nhset, "wiring_s": t1 - t0, "compile_s": t2 - t1, "total_s": t2 - t0,
            "peak_rss_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9}


def _child(name: str, cases: dict) -> dict:
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    out = subprocess.run([sys.executable, __file__, "--case", name] + (["--toy"] if cases is TOY else []),
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def markdown(rows: list[tuple[str, dict]], command: str) -> str:
    ok = all(r["total_s"] < TARGET_S and r["peak_rss_gb"] < TARGET_GB for _, r in rows)
    lines = [
        "## Topology build and routing at paper scale",
        "",
        provenance(command),
        "",
        "Each case runs in its own process on one core; *wiring* is the builder, *validate + route* "
        "is connectivity checks, port numbering and the all-equal-cost-next-hop routing tables "
        "(`compile_network`). Peak RSS is the process's maximum resident set (getrusage).",
        "",
        "| case | hosts | switches | links | route ranges | next-hop sets | wiring (s) | validate + route (s) "
        "| total (s) | peak RSS (GB) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for label, r in rows:
        lines.append(f"| {label} | {r['hosts']:,} | {r['switches']:,} | {r['links']:,} | {r['routes']:,} | "
                     f"{r['nhsets']:,} | {r['wiring_s']:.2f} | {r['compile_s']:.2f} | {r['total_s']:.2f} | "
                     f"{r['peak_rss_gb']:.2f} |")
    lines += ["", f"Target: < {TARGET_S:g} s and < {TARGET_GB:g} GB per case — "
              + ("met." if ok else "**missed**.")]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--toy", action="store_true", help="small sizes (CI)")
    ap.add_argument("--no-write", action="store_true", help="do not update docs/performance.md")
    ap.add_argument("--case", help=argparse.SUPPRESS)   # child process: run one case, print JSON
    args = ap.parse_args(argv)
    cases = TOY if args.toy else CASES
    if args.case:
        if hasattr(os, "sched_setaffinity"):
            os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
        print(json.dumps(run_case(cases[args.case][1])))
        return 0
    rows = []
    for name, (label, _) in cases.items():
        r = _child(name, cases)
        rows.append((label, r))
        print(f"{label}: {r['total_s']:.2f} s, {r['peak_rss_gb']:.2f} GB peak RSS "
              f"({r['hosts']} hosts, {r['switches']} switches, {r['links']} links)", flush=True)
    command = "python experiments/bench_topology.py" + (" --toy" if args.toy else "")
    md = markdown(rows, command)
    if not args.no_write:
        update_section(HERE.parent / "docs" / "performance.md", "topology", md)
    ok = all(r["total_s"] < TARGET_S and r["peak_rss_gb"] < TARGET_GB for _, r in rows)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
