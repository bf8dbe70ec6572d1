"""The task graph of each workload kind, built from a configuration on its topology.

Kind ``tasks``: the explicit graph; ``collective``: the flows of :mod:`mvopt.comm.collectives`
(ring), :mod:`mvopt.comm.tree` or :mod:`mvopt.comm.hierarchical`; ``hpcc_flows``: an HPCC
flow.txt (:mod:`mvopt.io.hpcc`); ``training``: the per-rank graph of
:mod:`mvopt.workload.taskgraph`; ``astra``: an ASTRA-sim/SimAI workload (:mod:`mvopt.io.astra`);
``chakra``: Chakra execution traces (:mod:`mvopt.io.chakra`).
"""

from __future__ import annotations

import warnings

import numpy as np

from mvopt.config import ExperimentConfig
from mvopt.engine.params import ser_ps
from mvopt.engine.tasks import TaskGraph, TaskGraphBuilder
from mvopt.errors import ApproximationWarning, ConfigError

__all__ = ["build_tasks", "training_setup"]


def _ns_to_ps(ns: float, where: str) -> int:
    from mvopt.cluster.units import ns_to_ps

    ps = ns_to_ps(ns)
    if ps is None:
        raise ConfigError(where, "must be a whole number of picoseconds", ns)
    return ps


def _explicit_graph(cfg: ExperimentConfig):
    """Kind ``tasks``: ids (default: list index) and ``after`` references to task indices."""
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
    if par.ep > 1 and w.expert_skew > par.ep:
        raise ConfigError("workload.expert_skew", f"must be at most parallelism.ep ({par.ep}): the busiest EP "
                          "rank receives at most all routed tokens", w.expert_skew)
    check_memory(model, par, gpu, precision=w.precision, flash_attention=w.flash_attention, dropout=w.dropout,
                 reserve_bytes=reserve, expert_skew=w.expert_skew)
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
        step_latency_s=_step_latency_s(topo), chunk_gap_ps=_chunk_gap_ps(cfg, topo), wire_factor=_wire_factor(cfg),
        expert_skew=w.expert_skew, stragglers=w.stragglers)


def _wire_factor(cfg: ExperimentConfig) -> float:
    """Wire bytes per payload byte of the network's packets."""
    net = cfg.network
    return (net.payload_bytes + net.header_bytes) / net.payload_bytes


def _collective_graph(cfg: ExperimentConfig, topo):
    """Kind ``collective``: ring (existing), tree, or hierarchical over the listed hosts' GPUs."""
    from mvopt.comm.collectives import add_collective_workload
    c = cfg.collective
    builder = TaskGraphBuilder()
    gap = _chunk_gap_ps(cfg, topo)
    if c.op == "all_to_all" and (c.all_to_all != "concurrent" or c.hierarchical):
        return _all_to_all_graph(cfg, topo)
    if c.algorithm == "ring" and not c.hierarchical:
        add_collective_workload(builder, c, int(topo.n_host), chunk_gap_ps=gap)
        return builder.build()
    from mvopt.comm.hierarchical import add_group_collective, add_network_collective

    n_host = int(topo.n_host)
    hosts = list(range(n_host)) if c.hosts is None else [int(h) for h in c.hosts]
    for i, h in enumerate(hosts):
        if not 0 <= h < n_host:
            raise ConfigError(f"collective.hosts[{i}]", f"must be a host id in 0..{n_host - 1}", h)
    if len(hosts) < 2:
        raise ConfigError("collective.hosts", "must list at least 2 hosts", hosts)
    if len(set(hosts)) != len(hosts):
        raise ConfigError("collective.hosts", "must not list a host twice", hosts)
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


def _all_to_all_graph(cfg: ExperimentConfig, topo):
    """Kind ``collective``, op ``all_to_all`` with the pairwise or hierarchical algorithm over the
    listed hosts (one member each), or with ``hierarchical: true`` any algorithm over every GPU of
    those hosts (NVLink between GPUs of a server, as the training graph's MoE exchanges; one
    host is enough when it holds several GPUs)."""
    from mvopt.comm.alltoall import add_all_to_all, even_matrix
    from mvopt.workload import get_gpu

    c = cfg.collective
    n_host = int(topo.n_host)
    hosts = list(range(n_host)) if c.hosts is None else [int(h) for h in c.hosts]
    for i, h in enumerate(hosts):
        if not 0 <= h < n_host:
            raise ConfigError(f"collective.hosts[{i}]", f"must be a host id in 0..{n_host - 1}", h)
    if len(set(hosts)) != len(hosts):
        raise ConfigError("collective.hosts", "must not list a host twice", hosts)
    if c.hierarchical:
        gpu_host = np.asarray(topo.gpu_host)
        gps = int(topo.gpus_per_server)
        gpus = sorted(int(g) for g in np.nonzero(np.isin(gpu_host, hosts))[0])
        members, servers = [int(gpu_host[g]) for g in gpus], [g // gps for g in gpus]
    else:
        members, servers = hosts, list(range(len(hosts)))
    if len(members) < 2:
        raise ConfigError("collective.hosts", "must list at least 2 hosts, or with hierarchical: true hosts "
                          "holding at least 2 GPUs", hosts)
    if c.bytes < len(members):
        raise ConfigError("collective.bytes", f"must be at least the ranks ({len(members)}) so that every "
                          "block carries a byte", c.bytes)
    builder = TaskGraphBuilder()
    add_all_to_all(builder, members, servers, even_matrix(len(members), c.bytes), algorithm=c.all_to_all,
                   intra=_intra_fn(cfg, get_gpu(cfg.cluster.gpu)), category="all_to_all")
    return builder.build()


def _astra_graph(cfg: ExperimentConfig, topo):
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


def _chakra_graph(cfg: ExperimentConfig, topo):
    from mvopt.io.chakra import chakra_graph, read_chakra
    from mvopt.workload import DEFAULT_EFFICIENCY, get_gpu

    w = cfg.workload
    trace = read_chakra(cfg.resolve_path(w.file), cfg.resolve_path(w.comm_groups) if w.comm_groups else None)
    gpu = get_gpu(cfg.cluster.gpu)
    gemm_rate = gpu.peak_bf16_flops * gpu.matmul_efficiency * DEFAULT_EFFICIENCY.gemm_fraction
    b = TaskGraphBuilder()
    chakra_graph(b, trace, gpu_host=np.asarray(topo.gpu_host), gpus_per_server=int(topo.gpus_per_server),
                 intra=_intra_fn(cfg, gpu), flop_s=lambda flops: flops / gemm_rate, iterations=w.iterations,
                 collective=cfg.collective, nic_bytes_per_s=_nic_bytes_per_s(topo), step_latency_s=_step_latency_s(topo),
                 chunk_gap_ps=_chunk_gap_ps(cfg, topo), wire_factor=_wire_factor(cfg))
    return b.build()


def build_tasks(cfg: ExperimentConfig, topo, *, plan_out: list | None = None):
    """The task graph of ``cfg.workload`` on ``topo`` (validated against it). For kind
    ``training`` the training plan is appended to ``plan_out`` when given."""
    kind = cfg.workload.kind
    if kind == "tasks":
        graph = _explicit_graph(cfg)
    elif kind == "collective":
        graph = _collective_graph(cfg, topo)
    elif kind == "hpcc_flows":
        from mvopt.io.hpcc import add_hpcc_flows, read_hpcc_flows

        path = cfg.resolve_path(cfg.workload.file)
        builder = TaskGraphBuilder()
        add_hpcc_flows(builder, read_hpcc_flows(path), topo, path)
        graph = builder.build()
    elif kind == "training":
        from mvopt.workload.taskgraph import build_training

        plan = build_training(training_setup(cfg, topo))
        graph = TaskGraph(**plan.columns)
        if plan_out is not None:
            plan_out.append(plan)
        return graph     # built by construction: ids, hosts and acyclicity hold
    elif kind == "astra":
        graph = _astra_graph(cfg, topo)
    elif kind == "chakra":
        graph = _chakra_graph(cfg, topo)
    else:  # pragma: no cover - the config's Literal lists every kind
        raise ConfigError("workload.kind", "is not a known workload kind", kind)
    graph.validate(int(topo.n_host))
    return graph
