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
  :mod:`mvopt.comm.collectives` (ring), :mod:`mvopt.comm.tree` or :mod:`mvopt.comm.hierarchical`;
  ``hpcc_flows``: an HPCC flow.txt; ``training``: the per-rank graph of
  :mod:`mvopt.workload.taskgraph`; ``astra``: an ASTRA-sim/SimAI workload, :mod:`mvopt.io.astra`),
  the engine settings from ``network`` and ``simulation``. Invalid input raises ConfigError /
  InputFileError, an invalid parallel layout or a configuration that does not fit in GPU memory
  InfeasibleError, all before any simulation. :func:`build` also returns the training plan
  that :func:`training_report` turns into an iteration time, its breakdown, MFU and memory.
* :func:`run` — build every configuration and simulate them as one SPME batch.
* :func:`evaluate` — the optimizer's interface (:mod:`mvopt.optimize.evaluator`): configurations
  that cannot be built become infeasible evaluations at no simulation cost, all the others run
  in one batch; the objective of a training workload is its iteration time (with the breakdown
  compute / tp_comm / pp_comm / dp_comm / bubble, and MFU and peak memory in ``sim_stats``), of any
  other workload its makespan in seconds.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass
from typing import TYPE_CHECKING, Sequence

import numpy as np

from mvopt.config import ExperimentConfig
from mvopt.errors import ApproximationWarning, ConfigError, InfeasibleError, InputFileError, MvoptError

if TYPE_CHECKING:
    from mvopt.engine.progress import ProgressFn

__all__ = ["build_experiment", "build", "Built", "build_tasks", "run", "evaluate", "training_setup",
           "training_report", "UNSUPPORTED_KINDS"]

UNSUPPORTED_KINDS: tuple[str, ...] = ()
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


def _nic_bytes_per_s(topo) -> float:
    off = np.asarray(topo.node_port_offset, np.int64)
    return float(np.asarray(topo.port_rate_bps, np.int64)[off[:int(topo.n_host)]].min()) / 8


def _step_latency_s(topo) -> float:
    """One-way latency of a longest shortest path (closed-form estimates only)."""
    return max(1, int(topo.diameter_hops)) * float(np.asarray(topo.port_delay_ps).max()) / 1e12


def _intra_model(cfg: ExperimentConfig):
    from mvopt.comm.intra import IntraServerModel, default_model, load_params

    path = cfg.workload.intra_server_params
    return IntraServerModel(load_params(cfg.resolve_path(path))) if path else default_model()


def _intra_fn(cfg: ExperimentConfig, gpu):
    model = _intra_model(cfg)

    def fn(op: str, nbytes: float, gpus: int) -> float:
        return 0.0 if gpus < 2 or nbytes <= 0 else float(model.time_s(op, nbytes, gpu=gpu, gpus=gpus))
    return fn


def training_setup(cfg: ExperimentConfig, topo):
    """The :class:`~mvopt.workload.taskgraph.TrainingSetup` of a ``training`` configuration.

    Checks, before anything is built: the model exists, the layout is valid for the model and
    the cluster (InfeasibleError with every reason), and every pipeline stage fits in GPU
    memory (InfeasibleError with the peak and the capacity).
    """
    from mvopt.workload import ComputeModel, OperatorTrace, check_layout, check_memory, get_gpu, get_model
    from mvopt.workload.taskgraph import TrainingSetup

    w = cfg.workload
    model = get_model(w.model, path="workload.model")
    if w.seq_len is not None:
        model = model.with_seq_len(w.seq_len)
    gpu = get_gpu(cfg.cluster.gpu)
    par = cfg.parallelism
    check_layout(model, par, gpus_per_server=int(topo.gpus_per_server), gpus=int(topo.n_gpu))
    reserve = w.memory_reserve_gib * 2**30
    check_memory(model, par, gpu, precision=w.precision, flash_attention=w.flash_attention, dropout=w.dropout,
                 reserve_bytes=reserve)
    trace = OperatorTrace.read(cfg.resolve_path(w.operator_trace)) if w.operator_trace else None
    cl = cfg.cluster
    rail_zero_only = cl.topology == "rail_optimized" and cl.resolved_nics_per_server < cl.gpus_per_server
    if rail_zero_only and not w.rail_sample:
        raise ConfigError("cluster.nics_per_server", "1 describes rail 0 of the rail-optimised fabric alone, "
                          "which carries only the GPUs of local index 0: set workload.rail_sample: true, or "
                          f"nics_per_server: {cl.gpus_per_server} for the whole fabric", cl.nics_per_server)
    if w.rail_sample and cl.topology == "rail_optimized" and cl.tiers == 3 and cl.gpus_per_server > 1:
        warnings.warn("workload.rail_sample on a 3-tier rail_optimized cluster is approximate: pod spines "
                      "and cores carry every rail, so the other rails' traffic that shares them is not "
                      "simulated (exact on 2 tiers)", ApproximationWarning,
                      stacklevel=2)
    return TrainingSetup(
        model=model, par=par, gpu=gpu, compute=ComputeModel(gpu, trace=trace), intra=_intra_model(cfg),
        gpus_per_server=int(topo.gpus_per_server), gpu_host=np.asarray(topo.gpu_host), collective=cfg.collective,
        precision=w.precision, flash_attention=w.flash_attention, dropout=w.dropout, reserve_bytes=reserve,
        iterations=w.iterations, rail_sample=w.rail_sample, nic_bytes_per_s=_nic_bytes_per_s(topo),
        step_latency_s=_step_latency_s(topo), chunk_gap_ps=_chunk_gap_ps(cfg, topo), wire_factor=_wire_factor(cfg))


def _wire_factor(cfg: ExperimentConfig) -> float:
    """Wire bytes per payload byte of the network's packets."""
    net = cfg.network
    return (net.payload_bytes + net.header_bytes) / net.payload_bytes


def _collective_graph(cfg: ExperimentConfig, topo):
    """Kind ``collective``: ring (existing), tree, or hierarchical over the listed hosts' GPUs."""
    from mvopt.comm.collectives import add_collective_workload
    from mvopt.engine.tasks import TaskGraphBuilder

    c = cfg.collective
    builder = TaskGraphBuilder()
    gap = _chunk_gap_ps(cfg, topo)
    if c.algorithm == "ring" and not c.hierarchical:
        add_collective_workload(builder, c, int(topo.n_host), chunk_gap_ps=gap)
        return builder.build()
    from mvopt.comm.hierarchical import add_group_collective, add_network_collective
    from mvopt.errors import ConfigError as _CE

    n_host = int(topo.n_host)
    hosts = list(range(n_host)) if c.hosts is None else [int(h) for h in c.hosts]
    for i, h in enumerate(hosts):
        if not 0 <= h < n_host:
            raise _CE(f"collective.hosts[{i}]", f"must be a host id in 0..{n_host - 1}", h)
    if len(hosts) < 2:
        raise _CE("collective.hosts", "must list at least 2 hosts", hosts)
    if len(set(hosts)) != len(hosts):
        raise _CE("collective.hosts", "must not list a host twice", hosts)
    kw = dict(algorithm=c.algorithm, channels=c.channels, chunk_bytes=c.chunk_bytes, chunk_gap_ps=gap,
              category=c.op, nic_bytes_per_s=_nic_bytes_per_s(topo), step_latency_s=_step_latency_s(topo))
    if not c.hierarchical:
        add_network_collective(builder, c.op, hosts, c.bytes, **kw)
        return builder.build()
    gpu_host = np.asarray(topo.gpu_host)
    gps = int(topo.gpus_per_server)
    order = {h: i for i, h in enumerate(hosts)}
    gpus = sorted((int(g) for g in np.nonzero(np.isin(gpu_host, hosts))[0]),
                  key=lambda g: (order[int(gpu_host[g])], g))
    gpus = sorted(gpus, key=lambda g: (g // gps, g))
    from mvopt.workload import get_gpu
    add_group_collective(builder, c.op, [int(gpu_host[g]) for g in gpus], [g // gps for g in gpus], c.bytes,
                         intra=_intra_fn(cfg, get_gpu(cfg.cluster.gpu)), hierarchical=True, **kw)
    return builder.build()


def _astra_graph(cfg: ExperimentConfig, topo):
    from mvopt.engine.tasks import TaskGraphBuilder
    from mvopt.io.astra import astra_graph, read_astra
    from mvopt.workload import get_gpu

    path = cfg.resolve_path(cfg.workload.file)
    w = read_astra(path)
    b = TaskGraphBuilder()
    astra_graph(b, w, gpu_host=np.asarray(topo.gpu_host), gpus_per_server=int(topo.gpus_per_server),
                intra=_intra_fn(cfg, get_gpu(cfg.cluster.gpu)), iterations=cfg.workload.iterations,
                collective=cfg.collective, nic_bytes_per_s=_nic_bytes_per_s(topo),
                step_latency_s=_step_latency_s(topo), chunk_gap_ps=_chunk_gap_ps(cfg, topo),
                wire_factor=_wire_factor(cfg), file=path)
    return b.build()


def build_tasks(cfg: ExperimentConfig, topo, *, plan_out: list | None = None):
    """The task graph of ``cfg.workload`` on ``topo`` (validated against it). For kind
    ``training`` the training plan is appended to ``plan_out`` when given."""
    kind = cfg.workload.kind
    if kind in UNSUPPORTED_KINDS:
        raise MvoptError(f"workload kind {kind!r} is not yet supported by the simulator")
    if kind == "tasks":
        graph = _explicit_graph(cfg)
    elif kind == "collective":
        graph = _collective_graph(cfg, topo)
    elif kind == "hpcc_flows":
        from mvopt.io.hpcc import flow_graph, read_hpcc_flows

        path = cfg.resolve_path(cfg.workload.file)
        graph = flow_graph(read_hpcc_flows(path), topo, path)
    elif kind == "training":
        from mvopt.engine.tasks import TaskGraph
        from mvopt.workload.taskgraph import build_training

        plan = build_training(training_setup(cfg, topo))
        graph = TaskGraph(**plan.columns)
        if plan_out is not None:
            plan_out.append(plan)
        return graph     # built by construction: ids, hosts and acyclicity hold
    elif kind == "astra":
        graph = _astra_graph(cfg, topo)
    else:  # pragma: no cover - the config's Literal lists every kind
        raise ConfigError("workload.kind", "is not a known workload kind", kind)
    graph.validate(int(topo.n_host))
    return graph


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


def run(cfgs: Sequence[ExperimentConfig], backend: str = "cpu") -> list:
    """Build every configuration and simulate them as one batch; ExperimentResults in order."""
    from mvopt.engine import simulate

    experiments = [build_experiment(c) for c in cfgs]
    return simulate(experiments, backend=backend)


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
    """The optimizer's evaluator (see :class:`mvopt.optimize.evaluator.Evaluator`).

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
    from mvopt.engine import simulate
    from mvopt.optimize.evaluator import Evaluation

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
        results = simulate([b.experiment for _, b in todo], backend=backend, progress=progress, report=report)
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


# Building an experiment is Python and numpy on one core (topology, routes, task graph): for a
# GPU generation of 1,000 configurations it takes minutes on one core while the simulation takes
# seconds. From this many configurations on, they are built in worker processes.
PARALLEL_BUILD_MIN = 16


def _build_pool_size() -> int | None:
    """$MVOPT_BUILD_WORKERS (1 = build in this process), else None (one per core)."""
    import os
    env = os.environ.get("MVOPT_BUILD_WORKERS", "")
    if not env:
        return None
    if not env.isdigit() or int(env) < 1:
        raise ConfigError("MVOPT_BUILD_WORKERS", "must be a whole number >= 1", env)
    return int(env)


def build_workers(n_configs: int) -> int:
    """Processes that build `n_configs` configurations: $MVOPT_BUILD_WORKERS if set (1 = build in
    this process), else one per usable core when there are at least PARALLEL_BUILD_MIN of them."""
    from mvopt.procpool import usable_cores
    size = _build_pool_size()
    n = size if size is not None else usable_cores() if n_configs >= PARALLEL_BUILD_MIN else 1
    return max(1, min(n, n_configs))


def _build_outcome(cfg: ExperimentConfig) -> tuple:
    """(Built, None, 0) or (None, reason, violation) for a configuration that cannot be built
    (invalid layout, does not fit in GPU memory, a bad input file); other errors propagate."""
    try:
        return build(cfg), None, 0.0
    except InfeasibleError as e:
        return None, str(e), _violation(cfg, e)
    except (ConfigError, InputFileError) as e:
        return None, str(e), 1.0


def build_all(configs: Sequence[ExperimentConfig]) -> list[tuple]:
    """:func:`_build_outcome` of every configuration, in order, in parallel worker processes
    (kept between calls) when there are many (:func:`build_workers`). The result does not depend
    on how many processes built it."""
    n = build_workers(len(configs))
    if n == 1:
        return [_build_outcome(c) for c in configs]
    from concurrent.futures.process import BrokenProcessPool

    from mvopt.procpool import drop_pool, get_pool, usable_cores
    from mvopt.shmtransfer import sweep_stale, unpack_all
    size = _build_pool_size() or usable_cores()     # one pool for every generation, whatever its size
    sweep_stale()
    try:
        # the experiments come back through shared memory (mvopt/shmtransfer.py), not the pipe
        return unpack_all(get_pool("build", size).map(_build_outcome_packed, configs,
                                                      chunksize=max(1, len(configs) // (4 * n))))
    except BrokenProcessPool:
        drop_pool("build", size)   # a worker died (killed, out of memory): the next call starts fresh ones
        raise


def _build_outcome_packed(cfg: ExperimentConfig):
    """:func:`_build_outcome` in a worker process, packed for the main one."""
    from mvopt.shmtransfer import pack
    return pack(_build_outcome(cfg))


def _violation(cfg: ExperimentConfig, err: Exception) -> float:
    """peak / capacity - 1 for a training configuration that does not fit, else 1."""
    if cfg.workload.kind != "training" or "GPU memory" not in str(err):
        return 1.0
    try:
        from mvopt.workload import get_gpu, get_model, peak_memory

        w = cfg.workload
        model = get_model(w.model)
        if w.seq_len is not None:
            model = model.with_seq_len(w.seq_len)
        pk = peak_memory(model, cfg.parallelism, get_gpu(cfg.cluster.gpu), precision=w.precision,
                         flash_attention=w.flash_attention, dropout=w.dropout,
                         reserve_bytes=w.memory_reserve_gib * 2**30)
        return max(pk.total_bytes / pk.capacity_bytes - 1.0, 1e-9)
    except Exception:   # noqa: BLE001 - the violation is advisory
        return 1.0
