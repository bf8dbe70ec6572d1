"""A generation of configurations to one simulated batch and one Evaluation each: the
simulator as the optimizer's evaluator (:class:`mvopt.evaluation.Evaluator`)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Sequence

import numpy as np

from mvopt.build.experiment import Built, simulate_built, training_report
from mvopt.build.parallel import build_all
from mvopt.config import ExperimentConfig
from mvopt.errors import MvoptError
from mvopt.evaluation import Evaluation

if TYPE_CHECKING:
    from mvopt.engine.progress import ProgressFn

__all__ = ["evaluate"]


# an engine "error" (a bug the engine reports, never a model outcome) is shown as stuck, with its
# diagnostic; "capacity" and "cancelled" are the engine's internal states and never reach here
_STATUS = {"done": "ok", "stuck": "stuck", "timeout": "timeout", "error": "stuck"}


def _sim_stats(result, wall_s: float, batch: int) -> dict[str, float]:
    stats: dict[str, float] = {f"{k}": float(v) for k, v in result.counters.items()}
    fct = np.asarray(result.flow_fct_ps)
    fct = fct[fct >= 0]
    stats.update(windows=float(result.windows), simulated_s=result.end_ps / 1e12, flows=float(len(result.flow_ids)),
                 tasks=float(len(result.task_finish_ps)), batch_wall_s=wall_s, batch_size=float(batch))
    if fct.size:
        stats.update(fct_p50_s=float(np.percentile(fct, 50)) / 1e12, fct_p99_s=float(np.percentile(fct, 99)) / 1e12,
                     fct_max_s=float(fct.max()) / 1e12)
    return stats


def evaluate(configs: Sequence[ExperimentConfig], backend: str = "cpu", progress: ProgressFn | None = None,
             report: dict | None = None) -> list:
    """The optimizer's evaluator (see :class:`mvopt.evaluation.Evaluator`).

    A configuration that cannot be built (ConfigError, InfeasibleError — invalid layout, does
    not fit in GPU memory —, a bad input file) becomes ``Evaluation.infeasible(reason)`` without
    simulation (memory: ``violation`` = peak / capacity - 1); all others run in ONE
    :func:`~mvopt.engine.simulate` call. A training workload's iteration time is the simulated
    time per iteration, with ``breakdown`` = compute, tp_comm, pp_comm, dp_comm, bubble (seconds
    per iteration, summing to it) and ``mfu``, ``hfu``, ``peak_memory_gib`` in ``sim_stats``;
    any other workload's is its makespan. A stuck or timed-out experiment is feasible, with that
    status, its diagnostic as the reason and no time. `progress` receives the batch's
    :class:`~mvopt.engine.progress.BatchProgress` every few seconds of a long simulation;
    `report`, if given, the engine's figures of the batch (:func:`~mvopt.engine.simulate`).
    """

    out: list = [None] * len(configs)
    todo: list[tuple[int, Built]] = []
    t_build = time.perf_counter()
    for i, (built, reason, violation) in enumerate(build_all(configs)):
        if built is not None:
            todo.append((i, built))
        else:
            out[i] = Evaluation.infeasible(reason, violation=violation)
    build_wall_s = time.perf_counter() - t_build
    if todo:
        t0 = time.perf_counter()
        results = simulate_built([b for _, b in todo], backend=backend, progress=progress, report=report)
        wall = time.perf_counter() - t0
        for (i, b), r in zip(todo, results):
            if r.status not in _STATUS:
                raise MvoptError(f"{b.experiment.name}: the engine returned status {r.status!r} (a bug)")
            status = _STATUS[r.status]
            stats = _sim_stats(r, wall, len(todo))
            stats["build_s"] = b.build_s
            stats["build_wall_s"] = build_wall_s
            if status != "ok":
                out[i] = Evaluation(feasible=True, reason=r.diagnostic or f"simulation {r.status}",
                                    status=status, sim_stats=stats)
            elif b.plan is not None:
                rep = training_report(b.plan, r)
                stats.update(mfu=rep["mfu"], hfu=rep["hfu"], tflops_per_gpu=rep["tflops_per_gpu"],
                             peak_memory_gib=rep["peak_memory_bytes"] / 2**30,
                             memory_capacity_gib=rep["memory_capacity_bytes"] / 2**30,
                             simulated_gpus=float(rep["simulated_gpus"]), gpus=float(rep["gpus"]))
                out[i] = Evaluation(feasible=True, iteration_time_s=rep["iteration_time_s"], status="ok",
                                    breakdown=dict(rep["breakdown"]), sim_stats=stats)
            else:
                out[i] = Evaluation(feasible=True, iteration_time_s=r.makespan_s, status="ok",
                                    breakdown={"makespan": r.makespan_s}, sim_stats=stats)
    return out
