"""A deterministic closed-form test double of the simulator, for the optimizer's loop mechanics.

The "iteration time" is a made-up smooth function of a few configuration fields; it is NOT a
model of anything. Environment variables (read at each call, so subprocesses can be steered):

* ``MVOPT_TEST_EVAL_LOG``: append ``pid config_key`` per simulated configuration to this file;
* ``MVOPT_TEST_EVAL_SLEEP``: seconds to sleep per batch (to kill a worker mid-generation);
* ``MVOPT_TEST_EVAL_STARTED``: append ``pid batch-size`` to this file when a batch starts.
"""

from __future__ import annotations

import math
import os
import time

from mvopt.config import ExperimentConfig, config_key
from mvopt.optimize.evaluator import Evaluation

CC_PENALTY = {"none": 1.0, "dcqcn": 0.2, "hpcc": 0.0, "dctcp": 0.4}


def iteration_time(cfg: ExperimentConfig) -> float:
    """Made-up cost: best at hpcc + spray, kmin near 100 KB, bigger k a bit slower."""
    n = cfg.network
    kmin = n.ecn.kmin_kb if n.ecn.kmin_kb is not None else 100.0
    t = 1.0 + CC_PENALTY[n.cc] + (0.0 if n.lb == "spray" else 0.1)
    t += 0.05 * math.log(max(kmin, 1.0) / 100.0) ** 2
    if n.cc == "hpcc":
        t += 2.0 * (n.hpcc.eta - 0.95) ** 2
    if cfg.cluster.k:
        t += 0.01 * cfg.cluster.k
    t += 0.01 * cfg.parallelism.tp + 0.02 * cfg.parallelism.pp
    return t * 1e-3


class AnalyticEvaluator:
    """Closed-form evaluator; ``network.ecn.kmin_kb > 300`` is "infeasible" (a test rule)."""

    name = "analytic"

    def __init__(self) -> None:
        self.batches: list[int] = []

    def evaluate(self, configs: list[ExperimentConfig]) -> list[Evaluation]:
        self.batches.append(len(configs))
        started = os.environ.get("MVOPT_TEST_EVAL_STARTED")
        if started:
            with open(started, "a") as f:
                f.write(f"{os.getpid()} {len(configs)}\n")
        delay = float(os.environ.get("MVOPT_TEST_EVAL_SLEEP", "0") or 0)
        if delay:
            time.sleep(delay)
        log = os.environ.get("MVOPT_TEST_EVAL_LOG")
        out = []
        for cfg in configs:
            kmin = cfg.network.ecn.kmin_kb
            if kmin is not None and kmin > 300:
                out.append(Evaluation.infeasible("does not fit (test rule: kmin_kb > 300)", violation=kmin / 300 - 1))
            else:
                t = iteration_time(cfg)
                out.append(Evaluation(feasible=True, iteration_time_s=t, status="ok",
                                      breakdown={"compute": 0.6 * t, "exposed_dp": 0.3 * t, "bubble": 0.1 * t},
                                      sim_stats={"packets": 1000.0}))
        if log:
            with open(log, "a") as f:
                f.write("".join(f"{os.getpid()} {config_key(c)}\n" for c in configs))
        return out


def make() -> AnalyticEvaluator:
    """Factory used as ``--backend analytic_evaluator:make`` by subprocess tests."""
    return AnalyticEvaluator()


# The flow level of FidelityEvaluator: what it cannot see (cc, ECN, spraying) is left out, and it
# is a little optimistic, as the fluid model is (no queueing).
FLOW_OPTIMISM = 0.98
SEED_JITTER = 0.004   # the packet level's relative change per seed, a made-up deterministic pattern


def packet_time(cfg: ExperimentConfig) -> float:
    """The packet level: :func:`iteration_time` with a seed-dependent jitter."""
    jitter = SEED_JITTER * ((cfg.simulation.seed * 7) % 5 - 2) / 2
    return iteration_time(cfg) * (1.0 + jitter)


def flow_time(cfg: ExperimentConfig) -> float:
    """The flow level: blind to cc, ECN and spraying."""
    t = 1.0 + 0.01 * (cfg.cluster.k or 0) + 0.01 * cfg.parallelism.tp + 0.02 * cfg.parallelism.pp
    t += 0.002 * (cfg.collective.bytes / 1e6)
    return t * 1e-3 * FLOW_OPTIMISM


class FidelityEvaluator(AnalyticEvaluator):
    """Closed-form at both levels (``simulation.fidelity``); records every configuration it is given."""

    name = "fidelity"

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[ExperimentConfig] = []

    def evaluate(self, configs: list[ExperimentConfig]) -> list[Evaluation]:
        self.batches.append(len(configs))
        self.seen += configs
        out = []
        for cfg in configs:
            t = flow_time(cfg) if cfg.simulation.fidelity == "flow" else packet_time(cfg)
            out.append(Evaluation(feasible=True, iteration_time_s=t, status="ok", breakdown={"compute": 0.6 * t,
                                  "exposed_dp": 0.4 * t}, sim_stats={"packets": 1000.0}))
        return out


def make_fidelity() -> FidelityEvaluator:
    """``--backend analytic_evaluator:make_fidelity``."""
    return FidelityEvaluator()
