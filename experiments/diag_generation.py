"""Which configurations of a generation cost the most simulation, one at a time (issue 6).

    python experiments/diag_generation.py --small --small-bytes 8388608 --n 40 [--backend cpu] [--capacities]

A generation runs as one batch, and a batch lasts as long as its slowest experiment; this
samples ``--n`` random points of bench_optimizer's topology space (the same space options:
``--small``, ``--small-bytes``, ``--no-distinct``), simulates each feasible one alone, and
prints one line per experiment, slowest first: its topology and network parameters, status,
windows, simulated end, packet-hops, planner bytes and wall time. Prints only.

``--capacities`` also runs each one with compact packet slots (mvopt/engine/capacity.py) and
adds its bytes, whether that first try ran out of them (and of what: a wire ring or a switch
pool; the simulator then runs it again with full ones), and whether its result is identical to
the full run's.

``--memory-only`` simulates nothing: per topology kind, the mean engine bytes of the sampled
configurations with full and with compact packet slots (the planner's exact count), and what a
generation of 1,000 such configurations needs. Without ``--small`` that is the space's own
training workload (GPT-3 13B).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "experiments"))

from bench_optimizer import space_data  # noqa: E402
from mvopt.build import build_experiment  # noqa: E402
from mvopt.engine import build_batch, get_backend, simulate  # noqa: E402
from mvopt.engine.batch import extract_results  # noqa: E402
from mvopt.engine.sizing import batch_bytes, experiment_counts  # noqa: E402
from mvopt.engine.tasks import FLOW  # noqa: E402
from mvopt.engine.workers import parse_backend, Worker
from mvopt.optimize import load_space  # noqa: E402


def memory_table(space, args: argparse.Namespace) -> None:
    """Mean full / compact bytes per topology kind of --n sampled configurations (no simulation)."""
    by: dict[str, list[tuple[int, int, int]]] = {}
    for cand in space.sample(args.n, seed=args.seed):
        if cand.feasible:
            exp = build_experiment(cand.config)
            kind = str(space.active_params(cand.params)["cluster.topology"])
            flows = exp.tasks.kind == FLOW
            by.setdefault(kind, []).append((batch_bytes(experiment_counts(exp)),
                                            batch_bytes(experiment_counts(exp, compact=True)),
                                            int(exp.params.flow_npkt[flows].sum())))
    workload = f"all-reduce of {args.small_bytes:,} B per NIC" if args.small else "the space's training workload"
    print(f"{sum(len(v) for v in by.values())} feasible of {args.n} sampled configurations (seed {args.seed}), {workload}\n")
    print("| topology | configurations | full MiB (mean) | compact MiB (mean) | data packets (mean) |")
    print("|---|---:|---:|---:|---:|")
    for kind, v in sorted(by.items()):
        print(f"| {kind} | {len(v)} | {sum(f for f, _, _ in v) / len(v) / 2**20:,.0f} | "
              f"{sum(c for _, c, _ in v) / len(v) / 2**20:,.0f} | {sum(k for _, _, k in v) / len(v):,.0f} |")
    every = [x for v in by.values() for x in v]
    full, small, pkts = (sum(x[k] for x in every) / len(every) for k in (0, 1, 2))
    print(f"| all | {len(every)} | {full / 2**20:,.0f} | {small / 2**20:,.0f} | {pkts:,.0f} |")
    print(f"\n1,000 such configurations: {1000 * full / 2**30:,.1f} GiB with full packet slots, "
          f"{1000 * small / 2**30:,.1f} GiB with compact ones.")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="random points to sample (default 40)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--backend", default="cpu")
    ap.add_argument("--small", action="store_true")
    ap.add_argument("--small-bytes", type=int, default=65536)
    ap.add_argument("--no-distinct", dest="distinct", action="store_false")
    ap.add_argument("--capacities", action="store_true", help="compare compact packet slots with full ones")
    ap.add_argument("--memory-only", action="store_true", help="bytes per configuration only, no simulation")
    args = ap.parse_args()
    args.space = ROOT / "search_spaces" / "topology.yaml"
    space = load_space(space_data(args))
    if args.memory_only:
        memory_table(space, args)
        return
    rows = []
    for i, cand in enumerate(space.sample(args.n, seed=args.seed)):
        if not cand.feasible:
            continue
        t = time.perf_counter()
        exp = build_experiment(cand.config)
        build_s = time.perf_counter() - t
        t = time.perf_counter()
        r = simulate([exp], backend=args.backend, capacities="full")[0]
        wall = time.perf_counter() - t
        extra = ""
        if args.capacities:
            # the first try alone: did it run out, and of what (its diagnostic says)
            worker: Worker = parse_backend(args.backend)[0]
            batch = build_batch([exp], compact=True)
            (rc,) = extract_results(batch, get_backend(worker.kind, device=worker.device).run(batch))
            ran_out = ("ring" if "wire ring" in rc.diagnostic else "pool") if rc.status == "capacity" else "no"
            same = "(rerun: full)" if rc.status == "capacity" else ("yes" if rc.same_as(r) else "NO")
            extra = f" {batch.nbytes / 2**20:.0f} | {ran_out} | {same} |"
        p = space.active_params(cand.params)
        label = " ".join(f"{k.split('.')[-1]}={v:.3g}" if isinstance(v, float) else f"{k.split('.')[-1]}={v}"
                         for k, v in p.items())
        rows.append((wall, i, label, r.status, r.windows, r.end_ps, r.counters["packet_hops"],
                     batch_bytes(experiment_counts(exp)), build_s, extra))
        print(f"[{i}] {wall:.2f} s {r.status}", file=sys.stderr, flush=True)
    rows.sort(reverse=True)
    more = " compact MiB | ran out | identical |" if args.capacities else ""
    print("| wall (s) | # | parameters | status | windows | simulated end (us) | packet-hops | MiB | build (s) |" + more)
    print("|---|---|---|---|---|---|---|---|---|" + "---|" * more.count("|"))
    for wall, i, label, status, windows, end_ps, hops, nbytes, build_s, extra in rows:
        print(f"| {wall:.2f} | {i} | {label} | {status} | {windows:,} | {end_ps / 1e6:,.1f} | {hops:,} | "
              f"{nbytes / 2**20:.0f} | {build_s:.2f} |{extra}")


if __name__ == "__main__":
    main()
