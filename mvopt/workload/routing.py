"""How many routed tokens the busiest rank of an expert-parallel group receives.

Routing that is uniform in expectation is not uniform in every micro-batch: each token's
``top_k`` experts are drawn afresh, so the ranks' counts scatter around the mean, and at every
dispatch and combine the group waits for the rank that received the most. With ``N = ep s b``
tokens routed in the group per micro-batch (each rank routes its own ``s b``), ``E`` experts of
which each rank holds ``E / ep``, a token sends ``Y`` of its ``k`` distinct picks to a given
rank, hypergeometric with variance ``v = k (1/ep) (1 - 1/ep) (E - k) / (E - 1)``. A rank's count
``X`` is the sum over the ``N`` tokens: mean ``s b k``, variance ``N v``; the ``ep`` counts sum to
``N k``, so they are (for large ``N``) equicorrelated normals with correlation ``-1 / (ep - 1)``,
whose maximum is ``mean + sqrt(N v ep / (ep - 1)) m(ep)``, ``m(n)`` the expected maximum of ``n``
independent standard normals.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.special import ndtr

from mvopt.config import ParallelismConfig
from mvopt.workload.models import ModelSpec

__all__ = ["expected_max_normal", "sampled_max_load", "busiest_load"]


@functools.lru_cache(maxsize=None)
def expected_max_normal(n: int) -> float:
    """``E[max of n independent standard normals] = int x n phi(x) Phi(x)^(n-1) dx`` (0 for
    ``n = 1``), by the trapezoidal rule on a fixed grid (|x| <= 12, step 1e-3)."""
    if n < 1:
        raise ValueError(f"n must be >= 1, got {n}")
    x = np.linspace(-12.0, 12.0, 24001)
    pdf = np.exp(-0.5 * x * x) / math.sqrt(2.0 * math.pi)
    return float(np.trapezoid(x * n * pdf * ndtr(x) ** (n - 1), x))


def sampled_max_load(model: ModelSpec, par: ParallelismConfig) -> float:
    """Expected routed tokens of the busiest EP rank relative to the mean, for routing uniform
    in expectation (the module's closed form); 1 without expert parallelism."""
    ep, experts, k = par.ep, model.experts, model.top_k
    if ep <= 1 or experts <= 1:
        return 1.0
    tokens = float(model.seq_len * par.micro_batch)
    var = k * (1.0 / ep) * (1.0 - 1.0 / ep) * (experts - k) / (experts - 1)
    sd = math.sqrt(ep * tokens * var * ep / (ep - 1))
    return 1.0 + sd * expected_max_normal(ep) / (tokens * k)


def busiest_load(model: ModelSpec, par: ParallelismConfig, expert_skew: float = 1.0) -> float:
    """Routed tokens of the busiest EP rank relative to uniform routing: the systematic skew
    (``workload.expert_skew``) times the sampling maximum (:func:`sampled_max_load`), at most
    ``ep`` (every routed token); 1 without expert parallelism."""
    if par.ep <= 1:
        return 1.0
    return min(float(par.ep), float(expert_skew) * sampled_max_load(model, par))
