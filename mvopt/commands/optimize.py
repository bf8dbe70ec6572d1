"""``python -m mvopt optimize SPACE.yaml``: search a space, generation by generation."""

from __future__ import annotations

import argparse
from typing import Any

import yaml

from mvopt.errors import ConfigError, MvoptError

from mvopt.optimize.evaluator import make_evaluator
from mvopt.optimize.cli import add_run_arguments, add_storage_arguments, budget_from_args, quiet_optuna, run_study
from mvopt.optimize.samplers import sampler_problem
from mvopt.optimize.space_file import load_space
from mvopt.optimize.storage import make_storage
from mvopt.optimize.study import create_or_resume

DEFAULT_TRIALS = 200


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("space", help="search-space YAML (see search_spaces/ and docs/optimizer.md)")
    p.add_argument("--study", default=None, help="study name (default: the space's name)")
    p.add_argument("--resume", action="store_true",
                   help="continue an existing study of that name (trials of dead processes are retried)")
    p.add_argument("--check", action="store_true", help="only load and validate the space, print it, and exit")
    p.add_argument("--set", dest="overrides", action="append", default=[], metavar="PATH=VALUE",
                   help="change a field of the base experiment (YAML value; repeatable), e.g. for a quick run "
                        "--set simulation.time_limit_ms=0.1 or --set collective.bytes=1048576")
    add_storage_arguments(p)
    add_run_arguments(p)


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """``["a.b=1", "c={x: y}"]`` -> ``{"a.b": 1, "c": {"x": "y"}}`` (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for item in items:
        path, sep, text = item.partition("=")
        if not sep or not path.strip():
            raise MvoptError(f"--set {item!r}: expected PATH=VALUE, e.g. simulation.time_limit_ms=0.1")
        try:
            out[path.strip()] = yaml.safe_load(text)
        except yaml.YAMLError as e:
            raise MvoptError(f"--set {item!r}: the value is not valid YAML: {str(e).splitlines()[0]}") from None
    return out


def run(args: argparse.Namespace) -> int:
    quiet_optuna()
    space = load_space(args.space, base_overrides=parse_overrides(getattr(args, "overrides", None) or []),
                       fidelity=args.fidelity)
    sampler = args.sampler or space.run.sampler
    problem = sampler_problem(sampler, space.objective_names)
    if problem:
        if args.sampler:
            raise MvoptError(f"--sampler: {problem}")
        raise ConfigError("run.sampler", problem, show_value=False, source=space.source)
    if args.check:
        print(f"{space.source}: study {space.name!r}, {len(space.parameters)} parameters "
              f"({', '.join(p.name for p in space.parameters)}), objectives {', '.join(space.objective_names)}: ok")
        return 0
    gen = args.generation_size if args.generation_size is not None else space.run.generation_size
    seed = args.seed if args.seed is not None else space.run.seed
    # everything that can be refused is checked before the storage: nothing is written then
    budget = budget_from_args(args, space, default_trials=None if sampler == "grid" else DEFAULT_TRIALS)
    evaluator = make_evaluator(args.backend)
    storage = make_storage(args.storage, heartbeat_s=args.heartbeat)
    study = create_or_resume(storage, space, study_name=args.study, sampler=sampler, generation_size=gen,
                             seed=seed, resume=args.resume)
    run_study(study, space, args, generation_size=gen, budget=budget, evaluator=evaluator)
    return 0
