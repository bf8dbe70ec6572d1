"""Many experiments as one set of flat arrays: tasks, flows, their paths, links.

Rows of one experiment are contiguous and concatenated in input order; ids are global (offset by
the experiment's first row), and everything that must not depend on the batch (paths, hashes)
is computed per experiment beforehand, so that an experiment's result never depends on what
else is in its batch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from mvopt.engine.params import Experiment, PS_PER_S
from mvopt.engine.tasks import FLOW
from mvopt.errors import ConfigError
from mvopt.flow.paths import WEIGHT_ONE, flow_paths

__all__ = ["FlowBatch", "build_flow_batch", "check_experiment", "RATE_UNIT_BPS"]

# rates are integers in this unit (kb/s): every common link rate is a whole number of them, and a
# link's load in units x WEIGHT_ONE stays below 2**53 for links up to 12 Tb/s (xp.segment_sum)
RATE_UNIT_BPS = 1000
MAX_LINK_BPS = (2**53 // WEIGHT_ONE) * RATE_UNIT_BPS


@dataclass
class FlowBatch:
    """The batch's columns (NumPy; the simulator moves them to its array module)."""

    experiments: list[Experiment]
    exp_task_lo: np.ndarray     # int64[E+1]: tasks of experiment e are [lo[e], lo[e+1])
    exp_flow_lo: np.ndarray     # int64[E+1]
    exp_port_lo: np.ndarray     # int64[E+1]
    exp_limit_ps: np.ndarray    # int64[E]: simulated-time limit
    task_exp: np.ndarray        # int64: experiment of each task
    task_is_flow: np.ndarray    # bool
    task_duration_ps: np.ndarray  # int64 (delays)
    task_min_ps: np.ndarray     # int64: earliest start
    task_npred: np.ndarray      # int64: predecessors
    task_flow: np.ndarray       # int64: flow row of a flow task, else -1
    succ_offset: np.ndarray     # int64[T+1]: successors of task t are succ[succ_offset[t]:succ_offset[t+1]]
    succ: np.ndarray            # int64: successor task (global)
    succ_notify_ps: np.ndarray  # int64: 0 when it starts where its predecessor finishes, else the window
    flow_task: np.ndarray       # int64: task of each flow (global)
    flow_exp: np.ndarray        # int64
    flow_bits: np.ndarray       # float64: wire bits (payload and every packet's header)
    flow_latency_ps: np.ndarray  # int64: added to the fluid transfer (docs: per-hop latency)
    flow_ack_ps: np.ndarray     # int64: the last ACK's way back (for flow completion times)
    path_offset: np.ndarray     # int64[F+1]: path entries of flow f
    path_port: np.ndarray       # int64: global port of each entry
    path_weight: np.ndarray     # int64: share of the flow's rate, of WEIGHT_ONE
    path_is_data: np.ndarray    # bool: a data entry (else the flow's ACKs on its way back)
    port_cap: np.ndarray        # int64: capacity in RATE_UNIT_BPS x WEIGHT_ONE

    @property
    def n_exp(self) -> int:
        return len(self.experiments)


def check_experiment(exp: Experiment) -> None:
    """ConfigError naming the setting of `exp` that the flow level cannot run, if any."""
    if exp.queue_monitor_ps:
        raise ConfigError("simulation.queue_monitor_ns", "must be 0 with simulation.fidelity: flow (the flow "
                          "level has no queues to sample)", exp.queue_monitor_ps / 1000)
    down = getattr(exp.topology, "link_down", ())
    if down:
        raise ConfigError("cluster.link_down", "must be empty with simulation.fidelity: flow (the flow level "
                          "has no packets to lose and routes fixed for the run; failed_links removes a link "
                          "for the whole run at either level)", [at / 1000 for at, _, _ in down])
    rate = np.asarray(exp.topology.port_rate_bps, np.int64)
    if rate.size and int(rate.max()) > MAX_LINK_BPS:
        raise ConfigError("cluster.link_gbps", f"must be at most {MAX_LINK_BPS / 1e9:g} Gb/s with "
                          "simulation.fidelity: flow", int(rate.max()) / 1e9)


def _experiment_columns(exp: Experiment) -> dict[str, np.ndarray]:
    """One experiment's columns with local ids."""
    from mvopt.flow.compiled import flow_latency, successors      # (compiled imports this module)

    check_experiment(exp)
    g, topo, p = exp.tasks, exp.topology, exp.params
    n = g.n
    flows = np.flatnonzero(g.kind == FLOW)
    succ_offset, succ, succ_notify_ps = successors(g, p.window_ps)
    task_flow = np.full(n, -1, np.int64)
    task_flow[flows] = np.arange(flows.size)
    paths = flow_paths(exp)
    rate = np.asarray(topo.port_rate_bps, np.int64)
    delay = np.asarray(topo.port_delay_ps, np.int64)
    size = g.size_bytes[flows].astype(np.int64)
    # latency: every hop's propagation, and one full packet's serialisation on every hop but the
    # bottleneck's, whose serialisation of every byte is the fluid transfer itself (exact for a
    # lone flow at line rate: the last packet waits for the full one ahead of it at every hop);
    # the last ACK's way back: propagation and its serialisation on every hop
    first_wire = np.minimum(size, p.payload) + p.header          # a full packet (or the only one)
    ack_hop = delay - (-(p.ack_bytes * 8 * PS_PER_S) // rate)
    latency, ack = flow_latency(paths, first_wire, rate, delay, ack_hop)
    return {
        # (the task graph's own arrays where they are int64 already: the batch only reads them)
        "task_is_flow": g.kind == FLOW, "task_duration_ps": np.asarray(g.duration_ps, np.int64),
        "task_min_ps": np.asarray(g.start_ps, np.int64), "task_npred": np.diff(np.asarray(g.pred_offset, np.int64)),
        "task_flow": task_flow, "succ_offset": succ_offset, "succ": succ, "succ_notify_ps": succ_notify_ps,
        "flow_task": flows.astype(np.int64),
        "flow_bits": ((size + p.flow_npkt[flows] * p.header) * 8).astype(np.float64),
        "flow_latency_ps": latency, "flow_ack_ps": ack,
        "path_offset": paths.offset, "path_port": paths.port, "path_weight": paths.weight,
        "path_is_data": paths.is_data,
        "port_cap": rate // RATE_UNIT_BPS * WEIGHT_ONE,
    }


def build_flow_batch(experiments: Sequence[Experiment]) -> FlowBatch:
    """The batch of `experiments` (ConfigError for one the flow level cannot run)."""
    parts = [_experiment_columns(e) for e in experiments]
    E = len(parts)
    n_task = np.asarray([p["task_is_flow"].size for p in parts], np.int64)
    n_flow = np.asarray([p["flow_task"].size for p in parts], np.int64)
    n_port = np.asarray([p["port_cap"].size for p in parts], np.int64)
    lo = {k: np.concatenate([[0], np.cumsum(v)]).astype(np.int64) for k, v in
          (("task", n_task), ("flow", n_flow), ("port", n_port))}

    def cat(key: str, shift: str | None = None) -> np.ndarray:
        """Column `key` of every experiment; ids >= 0 of kind `shift` made global."""
        cols = [p[key] if shift is None or lo[shift][i] == 0 else np.where(p[key] >= 0, p[key] + lo[shift][i], p[key])
                for i, p in enumerate(parts)]
        if len(cols) == 1:
            return cols[0]          # (each experiment's columns are its own arrays)
        return np.concatenate(cols) if cols else np.zeros(0, np.int64)

    def csr(offset_key: str) -> np.ndarray:
        ends = np.cumsum([int(p[offset_key][-1]) for p in parts]) if parts else np.zeros(0, np.int64)
        starts = np.concatenate([[0], ends[:-1]]).astype(np.int64) if parts else np.zeros(0, np.int64)
        cols = [p[offset_key][:-1] + s for p, s in zip(parts, starts)]
        return np.concatenate(cols + [np.asarray([ends[-1] if parts else 0], np.int64)])

    return FlowBatch(
        experiments=list(experiments),
        exp_task_lo=lo["task"], exp_flow_lo=lo["flow"], exp_port_lo=lo["port"],
        exp_limit_ps=np.asarray([e.time_limit_ps for e in experiments], np.int64),
        task_exp=np.repeat(np.arange(E), n_task), task_is_flow=cat("task_is_flow").astype(bool, copy=False),
        task_duration_ps=cat("task_duration_ps"), task_min_ps=cat("task_min_ps"), task_npred=cat("task_npred"),
        task_flow=cat("task_flow", "flow"), succ_offset=csr("succ_offset"), succ=cat("succ", "task"),
        succ_notify_ps=cat("succ_notify_ps"), flow_task=cat("flow_task", "task"),
        flow_exp=np.repeat(np.arange(E), n_flow), flow_bits=cat("flow_bits").astype(np.float64, copy=False),
        flow_latency_ps=cat("flow_latency_ps"), flow_ack_ps=cat("flow_ack_ps"),
        path_offset=csr("path_offset"), path_port=cat("path_port", "port"), path_weight=cat("path_weight"),
        path_is_data=cat("path_is_data").astype(bool, copy=False),
        port_cap=cat("port_cap"),
    )
