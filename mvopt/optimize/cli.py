"""Options and the run sequence shared by ``mvopt optimize`` and ``mvopt worker``."""

from __future__ import annotations

import argparse
import logging
import math
import signal
import sys
import warnings

import optuna

from mvopt.errors import MvoptError
from mvopt.optimize.artifacts import default_artifact_dir
from mvopt.optimize.evaluator import Evaluator, evaluator_names, make_evaluator
from mvopt.optimize.fidelity import FIDELITIES
from mvopt.optimize.loop import Budget, GenerationLoop, RunSummary
from mvopt.optimize.progress import ConsoleProgress, SilentProgress
from mvopt.optimize.samplers import sampler_names
from mvopt.optimize.space import SearchSpace
from mvopt.optimize.storage import describe_storage
from mvopt.optimize.summary import best_table, format_table, no_feasible_note, noise_note

__all__ = ["add_run_arguments", "add_storage_arguments", "budget_from_args", "run_study", "quiet_optuna",
           "parse_duration", "positive_int", "non_negative_int", "seed_int"]

SEED_MAX = 2 ** 32 - 1   # NumPy's RandomState, which Optuna's samplers seed, takes 0 .. 2**32 - 1


def parse_duration(text: str) -> float:
    """Seconds (> 0, finite) from ``90``, ``90s``, ``15m``, ``2h``."""
    units = {"s": 1, "m": 60, "h": 3600}
    t = text.strip().lower()
    try:
        seconds = float(t[:-1]) * units[t[-1]] if t and t[-1] in units else float(t)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (e.g. 90, 15m, 2h)") from None
    if not math.isfinite(seconds) or seconds <= 0:
        raise argparse.ArgumentTypeError(f"a duration must be positive and finite, got {text!r} (e.g. 90, 15m, 2h)")
    return seconds


def _int_within(text: str, low: int, high: int | None = None) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if v < low or (high is not None and v > high):
        raise argparse.ArgumentTypeError(f"must be {f'>= {low}' if high is None else f'from {low} to {high}'}, got {v}")
    return v


def positive_int(text: str) -> int:
    """An integer >= 1 (an argparse type: a bad value is refused before anything is opened)."""
    return _int_within(text, 1)


def non_negative_int(text: str) -> int:
    """An integer >= 0 (an argparse type)."""
    return _int_within(text, 0)


def seed_int(text: str) -> int:
    """A sampler seed, 0 .. 2**32 - 1 (an argparse type)."""
    return _int_within(text, 0, SEED_MAX)


def add_storage_arguments(p: argparse.ArgumentParser, *, required: bool = False) -> None:
    """--storage and --heartbeat."""
    p.add_argument("--storage", required=required, default=None,
                   help="Optuna storage URL (sqlite:///FILE, postgresql://USER:PW@HOST/DB) or a journal file path "
                        "(default sqlite:///mvopt.db in the working directory)")
    p.add_argument("--heartbeat", type=non_negative_int, default=10, metavar="S",
                   help="heartbeat period of running trials in RDB storages; a trial silent for 3x this is "
                        "failed and retried (0 = off; default 10)")


def add_run_arguments(p: argparse.ArgumentParser) -> None:
    """Options of the generation loop (sampler, budget, backend, output)."""
    p.add_argument("--sampler", choices=sampler_names(), default=None, help="sampler (default: the space's run.sampler, else tpe)")
    p.add_argument("-g", "--generation-size", type=positive_int, default=None, metavar="N",
                   help="trials per generation, simulated as one batch (default: the space's, else 32)")
    p.add_argument("-n", "--n-trials", type=positive_int, default=None, metavar="N", help="trials to run in this process")
    p.add_argument("--timeout", type=parse_duration, default=None, metavar="T",
                   help="time budget of this process (90, 15m, 2h); the running generation is finished")
    p.add_argument("--stop-file", default=None, metavar="FILE", help="stop after the generation in which FILE appears")
    p.add_argument("--seed", type=seed_int, default=None, help=f"sampler seed (0 .. {SEED_MAX})")
    p.add_argument("--backend", default="cpu", metavar="NAME",
                   help=f"simulation backend: {', '.join(evaluator_names())}, an engine spec (gpu:0,1, cpu:N, auto, "
                        "gpu:0+cpu: the CPU races the GPU on its slowest experiments, as auto does on a one-GPU machine) "
                        "or module:factory (default cpu)")
    p.add_argument("--fidelity", choices=FIDELITIES, default=None,
                   help="packet or flow: every trial at that level; multi: every trial at flow level, the best "
                        "run.promote share and those that set what the flow level cannot see also at packet level "
                        "(default: the space's run.fidelity, else its base's simulation.fidelity)")
    p.add_argument("--artifacts", default=None, metavar="DIR",
                   help="directory for per-trial plots (Optuna artifacts; default mvopt-artifacts beside the database)")
    p.add_argument("--top", type=positive_int, default=5, metavar="K", help="rows of the final table of best configurations")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress lines")


def budget_from_args(args: argparse.Namespace, space: SearchSpace, *, default_trials: int | None) -> Budget:
    """The run budget from the options, falling back on the space's ``run:`` section."""
    n = args.n_trials if args.n_trials is not None else space.run.n_trials
    timeout = args.timeout if args.timeout is not None else space.run.timeout_s
    if n is None and timeout is None and args.stop_file is None:
        n = default_trials
    if n is not None and n < 1:
        raise MvoptError(f"--n-trials must be >= 1, got {n}")
    return Budget(n_trials=n, timeout_s=timeout, stop_file=args.stop_file,
                  study_trials=getattr(args, "study_trials", None))


def quiet_optuna() -> None:
    """Keep Optuna's per-trial INFO lines and experimental-feature warnings off the terminal."""
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    warnings.filterwarnings("ignore", category=optuna.exceptions.ExperimentalWarning)
    warnings.filterwarnings("ignore", message="Heartbeat of storage is supposed to be used with Study.optimize")
    logging.basicConfig(level=logging.WARNING, format="mvopt: %(message)s")
    logging.getLogger("mvopt.engine").setLevel(logging.INFO)    # e.g. experiments run again with full packet slots


def _terminate(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def run_study(study: optuna.Study, space: SearchSpace, args: argparse.Namespace, *, generation_size: int,
              budget: Budget, evaluator: Evaluator | None = None) -> RunSummary:
    """Run the loop, print the summary and the best configurations, attach best-trial plots.
    Commands pass the `evaluator` they made before opening the storage (a backend this machine
    lacks then fails before the study is touched)."""
    evaluator = evaluator or make_evaluator(args.backend)
    progress = SilentProgress() if args.quiet else ConsoleProgress()
    if hasattr(evaluator, "on_progress"):       # the simulator: a line every few seconds of a long batch
        evaluator.on_progress = progress.simulating
    if not args.quiet:
        # (new or resumed, and how far: a --resume with a mistyped --study starts a new study, so say so)
        done = len(study.get_trials(deepcopy=False))
        state = f"resumed with {done} trials" if done else "new"
        print(f"mvopt: study {study.study_name!r} ({state}) in {describe_storage(args.storage)}: "
              f"{len(space.parameters)} parameters, generations of {generation_size}, backend {evaluator.name}"
              f"{_describe_fidelity(space)}", file=sys.stderr)
    loop = GenerationLoop(study, space, evaluator, generation_size=generation_size, progress=progress,
                          poll_s=min(1.0, max(0.1, args.heartbeat / 4)) if args.heartbeat else 1.0,
                          artifact_dir=args.artifacts or default_artifact_dir(args.storage))
    previous = signal.signal(signal.SIGTERM, _terminate)  # a scheduler's SIGTERM releases trials like Ctrl-C
    try:
        summary = loop.run(budget)
    finally:
        signal.signal(signal.SIGTERM, previous)
    gens = f"{summary.generations} generation{'' if summary.generations == 1 else 's'}"
    counts = [f"{summary.simulated} simulated"]
    if summary.cached:
        counts.append(f"{summary.cached} from identical configurations")
    if summary.promoted:
        counts.append(f"{summary.promoted} of them also at packet level")
    if summary.rejected:
        counts.append(f"{summary.rejected} rejected before simulation")
    print(f"{summary.told} trials in {gens} ({', '.join(counts)}; {summary.infeasible} infeasible) in "
          f"{summary.elapsed_s:.1f} s: {summary.stopped}")
    rows = best_table(study, space.objective_names, args.top)
    print(format_table(rows) if rows else no_feasible_note(study))
    note = noise_note(study, args.top) if rows else None
    if note:
        print(f"note: {note}")
    return summary


def _describe_fidelity(space: SearchSpace) -> str:
    plan = space.fidelity_plan
    replicates = f", {plan.replicates} seeds each" if plan.replicates > 1 else ""
    if plan.mode == "multi":
        return f", multi-fidelity (flow level, then the best {plan.promote:.0%} at packet level{replicates})"
    return f", {plan.mode} level{replicates}"
