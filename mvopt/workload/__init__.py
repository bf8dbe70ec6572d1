"""The training workload: models, parallel layout, memory, compute, and the per-rank task graphs
of one iteration (:mod:`mvopt.workload.taskgraph`). GPU types are cluster hardware
(:mod:`mvopt.cluster.gpus`), re-exported here.
"""

from mvopt.workload.calibration import CALIBRATION_ROWS, calibrate_efficiency, single_stage_iteration_s
from mvopt.workload.compute import (DEFAULT_EFFICIENCY, ComputeModel, Efficiency, Op, OperatorTrace,
                                    PhaseTimes, embedding_ops, iteration_flops, layer_ops,
                                    megatron_flops, optimizer_ops, output_ops, overlap_slowdown,
                                    overlapped_time_s)
from mvopt.cluster.gpus import GpuSpec, builtin_gpus, get_gpu, gpu_from_dict
from mvopt.workload.memory import (DEFAULT_RESERVE_BYTES, PRECISIONS, MemoryBreakdown, PrecisionScheme,
                                   check_memory, inflight_layers, layer_activation_bytes,
                                   memory_per_stage, peak_memory, stage_param_count)
from mvopt.workload.models import ZOO, ModelSpec, ParamCounts, decoder_model, get_model, model_names
from mvopt.workload.parallel import Coords, Layout, check_layout, layout_problems, num_microbatches
from mvopt.workload.published import PublishedRun, published_run, published_runs

__all__ = [
    # models and GPUs
    "ModelSpec", "ParamCounts", "decoder_model", "get_model", "model_names", "ZOO",
    "GpuSpec", "get_gpu", "gpu_from_dict", "builtin_gpus",
    # parallel layout
    "Coords", "Layout", "layout_problems", "check_layout", "num_microbatches",
    # memory
    "PrecisionScheme", "PRECISIONS", "MemoryBreakdown", "layer_activation_bytes", "inflight_layers",
    "stage_param_count", "memory_per_stage", "peak_memory", "check_memory", "DEFAULT_RESERVE_BYTES",
    # compute
    "Op", "Efficiency", "DEFAULT_EFFICIENCY", "ComputeModel", "OperatorTrace", "PhaseTimes",
    "layer_ops", "embedding_ops", "output_ops", "optimizer_ops", "iteration_flops", "megatron_flops",
    "overlap_slowdown", "overlapped_time_s",
    # calibration and published runs
    "CALIBRATION_ROWS", "calibrate_efficiency", "single_stage_iteration_s",
    "PublishedRun", "published_runs", "published_run",
]
