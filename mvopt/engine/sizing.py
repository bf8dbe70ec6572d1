"""How big experiments and batches are, before anything is built.

The exact rows every experiment adds to each table of :mod:`mvopt.engine.schema`, and the bytes
of a batch of them, so that memory is planned before any batch exists (the batch builder places
each experiment's rows from the same counts); and the estimated simulation work of an
experiment, which orders and balances them.
"""

from __future__ import annotations

from typing import Sequence

import numpy as np

from mvopt.engine import routes, schema
from mvopt.engine.capacity import node_pool_slots, pools_compact, port_ring_capacities
from mvopt.engine.params import Experiment, ResolvedParams
from mvopt.engine.tasks import FLOW

__all__ = ["INT32_LIMIT", "GPU_MEMORY_FRACTION", "experiment_counts", "route_table_counts", "batch_route_counts",
           "slot_counts", "batch_counts", "batch_bytes", "experiment_cost", "dependency_ends", "monitor_rows",
           "link_rows", "ps_per_byte", "scratch_words", "scratch_nbytes"]

INT32_LIMIT = 2**31 - 1            # kernels index slots, tasks, heaps ... with int32
GPU_MEMORY_FRACTION = 0.85         # of the free device memory a batch may take (the rest: CuPy, NVRTC, fragments)


def experiment_counts(exp: Experiment, compact: bool = False) -> dict[str, int]:
    """The rows `exp` adds to a batch, per count of :mod:`schema` (exactly what build_batch adds,
    with the same `compact`; n_int is the INT slots it needs: its packet slots if it uses HPCC,
    else 0; n_monq / n_monw the rows of its monitor tables, 0 when its monitors are off; n_link
    its ports, the most link classes it can bring, of which the batch keeps the distinct ones)."""
    topo, g = exp.topology, exp.tasks
    nn = int(topo.n_node)
    npt = int(np.asarray(topo.node_port_offset)[-1])
    owner, _, local = dependency_ends(g)
    remote = ~local
    n_flow = int((g.kind == FLOW).sum())
    return {"n_exp": 1, "n_node": nn, "n_port": npt, "n_task": int(g.n), "n_flow": n_flow, "n_pred": int(remote.sum()),
            "n_succ": int(g.pred.size), "n_route": int(np.asarray(topo.sw_route_offset)[-1]),
            "n_nh": int(np.asarray(topo.nhset_offset)[-1]), **route_table_counts(topo, True), **slot_counts(exp, compact),
            "n_hop": n_flow if exp.network.cc == "hpcc" else 0,
            "n_sr": n_flow if exp.network.resolved_transport == "sr" else 0,
            "n_fpath": n_flow if n_flow and routes.wants_paths(topo, n_flow) else 0,
            "n_heap": 2 * int(g.n) + nn, "n_list": int(np.unique(owner[remote]).size),
            "n_monq": monitor_rows(exp)[0], "n_monw": monitor_rows(exp)[1],
            "n_link": npt, "n_flowlet": nn if exp.network.flowlet_gap_ns is not None else 0}     # (at most: the batch holds each distinct link class once)


def route_table_counts(topo, owner: bool) -> dict[str, int]:
    """The rows of the dense routing tables (engine/routes.py) of an experiment of `topo`: its
    topology's table if it brings it to the batch (`owner`; experiment_counts counts it so, an
    upper bound), none if another experiment of the same topology does; plus its own tables for
    the links that go down during the run."""
    epochs = routes.down_tables(topo)     # its own tables for links going down (never shared)
    own = {"n_rtab": sum(int(t.size) for t, _ in epochs), "n_rtnh": sum(int(nh.size) for _, nh in epochs)}
    if not owner or not routes.has_table(topo):
        return own
    return {"n_rtab": int(topo.n_switch) * int(topo.n_host) + own["n_rtab"],
            "n_rtnh": int(topo.nhset_port.size) + own["n_rtnh"]}


def batch_route_counts(experiments: Sequence[Experiment], counts: list[dict[str, int]],
                       owners: list[int | None] | None = None) -> list[dict[str, int]]:
    """`counts` (experiment_counts of `experiments`) as the experiments hold rows in one batch:
    the dense routing table of a topology counted once, for the first experiment of it
    (`owners`: routes.table_owners of their topologies, computed if not given), and so is each
    distinct link class (n_link)."""
    if owners is None:
        owners = routes.table_owners([e.topology for e in experiments])
    seen: set[bytes] = set()
    new_links = []
    classes: dict[tuple[int, int], set[bytes]] = {}    # (a generation repeats the same objects)
    for e in experiments:
        key = (id(e.topology), id(e.params))
        if key not in classes:
            rows = link_rows(np.asarray(e.topology.port_rate_bps, np.int64),
                             np.asarray(e.topology.port_delay_ps, np.int64), e.params)
            classes[key] = {r.tobytes() for r in np.unique(rows, axis=0)}
        keys = classes[key] - seen
        seen |= keys
        new_links.append(len(keys))
    return [{**c, **route_table_counts(e.topology, owners[i] == i), "n_link": new_links[i]}
            for i, (c, e) in enumerate(zip(counts, experiments))]


def slot_counts(exp: Experiment, compact: bool = False) -> dict[str, int]:
    """The packet-slot part of experiment_counts (n_slot, n_int), the only part `compact`
    changes: counts of one sizing become the other's with `{**counts, **slot_counts(exp, c)}`."""
    topo, p = exp.topology, exp.params
    n_slot = (int(port_ring_capacities(topo, p, compact).sum())
              + int(node_pool_slots(topo, p, compact and pools_compact(exp)).sum()))
    return {"n_slot": n_slot, "n_int": n_slot * schema.MAX_INT_HOPS if exp.network.cc == "hpcc" else 0}


def batch_counts(summed: dict[str, int]) -> dict[str, int]:
    """The counts of the batch of experiments whose experiment_counts were summed (what
    build_batch will report): a batch with any HPCC experiment holds HPCC's hop state for every
    flow, one with any selective-repeat experiment the transport's rings for every flow, one with any
    flowlet experiment a flowlet table for every node, one with
    any experiment that wants its flows' paths (routes.wants_paths) holds them for every flow,
    and tables nobody uses still get one row."""
    out = dict(summed, n_hop=int(summed["n_flow"]) if summed.get("n_hop", 0) > 0 else 0,
               n_sr=int(summed["n_flow"]) if summed.get("n_sr", 0) > 0 else 0,
               n_fpath=int(summed["n_flow"]) if summed.get("n_fpath", 0) > 0 else 0,
               n_flowlet=int(summed["n_node"]) if summed.get("n_flowlet", 0) > 0 else 0)
    for k in schema.MIN_ONE_COUNTS:
        out[k] = max(1, int(out[k]))
    return out


def batch_bytes(counts: dict[str, int]) -> int:
    """Bytes of a batch with these (summed) counts: every column plus the scratch packet slots."""
    counts = batch_counts(counts)
    return scratch_nbytes(counts) + sum(int(counts[col.length]) * col.mult * schema.numpy_dtype(col).itemsize
                                        for col in schema.COLUMNS if not col.doc.startswith("scratch"))


def experiment_cost(exp: Experiment) -> float:
    """Estimated simulation work: packets x path length (in windows) over all flows, plus the
    nodes (an idle window still visits every node)."""
    p = exp.params
    flows = exp.tasks.kind == FLOW
    hops = np.maximum(1.0, p.flow_base_rtt_ps[flows] / (2.0 * p.window_ps))
    return float((p.flow_npkt[flows] * hops).sum()) + float(exp.topology.n_node)



def dependency_ends(g) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(owner, predecessor, local) of every dependency entry: the task it belongs to, the task it
    waits for, and whether that one finishes on the host where the owner starts (else the owner
    learns of it in a later window: a remote dependency)."""
    # task ids in int32 where they fit (they do in any batch: its tables are int32-indexed), so
    # that the two arrays per dependency of a paper-scale graph take half the memory
    it = np.int32 if g.n < 2**31 else np.int64
    owner = np.repeat(np.arange(g.n, dtype=it), np.diff(g.pred_offset))
    pred = g.pred.astype(it, copy=False)
    return owner, pred, g.dst[pred] == g.src[owner]


def monitor_rows(exp: Experiment) -> tuple[int, int]:
    """Rows of the queue-monitor and link-monitor tables the experiment needs (0 when off):
    its ports times the sample cap each."""
    if exp.queue_monitor_ps <= 0:
        return 0, 0
    rows = int(np.asarray(exp.topology.node_port_offset)[-1]) * int(exp.monitor_max_samples)
    return rows, rows if exp.link_monitor else 0


def ps_per_byte(rate_bps: np.ndarray) -> np.ndarray:
    """8e12 / rate where that is an integer (serialization is then a multiplication), else 0."""
    rate = np.asarray(rate_bps, np.int64)
    return np.where(8 * 10**12 % rate == 0, 8 * 10**12 // rate, 0).astype(np.int64)


def link_rows(rate: np.ndarray, delay: np.ndarray, p: ResolvedParams) -> np.ndarray:
    """Each port's link class (the `link` record, schema.LK, then Pmax's bits), one row per port:
    build_batch keeps each distinct row once."""
    rows = np.zeros((rate.size, schema.NLK + 1), np.int64)
    rows[:, schema.LK["rate"]] = rate
    rows[:, schema.LK["delay"]] = delay
    rows[:, schema.LK["ppb"]] = ps_per_byte(rate)
    rows[:, schema.LK["kmin"]] = p.port_kmin
    rows[:, schema.LK["kmax"]] = p.port_kmax
    rows[:, schema.LK["headroom"]] = p.port_headroom
    rows[:, schema.LK["shift"]] = p.port_shift
    rows[:, schema.NLK] = np.asarray(p.port_pmax, np.float64).view(np.int64)
    return rows


def scratch_words(counts: dict[str, int]) -> dict[str, int]:
    """Size in int64 words of each scratch column of a batch with these counts."""
    return {col.name: -(-int(counts[col.length]) * col.mult * schema.numpy_dtype(col).itemsize // 8)
            for col in schema.COLUMNS if col.doc.startswith("scratch")}


def scratch_nbytes(counts: dict[str, int]) -> int:
    """Bytes of the scratch columns of a batch with these counts."""
    return 8 * sum(scratch_words(counts).values())
