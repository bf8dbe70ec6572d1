"""CPU engine speed (tracker issue 3): k=4 fat-tree ring all-reduce, 1500-byte packets.

    python experiments/bench_engine.py                       # 64 MiB, batches 1,16,256, every CC
    python experiments/bench_engine.py --mib 8 --batch 1,4   # quick

Writes the table into docs/performance.md (section `engine_cpu`). Per-thread figures come from
runs with OMP_NUM_THREADS=1 (one core), the all-core figures from the machine's core count, both
in the same run. The ns-3 figure it is compared with (90–160 thousand packet-hops/s on one core)
is the one stated in the tracker for mainline ns-3 3.44 on this kind of machine; the side-by-side
ns-3 measurement belongs to the ns-3 harness (experiments/ns3/, not yet written).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from _report import provenance, update_section  # noqa: E402


def run_rows(threads: int, batches: str, ccs: str, mib: float, repeats: int) -> list[dict]:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads), PYTHONPATH=str(ROOT))
    out = subprocess.run([sys.executable, "-m", "mvopt", "bench", "--json", "--batch", batches, "--cc", ccs,
                          "--mib", str(mib), "--repeats", str(repeats)], env=env, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", type=float, default=64.0)
    ap.add_argument("--batch", default="1,16,256")
    ap.add_argument("--cc", default="none,dcqcn,hpcc,dctcp")
    ap.add_argument("--repeats", type=int, default=3, help="runs per row, the median is reported (the first run "
                    "of a batch size also pays for fresh memory)")
    ap.add_argument("--no-write", action="store_true")
    args = ap.parse_args()
    cores = os.cpu_count() or 1
    rows = run_rows(1, args.batch, args.cc, args.mib, args.repeats)
    if cores > 1:
        rows += run_rows(cores, args.batch, args.cc, args.mib, args.repeats)
    lines = ["| threads | cc | batch | status | makespan (us) | packet-hops | run (s) | Mhops/s | "
             "Mhops/s per thread | x ns-3 per core (0.09–0.16 M) | windows/s | experiments/hour |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        per = r["hops_per_s_per_thread"]
        lines.append(f"| {r['threads']} | {r['cc']} | {r['batch']} | {r['status']} | {r['makespan_us']:.1f} | "
                     f"{r['packet_hops']:,} | {r['run_s']:.2f} | {r['hops_per_s'] / 1e6:.2f} | {per / 1e6:.2f} | "
                     f"{per / 160e3:.0f}–{per / 90e3:.0f} | {r['windows_per_s']:,.0f} | {r['experiments_per_hour']:,.0f} |")
    cmd = (f"python experiments/bench_engine.py --mib {args.mib:g} --batch {args.batch} --cc {args.cc} "
           f"--repeats {args.repeats}")
    text = (f"## CPU engine: k=4 fat-tree ring all-reduce of {args.mib:g} MiB, 1500-byte packets\n\n"
            f"{provenance(cmd)}\n\n" + "\n".join(lines) + "\n")
    print(text)
    if not args.no_write:
        update_section(ROOT / "docs" / "performance.md", "engine_cpu", text)


if __name__ == "__main__":
    main()
