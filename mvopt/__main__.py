"""``python -m mvopt``: the command-line interface.

The table below is the whole CLI: each subcommand is a module of :mod:`mvopt.commands` with
``add_arguments(parser)`` and ``run(args) -> int``, imported only when that subcommand runs so
that ``--help`` stays instant. Errors a user can fix become one line on stderr and a non-zero
exit code, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import NoReturn, Sequence

from mvopt import __version__
from mvopt.errors import MvoptError

# name -> (module under mvopt.commands, one-line help)
SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "optimize": ("optimize", "search a space of configurations: Optuna generations simulated as batches"),
    "worker": ("worker", "join a shared study (PostgreSQL) and evaluate generations until it is done"),
    "report": ("report", "write an HTML report (plots, best configurations) of a study"),
    "simulate": ("simulate", "simulate one experiment (YAML, or HPCC ns-3 topology/flow/config files)"),
    "bench": ("bench", "measure simulator speed (packet-hops/s, windows/s, experiments/hour)"),
    "topo": ("topo", "build a topology, print its summary, optionally write the compiled arrays"),
    "calibrate": ("calibrate", "fit the intra-server collective model to nccl-tests logs, print the "
                               "error per size, write a parameter file"),
}


class _Parser(argparse.ArgumentParser):
    """argparse that reports usage errors as one line (exit code 2)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="mvopt", description="mvopt: optimize LLM training-cluster configurations by batched packet-level simulation.")
    parser.add_argument("--version", action="version", version=f"mvopt {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, (module, help_text) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        p.set_defaults(_module=module)
        # Arguments are added lazily in main() for the chosen command only.
    return parser


def _command_module(module: str):
    return importlib.import_module(f"mvopt.commands.{module}")



def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    if argv and argv[0] in SUBCOMMANDS:
        name = argv[0]
        module = _command_module(SUBCOMMANDS[name][0])
        p = _Parser(prog=f"mvopt {name}", description=SUBCOMMANDS[name][1])
        module.add_arguments(p)
        args = p.parse_args(argv[1:])
        try:
            return int(module.run(args) or 0)
        except MvoptError as e:
            print(f"mvopt {name}: error: {e}", file=sys.stderr)
            return 1
        except KeyboardInterrupt:
            print(f"mvopt {name}: interrupted", file=sys.stderr)
            return 130
        except BrokenPipeError:           # output piped into `head` & co.: stop quietly
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 0
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return 2
    return 0  # unreachable: known commands are handled above


if __name__ == "__main__":
    sys.exit(main())
