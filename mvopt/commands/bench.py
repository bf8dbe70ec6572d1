"""``python -m mvopt bench``: simulator speed on the standard workload."""

from __future__ import annotations

import argparse
import json
import math

from mvopt._cfg.algorithms import CC_NAMES
from mvopt.commands._backend import add_backend_options, backend_spec


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


def add_arguments(p: argparse.ArgumentParser) -> None:
    add_backend_options(p)
    p.add_argument("--batch", type=_ints, default=[1, 16], help="batch sizes, e.g. 1,16,256 (default 1,16)")
    p.add_argument("--cc", type=_ccs, default=["none", "dcqcn"], help=f"congestion controls, comma-separated: {', '.join(CC_NAMES)} (default none,dcqcn)")
    p.add_argument("--mib", type=_mib, default=64.0, help="all-reduce size in MiB (default 64)")
    p.add_argument("--repeats", type=int, default=1, help="timed repeats per point (median reported; at least 1)")
    p.add_argument("--json", action="store_true", help="print JSON rows instead of a table")


def run(args: argparse.Namespace) -> int:
    from mvopt.bench import bench_allreduce, format_table
    rows = bench_allreduce(args.batch, args.cc, int(args.mib * 2**20), backend=backend_spec(args),
                           repeats=max(1, args.repeats))
    if args.json:
        print(json.dumps([r.as_dict() for r in rows], indent=2))
    else:
        print("k=4 fat-tree, ring all-reduce over 16 hosts, 1500-byte packets")
        print(format_table(rows))
    return 0
