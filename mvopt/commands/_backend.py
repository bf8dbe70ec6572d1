"""The --backend / --gpus options shared by the commands that simulate."""

from __future__ import annotations

import argparse
import sys

__all__ = ["add_backend_options", "backend_spec"]


def add_backend_options(parser: argparse.ArgumentParser, default: str = "cpu") -> None:
    parser.add_argument("--backend", default=default, choices=["cpu", "gpu", "auto"],
                        help=f"engine backend; auto: the GPUs when CuPy sees one (one GPU: raced by the CPU's cores on "
                             f"its slowest experiments), else the CPU; gpu: the GPUs alone (default: {default})")
    parser.add_argument("--gpus", default=None, metavar="LIST",
                        help="GPU devices to spread experiments over, e.g. 0,1 (default: every visible GPU)")
    parser.add_argument("--race-cpu", action="store_true",
                        help="while one GPU runs the batch, the CPU's cores run its slowest experiments too; "
                             "whichever finishes first gives the result (identical either way; "
                             "--backend auto does this on a one-GPU machine)")


def backend_spec(args: argparse.Namespace, announce: bool = True) -> str:
    """The engine backend spec of the options (see mvopt.engine.workers); with `announce`, says on
    stderr what 'auto' chose."""
    from mvopt.engine import resolve_backend
    from mvopt.engine.workers import describe_backend
    from mvopt.errors import MvoptError
    spec = args.backend
    if args.gpus:
        if args.backend == "cpu":
            raise MvoptError("--gpus needs --backend gpu or auto")
        if not all(x.strip().isdigit() for x in args.gpus.split(",")):
            raise MvoptError(f"--gpus: expected comma-separated GPU indices, e.g. 0,1, got {args.gpus!r}")
        if resolve_backend(args.backend) == "gpu":
            spec = f"gpu:{args.gpus}"
        else:
            spec = "cpu"
            print(f"mvopt: --gpus {args.gpus} ignored: backend auto found no GPU and runs on the CPU",
                  file=sys.stderr)
    if getattr(args, "race_cpu", False):
        if resolve_backend(args.backend) != "gpu":
            raise MvoptError("--race-cpu needs a GPU (--backend gpu or auto on a machine with one): "
                             "the CPU races the GPU")
        spec = f"{spec if ':' in spec else 'gpu:0'}+cpu"
    what = describe_backend(spec)
    if announce and args.backend == "auto":
        print(f"mvopt: backend auto: {what}", file=sys.stderr)
    return spec
