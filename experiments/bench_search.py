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
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from mvopt.bench import SPACES, bench_allreduce, bench_space, markdown, parse_set  # noqa: E402


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
        row = bench_space(name, backend=args.backend, n=args.n, seed=args.seed, overrides=overrides,
                          topology=args.topology, budget_s=args.budget_s)
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
