"""``python -m mvopt worker --storage URL --study NAME``: one more worker on an existing study.

Workers share nothing but the database: start one per GPU machine against the same PostgreSQL
storage. The search space, sampler and generation size come from the study.
"""

from __future__ import annotations

import argparse

from mvopt.optimize.evaluator import make_evaluator
from mvopt.optimize.cli import (add_run_arguments, add_storage_arguments, budget_from_args, positive_int, quiet_optuna,
                                run_study)
from mvopt.optimize.storage import make_storage
from mvopt.optimize.study import join_study


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--study", required=True, help="name of the study to join")
    p.add_argument("--study-trials", type=positive_int, default=None, metavar="N",
                   help="stop when the study holds N complete trials (all workers together)")
    add_storage_arguments(p, required=True)
    add_run_arguments(p)


def run(args: argparse.Namespace) -> int:
    quiet_optuna()
    evaluator = make_evaluator(args.backend)       # before the storage: nothing written if it fails
    storage = make_storage(args.storage, heartbeat_s=args.heartbeat)
    study, space, gen = join_study(storage, args.study, sampler=args.sampler,
                                   generation_size=args.generation_size, seed=args.seed, fidelity=args.fidelity)
    budget = budget_from_args(args, space, default_trials=None)
    run_study(study, space, args, generation_size=gen, budget=budget, evaluator=evaluator)
    return 0
