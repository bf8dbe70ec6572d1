"""From validated configurations to engine experiments, batched simulation and evaluations.

>>> from mvopt.config import load_config
>>> from mvopt.experiment import build_experiment, run
>>> cfg = load_config({"cluster": {"topology": "fat_tree", "k": 4}, "network": {"cc": "none"},
...                    "workload": {"kind": "collective"}, "collective": {"bytes": 1 << 20}})
>>> result, = run([cfg])                                   # doctest: +SKIP
>>> result.status, result.makespan_s                       # doctest: +SKIP

* :func:`build_experiment` — one :class:`~mvopt.config.ExperimentConfig` to one
  :class:`~mvopt.engine.Experiment`: the topology from ``cluster``, the task graph from
  ``workload`` (kind ``tasks``: the explicit graph; ``collective``: the flows of
  :mod:`mvopt.comm.collectives`; ``hpcc_flows``: an HPCC flow.txt), the engine settings from
  ``network`` and ``simulation``. Invalid input raises ConfigError / InputFileError before any
  simulation.
* :func:`run` — build every configuration and simulate them as one SPME batch.
* :func:`evaluate` — the optimizer's interface (:mod:`mvopt.optimize.evaluator`): configurations
  that cannot be built become infeasible evaluations at no simulation cost, all the others run
  in one batch; the objective of a non-training workload is its makespan in seconds.
"""

from __future__ import annotations

import time
from typing import Sequence

import numpy as np

from mvopt.config import ExperimentConfig
from mvopt.errors import ConfigError, InfeasibleError, InputFileError, MvoptError

__all__ = ["build_experiment", "build_tasks", "run", "evaluate", "UNSUPPORTED_KINDS"]

UNSUPPORTED_KINDS = ("training", "astra")
PS_PER_NS = 1000


def _ns_to_ps(ns: float, where: str) -> int:
    from mvopt.cluster.units import ns_to_ps

    ps = ns_to_ps(ns)
    if ps is None:
        raise ConfigError(where, "must be a whole number of picoseconds", ns)
    return ps


def _explicit_graph(cfg: ExperimentConfig):
    """Kind ``tasks``: ids (default: list index) and ``after`` references to task indices."""
    from mvopt.engine.tasks import TaskGraphBuilder

    tasks = cfg.workload.tasks
    index = {(t.id if t.id is not None else i): i for i, t in enumerate(tasks)}
    b = TaskGraphBuilder()
    for i, t in enumerate(tasks):
        where = f"workload.tasks[{i}]"
        after = [index[a] for a in t.after]
        start = _ns_to_ps(t.start_ns, f"{where}.start_ns")
        if t.kind == "flow":
            b.flow(t.src, t.dst, t.bytes, after=after, start_ps=start, category="flow")
        else:
            b.delay(t.node, _ns_to_ps(t.duration_ns, f"{where}.duration_ns"), after=after, start_ps=start,
                    category="delay")
    return b.build()


def _chunk_gap_ps(cfg: ExperimentConfig, topo) -> int:
    """Spacing of the first ring step's chunks: channels x serialization of one chunk (payload +
    headers) at the slowest host NIC."""
    from mvopt.engine.params import ser_ps

    c = cfg.collective
    if c.chunk_bytes is None:
        return 0
    net = cfg.network
    wire = c.chunk_bytes + -(-c.chunk_bytes // net.payload_bytes) * net.header_bytes
    off = np.asarray(topo.node_port_offset, np.int64)
    rate = int(np.asarray(topo.port_rate_bps, np.int64)[off[:int(topo.n_host)]].min())
    return c.channels * ser_ps(wire, rate)


def build_tasks(cfg: ExperimentConfig, topo):
    """The task graph of ``cfg.workload`` on ``topo`` (validated against it)."""
    kind = cfg.workload.kind
    if kind in UNSUPPORTED_KINDS:
        raise MvoptError(f"workload kind {kind!r} is not yet supported by the simulator "
                         "(supported: tasks, collective, hpcc_flows)")
    if kind == "tasks":
        graph = _explicit_graph(cfg)
    elif kind == "collective":
        from mvopt.comm.collectives import add_collective_workload
        from mvopt.engine.tasks import TaskGraphBuilder

        builder = TaskGraphBuilder()
        add_collective_workload(builder, cfg.collective, int(topo.n_host), chunk_gap_ps=_chunk_gap_ps(cfg, topo))
        graph = builder.build()
    elif kind == "hpcc_flows":
        from mvopt.io.hpcc import flow_graph, read_hpcc_flows

        path = cfg.resolve_path(cfg.workload.file)
        graph = flow_graph(read_hpcc_flows(path), topo, path)
    else:  # pragma: no cover - the config's Literal lists every kind
        raise ConfigError("workload.kind", "is not a known workload kind", kind)
    graph.validate(int(topo.n_host))
    return graph


def build_experiment(cfg: ExperimentConfig, *, topology=None):
    """One engine :class:`~mvopt.engine.Experiment` from a validated configuration.

    ``topology`` (a CompiledTopology) skips building it from ``cfg.cluster`` when the caller has
    it already. Everything the engine derives from the configuration (routes, thresholds,
    base RTTs) is resolved here, so that errors surface before any simulation.
    """
    from mvopt.cluster import build_topology
    from mvopt.engine import Experiment

    topo = topology if topology is not None else build_topology(cfg.cluster, base_dir=cfg.base_dir)
    tasks = build_tasks(cfg, topo)
    limit = int(round(cfg.simulation.time_limit_ms * 10**9))
    exp = Experiment(topology=topo, network=cfg.network, tasks=tasks, seed=cfg.simulation.seed,
                     time_limit_ps=limit, name=cfg.name)
    exp.params  # resolve now: a missing route or a bad threshold is a configuration error
    return exp


def run(cfgs: Sequence[ExperimentConfig], backend: str = "cpu") -> list:
    """Build every configuration and simulate them as one batch; ExperimentResults in order."""
    from mvopt.engine import simulate

    experiments = [build_experiment(c) for c in cfgs]
    return simulate(experiments, backend=backend)


_STATUS = {"done": "ok", "stuck": "stuck", "timeout": "timeout"}


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


def evaluate(configs: Sequence[ExperimentConfig], backend: str = "cpu") -> list:
    """The optimizer's evaluator (see :class:`mvopt.optimize.evaluator.Evaluator`).

    A configuration that cannot be built (ConfigError, InfeasibleError, a bad input file)
    becomes ``Evaluation.infeasible(reason)`` without simulation; all others run in ONE
    :func:`~mvopt.engine.simulate` call. The iteration time of a non-training workload is its
    makespan in seconds; a stuck or timed-out experiment is feasible, with that status, its
    diagnostic as the reason and no time. Unsupported workload kinds (training, astra) raise
    MvoptError: that is a limitation of this evaluator, not of the configuration.
    """
    from mvopt.engine import simulate
    from mvopt.optimize.evaluator import Evaluation

    out: list = [None] * len(configs)
    todo: list[tuple[int, object]] = []
    for i, cfg in enumerate(configs):
        try:
            todo.append((i, build_experiment(cfg)))
        except (ConfigError, InfeasibleError, InputFileError) as e:
            out[i] = Evaluation.infeasible(str(e))
    if todo:
        t0 = time.perf_counter()
        results = simulate([e for _, e in todo], backend=backend)
        wall = time.perf_counter() - t0
        for (i, _), r in zip(todo, results):
            status = _STATUS.get(r.status, "stuck")
            stats = _sim_stats(r, wall, len(todo))
            if status == "ok":
                out[i] = Evaluation(feasible=True, iteration_time_s=r.makespan_s, status="ok",
                                    breakdown={"makespan": r.makespan_s}, sim_stats=stats)
            else:
                out[i] = Evaluation(feasible=True, reason=r.diagnostic or f"simulation {r.status}",
                                    status=status, sim_stats=stats)
    return out
