"""Run an mvopt subcommand module in this process, as ``python -m mvopt NAME`` would.

Used as ``python optimize_cli_runner.py optimize ARGS...`` by subprocess tests, so that they work whether
or not the CLI table of ``mvopt.__main__`` lists the optimizer's subcommands yet.
"""

from __future__ import annotations

import importlib
import sys

from mvopt.errors import MvoptError


def main(argv: list[str]) -> int:
    from mvopt import __main__ as cli
    name = argv[0]
    if name in cli.SUBCOMMANDS:
        return cli.main(argv)
    module = importlib.import_module(f"mvopt.commands.{name}")
    parser = cli._Parser(prog=f"mvopt {name}")
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except MvoptError as e:
        print(f"mvopt {name}: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"mvopt {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
