"""Run ``python -m mvopt ARGS...`` in a subprocess started by the tests (``python
optimize_cli_runner.py optimize ARGS...``), with the checkout importable."""

from __future__ import annotations

import sys

import mvopt.__main__ as cli

main = cli.main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
