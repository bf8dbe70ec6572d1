"""One configuration to one engine experiment (and, for training workloads, its plan)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Sequence

from mvopt.build.graphs import build_tasks
from mvopt.config import ExperimentConfig

__all__ = ["Built", "build", "build_experiment", "training_report", "run", "simulate_built"]


@dataclass
class Built:
    """An engine experiment and, for training workloads, its plan (for :func:`training_report`)."""

    experiment: object
    plan: object | None = None
    config: ExperimentConfig | None = None
    build_s: float = 0.0


def build(cfg: ExperimentConfig, *, topology=None) -> Built:
    """:func:`build_experiment` plus the training plan (None for other workloads)."""
    from mvopt.cluster import build_topology
    from mvopt.engine import Experiment

    t0 = time.perf_counter()
    topo = topology if topology is not None else build_topology(cfg.cluster, base_dir=cfg.base_dir)
    plans: list = []
    tasks = build_tasks(cfg, topo, plan_out=plans)
    limit = int(round(cfg.simulation.time_limit_ms * 10**9))
    sim = cfg.simulation
    exp = Experiment(topology=topo, network=cfg.network, tasks=tasks, seed=sim.seed,
                     time_limit_ps=limit, name=cfg.name, queue_monitor_ps=sim.monitor_interval_ps,
                     link_monitor=sim.link_monitor, monitor_max_samples=sim.monitor_max_samples)
    exp.params  # resolve now: a missing route or a bad threshold is a configuration error
    return Built(exp, plans[0] if plans else None, cfg, time.perf_counter() - t0)


def build_experiment(cfg: ExperimentConfig, *, topology=None):
    """One engine :class:`~mvopt.engine.Experiment` from a validated configuration.

    ``topology`` (a CompiledTopology) skips building it from ``cfg.cluster`` when the caller has
    it already. Everything the engine derives from the configuration (routes, thresholds,
    base RTTs) is resolved here, so that errors surface before any simulation.
    """
    return build(cfg, topology=topology).experiment


def training_report(plan, result) -> dict:
    """Iteration time, breakdown, MFU and memory of a finished training experiment."""
    from mvopt.workload.taskgraph import training_breakdown

    return training_breakdown(plan, result.task_start_ps, result.task_finish_ps, result.makespan_ps)


def simulate_built(built: Sequence[Built], backend: str = "cpu", progress=None, report: dict | None = None) -> list:
    """Simulate built experiments, each at its configuration's ``simulation.fidelity``: the
    packet-level ones as one engine batch (:func:`mvopt.engine.simulate`, with `progress` and
    `report`), the flow-level ones as one flow-level batch (:func:`mvopt.flow.simulate`) on the
    host's cores whatever the backend: its compiled event loop is far faster than the array path
    on a GPU, which a step's many small launches bound (docs/decisions/0071). ExperimentResults
    in input order."""
    from mvopt.engine import simulate
    from mvopt.flow import simulate as simulate_flows

    flow = [i for i, b in enumerate(built) if b.config is not None and b.config.simulation.fidelity == "flow"]
    packet = sorted(set(range(len(built))) - set(flow))
    out: list = [None] * len(built)
    if packet:
        results = simulate([built[i].experiment for i in packet], backend=backend, progress=progress, report=report)
        for i, r in zip(packet, results):
            out[i] = r
    if flow:
        for i, r in zip(flow, simulate_flows([built[i].experiment for i in flow], backend="cpu")):
            out[i] = r
    return out


def run(cfgs: Sequence[ExperimentConfig], backend: str = "cpu") -> list:
    """Build every configuration and simulate each at its fidelity, the packet-level ones as one
    batch; ExperimentResults in order."""
    return simulate_built([build(c) for c in cfgs], backend=backend)
