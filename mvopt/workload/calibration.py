"""Calibration of the compute model's efficiency fractions on published iteration times.

Only rows whose iteration can be computed without the network simulator qualify: one pipeline
stage, no data parallelism, tensor parallelism inside one server. Their iteration is

    compute of every layer (forward, recompute, backward) + embedding + output layer + optimizer
    + exposed tensor-parallel communication (intra-server model)
    + backward collectives Megatron overlaps with GEMMs (input re-gather with the input-gradient
      GEMM, gradient reduce-scatter / all-reduce with the weight-gradient GEMM), through
      :func:`mvopt.workload.compute.overlapped_time_s`.

:data:`CALIBRATION_ROWS` names the rows used; no accuracy is ever reported on them.
"""

from __future__ import annotations

import math
from dataclasses import replace

from typing import TYPE_CHECKING

import numpy as np

from mvopt.config import ParallelismConfig
from mvopt.errors import InfeasibleError
from mvopt.workload.compute import (ComputeModel, Efficiency, embedding_ops, layer_ops,
                                    optimizer_ops, output_ops, overlap_slowdown, overlapped_time_s)
from mvopt.workload.memory import stage_param_count
from mvopt.workload.published import PublishedRun, published_run

if TYPE_CHECKING:   # mvopt.comm depends on mvopt.workload, not the reverse: the model is passed in
    from mvopt.comm.intra import IntraServerModel

__all__ = ["CALIBRATION_ROWS", "single_stage_iteration_s", "calibrate_efficiency", "calibration_targets"]

# The rows whose times set the efficiency fractions (both of korthikanti-22b's times).
CALIBRATION_ROWS: tuple[str, ...] = ("korthikanti-22b",)


def single_stage_iteration_s(run: PublishedRun, par: ParallelismConfig, compute: ComputeModel,
                             intra: "IntraServerModel") -> float:
    """Iteration time of a pp = 1, dp = 1 configuration inside one server (see module docstring);
    ``intra`` times the tensor-parallel collectives (e.g. ``mvopt.comm.default_model()``)."""
    if par.pp != 1 or par.dp != 1 or par.tp > 8:
        raise InfeasibleError(f"{run.name}: the calibration harness needs pp = 1, dp = 1 and TP inside "
                              "one server")
    model, t = run.model, par.tp
    act = 2.0 * model.seq_len * par.micro_batch * model.hidden      # bytes of one activation tensor

    def coll(name: str, nbytes: float) -> float:
        return float(intra.time_s(name, nbytes, gpu=run.gpu, gpus=t)) if t > 1 else 0.0

    ag, rs, ar = coll("all_gather", act), coll("reduce_scatter", act), coll("all_reduce", act)
    if par.sequence_parallel:
        fwd_comm, bwd_exposed, bwd_with_dgrad, bwd_with_wgrad = 2 * (ag + rs), 2 * ag, ag, rs
    else:
        fwd_comm, bwd_exposed, bwd_with_dgrad, bwd_with_wgrad = 2 * ar, 0.0, 0.0, ar
    ops = layer_ops(model, par, flash_attention=run.flash_attention)
    times = compute.phase_times(ops)
    slow = overlap_slowdown(run.gpu)
    # Column-parallel layers (QKV, FC1) carry the overlapped backward collectives.
    def gemm_time(name: str, phase: str) -> float:
        return sum(compute.op_time_s(o) for o in ops if o.name == name and o.phase == phase)
    bwd = times.bwd_input + times.bwd_weight + bwd_exposed
    for name in ("qkv", "fc1"):
        for phase, comm in (("bwd_input", bwd_with_dgrad), ("bwd_weight", bwd_with_wgrad)):
            g = gemm_time(name, phase)
            bwd += overlapped_time_s(g, comm, slow) - g
    recompute_comm = fwd_comm if par.recompute == "full" else 0.0
    layer = times.fwd + fwd_comm + times.recompute + recompute_comm + bwd
    edge = compute.phase_times(embedding_ops(model, par) + output_ops(model, par)).total
    edge_comm = (rs + ag) * 2 if par.sequence_parallel else 2 * ar
    micro = par.global_batch // par.micro_batch
    step = compute.phase_times(optimizer_ops(stage_param_count(model, par, 0))).total
    return micro * (model.layers * layer + edge + edge_comm) + step


def calibration_targets() -> list[tuple[PublishedRun, ParallelismConfig, float]]:
    """(row, layout, measured seconds) for every measured time of :data:`CALIBRATION_ROWS`."""
    out = []
    for name in CALIBRATION_ROWS:
        run = published_run(name)
        out.append((run, run.parallel, run.t_iter_s))
        if run.t_iter_full_recompute_s is not None:
            out.append((run, run.full_recompute(), float(run.t_iter_full_recompute_s)))
    return out


def calibrate_efficiency(intra: "IntraServerModel", base: Efficiency = Efficiency()) -> Efficiency:
    """Fit ``gemm_fraction`` and ``memory_fraction`` to the calibration rows: least squares on
    log(predicted / measured) (scipy ``least_squares``), rounded to 3 decimals; the other fields
    of ``base`` are kept."""
    from scipy.optimize import least_squares

    targets = calibration_targets()

    def with_fractions(x: np.ndarray) -> Efficiency:
        return replace(base, gemm_fraction=float(x[0]), memory_fraction=float(x[1]))

    def residuals(x: np.ndarray) -> np.ndarray:
        eff = with_fractions(x)
        return np.array([math.log(single_stage_iteration_s(run, par, ComputeModel(run.gpu, eff), intra) / t)
                         for run, par, t in targets])

    fit = least_squares(residuals, x0=[base.gemm_fraction, base.memory_fraction],
                        bounds=([0.05, 0.05], [1.0, 1.0]), diff_step=1e-4)
    return with_fractions(np.round(fit.x, 3))
