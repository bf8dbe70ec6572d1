"""µs a window of the first N candidates of one cluster kind of search_spaces/topology.yaml at
32,000-byte packets (duplicates kept: the same list in any checkout), as one GPU batch for a time
budget. For A/B runs against older checkouts: copy this file and topology.yaml next to each
other in the old checkout and run it there.

    PYTHONPATH=. python experiments/kind_windows.py leaf_spine 16 12 OUT.json

Prints the kind, the batch size, µs a window, G packet-hops/s and windows; writes them (and
each experiment's simulated time reached) to OUT.json. Needs CuPy and a GPU.
"""
import json
import os
import sys
import time

from mvopt.optimize import load_space
try:
    from mvopt.build import build_all
except ImportError:      # trees before mvopt.build
    from mvopt.experiment import build_all
from mvopt.engine import build_batch, get_backend
from mvopt.engine.batch import extract_results


_HERE = os.path.dirname(os.path.abspath(__file__))
# (this checkout's shipped space, or a copy beside the script in an older checkout)
SPACE = next(p for p in (os.path.join(_HERE, "..", "search_spaces", "topology.yaml"), os.path.join(_HERE, "topology.yaml"))
             if os.path.exists(p))


def main():
    kind, n, budget, out = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
    space = load_space(SPACE, base_overrides={"network.payload_bytes": 32000})
    cands = [c for c in space.sample(n * 50, seed=0) if c.feasible and c.config.cluster.topology == kind][:n]
    exps = [b.experiment for b, _, _ in build_all([c.config for c in cands]) if b is not None]
    be = get_backend("gpu")
    warm = build_batch(exps[:1]); be.run(warm, max_iters=50, resumable=False)   # compile / module load
    batch = build_batch(exps)
    t = time.perf_counter()
    be.run(batch, deadline_s=budget, resumable=False)
    run_s = time.perf_counter() - t
    res = extract_results(batch, 0)
    w = max(r.windows for r in res)
    hops = sum(int(r.counters["packet_hops"]) for r in res)
    row = {"kind": kind, "n": len(exps), "run_s": run_s, "windows": w, "us_per_window": run_s / w * 1e6,
           "hops": hops, "ghops_per_s": hops / run_s / 1e9, "reached_ms": sorted(r.end_ps / 1e9 for r in res)}
    print(f"{kind:>15} n={len(exps)} {row['us_per_window']:.1f} us/window  {row['ghops_per_s']:.4f} G hops/s  windows {w}", flush=True)
    json.dump(row, open(out, "w"))


if __name__ == "__main__":
    main()
