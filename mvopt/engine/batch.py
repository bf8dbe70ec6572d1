"""Turn a list of experiments into one columnar SPME batch, and batch state back into results.

Every experiment's rows (nodes, ports, tasks, route ranges, packet slots) are contiguous and
concatenated in input order; ids inside the kernels are global, and what must not depend on
the batch (hash inputs) uses the experiment-local ids kept in ``*_local`` columns.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Callable, Iterable, NamedTuple, Sequence

import numpy as np

from mvopt.engine import routes, schema
from mvopt.errors import ConfigError
from mvopt.engine.capacity import node_pool_slots, pools_compact, port_ring_capacities
from mvopt.engine.params import TAG_ECMP, TAG_ECN, TAG_SPRAY, Experiment, ResolvedParams, hash_prefixes
from mvopt.engine.results import COUNTERS, ExperimentResult, monitor_fields
from mvopt.engine.sizing import (batch_route_counts, dependency_ends, experiment_counts, link_rows, monitor_rows,
                                 scratch_nbytes, scratch_words)
from mvopt.engine.tasks import DELAY, FLOW
from mvopt.engine.threads import experiment_threads, thread_map

__all__ = ["Batch", "build_batch", "extract_results", "gpu_report_columns", "node_packets_sent", "port_packets_sent", "scratch_arrays", "RESULT_COLUMNS", "STATE_COLUMNS",
           "INF_PS", "STATUS", "ST_RUN", "ST_CAPACITY", "ST_CANCELLED", "Steer"]

INF_PS = 0x3FFFFFFFFFFFFFFF
# "capacity": the experiment ran out of its compact packet slots and must run again with full
# ones (mvopt.engine.capacity); run_share does that, so users never see this status. "cancelled":
# a backend's `steer` stopped it because another backend already has its result (engine/race.py).
STATUS = {0: "running", 1: "done", 2: "stuck", 3: "timeout", 4: "error", 5: "capacity", 6: "cancelled"}
ST_RUN, ST_CAPACITY, ST_CANCELLED = 0, 5, 6
# called by a backend between launches with the batch's statuses (a host copy): the experiments
# (batch indices) to cancel
Steer = Callable[[np.ndarray], Iterable[int]]

# node_hash's words (schema.HT): the hash tags in that order
HASH_TAGS = tuple({"ecn": TAG_ECN, "ecmp": TAG_ECMP, "spray": TAG_SPRAY}[k] for k in sorted(schema.HT, key=schema.HT.get))
class Span(NamedTuple):
    """An experiment's rows in a batch: nodes, ports, tasks and flows [lo, hi)."""
    node_lo: int
    node_hi: int
    port_lo: int
    port_hi: int
    task_lo: int
    task_hi: int
    flow_lo: int
    flow_hi: int


@dataclass
class Batch:
    """The batch: counts and one numpy array per column of :mod:`mvopt.engine.schema`."""

    counts: dict[str, int]
    cols: dict[str, np.ndarray]
    experiments: list[Experiment]
    spans: list[Span]                # per experiment: its rows of nodes, ports, tasks and flows
    # columns that are zero in every row when built: a GPU sets them in place instead of copying
    # them (for 128-GPU clusters more than half of the bytes)
    zero_columns: frozenset[str] = frozenset()
    # per experiment: whether it runs with compact packet slots (mvopt.engine.capacity)
    compact: tuple[bool, ...] = ()
    # the scratch columns (packets in flight) of a run stopped early (max_iters, a deadline) with
    # experiments still running: the next run of the batch, on either backend, continues from
    # them (and from the state columns, which the backends leave in `cols`). None otherwise.
    scratch: dict[str, np.ndarray] | None = None
    # the GPU's report columns do not follow the state (a CPU run, which does not keep them,
    # changed it last): a GPU continuing the batch derives them (gpu_report_columns)
    gpu_reports_stale: bool = False

    @property
    def nbytes(self) -> int:
        """Bytes the kernels work on: the columns plus the scratch packet slots."""
        return sum(a.nbytes for a in self.cols.values()) + scratch_nbytes(self.counts)


def _exp_ints(exp: Experiment, p: ResolvedParams, mon_qlo: int = -1, mon_wlo: int = -1,
              compact_pools: bool = False, down: Sequence[Sequence[int]] = ()) -> list[int]:
    """The experiment's exp_i row; ``down``: its links going down, each as the DOWN slots say
    (the ports relative to the experiment's first)."""
    n_port = int(np.asarray(exp.topology.node_port_offset)[-1])
    v = {"mon_ps": exp.queue_monitor_ps, "mon_cap": exp.monitor_max_samples, "mon_nport": n_port,
         "mon_qlo": mon_qlo, "mon_wlo": mon_wlo,
         "seed": exp.seed, "cc": p.cc, "spray": p.lb, "transport": p.transport, "pfc": int(p.pfc), "ecn": int(p.ecn),
         "payload": p.payload, "header": p.header, "ack": p.ack_bytes, "pfc_frame": p.pfc_frame_bytes,
         "nack_ps": p.nack_interval_ps, "rto_ps": p.rto_ps, "reserve": p.sw_reserve,
         "resume": p.resume_offset, "varwin": int(p.var_win), "dcqcn_f": p.dcqcn_f,
         "hpcc_stage": p.hpcc_max_stage, "dcqcn_clamp": int(p.dcqcn_clamp), "compact_pools": int(compact_pools),
         "timely_hai_n": p.timely_hai_n, "flowlet_ps": p.flowlet_ps,
         "acks": schema.ACKS["switch_data"] * p.switch_ack_data + schema.ACKS["host_pause"] * p.pause_host_acks,
         "down_n": len(down), "down": 0}
    row = [int(v[k]) for k in schema.EI] + [0] * (schema.NEXP_I - len(schema.EI))
    at = schema.EI.index("down")
    for k, d in enumerate(down):
        row[at + k * schema.NDOWN:at + (k + 1) * schema.NDOWN] = [int(x) for x in d]
    return row


def _exp_doubles(p: ResolvedParams) -> list[float]:
    """The experiment's exp_d row: each slot of schema.ED is the resolved parameter of its name."""
    return [float(getattr(p, k)) for k in schema.ED] + [0.0] * (schema.NEXP_D - len(schema.ED))


def _place_slots(sizes: list[tuple[np.ndarray, np.ndarray, bool]]):
    """Packet-slot layout: each experiment's rings, then its node pools, contiguously; HPCC
    experiments first, so that INT records (MAX_INT_HOPS per slot, only HPCC reads them) are
    allocated for their slots alone. Returns per-experiment ring and pool first slots, the slot
    count, and the number of slots that carry INT records."""
    order = sorted(range(len(sizes)), key=lambda i: not sizes[i][2])     # stable: HPCC first
    base = np.zeros(len(sizes), np.int64)
    n_slot = n_int_slots = 0
    for i in order:
        base[i] = n_slot
        n_slot += int(sizes[i][0].sum() + sizes[i][1].sum())
        if sizes[i][2]:
            n_int_slots = n_slot
    ring_lo, pool_lo = [], []
    for i, (cap, pools, _) in enumerate(sizes):
        ring_lo.append(base[i] + np.concatenate([[0], np.cumsum(cap)[:-1]]).astype(np.int64))
        pool_lo.append(base[i] + int(cap.sum()) + np.concatenate([[0], np.cumsum(pools)[:-1]]).astype(np.int64))
    return ring_lo, pool_lo, n_slot, n_int_slots


def _csr(groups: np.ndarray, n_groups: int, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Stable CSR of `values` grouped by `groups` (offsets length n_groups + 1)."""
    order = np.argsort(groups, kind="stable")
    off = np.zeros(n_groups + 1, np.int64)
    np.cumsum(np.bincount(groups, minlength=n_groups), out=off[1:])
    return off, values[order]


class _ColumnWriter:
    """The batch's columns, written part by part. Each column is allocated once, at its final size
    (`rows`: the experiments' exact counts), and each part is copied to its place as it is made,
    in any order of the experiments, so that the host holds the batch plus the parts being made
    (before, every part was kept until the end and then concatenated: twice the memory traffic and
    page faults). A column starts zeroed and untouched (calloc: the OS maps zero pages on first
    touch), and an all-zero part is not copied: much of a batch is zeros (empty heaps, unused
    flow state, task times not known yet), and writing them only made the host fault in and zero
    every page once more; a column none of whose parts had a non-zero value is reported as zero
    (`nonzero`), so that the GPU sets it instead of copying it. A batch of one experiment (`rows`
    None) adopts its parts as its columns instead, copying a part that may be the caller's own
    array (a graph or parameter column: any part already of the column's type, to be safe), since
    the columns are the kernels' state."""

    def __init__(self, rows: dict[str, int] | None) -> None:
        import threading
        self.rows = rows
        self._lock = threading.Lock()
        self.cols: dict[str, np.ndarray] = {}
        self.written: dict[str, int] = {}
        self.nonzero: set[str] = set()     # columns with a non-zero value

    def adder(self, start: dict[str, int]):
        """`add(name, values)` for one experiment whose first rows of every kind are `start`."""
        if self.rows is None:
            return self._adopt

        def add(name: str, values) -> None:
            arr = np.asarray(values)
            col = self.cols.get(name)
            if col is None:
                with self._lock:                 # experiments may be written by several threads
                    col = self.cols.get(name)
                    if col is None:
                        col = self.cols[name] = np.zeros(self.rows[name], _DTYPES[name])
            nonzero = bool(arr.any())
            if nonzero:
                at = start[_LENGTH[name]] * _MULT[name]
                col[at:at + arr.size] = arr.ravel()
            with self._lock:
                self.written[name] = self.written.get(name, 0) + arr.size
                if nonzero:
                    self.nonzero.add(name)
        return add

    def _adopt(self, name: str, values) -> None:
        """The one experiment's part of column `name` (its only one) becomes the column."""
        arr = np.asarray(values)
        part = arr.astype(_DTYPES[name], copy=False).ravel()
        if part is arr or np.may_share_memory(part, arr):
            part = part.copy()
        if name in self.cols:
            raise AssertionError(f"column {name}: a second part for a one-experiment batch")
        self.cols[name], self.written[name] = part, part.size
        if part.any():
            self.nonzero.add(name)


_DTYPES = {c.name: schema.numpy_dtype(c) for c in schema.COLUMNS}
_LENGTH = {c.name: c.length for c in schema.COLUMNS}
_ZERO_STARTS = {c.length: 0 for c in schema.COLUMNS}
_MULT = {c.name: c.mult for c in schema.COLUMNS}


def build_batch(experiments: list[Experiment], compact: bool | list[bool] = False,
                exp_counts: list[dict[str, int]] | None = None) -> Batch:
    """One SPME batch of the given experiments (any sizes, topologies, CC and LB mixed).
    `compact` (one flag, or one per experiment): give them compact packet slots, a first try
    that may end with status ``capacity`` (:mod:`mvopt.engine.capacity`). `exp_counts`: each
    experiment's :func:`~mvopt.engine.sizing.experiment_counts` with its `compact`, when the
    caller has them (the planner does), else computed here."""
    if not experiments:
        raise ValueError("build_batch: no experiments (a batch holds at least one)")
    flags = [bool(compact)] * len(experiments) if isinstance(compact, bool) else [bool(f) for f in compact]
    if len(flags) != len(experiments):
        raise ValueError(f"build_batch: {len(flags)} compact flags for {len(experiments)} experiments")
    # explicit per-flow paths, checked before anything is allocated
    pinned = [routes.explicit_path_rows(e) for e in experiments]
    # experiments of one topology share its dense routing table (engine/routes.py): the first of
    # them brings it
    threads = experiment_threads(experiments)
    keys = thread_map(lambda i: routes.route_key(experiments[i].topology), range(len(experiments)), threads)
    table_of = routes.table_owners([e.topology for e in experiments], keys)
    if len(experiments) == 1:       # its parts become the columns: no counts needed
        starts, totals, out = [_ZERO_STARTS], {}, _ColumnWriter(None)
    else:
        if exp_counts is None:
            exp_counts = thread_map(lambda i: experiment_counts(experiments[i], flags[i]), range(len(experiments)),
                                    threads)
        exp_counts = batch_route_counts(experiments, exp_counts, table_of)
        # each experiment's first row of every kind (the running sums of the counts before it):
        # its parts' places in the columns, known before any is made, so that experiments are
        # written in parallel (NumPy releases the interpreter lock for most of the work)
        starts, totals = [], dict.fromkeys(exp_counts[0], 0)
        for c in exp_counts:
            starts.append(dict(totals))
            for k, v in c.items():
                totals[k] += int(v)
        out = _ColumnWriter({c.name: totals[c.length] * c.mult for c in schema.COLUMNS
                             if not c.doc.startswith("scratch") and c.length in totals})
    spans: list = [None] * len(experiments)
    slot_sizes: list = [None] * len(experiments)   # per experiment: ring caps, pool sizes, HPCC
    wire_parts: list = [None] * len(experiments)   # per experiment: ring caps, delays, ps/byte

    def write(i: int) -> dict[str, int]:
        """Experiment i's parts, at its places; returns the rows it added of every kind."""
        exp, small, at = experiments[i], flags[i], starts[i]
        add = out.adder(at)
        node_base, port_base, task_base, flow_base = at["n_node"], at["n_port"], at["n_task"], at["n_flow"]
        route_base, nh_base, heap_base, list_base = at["n_route"], at["n_nh"], at["n_heap"], at["n_list"]
        pred_base, succ_base, monq_base, monw_base = at["n_pred"], at["n_succ"], at["n_monq"], at["n_monw"]
        topo, g = exp.topology, exp.tasks
        g.validate(int(topo.n_host))      # before resolve(), which routes every flow
        p = exp.params
        # running out of a compact pool stops the experiment (a rerun); only where one is smaller
        pools = node_pool_slots(topo, p)
        if small and pools_compact(exp):
            smaller = node_pool_slots(topo, p, True)
            small_pools = bool((smaller < pools).any())
            pools = smaller
        else:
            small_pools = False
        nh, nn = int(topo.n_host), int(topo.n_node)
        poff = np.asarray(topo.node_port_offset, np.int64)
        npt = int(poff[-1])
        nt = g.n
        # ---- experiment row (each part goes into its column, in its type, as soon as it is made)
        add("exp_node_lo", [node_base]); add("exp_node_hi", [node_base + nn])
        add("exp_port_lo", [port_base])
        add("exp_n_task", [nt]); add("exp_n_flow", [int((g.kind == FLOW).sum())])
        add("exp_window_ps", [p.window_ps]); add("exp_limit_ps", [exp.time_limit_ps])
        mq, mw = monitor_rows(exp)
        # dense routing tables: the topology's (shared: its first experiment brings it), then this
        # experiment's own for each link going down (engine/routes.py)
        owner = table_of[i]
        epochs = routes.down_tables(topo)
        if epochs and exp.paths:
            raise ConfigError("cluster.link_down", "cannot be combined with explicit per-flow paths (a flow's "
                              "pinned path may cross the link)", show_value=False)
        rtab_parts = list(routes.dense_routes(topo)) if owner == i else []   # (owner None: no table, no epochs)
        down, rt_at, nh_at = [], at["n_rtab"] + (rtab_parts[0].size if rtab_parts else 0), \
            at["n_rtnh"] + (rtab_parts[1].size if rtab_parts else 0)
        for (at_ps, port, peer), (rtab_k, nh_k) in zip(routes.links_down(topo), epochs):
            down.append((at_ps, port + port_base, peer + port_base, rt_at - starts[owner]["n_rtab"],
                         nh_at - starts[owner]["n_rtnh"]))
            rt_at, nh_at = rt_at + rtab_k.size, nh_at + nh_k.size
        add("exp_i", _exp_ints(exp, p, monq_base if mq else -1, monw_base if mw else -1, small_pools, down))
        add("exp_d", _exp_doubles(p))
        add("exp_T_ps", [0]); add("exp_iter", [0]); add("exp_status", [0])
        sizes = {"n_exp": 1, "n_monq": mq, "n_monw": mw}
        # ---- ports
        rate = np.asarray(topo.port_rate_bps, np.int64)
        delay = np.asarray(topo.port_delay_ps, np.int64)
        add("port_node", np.asarray(topo.port_node, np.int64) + node_base)
        add("port_peer", np.asarray(topo.port_peer_port, np.int64) + port_base)
        add("port_in", np.zeros(npt * schema.NPI, np.int64))   # state, zero
        cap = port_ring_capacities(topo, p, small)
        # port_wire once the rings are placed, with the link classes of the whole batch
        wire_parts[i] = (cap, link_rows(rate, delay, p))
        # ---- nodes
        is_host = np.arange(nn) < nh
        add("node_exp", np.full(nn, i)); add("node_local", np.arange(nn))
        add("node_hash", hash_prefixes(exp.seed, HASH_TAGS, np.arange(nn)).view(np.int64).ravel())
        add("node_is_host", is_host.astype(np.int8))
        add("node_port_lo", poff[:-1] + port_base); add("node_port_hi", poff[1:] + port_base)
        # switch routing: ranges + deduplicated next-hop sets
        sw_off = np.asarray(topo.sw_route_offset, np.int64)
        nhs_off = np.asarray(topo.nhset_offset, np.int64)
        rset = np.asarray(topo.route_nhset, np.int64)
        route_lo = np.zeros(nn, np.int64)
        route_hi = np.zeros(nn, np.int64)
        route_lo[nh:] = sw_off[:-1] + route_base
        route_hi[nh:] = sw_off[1:] + route_base
        add("node_route_lo", route_lo); add("node_route_hi", route_hi)
        add("route_dst_lo", np.asarray(topo.route_dst_lo, np.int64))
        add("route_nh_lo", nhs_off[rset] + nh_base); add("route_nh_hi", nhs_off[rset + 1] + nh_base)
        add("route_nh", np.asarray(topo.nhset_port, np.int64) + port_base)
        sizes["n_route"], sizes["n_nh"] = int(sw_off[-1]), int(nhs_off[-1])
        sizes["n_rtab"] = sizes["n_rtnh"] = 0
        if owner is None:
            add("node_rtab", np.full(nn, -1, np.int64)); add("node_rtnh", np.zeros(nn, np.int64))
        else:
            row = np.full(nn, -1, np.int64)
            row[nh:] = starts[owner]["n_rtab"] + np.arange(nn - nh) * nh
            add("node_rtab", row); add("node_rtnh", np.where(is_host, 0, starts[owner]["n_rtnh"]))
            rtab_parts += [t for tables in epochs for t in tables]
            if rtab_parts:
                rtab = np.concatenate(rtab_parts[0::2]); rtab_nh = np.concatenate(rtab_parts[1::2])
                add("rtab", rtab); add("rtab_nh", rtab_nh)
                sizes["n_rtab"], sizes["n_rtnh"] = int(rtab.size), int(rtab_nh.size)
        buf = np.zeros(nn, np.int64); buf[nh:] = p.sw_buffer
        port_cost = p.port_headroom + p.sw_reserve
        reserved = np.add.reduceat(port_cost, poff[:-1]) if npt else np.zeros(nn, np.int64)
        reserved = np.where(np.diff(poff) > 0, reserved, 0)
        reserved[:nh] = 0
        add("node_buffer", buf); add("node_reserved", reserved)
        slot_sizes[i] = (cap, pools, exp.network.cc == "hpcc")
        # ---- tasks
        src, dst = g.src.astype(np.int64), g.dst.astype(np.int64)
        owner, pred, local = dependency_ends(g)
        local_left = np.bincount(owner[local], minlength=nt)
        remote_owner, remote_pred = owner[~local], pred[~local]
        r_off, r_pred = _csr(remote_owner, nt, remote_pred)
        s_off, s_task = _csr(pred, nt, owner)                           # successors of every task
        has_remote = np.diff(r_off) > 0
        flow_ids = np.nonzero(g.kind == FLOW)[0]                       # the experiment's flows, in task order
        nf = int(flow_ids.size)
        task_flow = np.full(nt, -1, np.int64)
        task_flow[flow_ids] = flow_base + np.arange(nf)
        add("task_kind", g.kind); add("task_src", src + node_base); add("task_dst", dst + node_base)
        add("task_flow", task_flow); add("task_dur_ps", g.duration_ps); add("task_min_ps", g.start_ps)
        add("f_task", flow_ids + task_base); add("f_local", flow_ids)
        add("f_src_local", src[flow_ids]); add("f_dst_local", dst[flow_ids]); add("f_size", g.size_bytes[flow_ids])
        add("task_pred_lo", r_off[:-1] + pred_base); add("task_pred_hi", r_off[1:] + pred_base)
        add("task_succ_lo", s_off[:-1] + succ_base); add("task_succ_hi", s_off[1:] + succ_base)
        add("task_pred", r_pred + task_base); add("task_succ", s_task + task_base)
        sizes["n_pred"], sizes["n_succ"] = int(r_off[-1]), int(s_off[-1])
        add("task_local_left", local_left); add("task_ready_max", np.zeros(nt, np.int64))
        add("task_remote_ps", np.where(has_remote, -1, 0))
        del owner, pred, local, remote_owner, remote_pred, r_off, r_pred, s_off, s_task, local_left, task_flow
        add("task_finish_ps", np.full(nt, INF_PS, np.int64))
        # remote-dependency lists per host
        rl_nodes = src[has_remote]
        rl_off, rl_tasks = _csr(rl_nodes, nn, np.nonzero(has_remote)[0])
        add("node_task_lo", rl_off[:-1] + list_base); add("node_task_hi", rl_off[1:] + list_base)
        add("node_remote_list", rl_tasks + task_base)
        add("node_remote_left", np.diff(rl_off))
        sizes["n_list"] = int(rl_off[-1])
        # heaps: 2 entries per task starting at the host; initially the tasks with no predecessors
        task_starts = np.bincount(src, minlength=nn)
        heap_size = 2 * task_starts + 1
        heap_lo = heap_base + np.concatenate([[0], np.cumsum(heap_size)[:-1]])
        add("node_heap_lo", heap_lo); add("node_act_lo", heap_lo)
        heap_t = np.zeros(int(heap_size.sum()), np.int64)
        heap_task = np.zeros(int(heap_size.sum()), np.int64)
        free = (np.diff(g.pred_offset) == 0)
        start_ps = np.full(nt, -1, np.int64)
        start_ps[free] = g.start_ps[free]
        heap_n = np.zeros(nn, np.int64)
        ids = np.nonzero(free)[0]
        order = np.lexsort((ids, g.start_ps[ids], src[ids]))   # by node, then (time, task): sorted = heap
        ids = ids[order]
        for node in np.unique(src[ids]):
            sel = ids[src[ids] == node]
            lo = int(heap_lo[node]) - heap_base
            heap_t[lo:lo + sel.size] = g.start_ps[sel]
            heap_task[lo:lo + sel.size] = 2 * (sel + task_base)      # start events (kind 0)
            heap_n[node] = sel.size
        add("heap_t", heap_t); add("heap_task", heap_task); add("act_flow", np.zeros(heap_t.size, np.int64))
        add("node_heap_n", heap_n)
        sizes["n_heap"] = int(heap_t.size)
        del heap_t, heap_task
        add("task_start_ps", start_ps)
        # flows
        add("f_npkt", p.flow_npkt[flow_ids]); add("f_line_bps", p.flow_line_bps[flow_ids])
        add("f_base_rtt_ps", p.flow_base_rtt_ps[flow_ids]); add("f_win", p.flow_win_bytes[flow_ids])
        add("f_done_ps", np.full(nf, -1, np.int64)); add("f_last_nack", np.full(nf, -1, np.int64))
        spans[i] = Span(node_base, node_base + nn, port_base, port_base + npt, task_base, task_base + nt,
                        flow_base, flow_base + nf)
        sizes.update(n_node=nn, n_port=npt, n_task=nt, n_flow=nf)
        return sizes

    added = thread_map(write, range(len(experiments)), threads)
    if len(experiments) == 1:
        totals = added[0]
    else:
        for i, a in enumerate(added):     # the planner's counts were this experiment's rows
            if any(a[k] != exp_counts[i][k] for k in a):
                raise AssertionError(f"experiment {i}: rows {a}, counted {exp_counts[i]}")
    counts = {"n_exp": len(experiments),
              **{k: totals.get(k, 0) for k in ("n_node", "n_port", "n_task", "n_flow", "n_pred", "n_succ", "n_route",
                                               "n_nh", "n_heap", "n_list")},
              **{k: max(1, totals.get(k, 0)) for k in ("n_monq", "n_monw", "n_rtab", "n_rtnh")}}
    ring_lo, pool_lo, n_slot, n_int_slots = _place_slots(slot_sizes)
    links, link_of = np.unique(np.concatenate([rows for _, rows in wire_parts]), axis=0, return_inverse=True)
    link_of = link_of.reshape(-1)
    for at, lo, (cap, rows) in zip(starts, ring_lo, wire_parts):
        first = at["n_port"]
        of = link_of[first:first + cap.size]
        out.adder(at)("port_wire", np.stack([lo, cap, of, np.zeros_like(of)], axis=1).ravel())
    pool_counts = np.concatenate([pools for _, pools, _ in slot_sizes]) if slot_sizes else np.zeros(0, np.int64)
    pool_lo = np.concatenate(pool_lo) if pool_lo else np.zeros(0, np.int64)
    counts["n_slot"] = n_slot
    counts["n_link"] = max(1, len(links))
    counts["n_int"] = max(1, n_int_slots * schema.MAX_INT_HOPS)
    counts["has_int"] = int(n_int_slots > 0)
    counts["n_hop"] = max(1, counts["n_flow"]) if n_int_slots > 0 else 1     # HPCC's per-flow hop state
    # selective repeat's per-flow rings (the kernels touch them only for selective-repeat flows)
    sr = any(e.network.resolved_transport == "sr" for e in experiments)
    counts["n_sr"] = max(1, counts["n_flow"]) if sr else 1
    # adaptive routing's flowlet tables, for every node if one experiment routes by flowlets
    counts["n_flowlet"] = max(1, counts["n_node"]) if any(e.network.flowlet_gap_ns is not None for e in experiments) else 1
    # the flows' ECMP paths, for every flow if one experiment wants them (routes.wants_paths)
    paths = any(sp.flow_hi > sp.flow_lo and routes.wants_paths(e.topology, sp.flow_hi - sp.flow_lo)
                for e, sp in zip(experiments, spans))
    counts["has_paths"] = int(paths)
    counts["n_fpath"] = max(1, counts["n_flow"]) if paths else 1

    cols: dict[str, np.ndarray] = {}
    zero: set[str] = set()
    for col in schema.COLUMNS:
        if col.doc.startswith("scratch"):
            continue
        n = counts[col.length] * col.mult
        dt = schema.numpy_dtype(col)
        if col.name in out.cols:
            arr = out.cols.pop(col.name)
            if out.written[col.name] != n or arr.size != n:
                raise AssertionError(f"column {col.name}: {out.written[col.name]} values for {n} rows")
            if col.name not in out.nonzero:
                zero.add(col.name)
        else:
            arr = np.zeros(n, dt)
            zero.add(col.name)
        cols[col.name] = np.ascontiguousarray(arr)
    # initial state that is not zero
    for name, value in (("port_q", -1), ("node_rr", -1), ("node_pool_free", -1),
                        ("exp_acc_next", INF_PS), ("exp_acc_prog", INF_PS)):
        cols[name][:] = value
    cols["port_pool"].reshape(-1, 2)[:, 0] = -1   # (empty lists: head -1, count 0)
    if n_slot >= 2**31:
        raise ValueError(f"a batch holds at most 2**31 - 1 packet slots (int32 slot ids), this one needs {n_slot}: "
                         "split it (mvopt.engine.split splits batches by memory)")
    cols["node_pool_next"][:] = pool_lo
    cols["node_pool_hi"][:] = pool_lo + pool_counts
    if len(links):
        cols["link"][:] = links[:, :schema.NLK].ravel()
        cols["link_pmax"][:] = links[:, schema.NLK].view(np.float64)
    cols["node_order"][:] = node_order(cols)
    if paths:
        cols["f_path"][:] = batch_flow_paths(cols, spans, threads, pinned).ravel()
        rows = cols["f_path"].reshape(-1, 2 * schema.NPATH)
        for e, sp in zip(experiments, spans):   # routes change when a link goes down: switches route
            if routes.links_down(e.topology):
                rows[sp.flow_lo:sp.flow_hi] = -1
    else:
        cols["f_path"][:] = -1
    filled = {"port_q", "port_pool", "node_rr", "node_pool_free", "exp_acc_next", "exp_acc_prog", "node_pool_next",
              "node_pool_hi", "node_order", "f_path", "link", "link_pmax"}
    return Batch(counts=counts, cols=cols, experiments=list(experiments), spans=spans, compact=tuple(flags),
                 zero_columns=frozenset(zero - filled))


def batch_flow_paths(cols: dict[str, np.ndarray], spans: list[Span], threads: int = 1,
                     pinned: list[np.ndarray | None] | None = None) -> np.ndarray:
    """routes.flow_paths for every flow of a batch, computed once per distinct experiment: paths
    are egress indices among a switch's ports, so experiments equal in what the paths depend on
    (their ports' wiring, dense tables and ECMP hash states relative to their first node and
    port, their flows' ends and ids, spraying) have equal rows. An optimizer's generation holds
    many such (candidates that differ in CC or buffers only); a benchmark's batch, one. The
    distinct ones in up to `threads` threads (threads.thread_map). `pinned`: per experiment, its
    explicit paths' rows by task id (routes.explicit_path_rows) or None; they replace the hashed rows."""
    spray = exp_int(cols, "spray")
    out = np.full((cols["f_local"].size, 2, schema.NPATH), -1, np.int16)
    ecmp = cols["node_hash"].reshape(-1, schema.NHT)[:, schema.HT["ecmp"]]
    groups: dict[bytes, list[int]] = {}
    for i, sp in enumerate(spans):
        if sp.flow_hi == sp.flow_lo:
            continue
        n, p, f = slice(sp.node_lo, sp.node_hi), slice(sp.port_lo, sp.port_hi), slice(sp.flow_lo, sp.flow_hi)
        h = hashlib.blake2b(digest_size=16)
        for part in (cols["node_is_host"][n], cols["node_port_lo"][n] - sp.port_lo, cols["node_rtab"][n],
                     cols["node_rtnh"][n], ecmp[n], cols["port_node"][p] - sp.node_lo, cols["port_peer"][p] - sp.port_lo,
                     cols["f_local"][f], cols["f_src_local"][f], cols["f_dst_local"][f], spray[i:i + 1]):
            h.update(np.ascontiguousarray(part).tobytes())
        if pinned is not None and pinned[i] is not None:
            h.update(b"pinned" + np.ascontiguousarray(pinned[i]).tobytes())
        groups.setdefault(h.digest(), []).append(i)
    def fill(members: list[int]) -> None:
        first = spans[members[0]]
        paths = routes.flow_paths(cols, spray, schema.NPATH, np.arange(first.flow_lo, first.flow_hi))
        own = pinned[members[0]] if pinned is not None else None
        if own is not None:
            rows = own[cols["f_local"][first.flow_lo:first.flow_hi]]
            given = (rows >= 0).any(axis=(1, 2))
            paths[given] = rows[given]
        for i in members:
            out[spans[i].flow_lo:spans[i].flow_hi] = paths

    thread_map(fill, list(groups.values()), threads)
    return out


def exp_int(cols: dict[str, np.ndarray], name: str) -> np.ndarray:
    """Integer parameter `name` (one of schema.EI) of every experiment of a batch's columns."""
    return cols["exp_i"].reshape(-1, schema.NEXP_I)[:, schema.EI.index(name)]


def node_order(cols: dict[str, np.ndarray], widest_first: bool = False,
               groups: np.ndarray | None = None, tor_first: bool = False) -> np.ndarray:
    """The order in which GPU threads take nodes in the network phase (results do not depend on
    it). Hosts first, then switches by port count, so that a warp runs one kind of code
    (docs/decisions/0007-gpu-node-order.md). With `widest_first`, switches come first, the widest
    first, then hosts: the GPU starts the blocks of the busiest threads (wide spines) before the
    rest (experiments/diag_wide_switch.py --orders compares). `groups` (the GPU's groups launch mode: experiment_groups' offsets): the order within each
    group of experiments, whose nodes stay in the group's rows (a block's threads); `tor_first`
    (with `groups`): among switches of a width, those with more hosts on their ports first (the
    top-of-rack switches, which carry every packet of their hosts)."""
    ports = cols["node_port_hi"] - cols["node_port_lo"]
    if widest_first:
        kind_key = np.where(cols["node_is_host"] == 1, 1, -ports)
    else:
        kind_key = np.where(cols["node_is_host"] == 1, 0, 1 + ports)
    if groups is not None:
        nodes = cols["exp_node_hi"] - cols["exp_node_lo"]
        per_group = np.add.reduceat(nodes, groups[:-1]) if nodes.size else nodes
        group_of = np.repeat(np.arange(per_group.size), per_group)
        if not tor_first:
            return np.lexsort((kind_key, group_of))
        host_ports = np.bincount(cols["port_node"], weights=cols["node_is_host"][cols["port_node"][cols["port_peer"]]],
                                 minlength=ports.size)
        return np.lexsort((-host_ports, kind_key, group_of))
    return np.argsort(kind_key, kind="stable")


def scratch_arrays(batch: Batch, xp=np) -> dict:
    """The kernels' working memory for `batch`, allocated zeroed with `xp` (numpy, or cupy on a
    GPU). Nothing needs initialising: pools hand out never-used slots first, and the kernels
    never read a slot (an INT record, a flow's hop state) before writing it, so a backend may
    also reuse old memory (the CPU backend does). Raw words: the kernels see them through `struct Pkt` /
    `struct IntHop`."""
    return {name: xp.zeros(n, dtype=xp.int64) for name, n in scratch_words(batch.counts).items()}


def gpu_report_columns(cols: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The GPU's report columns (schema: "state [GPU nodes]", node_iter), derived from the state
    every backend keeps: the tasks and flows each node finished, the experiments' window counts.
    The CPU reduces over an experiment's nodes in each window instead and leaves these columns as
    built, so a run stopped on the CPU continues on the GPU only from these (between windows the
    GPU's own values equal them too)."""
    lo, hi = cols["exp_node_lo"], cols["exp_node_hi"]

    def per_experiment(node_values: np.ndarray) -> np.ndarray:
        total = np.concatenate(([0], np.cumsum(node_values, dtype=np.int64)))
        return total[hi] - total[lo]

    return {"exp_done": per_experiment(cols["node_tasks_done"]),
            "exp_acked": per_experiment(cols["node_flows_acked"]),
            "exp_acc_next": np.full_like(cols["exp_acc_next"], INF_PS),
            "exp_acc_prog": np.full_like(cols["exp_acc_prog"], INF_PS),
            "exp_arrive": np.zeros_like(cols["exp_arrive"]),
            "node_iter": cols["exp_iter"][cols["node_exp"]].astype(cols["node_iter"].dtype)}


# Every column the kernels write (besides the scratch ones): what a run stopped early must leave
# in the batch for the next run to continue it.
STATE_COLUMNS = tuple(col.name for col in schema.COLUMNS if col.doc.startswith("state"))
# The state columns that extract_results reads: all a backend must copy back after a run that ended.
RESULT_COLUMNS = ("exp_status", "exp_iter", "exp_T_ps", "task_start_ps", "task_finish_ps", "f_done_ps",
                  "f_snd_una", "node_ctr", "node_last_ps", "node_event_ps", "port_qmax", "port_tx",
                  "port_in", "exp_mon_k", "mon_q", "mon_w", "node_pool_next", "node_pool_free", "port_pool")


def extract_results(batch: Batch, iterations: int) -> list[ExperimentResult]:
    """Per-experiment results from the final batch state (copied, so the batch can be reused;
    the experiments in threads: threads.thread_map)."""
    c = batch.cols
    hops = port_packets_sent(c)          # once for the batch (a per-experiment call would be quadratic)

    def result(i: int) -> ExperimentResult:
        exp, (n0, n1, p0, p1, t0, t1, f0, f1) = batch.experiments[i], batch.spans[i]
        g = exp.tasks
        status = STATUS[int(c["exp_status"][i])]
        if status == "capacity" and not (batch.compact and batch.compact[i]):
            status = "error"          # full capacities cannot run out: a planning bug
        finish = c["task_finish_ps"][t0:t1].copy()
        start = c["task_start_ps"][t0:t1].copy()
        flows = np.nonzero(g.kind == FLOW)[0]          # flow rows f0.. are these tasks, in order
        done = c["f_done_ps"][f0:f1]
        fct = np.where(done >= 0, done - start[flows], -1)
        finished = finish < INF_PS
        makespan = int(finish[finished].max()) if finished.any() else 0
        ctr = c["node_ctr"].reshape(-1, schema.NCTR)[n0:n1].sum(axis=0)
        counters = {name: int(ctr[k]) for k, name in enumerate(COUNTERS)}
        counters["packet_hops"] = int(hops[p0:p1].sum())
        end = int(max(makespan, int(c["node_last_ps"][n0:n1].max(initial=0))))
        if status == "timeout":
            end = int(exp.time_limit_ps)
        elif status == "stuck":
            end = int(c["node_event_ps"][n0:n1].max(initial=0))
        if status == "timeout":
            # task_start_ps marks a scheduled task with its ready time: one due after the last
            # window simulated never started
            start = np.where(start >= int(c["exp_T_ps"][i]) + int(c["exp_window_ps"][i]), -1, start)
        diag = ""
        if status != "done":
            # a cancelled experiment's result is dropped (another backend has it): no diagnostic
            diag = _diagnostic(batch, i, status) if status != "cancelled" else ""
            finish = np.where(finished, finish, -1)
        return ExperimentResult(
            name=exp.name, status=status, end_ps=end, makespan_ps=makespan,
            task_start_ps=start, task_finish_ps=finish, flow_ids=flows, flow_fct_ps=fct,
            flow_standalone_ps=exp.params.flow_standalone_ps[flows].copy(), counters=counters,
            port_max_queue_bytes=c["port_qmax"][p0:p1].copy(), windows=int(c["exp_iter"][i]),
            # every byte put on the wire (PT_WIRE_BYTES), not PT_TX_BYTES (dequeued data, for INT)
            port_tx_bytes=port_record(c, "port_tx", "wire_bytes")[p0:p1].copy(),
            diagnostic=diag, **_monitors(batch, i, end))

    return thread_map(result, range(len(batch.experiments)), experiment_threads(batch.experiments))


def _monitors(batch: Batch, i: int, end_ps: int) -> dict:
    """The monitor fields of experiment i's result: samples as [port, sample] arrays (copies)."""
    exp = batch.experiments[i]
    if exp.queue_monitor_ps <= 0:
        return {}
    c = batch.cols
    ei = c["exp_i"].reshape(-1, schema.NEXP_I)[i]
    n = min(int(c["exp_mon_k"][i]), int(exp.monitor_max_samples))     # recorded by the nodes
    npt = int(ei[schema.EI.index("mon_nport")])
    p0, p1 = batch.spans[i].port_lo, batch.spans[i].port_hi

    def table(name: str, lo: int) -> np.ndarray:
        return c[name][lo:lo + n * npt].reshape(n, npt).T

    qlo, wlo = int(ei[schema.EI.index("mon_qlo")]), int(ei[schema.EI.index("mon_wlo")])
    final_q = port_record(c, "port_tx", "qbytes", 1)[p0:p1]            # the data queues
    return monitor_fields(exp.queue_monitor_ps, exp.monitor_max_samples, end_ps, table("mon_q", qlo),
                          table("mon_w", wlo) if wlo >= 0 else None, final_q, port_record(c, "port_tx", "wire_bytes")[p0:p1])


def port_packets_sent(cols: dict[str, np.ndarray]) -> np.ndarray:
    """Packets (data and control) every port has put on its wire: its ring's tail, which only
    grows (the later of its two parity copies). The kernels keep no hop counter: this is the
    `packet_hops` counter, per port (one fewer memory update per packet-hop)."""
    return np.maximum(port_record(cols, "port_tx", "tail", 0), port_record(cols, "port_tx", "tail", 1))


def node_packets_sent(cols: dict[str, np.ndarray]) -> np.ndarray:
    """port_packets_sent summed over each node's ports."""
    total = np.concatenate(([0], np.cumsum(port_packets_sent(cols), dtype=np.int64)))
    return total[cols["node_port_hi"]] - total[cols["node_port_lo"]]


_RECORDS = {"port_tx": (schema.NPT, schema.PT), "port_in": (schema.NPI, schema.PI)}


def port_record(cols: dict[str, np.ndarray], column: str, field: str, offset: int = 0) -> np.ndarray:
    """One field of every port's record (`port_tx`: schema.PT, `port_in`: schema.PI), as a
    strided view."""
    words, layout = _RECORDS[column]
    return cols[column].reshape(-1, words)[:, layout[field] + offset]


def _diagnostic(batch: Batch, i: int, status: str) -> str:
    """Which flows are unfinished and which ports are paused, for stuck/timeout reports."""
    c = batch.cols
    sp = batch.spans[i]
    p0, p1, t0 = sp.port_lo, sp.port_hi, sp.task_lo
    g = batch.experiments[i].tasks
    clock_us = int(c["exp_T_ps"][i]) / 1e6
    if status == "timeout":
        # the clock is where the last window simulated began: the next event lay past the limit
        limit_ms = batch.experiments[i].time_limit_ps / 1e9
        lines = [f"status timeout: the time limit of {limit_ms:g} ms passed (the last window simulated "
                 f"began at t = {clock_us:.3f} us)"]
    else:
        lines = [f"status {status} at t = {clock_us:.3f} us"]
    flows = np.nonzero(g.kind == FLOW)[0]
    una = c["f_snd_una"][sp.flow_lo:sp.flow_hi]
    npkt = c["f_npkt"][sp.flow_lo:sp.flow_hi]
    # (vectorised: a training experiment has millions of tasks, and the optimizer reads
    # diagnostics of every unfinished experiment of a generation)
    unfinished = np.nonzero(una < npkt)[0]
    if unfinished.size:
        shown = ", ".join(f"task {int(flows[j])} ({int(g.src[flows[j]])}->{int(g.dst[flows[j]])}, "
                          f"{int(una[j])}/{int(npkt[j])} pkts acked)" for j in unfinished[:10])
        more = f" and {unfinished.size - 10} more" if unfinished.size > 10 else ""
        lines.append(f"{unfinished.size} unfinished flows: {shown}{more}")
    pending = np.nonzero((c["task_finish_ps"][t0:t0 + g.n] >= INF_PS) & (g.kind == DELAY))[0]
    if pending.size:
        lines.append(f"{pending.size} delay tasks not run (waiting for predecessors): {pending[:10].tolist()}")
    paused = np.nonzero(port_record(c, "port_in", "pfc")[p0:p1] & schema.PFC["paused"])[0]
    if paused.size:
        topo = batch.experiments[i].topology
        desc = ", ".join(f"port {int(p)} (node {int(topo.port_node[p])}->{int(topo.port_peer_node[p])})"
                         for p in paused[:10])
        lines.append(f"{paused.size} paused ports: {desc}")
    if status == "error":
        lines.append("internal error: a wire ring overflowed (please report this as a bug)")
    elif status == "capacity":
        n0, n1 = sp.node_lo, sp.node_hi
        port_free = np.bincount(c["port_node"][p0:p1] - n0, weights=c["port_pool"].reshape(-1, 2)[p0:p1, 1],
                                minlength=n1 - n0)   # slots on the ports' own lists (port_pool), per node
        empty = np.nonzero((c["node_pool_next"][n0:n1] >= c["node_pool_hi"][n0:n1])
                           & (c["node_pool_free"][n0:n1] < 0) & (port_free == 0))[0]
        where = (f"the packet pools of nodes {', '.join(str(int(v)) for v in empty[:10])}" if empty.size
                 else "a wire ring")
        lines.append(f"ran out of its compact packet slots ({where}): to be run again with full ones")
    return "; ".join(lines)
