"""The GPU's groups launch mode, its plan: which experiments share a block, and which nodes each
thread of a block runs in a window (kernels/mv_cuda_main.cuh, mv_run_groups).

A window of a block lasts as long as its busiest thread. In workload (a) (k=4 fat-tree ring
all-reduce) a top-of-rack switch handles 88 events a window, a host 29, an aggregation switch
37-52, a core switch 27-32 (experiments/diag_node_events.py): with one node per thread, most
warps wait at the block's barrier for the top-of-rack switches (44 % of the stall cycles,
docs/performance.md). So a thread may run several light nodes one after the other, as many as
keep its events within those of the experiment's busiest node (first-fit decreasing), and a
block holds more experiments in the same threads. The loads are the events each node handled
so far (its ports' ring tails), read from the device between launches; before any traffic every
node is alone on its thread. Results do not depend on the plan: a node's window reads only what
other nodes wrote in earlier windows, whatever thread runs it and in which order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mvopt.engine.schema import NPT, PT

__all__ = ["GROUP_NODES_MAX", "GroupPlan", "experiment_groups", "node_loads", "plan_groups", "thread_bins"]

GROUP_NODES_MAX = 4      # the most nodes one thread runs in a window
PACK_SLACK = 0.05        # a thread's load may exceed the busiest node's by this fraction
WINDOW_EVENTS = 2.0      # a node's own cost per window, in events (a quiet node's window is not free)


def experiment_groups(threads_per_exp: np.ndarray, threads: int, limit: int) -> tuple[np.ndarray, int] | None:
    """Consecutive experiments (needing `threads_per_exp[e]` threads each) packed greedily into
    blocks of `threads` threads (more, in whole warps, if an experiment needs them), as offsets:
    block b runs experiments offsets[b] .. offsets[b + 1]. Returns (offsets, threads), or None if
    an experiment needs more than `limit` threads."""
    need = np.asarray(threads_per_exp, np.int64)
    widest = int(need.max()) if need.size else 1
    if widest > limit:
        return None
    threads = min(max(threads, -(-widest // 32) * 32), -(-limit // 32) * 32)
    offsets, used = [0], 0
    for e, n in enumerate(need.tolist()):
        if used + n > threads:
            offsets.append(e)
            used = 0
        used += n
    offsets.append(int(need.size))
    return np.asarray(offsets, np.int64), threads


def node_loads(port_tx: np.ndarray, port_node: np.ndarray, port_peer: np.ndarray, node_iter: np.ndarray) -> np.ndarray:
    """Each node's load so far: the packets its ports put on the wire and those its peers put on
    its in-rings (every port's ring tails, both parities, from its transmit record), and
    WINDOW_EVENTS for each window it ran (a quiet node's window is not free)."""
    tx = np.asarray(port_tx).reshape(-1, NPT)
    sent = np.maximum(tx[:, PT["tail"]], tx[:, PT["tail"] + 1]).astype(np.float64)
    n_node = int(node_iter.size)
    return (np.bincount(port_node, weights=sent, minlength=n_node)
            + np.bincount(port_node, weights=sent[port_peer], minlength=n_node)
            + WINDOW_EVENTS * np.asarray(node_iter, np.float64))


def thread_bins(node_exp: np.ndarray, loads: np.ndarray, n_exp: int, max_nodes: int = GROUP_NODES_MAX,
                slack: float = PACK_SLACK) -> tuple[np.ndarray, np.ndarray]:
    """Each experiment's nodes put on threads, first-fit decreasing: the heaviest node first, each
    onto the first of the experiment's threads that keeps within (1 + slack) times its busiest
    node's load and holds fewer than `max_nodes` nodes, else onto a new thread. Returns
    (bin_of_node, bins_per_exp): the thread (0, 1, ...) of each node within its experiment, and
    each experiment's threads. Vectorised over experiments: one step per node rank."""
    n = loads.size
    loads = np.asarray(loads, np.float64)
    node_exp = np.asarray(node_exp, np.int64)
    order = np.lexsort((np.arange(n), -loads, node_exp))          # by experiment, heaviest first
    width = np.bincount(node_exp, minlength=n_exp)
    start = np.concatenate(([0], np.cumsum(width)[:-1]))
    cap = np.zeros(n_exp)
    np.maximum.at(cap, node_exp, loads)
    cap *= 1.0 + slack
    W = int(width.max()) if n_exp else 0
    bin_load = np.zeros((n_exp, max(W, 1)))
    bin_count = np.zeros((n_exp, max(W, 1)), np.int64)
    bin_of = np.empty(n, np.int64)
    for r in range(W):
        es = np.flatnonzero(width > r)
        v = order[start[es] + r]
        w = loads[v]
        fits = (bin_load[es] + w[:, None] <= cap[es, None]) & (bin_count[es] < max_nodes)
        b = np.argmax(fits, axis=1)    # an empty thread always fits: the first one not yet used
        bin_load[es, b] += w
        bin_count[es, b] += 1
        bin_of[v] = b
    return bin_of, (bin_count > 0).sum(axis=1)


@dataclass(frozen=True)
class GroupPlan:
    """A groups launch's plan: block g runs experiments offsets[g] .. offsets[g + 1]; thread t of
    block g runs, in a window, nodes slots[g, k, t] for k = 0, 1, ... up to the first -1."""
    offsets: np.ndarray    # int64 [n_groups + 1]
    threads: int           # threads per block
    slots: np.ndarray      # int32 [n_groups, nodes_per_thread, threads]

    @property
    def nodes_per_thread(self) -> int:
        return int(self.slots.shape[1])


def plan_groups(cols: dict[str, np.ndarray], threads: int, limit: int, loads: np.ndarray | None = None,
                max_nodes: int = GROUP_NODES_MAX, ordered: bool = True) -> GroupPlan | None:
    """The plan of a batch (its columns `cols`) for blocks of `threads` threads (at most `limit`),
    with the nodes' `loads` (node_loads; None: one node per thread). `ordered` (the default): a
    block's threads take its switches first, the widest first and among those of a width the
    ones with more hosts on their ports (top-of-rack) first, then its hosts (warps of one kind
    of node), each kind by load, heaviest first; else in row order. None if an experiment needs
    more than `limit` threads."""
    n_node = int(cols["node_exp"].size)
    n_exp = int(cols["exp_node_lo"].size)
    node_exp = cols["node_exp"].astype(np.int64)
    if loads is None or max_nodes <= 1:
        bin_of = np.arange(n_node, dtype=np.int64) - cols["exp_node_lo"].astype(np.int64)[node_exp]
        bins = (cols["exp_node_hi"] - cols["exp_node_lo"]).astype(np.int64)
        loads = np.zeros(n_node)
        max_nodes = 1
    else:
        loads = np.asarray(loads, np.float64)
        bin_of, bins = thread_bins(node_exp, loads, n_exp, max_nodes)
    packed = experiment_groups(bins, threads, limit)
    if packed is None:
        return None
    offsets, threads = packed
    # a thread: (experiment, bin); its nodes heaviest first, ties by row
    thread_key = np.concatenate(([0], np.cumsum(bins)[:-1]))[node_exp] + bin_of     # global thread id
    n_thr = int(bins.sum())
    by_thread = np.lexsort((np.arange(n_node), -loads, thread_key))
    first = by_thread[np.concatenate(([0], np.flatnonzero(np.diff(thread_key[by_thread])) + 1))]
    rank = np.arange(n_node) - np.searchsorted(thread_key[by_thread], thread_key[by_thread])
    rank_of = np.empty(n_node, np.int64)
    rank_of[by_thread] = rank
    thread_load = np.bincount(thread_key, weights=loads, minlength=n_thr)
    # the threads' order within their group
    group_of_exp = np.repeat(np.arange(offsets.size - 1), np.diff(offsets))
    group_of_thread = group_of_exp[node_exp[first]]
    if ordered:
        ports = (cols["node_port_hi"] - cols["node_port_lo"]).astype(np.int64)
        kind = np.where(cols["node_is_host"] == 1, 1, -ports)
        host_ports = np.bincount(cols["port_node"], weights=cols["node_is_host"][cols["port_node"][cols["port_peer"]]],
                                 minlength=n_node)
        f = first
        t_order = np.lexsort((f, -thread_load, -host_ports[f], kind[f], group_of_thread))
    else:
        t_order = np.lexsort((first, group_of_thread))
    group_start = np.concatenate(([0], np.cumsum(np.bincount(group_of_thread, minlength=offsets.size - 1))[:-1]))
    lane = np.empty(n_thr, np.int64)
    lane[t_order] = np.arange(n_thr) - group_start[group_of_thread[t_order]]
    slots = np.full((offsets.size - 1, max_nodes, threads), -1, np.int32)
    slots[group_of_exp[node_exp], rank_of, lane[thread_key]] = np.arange(n_node, dtype=np.int32)
    return GroupPlan(offsets, threads, slots)
