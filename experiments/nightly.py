#!/usr/bin/env python3
"""Nightly search: run a named search space against a storage for a time budget, then report.

    python experiments/nightly.py topology --storage postgresql://USER:PW@HOST/DB --budget 6h \
        --backend gpu --out out/nightly/topology

* the space is ``search_spaces/<NAME>.yaml`` (or a path to any space file);
* the study (named after the space unless ``--study``) is created on the first night and
  resumed on every later one: running it again is safe, trials of a killed night are retried;
* the report (HTML + plots) is rewritten in ``--out`` at the end;
* the exit code is non-zero only on errors (a bad space, an unreachable storage, a crashed
  simulator), never because the budget ran out.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def _space_path(name: str) -> str:
    p = Path(name)
    if p.suffix in (".yaml", ".yml") or p.exists():
        return str(p)
    return str(REPO / "search_spaces" / f"{name}.yaml")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("space", help="search-space name (search_spaces/NAME.yaml) or path")
    parser.add_argument("--storage", default=None, help="storage URL or journal file (default sqlite:///mvopt.db)")
    parser.add_argument("--study", default=None, help="study name (default: the space's name)")
    parser.add_argument("--budget", default="1h", help="time budget (90, 15m, 2h; default 1h)")
    parser.add_argument("--out", default=None, help="report directory (default out/nightly/STUDY)")
    parser.add_argument("--backend", default="cpu", help="simulation backend (cpu, gpu, or module:factory)")
    parser.add_argument("--sampler", default=None, help="sampler (default: the space's)")
    parser.add_argument("-g", "--generation-size", default=None, help="trials per generation (default: the space's)")
    args = parser.parse_args(argv)

    from mvopt.commands import optimize, report
    from mvopt.errors import MvoptError
    from mvopt.optimize import load_space

    try:
        space_file = _space_path(args.space)
        study = args.study or load_space(space_file).name
        out = args.out or str(REPO / "out" / "nightly" / study)
        opt_argv = [space_file, "--resume", "--timeout", args.budget, "--study", study, "--backend", args.backend]
        for flag, value in (("--storage", args.storage), ("--sampler", args.sampler),
                            ("--generation-size", args.generation_size)):
            if value is not None:
                opt_argv += [flag, str(value)]
        rc = _run(optimize, opt_argv)
        if rc:
            return rc
        rep_argv = ["--study", study, "--out", out] + (["--storage", args.storage] if args.storage else [])
        return _run(report, rep_argv)
    except MvoptError as e:
        print(f"nightly: error: {e}", file=sys.stderr)
        return 1


def _run(module, argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog=f"mvopt {module.__name__.rsplit('.', 1)[-1]}")
    module.add_arguments(p)
    return int(module.run(p.parse_args(argv)) or 0)


if __name__ == "__main__":
    sys.exit(main())
