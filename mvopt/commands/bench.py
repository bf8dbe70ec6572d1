"""``python -m mvopt bench``: simulator speed on the use-case search spaces (``--space``) and on
the k=4 fat-tree all-reduce that is their ceiling."""

from __future__ import annotations

import argparse
import json
import math

from mvopt._cfg.algorithms import CC_NAMES
from mvopt.commands._backend import add_backend_options, backend_spec
from mvopt.errors import MvoptError


def _ints(text: str) -> list[int]:
    try:
        values = [int(x) for x in text.split(",") if x]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated integers, got {text!r}") from None
    if not values or min(values) < 1:
        raise argparse.ArgumentTypeError(f"expected positive integers, got {text!r}")
    return values


def _ccs(text: str) -> list[str]:
    values = [x for x in text.split(",") if x]
    bad = [x for x in values if x not in CC_NAMES]
    if bad or not values:
        raise argparse.ArgumentTypeError(f"congestion control must be {', '.join(CC_NAMES[:-1])} or {CC_NAMES[-1]}, "
                                         f"got {text!r}")
    return values


def _mib(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value * 2**20 >= 1):
        raise argparse.ArgumentTypeError(f"must be a size in MiB of at least one byte, got {text!r}")
    return value


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_backend_options(p)
    p.add_argument("--batch", type=_ints, default=[1, 16], help="batch sizes, e.g. 1,16,256 (default 1,16)")
    p.add_argument("--cc", type=_ccs, default=["none", "dcqcn"], help=f"congestion controls, comma-separated: {', '.join(CC_NAMES)} (default none,dcqcn)")
    p.add_argument("--mib", type=_mib, default=64.0, help="all-reduce size in MiB (default 64)")
    p.add_argument("--repeats", type=int, default=1, help="timed repeats per point (median reported; at least 1)")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")
    p.add_argument("--space", action="append", default=[], metavar="SPACE",
                   help="a search space to run one generation of, as the optimizer does: a shipped space's "
                        "name (topology, parallelism, collective, congestion_control) or a YAML file; repeatable. "
                        "The k=4 rows of --batch follow as the ceiling")
    p.add_argument("--n", type=_ints, default=None, metavar="N",
                   help="with --space: trials per generation (default: the space's run.generation_size)")
    p.add_argument("--budget-s", type=_positive_seconds, default=None,
                   help="with --space: stop each generation after this many seconds and report how far it got")
    p.add_argument("--set", action="append", default=[], metavar="PATH=VALUE",
                   help="with --space: change the space's base experiment, e.g. network.payload_bytes=32000")


def _spaces(args: argparse.Namespace) -> list[dict]:
    """One generation of each --space, with a line on stderr before each (they take minutes)."""
    import sys

    from mvopt.bench import bench_space, parse_set, space_path

    overrides = parse_set(args.set)
    for space in args.space:
        if not space_path(space).exists():
            raise MvoptError(f"--space {space}: no such search space (a shipped name: topology, parallelism, "
                             "collective, congestion_control; or a YAML file)")
    rows = []
    for space in args.space:
        print(f"mvopt bench: one generation of {space}"
              + (f", for at most {args.budget_s:g} s" if args.budget_s else "") + " ...", file=sys.stderr, flush=True)
        rows.append(bench_space(space, backend=backend_spec(args), n=args.n[0] if args.n else None,
                                overrides=overrides, budget_s=args.budget_s))
    return rows


def run(args: argparse.Namespace) -> int:
    import sys

    from mvopt.bench import bench_allreduce, format_table, markdown, parse_set
    if (args.n or args.budget_s or args.set) and not args.space:
        raise MvoptError("--n, --budget-s and --set go with --space")
    spaces = _spaces(args) if args.space else []
    print(f"mvopt bench: the k=4 all-reduce at batch sizes {', '.join(map(str, args.batch))} ...",
          file=sys.stderr, flush=True)
    rows = bench_allreduce(args.batch, args.cc, int(args.mib * 2**20), backend=backend_spec(args),
                           repeats=max(1, args.repeats))
    if args.json:
        out = [r.as_dict() for r in rows]
        print(json.dumps({"spaces": spaces, "k4": out} if spaces else out, indent=2, default=str))
        return 0
    if spaces:
        ceiling = max(rows, key=lambda r: r.hops_per_s)
        for row in spaces:
            row["share_of_k4"] = row.get("packet_hops_per_s", 0.0) / ceiling.hops_per_s
        print(markdown([{"set": parse_set(args.set), "budget_s": args.budget_s, "spaces": spaces,
                         "k4": ceiling.as_dict()}]))
        print()
    print("k=4 fat-tree, ring all-reduce over 16 hosts, 1500-byte packets")
    print(format_table(rows))
    return 0
