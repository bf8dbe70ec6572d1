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

__all__ = ["evaluate", "evaluation_of"]


# an engine "error" (a bug the engine reports, never a model outcome) is shown as stuck, with its
# diagnostic; "capacity" and "cancelled" are the engine's internal states and never reach here
_STATUS = {"done": "ok", "stuck": "stuck", "timeout": "timeout", "error": "stuck"}


def _sim_stats(result) -> dict[str, float]:
    stats: dict[str, float] = {f"{k}": float(v) for k, v in result.counters.items()}
    fct = np.asarray(result.flow_fct_ps)
    fct = fct[fct >= 0]
    stats.update(windows=float(result.windows), simulated_s=result.end_ps / 1e12, flows=float(len(result.flow_ids)),
                 tasks=float(len(result.task_finish_ps)))
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
    `report`, if given, the engine's figures of the batch (:func:`~mvopt.engine.simulate`), and
    under ``"flow"`` those of a flow-level generation run in worker processes (:func:`evaluate_flow`:
    from PROCESS_MIN flow-level configurations on, each built and simulated in one worker).
    """
    from mvopt.build.flow_trials import evaluate_flow, in_flow_workers

    out: list = [None] * len(configs)
    flow = [i for i, c in enumerate(configs) if c.simulation.fidelity == "flow"]
    if in_flow_workers(len(flow)):
        # built and simulated in one worker each, never all held here at once (mvopt.build.flow_trials)
        for i, ev in zip(flow, evaluate_flow([configs[i] for i in flow], report=report)):
            out[i] = ev
        rest = sorted(set(range(len(configs))) - set(flow))
    else:
        rest = list(range(len(configs)))
    todo: list[tuple[int, Built]] = []
    t_build = time.perf_counter()
    for i, (built, reason, violation) in zip(rest, build_all([configs[i] for i in rest])):
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
            out[i] = evaluation_of(b, r, {"batch_wall_s": wall, "batch_size": float(len(todo)),
                                          "build_wall_s": build_wall_s})
    return out


def evaluation_of(b: Built, r, extra: dict[str, float]) -> Evaluation:
    """The evaluation of built experiment `b` from its result `r` (its batch's figures in `extra`)."""
    if r.status not in _STATUS:
        raise MvoptError(f"{b.experiment.name}: the engine returned status {r.status!r} (a bug)")
    status = _STATUS[r.status]
    stats = _sim_stats(r)
    stats.update(extra)
    stats["build_s"] = b.build_s
    if status != "ok":
        return Evaluation(feasible=True, reason=r.diagnostic or f"simulation {r.status}", status=status,
                          sim_stats=stats)
    if b.plan is not None:
        rep = training_report(b.plan, r)
        stats.update(mfu=rep["mfu"], hfu=rep["hfu"], tflops_per_gpu=rep["tflops_per_gpu"],
                     peak_memory_gib=rep["peak_memory_bytes"] / 2**30,
                     memory_capacity_gib=rep["memory_capacity_bytes"] / 2**30,
                     simulated_gpus=float(rep["simulated_gpus"]), gpus=float(rep["gpus"]))
        return Evaluation(feasible=True, iteration_time_s=rep["iteration_time_s"], status="ok",
                          breakdown=dict(rep["breakdown"]), sim_stats=stats)
    return Evaluation(feasible=True, iteration_time_s=r.makespan_s, status="ok",
                      breakdown={"makespan": r.makespan_s}, sim_stats=stats)
