"""At which level a study simulates its trials, which trials climb to packet level, and replicates.

``run.fidelity`` (or ``--fidelity``) is one of :data:`FIDELITIES`: ``packet`` or ``flow`` run
every trial at that level (the base experiment's ``simulation.fidelity`` is set to it);
``multi`` simulates every trial at flow level first and *promotes* to packet level the best
``run.promote`` share of them plus every trial that sets a field the flow level cannot see
(:data:`FLOW_BLIND_FIELDS`, :func:`flow_blind_paths`). The level that decides a trial (packet
in ``multi``) is simulated ``run.replicates`` times, over consecutive seeds, as one batch;
:func:`combine_replicates` gives their mean and spread. docs/decisions/0110 says why the sampler
sees the value it sees.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from mvopt._cfg.algorithms import CC_NAMES
from mvopt.config import ExperimentConfig, NetworkConfig, with_overrides
from mvopt.evaluation import Evaluation

__all__ = ["FIDELITIES", "LEVELS", "DEFAULT_PROMOTE", "MAX_REPLICATES", "FLOW_BLIND_FIELDS", "FLOW_BLIND_SECTIONS",
           "FidelityPlan", "flow_blind_paths", "level_configs", "combine_replicates", "promotion_order",
           "within_noise"]

LEVELS = ("packet", "flow")               # simulation.fidelity's values: the levels a trial can reach
FIDELITIES = ("packet", "flow", "multi")  # run.fidelity's values
DEFAULT_PROMOTE = 0.25                    # share of a generation's flow-level trials promoted to packet level
MAX_REPLICATES = 64

# What the flow level cannot see (docs/decisions/0070): a trial that sets any of these must be
# decided at packet level. Congestion control and its parameters (one section per algorithm),
# the transport's window and loss recovery, ECN marking, buffers and PFC.
FLOW_BLIND_FIELDS = ("network.cc", "network.window", "network.var_win", "network.nack_interval_us",
                     "network.rto_us", "network.buffer_mb", "network.flowlet_gap_ns")
FLOW_BLIND_SECTIONS = ("network.ecn.", "network.pfc.") + tuple(
    f"network.{cc}." for cc in CC_NAMES if cc in {f.name for f in dataclasses.fields(NetworkConfig)})
# Fields the flow level sees only for some values: spraying's and adaptive routing's reordering,
# retransmissions and queue-driven choices are packet-level behaviour (the flow level splits such
# flows evenly; ECMP paths are exact at flow level).
FLOW_BLIND_VALUES: Mapping[str, tuple[Any, ...]] = {"network.lb": ("spray", "adaptive")}


def flow_blind_paths(overrides: Mapping[str, Any]) -> list[str]:
    """The configuration paths among ``overrides`` (what a trial sets: its parameters and derived
    values) whose value the flow level cannot see, in the given order."""
    out = []
    for path, value in overrides.items():
        if path in FLOW_BLIND_FIELDS or path.startswith(FLOW_BLIND_SECTIONS) or \
                value in FLOW_BLIND_VALUES.get(path, ()):
            out.append(path)
    return out


@dataclass(frozen=True)
class FidelityPlan:
    """How a run simulates: ``mode`` (one of :data:`FIDELITIES`), the promoted share (``multi``)
    and the replicates of the deciding level."""

    mode: str = "packet"
    promote: float = DEFAULT_PROMOTE
    replicates: int = 1

    @property
    def final_level(self) -> str:
        """The level whose value decides a trial that reaches it."""
        return "flow" if self.mode == "flow" else "packet"


def level_configs(cfg: ExperimentConfig, level: str | None, replicates: int) -> list[ExperimentConfig]:
    """``cfg`` at ``level`` (None: its own), once per replicate: seeds ``simulation.seed``, ``+1``, ...

    The first is ``cfg`` itself when it is at that level already (its key is the trial's)."""
    out = []
    for r in range(replicates):
        changes: dict[str, Any] = {}
        if level is not None and cfg.simulation.fidelity != level:
            changes["simulation.fidelity"] = level
        if r:
            changes["simulation.seed"] = cfg.simulation.seed + r
        out.append(with_overrides(cfg, changes) if changes else cfg)
    return out


def combine_replicates(evals: Sequence[Evaluation], seeds: Sequence[int]) -> tuple[Evaluation, dict[str, Any]]:
    """One Evaluation from the replicates of one configuration, and the attributes that record them.

    All finished: the mean iteration time and mean breakdown, the first replicate's statistics.
    Any not finished (infeasible, timeout, stuck): that replicate's evaluation, its seed in the reason.
    """
    first = evals[0]
    if len(evals) == 1:
        return first, {}
    for ev, seed in zip(evals, seeds):
        if not ev.ok:
            reason = f"seed {seed}: {ev.reason or 'simulation ' + ev.status}"
            return Evaluation(ev.feasible, reason, None, dict(ev.breakdown), ev.status, dict(ev.sim_stats),
                              ev.violation), {"replicate_seeds": list(seeds)}
    times = [float(ev.iteration_time_s) for ev in evals]
    mean = math.fsum(times) / len(times)
    parts = {k: math.fsum(float(ev.breakdown.get(k, 0.0)) for ev in evals) / len(evals) for k in first.breakdown}
    attrs = {"replicate_seeds": list(seeds), "replicate_times_s": times,
             "iteration_time_std_s": statistics.stdev(times),
             "iteration_time_spread": (max(times) - min(times)) / mean if mean > 0 else 0.0}
    return Evaluation(True, None, mean, parts, "ok", dict(first.sim_stats)), attrs


def promotion_order(values: Sequence[Sequence[float] | None], blind: Sequence[bool], share: float) -> list[int]:
    """Indices promoted to packet level: the best ``ceil(share x n)`` of the ``n`` that have
    values (non-dominated layers first, then by values, then by index), best first, followed by
    every blind one with values not already among them, in index order. ``None``: the flow level
    did not finish (infeasible, timeout): never promoted, packet level would not either."""
    ranked = [i for i, v in enumerate(values) if v is not None]
    layer = _pareto_layers([list(values[i]) for i in ranked])  # type: ignore[arg-type]
    ranked = [i for _, i in sorted(zip(layer, ranked), key=lambda p: (p[0], list(values[p[1]]), p[1]))]  # type: ignore[arg-type]
    best = ranked[:math.ceil(share * len(ranked) - 1e-9)]
    chosen = set(best)
    return best + [i for i in range(len(values)) if blind[i] and values[i] is not None and i not in chosen]


def _pareto_layers(points: list[list[float]]) -> list[int]:
    """Non-domination layer of every point (0: the front); with one objective, the rank of its value."""
    if not points:
        return []
    v = np.asarray(points, dtype=float)
    if v.shape[1] == 1:
        return np.unique(v[:, 0], return_inverse=True)[1].tolist()
    # dominated[i, j]: j dominates i (no worse everywhere, better somewhere)
    dominated = (v[None, :, :] <= v[:, None, :]).all(axis=2) & (v[None, :, :] < v[:, None, :]).any(axis=2)
    layers = np.full(len(points), -1)
    left = np.ones(len(points), dtype=bool)
    depth = 0
    while left.any():
        front = left & ~(dominated & left[None, :]).any(axis=1)
        layers[front] = depth
        left &= ~front
        depth += 1
    return layers.tolist()


def within_noise(a: Mapping[str, Any], b: Mapping[str, Any], value_a: float, value_b: float) -> bool:
    """True when two trials' iteration times (means of replicates, with their user attributes
    ``replicate_times_s``) differ by less than twice the standard error of their difference.
    Trials without replicates have no measured noise: False."""
    ta, tb = a.get("replicate_times_s"), b.get("replicate_times_s")
    if not ta or not tb or len(ta) < 2 or len(tb) < 2:
        return False
    se = math.sqrt(statistics.variance(ta) / len(ta) + statistics.variance(tb) / len(tb))
    return abs(value_a - value_b) < 2.0 * se
