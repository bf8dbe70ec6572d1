"""The optimizer: search spaces, the generation loop, storage, samplers and reports.

>>> from mvopt.optimize import load_space, make_storage, create_or_resume, GenerationLoop, Budget
>>> space = load_space("search_spaces/quickstart.yaml")                       # doctest: +SKIP
>>> study = create_or_resume(make_storage("sqlite:///mvopt.db"), space)       # doctest: +SKIP
>>> GenerationLoop(study, space, make_evaluator("cpu")).run(Budget(n_trials=64))  # doctest: +SKIP

Nothing here imports the simulator at import time: :class:`SimulatorEvaluator` loads
:mod:`mvopt.build` on first use.
"""

from mvopt.optimize.claims import Claims, LocalClaims, RdbClaims, make_claims
from mvopt.optimize.evaluator import (Evaluation, Evaluator, SimulatorEvaluator, evaluator_names, make_evaluator,
                                      register_evaluator)
from mvopt.optimize.loop import Budget, GenerationLoop, RunSummary
from mvopt.optimize.progress import ConsoleProgress, GenerationReport, Progress, SilentProgress
from mvopt.optimize.records import Outcome, is_feasible_trial
from mvopt.optimize.report import write_report
from mvopt.optimize.samplers import make_sampler, register_sampler, sampler_names
from mvopt.optimize.space import Candidate, SearchSpace
from mvopt.optimize.space_file import load_space
from mvopt.optimize.storage import DEFAULT_STORAGE, make_storage, recover_dead_trials
from mvopt.optimize.study import config_of_trial, create_or_resume, join_study, space_of
from mvopt.optimize.summary import best_table, best_trials

__all__ = [
    "Evaluation", "Evaluator", "SimulatorEvaluator", "register_evaluator", "make_evaluator", "evaluator_names",
    "SearchSpace", "Candidate", "load_space",
    "make_sampler", "register_sampler", "sampler_names",
    "DEFAULT_STORAGE", "make_storage", "recover_dead_trials", "create_or_resume", "join_study", "space_of", "config_of_trial",
    "Budget", "GenerationLoop", "RunSummary", "Outcome", "is_feasible_trial",
    "Progress", "ConsoleProgress", "SilentProgress", "GenerationReport",
    "Claims", "LocalClaims", "RdbClaims", "make_claims",
    "best_trials", "best_table", "write_report",
]
