"""Fully sharded data parallelism (ZeRO-3 / FSDP): memory and traffic of one GPU.

Parameters, gradients and optimizer state are sharded over the ``dp x cp`` ranks (Megatron's
gradient group). Each transformer layer's parameters are all-gathered before its forward and
again before its backward, the next layer's gather prefetched while the current one computes;
its gradients are reduce-scattered after its backward, every micro-batch (gradients stay
sharded between micro-batches: that is what saves their memory).
"""

from __future__ import annotations

from mvopt.config import ParallelismConfig
from mvopt.workload.models import ModelSpec
from mvopt.workload.parallel import num_microbatches

__all__ = ["fsdp_group_size", "fsdp_state_bytes", "fsdp_traffic_bytes"]


def fsdp_group_size(par: ParallelismConfig) -> int:
    """Ranks the model state is sharded over: ``dp * cp``."""
    return par.dp * par.cp


def fsdp_state_bytes(params: float, layer_params: float, group: int, *, param: float, grad: float,
                     optimizer: float) -> tuple[float, float, float]:
    """(weights, gradients, optimizer) bytes of a GPU holding ``params`` parameters (unsharded
    count) with FSDP over ``group`` ranks: every state ``1 / group``, plus the gathered
    parameters of two layers of ``layer_params`` (the one computing and the one prefetched)
    and one layer's unsharded gradients before their reduce-scatter."""
    return (params * param / group + 2 * layer_params * param,
            params * grad / group + layer_params * grad,
            params * optimizer / group)


def fsdp_traffic_bytes(stage_params: float, par: ParallelismConfig, *, param: float, grad: float) -> float:
    """Bytes one GPU sends per iteration in FSDP collectives (ring algorithms): per micro-batch
    two parameter all-gathers and one gradient reduce-scatter of its stage's ``stage_params``,
    each sending ``(n - 1) / n`` of the buffer: ``m (n - 1) / n * P (2 param + grad)``."""
    n = fsdp_group_size(par)
    if n == 1:
        return 0.0
    return num_microbatches(par) * (n - 1) / n * stage_params * (2 * param + grad)
