"""``python -m mvopt report --storage URL --study NAME --out DIR``: HTML page and plots of a study."""

from __future__ import annotations

import argparse
import sys

import optuna

from mvopt.errors import MvoptError
from mvopt.optimize.cli import positive_int, quiet_optuna
from mvopt.optimize.report import write_report
from mvopt.optimize.storage import make_storage


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--storage", default=None, help="storage URL or journal file (default sqlite:///mvopt.db)")
    p.add_argument("--study", default=None, help="study name (default: the only study of the storage)")
    p.add_argument("--out", required=True, help="output directory (index.html, *.svg, *.png)")
    p.add_argument("--top", type=positive_int, default=5, help="best configurations listed")


def run(args: argparse.Namespace) -> int:
    quiet_optuna()
    storage = make_storage(args.storage, heartbeat_s=None, must_exist=True)
    name = args.study
    if name is None:
        names = optuna.get_all_study_names(storage=storage)
        if len(names) != 1:
            raise MvoptError(f"the storage holds {len(names)} studies ({', '.join(names) or 'none'}): pass --study NAME")
        name = names[0]
    try:
        study = optuna.load_study(study_name=name, storage=storage)
    except KeyError:
        raise MvoptError(f"no study named {name!r} in this storage") from None
    print(f"mvopt report: study {name!r}, {len(study.get_trials(deepcopy=False))} trials", file=sys.stderr, flush=True)
    path = write_report(study, args.out, top=args.top,
                        say=lambda line: print(f"mvopt report: {line}", file=sys.stderr, flush=True))
    print(path)
    return 0
