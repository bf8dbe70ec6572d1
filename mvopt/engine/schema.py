"""Every table and column of an SPME batch, in one place.

The C struct that the kernels see (``struct Ctx``) is generated from this list, so the
kernels, the CPU loader and the GPU loader cannot disagree on a name, a type or an order.
A column is (name, C type, length, doc). Lengths name a count of the batch (``n_exp``,
``n_node``, ``n_port``, ``n_task``, ``n_slot`` ...), optionally times a constant. Columns whose
doc starts with "state" are written by the kernels; everything else is a parameter, written once
by the batch builder. "[owner]" names the only system that writes a state column. Columns whose
doc starts with "scratch" (the packet slots) are working memory of the kernels: the batch builder
does not hold them, each backend allocates them where the kernels run (``scratch_arrays``), and
no result is read from them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from mvopt._cfg.algorithms import CONGESTION_CONTROLS, LOAD_BALANCERS, TRANSPORTS
from mvopt._cfg.cluster import MAX_LINK_DOWN

__all__ = ["EI", "ED", "c_enum_source", "c_check_source", "Column", "COLUMNS", "COUNTS", "MIN_ONE_COUNTS", "SCALARS", "SR_WORDS", "SR_WINDOW", "SR_DUPTHRESH", "NCTR", "NCCD", "NCCI", "NHOPI", "NPT", "PT", "NPI", "PI",
           "PFC", "ACKS", "NLK", "LK", "MAX_INT_HOPS",
           "PKT_DTYPE", "INT_DTYPE", "c_struct_source", "numpy_dtype"]

NCTR = 16          # counters per node (mvopt.engine.results.COUNTERS)
NCCD = 6           # double-valued congestion-control state per flow (CD_* in mv_common.cuh)
NCCI = 13          # integer congestion-control state per flow (CI_*)
NHOPI = 16         # HPCC's last INT per hop, per flow (HI_*), in batches with HPCC experiments only
NEXP_D = 24        # double parameters per experiment
NEXP_I = 48        # integer parameters per experiment
# an experiment's integer and double parameters, slot by slot (exp_i, exp_d): the EI_* / ED_*
# enums of mv_common.cuh list the same slots in the same order (c_check_source stops the build
# otherwise)
EI = ("seed", "cc", "spray", "transport", "pfc", "ecn", "payload", "header", "ack", "pfc_frame", "nack_ps",
      "rto_ps", "reserve", "resume", "varwin", "dcqcn_f", "hpcc_stage", "dcqcn_clamp",
      "mon_ps", "mon_cap", "mon_nport", "mon_qlo", "mon_wlo", "compact_pools", "timely_hai_n",
      "flowlet_ps", "acks", "down_n", "down")
# EI "acks": where ACK/NACKs wait, bits (ACKS_* in mv_common.cuh): switches queue them with data
# (network.switch_ack_queue 'data'); a PAUSE stops a host's too (network.pfc.pause_host_acks)
ACKS = {"switch_data": 1, "host_pause": 2}
# Links going down (docs/engine.md, "Links going down"): EI_DOWN_N of them, by time, each NDOWN
# slots from EI_DOWN: its time (ps), its two ports (global ids), and how far the rows of the dense
# routing table without it (and the earlier ones) are from the switch's node_rtab / node_rtnh.
DOWN = {"at_ps": 0, "port": 1, "peer": 2, "d_rtab": 3, "d_rtnh": 4}
NDOWN = len(DOWN)
# Adaptive routing per flowlet (network.flowlet_gap_ns): a switch's flowlet table has FLOWLET_ENTRIES
# entries, a flow's chosen by its ECMP hash at the switch (flows may share one, as in hardware tables)
FLOWLET_ENTRIES = 32
ED = ("dcqcn_g", "dcqcn_alpha_ps", "dcqcn_dec_ps", "dcqcn_inc_ps", "dcqcn_rai", "dcqcn_rhai",
      "dcqcn_first", "dcqcn_min", "hpcc_eta", "hpcc_wai", "hpcc_min", "dctcp_g", "dctcp_rai", "dctcp_min",
      "timely_alpha", "timely_beta", "timely_delta", "timely_t_low_ps", "timely_t_high_ps", "timely_min_rtt_ps",
      "timely_min", "hpcc_int_multi")
MAX_INT_HOPS = 5   # HPCC INT records per packet
# Selective repeat (docs/engine.md): a flow's receive window, in packets from the first missing
# one, is a ring of SR_WORDS 64-bit words at each end (f_rx_map, f_sack_map); a hole counts as
# lost without PFC once a packet SR_DUPTHRESH above it is selectively acknowledged (TCP's
# duplicate-ACK threshold, RFC 5681, as forward acknowledgement counts it).
SR_WORDS = 8
SR_WINDOW = 64 * SR_WORDS
SR_DUPTHRESH = 3
NPT = 8            # words of a port's transmit record (PT_* in mv_common.cuh)
# where in that record (mirrors the PT_* enum): ring tails by parity, free time and wire bytes in
# its first 32-byte sector (what putting a packet on the wire touches, and what the receiver
# reads), queued bytes by class, dequeued bytes and data packets in its second (a dequeue)
PT = {"tail": 0, "free_ps": 2, "wire_bytes": 3, "qbytes": 4, "tx_bytes": 6, "deq": 7}
# f_path: a flow's egress port index at each of its first NPATH switches, data way then back
NPATH = 8
# node_hash's words: the hash state after (seed, tag, node_local) for each tag (params.TAG_*)
HT = {"ecn": 0, "ecmp": 1, "spray": 2}
NHT = len(HT)
NPI = 4            # words of a port's ingress record (PI_* in mv_common.cuh)
NLR = 24           # words a port of the switch lanes' records (LaneRecs in mv_lanes.cuh, packed by the switch's
                   # width: at most 161 bytes a port for 32 ports; 192 keeps each switch's records on 32-byte
                   # sectors)
# where in it: the MMU's ingress bytes and headroom bytes of the link (an arrival's admission),
# when the pending PFC frame was requested, and the PFC state's bits (PFC: we asked the peer to
# pause, what we last signalled, the peer paused us: what a port's next transmission depends on)
PI = {"in_bytes": 0, "in_hdrm": 1, "pfc_ps": 2, "pfc": 3}
PFC = {"in_paused": 1, "sent": 2, "paused": 4}
NLK = 8            # words of a link class (LK_* in mv_common.cuh): a row of `link`
# where in it: what a port's link is, read-only and the same for every port of the class (the
# batch holds each distinct one once, so that a window's working set holds them once)
LK = {"rate": 0, "delay": 1, "ppb": 2, "kmin": 3, "kmax": 4, "headroom": 5, "shift": 6}

# Packet record (rings and switch/host pools). Layout mirrored by `struct Pkt` in mv_common.cuh.
PKT_DTYPE = np.dtype([("t", "<i8"), ("flow", "<i4"), ("seq", "<i4"), ("next", "<i4"), ("sendno", "<i4"),
                      ("bytes", "<i2"), ("in_port", "<i2"), ("type", "i1"), ("flags", "i1"), ("nint", "i1"),
                      ("hop", "i1")])
# One INT hop record (HPCC), MAX_INT_HOPS per packet slot when the batch uses HPCC.
INT_DTYPE = np.dtype([("ts", "<i8"), ("tx", "<i8"), ("qlen", "<i8"), ("port", "<i8")])

COUNTS = ("n_exp", "n_node", "n_port", "n_task", "n_flow", "n_pred", "n_succ", "n_route", "n_nh",
          "n_rtab", "n_rtnh", "n_slot", "n_int", "n_hop", "n_sr", "n_heap", "n_list", "n_monq", "n_monw",
          "n_fpath", "n_link", "n_flowlet")
# Counts that are at least 1 in a batch (a table nobody uses still gets one row, so that every
# column has a valid address): INT records, HPCC's per-flow hop state, selective repeat's
# per-flow rings, the monitor tables, the dense routing tables and the flows' paths.
MIN_ONE_COUNTS = ("n_int", "n_hop", "n_sr", "n_monq", "n_monw", "n_rtab", "n_rtnh", "n_fpath", "n_link", "n_flowlet")
SCALARS = COUNTS + ("has_int", "has_paths")

_CTYPES = {"i8": "int8_t", "i16": "int16_t", "i32": "int32_t", "i64": "int64_t", "f64": "double",
           "pkt": "Pkt", "int": "IntHop"}
_NP = {"i8": np.int8, "i16": np.int16, "i32": np.int32, "i64": np.int64, "f64": np.float64,
       "pkt": PKT_DTYPE, "int": INT_DTYPE}


@dataclass(frozen=True)
class Column:
    name: str
    ctype: str        # key of _CTYPES
    length: str       # a name from COUNTS
    mult: int         # length multiplier
    doc: str


def _c(name: str, ctype: str, length: str, doc: str, mult: int = 1) -> Column:
    return Column(name, ctype, length, mult, doc)


def is_kernel_written(col: Column) -> bool:
    """State and scratch columns; the others are parameters, written once by the batch builder."""
    return col.doc.startswith(("state", "scratch"))


COLUMNS: tuple[Column, ...] = (
    # ---- experiments -------------------------------------------------------------------------
    _c("exp_node_lo", "i32", "n_exp", "first node of the experiment"),
    _c("exp_node_hi", "i32", "n_exp", "one past its last node"),
    _c("exp_port_lo", "i32", "n_exp", "first port of the experiment (ports are hashed by local id)"),
    _c("exp_n_task", "i32", "n_exp", "tasks of the experiment"),
    _c("exp_n_flow", "i32", "n_exp", "flow tasks of the experiment"),
    _c("exp_window_ps", "i64", "n_exp", "window = minimum link delay (ps)"),
    _c("exp_limit_ps", "i64", "n_exp", "simulated-time limit (ps)"),
    _c("exp_i", "i64", "n_exp", "integer parameters (EI_* in mv_common.cuh)", NEXP_I),
    _c("exp_d", "f64", "n_exp", "double parameters (ED_* in mv_common.cuh)", NEXP_D),
    _c("exp_T_ps", "i64", "n_exp", "state [advance]: window start (the experiment's clock)"),
    _c("exp_iter", "i64", "n_exp", "state [advance]: windows simulated; its parity selects ring buffers"),
    _c("exp_status", "i32", "n_exp", "state [advance]: 0 running, 1 done, 2 stuck, 3 timeout, 4 error, 5 out of compact slots, 6 cancelled"),
    _c("exp_mon_k", "i64", "n_exp", "state [advance]: monitor samples due after the windows simulated, "
       "floor((T + W) / interval) + 1 (0 before the first window or with monitors off); the nodes "
       "record sample k (time k * interval) if k < the experiment's cap (EI_MON_*)"),
    # the GPU's nodes report to their experiment through atomics (kernels/mv_cuda_main.cuh)
    _c("exp_acc_next", "i64", "n_exp", "state [GPU nodes]: earliest next-event time reported in the current "
       "window (atomic minimum; MV_INF between windows)"),
    _c("exp_acc_prog", "i64", "n_exp", "state [GPU nodes]: earliest progress time reported in the current window"),
    _c("exp_done", "i64", "n_exp", "state [GPU nodes]: tasks finished so far (sum of the nodes' reports)"),
    _c("exp_acked", "i64", "n_exp", "state [GPU nodes]: flows fully acknowledged so far"),
    _c("exp_arrive", "i32", "n_exp", "state [GPU nodes]: nodes that finished the current window"),
    _c("exp_lock", "i32", "n_exp", "state [any]: the experiment's lock word, alone in its 64-byte line (the "
       "MV_PUSH_LOCK=2 ablation only)", 16),
    # ---- nodes -------------------------------------------------------------------------------
    _c("node_exp", "i32", "n_node", "experiment of the node"),
    _c("node_order", "i32", "n_node", "processing order of the network phase on the GPU: hosts, then "
       "switches by port count, so that a warp's threads run the same code"),
    _c("node_local", "i32", "n_node", "node id inside its experiment (hash input; batch-independent)"),
    _c("node_is_host", "i8", "n_node", "1 for a host (NIC), 0 for a switch"),
    _c("node_hash", "i64", "n_node", "the experiment's hash state after (seed, tag, node_local) for tags "
       "ECN, ECMP, spray (HT; params.hash_prefixes; the kernels' mv_hash_from goes on from it)", NHT),
    _c("node_port_lo", "i32", "n_node", "first port (global id)"),
    _c("node_port_hi", "i32", "n_node", "one past its last port"),
    _c("node_route_lo", "i32", "n_node", "switch: first route range"),
    _c("node_route_hi", "i32", "n_node", "switch: one past its last route range"),
    _c("node_rtab", "i32", "n_node", "switch: its row of rtab (a dense routing table, engine/routes.py; shared by "
       "the experiments of one topology), -1: none (the range search)"),
    _c("node_rtnh", "i32", "n_node", "switch: where its topology's next-hop sets begin in rtab_nh"),
    _c("node_buffer", "i64", "n_node", "switch: shared buffer bytes"),
    _c("node_reserved", "i64", "n_node", "switch: sum of headroom and reserve over its ports"),
    _c("node_task_lo", "i32", "n_node", "host: first entry of its remote-dependency task list"),
    _c("node_task_hi", "i32", "n_node", "host: one past the last"),
    _c("node_heap_lo", "i32", "n_node", "host: first slot of its task-event heap"),
    _c("node_act_lo", "i32", "n_node", "host: first slot of its active-flow list"),
    _c("node_pool_hi", "i32", "n_node", "one past the last packet slot of the node's pool"),
    _c("node_pool_free", "i32", "n_node", "state [node]: head of the list of returned packet slots (-1 none)"),
    _c("node_pool_next", "i32", "n_node", "state [node]: first never-used slot of the pool"),
    _c("node_shared_used", "i64", "n_node", "state [node]: switch shared-buffer bytes in use"),
    _c("node_data_bytes", "i64", "n_node", "state [node]: switch data bytes queued (lossy mode)"),
    _c("node_heap_n", "i32", "n_node", "state [node]: entries in the heap"),
    _c("node_act_n", "i32", "n_node", "state [node]: active flows"),
    _c("node_rr", "i32", "n_node", "state [node]: id of the flow served last (round robin; -1 none)"),
    _c("node_remote_left", "i32", "n_node", "state [schedule]: tasks still waiting for a remote predecessor"),
    _c("node_next_ps", "i64", "n_node", "state [node]: earliest pending event after the window"),
    _c("node_prog_ps", "i64", "n_node", "state [node]: earliest pending event that can make progress "
       "(all but DCQCN timers): none anywhere means the experiment is stuck"),
    _c("node_tasks_done", "i32", "n_node", "state [node]: tasks finished here"),
    _c("node_flows_acked", "i32", "n_node", "state [node]: flows of this host fully acknowledged"),
    _c("node_last_ps", "i64", "n_node", "state [node]: time of the last completion here"),
    _c("node_event_ps", "i64", "n_node", "state [node]: time of the last event processed here"),
    _c("node_quiet", "i8", "n_node", "state [node]: a switch processed no event in the last window that left "
       "it nothing pending, a host none in its last window (then it may skip the next ones: "
       "kernels/mv_window.cuh, switch_quiet, host_quiet)"),
    _c("node_ctr", "i64", "n_node", "state [node]: counters (COUNTERS)", NCTR),
    _c("node_iter", "i64", "n_node", "state [node, GPU]: windows the node has simulated (it may start window "
       "k when its experiment's exp_iter is k)"),
    # ---- ports (one per link direction, owned by the sender) ---------------------------------
    _c("port_node", "i32", "n_port", "owner node"),
    _c("port_peer", "i32", "n_port", "the peer's port on the same link (its ring is our input)"),
    _c("port_wire", "i32", "n_port", "the port's wire, 16 bytes (PW_* in mv_common.cuh): first packet slot of "
       "its ring, ring capacity (a power of two: a slot is pos & (cap - 1)), its link class (a row of "
       "`link`), 0", 4),
    _c("port_tx", "i64", "n_port", "state [node]: the port's transmit record, one 64-byte line (PT_* in "
       "mv_common.cuh, PT here): packets ever sent by iteration parity (the ring's tails, read by the peer), "
       "busy-until time, every byte put on the wire (link utilisation); queued bytes (control, data), bytes "
       "dequeued for transmission (INT; no PFC frames), data packets dequeued (ECN hash counter)", NPT),
    _c("port_head", "i64", "n_port", "state [peer node]: packets of this ring consumed, by parity", 2),
    _c("port_q", "i32", "n_port", "state [node]: queue heads (control, data), then tails, into the pool "
       "(one 16-byte record)", 4),
    _c("port_qmax", "i64", "n_port", "state [node]: maximum queued bytes seen"),
    _c("port_pool", "i32", "n_port", "state [node]: the switch port's own list of free packet slots of its node's "
       "pool: head (-1: none), count (kernels/mv_common.cuh: the slots its windows run port by port free)", 2),
    _c("port_in", "i64", "n_port", "state [node]: the ingress record of the port's link, 32 bytes (PI_* in "
       "mv_common.cuh, PI here): MMU ingress bytes and headroom bytes of this link (switch), when the "
       "pending PFC frame was requested, the PFC state's bits (PFC here: we asked the peer to pause, pause "
       "state last signalled to the peer, data class paused by the peer)", NPI),
    # ---- link classes (what a port's link is: one row per distinct combination in the batch) --
    _c("link", "i64", "n_link", "a link class, one 64-byte line (LK_* in mv_common.cuh, LK here): rate (b/s), "
       "propagation delay (ps), serialization ps per byte when the rate divides 8e12 exactly else 0 (then "
       "the rate is used), ECN Kmin and Kmax bytes of its egress, PFC headroom and dynamic-threshold shift "
       "of its ingress", NLK),
    _c("link_pmax", "f64", "n_link", "the link class's ECN Pmax"),
    _c("node_lock", "i32", "n_node", "state [any]: the node's lock word (the MV_PUSH_LOCK ablation only; 0: free)"),
    _c("node_cached", "i8", "n_node", "state [node]: the switch's port caches (port_ta ...) hold its state "
       "(built in its first window, then kept up to date)"),
    # ---- tasks (flows are tasks) -------------------------------------------------------------
    _c("task_kind", "i8", "n_task", "0 flow, 1 delay"),
    _c("task_src", "i32", "n_task", "start node (global id): flow src / delay host"),
    _c("task_dst", "i32", "n_task", "finish node (global id): flow dst / delay host"),
    _c("task_flow", "i32", "n_task", "the flow row of a flow task (global), -1 for a delay"),
    _c("task_dur_ps", "i64", "n_task", "delay duration"),
    _c("task_min_ps", "i64", "n_task", "earliest start"),
    _c("task_pred_lo", "i32", "n_task", "predecessors (remote ones only) in task_pred"),
    _c("task_pred_hi", "i32", "n_task", ""),
    _c("task_succ_lo", "i32", "n_task", "successors in task_succ"),
    _c("task_succ_hi", "i32", "n_task", ""),
    _c("task_local_left", "i32", "n_task", "state [start node]: local predecessors not finished"),
    _c("task_ready_max", "i64", "n_task", "state [start node]: latest local predecessor finish"),
    _c("task_remote_ps", "i64", "n_task", "state [schedule]: remote readiness, -1 unknown"),
    _c("task_start_ps", "i64", "n_task", "state [start node]: start time (-1 not started)"),
    _c("task_finish_ps", "i64", "n_task", "state [finish node]: finish time (INF not finished)"),
    _c("task_pred", "i32", "n_pred", "remote predecessor task ids (global)"),
    _c("task_succ", "i32", "n_succ", "successor task ids (global)"),
    _c("node_remote_list", "i32", "n_list", "per host: tasks starting there with remote predecessors"),
    # ---- flows: a row per flow task (task_flow), the experiment's flows in task order ----------
    _c("f_task", "i32", "n_flow", "the flow's task id (global)"),
    _c("f_local", "i32", "n_flow", "the flow's task id inside the experiment (hash input)"),
    _c("f_src_local", "i32", "n_flow", "source host id inside the experiment"),
    _c("f_dst_local", "i32", "n_flow", "routing destination: destination host id inside the experiment"),
    _c("f_path", "i16", "n_fpath", "the flow's ECMP path: at its i-th switch, the egress port's index among the "
       "switch's ports, for the data way (first NPATH) and back (ACKs, NACKs); -1: not known here (the switch "
       "routes the packet itself: spraying, no dense table, longer paths; routes.flow_paths). A row per flow "
       "where has_paths, else one row", 2 * NPATH),
    _c("f_size", "i64", "n_flow", "bytes"),
    _c("f_npkt", "i32", "n_flow", "packets of the flow"),
    _c("f_line_bps", "i64", "n_flow", "NIC rate of the source"),
    _c("f_base_rtt_ps", "i64", "n_flow", "base RTT"),
    _c("f_win", "i64", "n_flow", "window bytes at line rate (0 = none)"),
    _c("f_snd_nxt", "i32", "n_flow", "state [src]: next packet to send"),
    _c("f_snd_una", "i32", "n_flow", "state [src]: first unacknowledged packet"),
    _c("f_next_tx", "i64", "n_flow", "state [src]: pacing: earliest next send"),
    _c("f_progress_ps", "i64", "n_flow", "state [src]: last acknowledgement progress (RTO)"),
    _c("f_sends", "i32", "n_flow", "state [src]: data packets sent (spray hash input)"),
    _c("f_max_sent", "i32", "n_flow", "state [src]: one past the highest packet ever sent (retransmissions)"),
    _c("f_rate", "f64", "n_flow", "state [src]: sending rate (b/s)"),
    _c("f_done_ps", "i64", "n_flow", "state [src]: last byte acknowledged (-1 not yet)"),
    _c("f_ccd", "f64", "n_flow", "state [src]: congestion-control doubles (CD_*)", NCCD),
    _c("f_cci", "i64", "n_flow", "state [src]: congestion-control integers (CI_*)", NCCI),
    _c("f_hop", "i64", "n_hop", "scratch: HPCC's last INT per hop (HI_*; written when the flow starts); a row "
       "per flow when the batch has HPCC experiments, else one", NHOPI),
    _c("f_rx_next", "i32", "n_flow", "state [dst]: next expected packet"),
    _c("f_rx_map", "i64", "n_sr", "state [dst]: selective repeat: packets received beyond f_rx_next, bit "
       "s % SR_WINDOW of a ring of SR_WORDS words for packet s; a row per flow when the batch has "
       "selective-repeat experiments, else one", SR_WORDS),
    _c("f_sack_map", "i64", "n_sr", "state [src]: selective repeat: packets selectively acknowledged beyond "
       "f_snd_una, bit s % SR_WINDOW for packet s (valid for f_snd_una <= s < f_snd_nxt); rows as "
       "f_rx_map's", SR_WORDS),
    _c("f_lost_hi", "i32", "n_flow", "state [src]: selective repeat: packets below it not acknowledged are "
       "presumed lost"),
    _c("f_rtx_nxt", "i32", "n_flow", "state [src]: selective repeat: the next packet to retransmit if it is "
       "below min(f_lost_hi, f_snd_nxt): never selectively acknowledged, at least f_snd_una"),
    _c("f_nack_ps", "i64", "n_flow", "state [dst]: NACK rate-limit timer"),
    _c("f_last_nack", "i32", "n_flow", "state [dst]: sequence of the last NACK"),
    # ---- routing ------------------------------------------------------------------------------
    _c("route_dst_lo", "i32", "n_route", "first destination host (local id) of the range"),
    _c("route_nh_lo", "i32", "n_route", "next-hop ports of the range in route_nh"),
    _c("route_nh_hi", "i32", "n_route", ""),
    _c("route_nh", "i32", "n_nh", "next-hop ports (global ids)"),
    _c("rtab", "i32", "n_rtab", "dense routing tables, a row per switch of each distinct topology, an entry per "
       "destination host: (a << 8) | n, n next hops; n = 1: the port's index among the switch's ports; n > 1: "
       "the first of them in rtab_nh, from node_rtnh"),
    _c("rtab_nh", "i32", "n_rtnh", "next-hop sets of the dense tables: port indices among their switch's ports"),
    _c("node_flowlet", "i64", "n_flowlet", "state [switch]: adaptive routing's flowlet table (network.flowlet_gap_ns): "
       "FLOWLET_ENTRIES entries of (time of the last data packet routed by it, 1 + its egress port's index among "
       "the switch's ports; 0: empty); a row per node when the batch has flowlet experiments, else one",
       2 * FLOWLET_ENTRIES),
    # ---- packets, task heaps, active lists ---------------------------------------------------
    _c("pkt", "pkt", "n_slot", "scratch: packet slots: port rings, then node pools"),
    _c("pkt_int", "int", "n_int", "scratch: INT records, MAX_INT_HOPS per slot (HPCC batches only)"),
    # A switch's event-selection caches, kept from one window to the next (kernels/mv_step.cuh)
    _c("port_ta", "i64", "n_port", "scratch: earliest arrival on the port's in-ring (MV_INF: empty when last seen); "
       "this and the next four: caches of switches with trees (more than MV_TREE_PORTS ports)"),
    _c("port_td", "i64", "n_port", "scratch: when the port can start its next transmission (MV_INF: nothing to send)"),
    _c("port_what", "i32", "n_port", "scratch: what that transmission is (Q_CTL, Q_DATA, 2: a PFC frame)"),
    _c("port_tree", "i16", "n_port", "scratch: tournament-tree winners of the port's switch (arrivals, then "
       "transmissions; 2 x the next power of two of its ports, from 4 x its first port)", 4),
    _c("port_tree_t", "i64", "n_port", "scratch: the values of those winners", 4),
    # The switch lanes' tables (MV_SWITCH_LANES 2, the GPU's groups kernel: kernels/mv_cuda_main.cuh),
    # in global memory rather than shared: a block's shared memory is taken from its SM's L1
    _c("port_lane", "i64", "n_port", "scratch: switch lanes: a window's records of the port's switch, in its "
       "ports' rows (LaneRecs in kernels/mv_step.cuh, NLR words a port)", NLR),
    _c("port_lane_last", "i64", "n_port", "scratch: switch lanes: the time of the port's last event of the window "
       "(-1: none; -2: a compact ring ran out)"),
    _c("node_lane", "i32", "n_node", "scratch: switch lanes: how the switch's window runs (LANES_* in "
       "kernels/mv_step.cuh)"),
    _c("heap_t", "i64", "n_heap", "state [host]: task-event heap times"),
    _c("heap_task", "i32", "n_heap", "state [host]: task-event heap keys (2 * task + kind)"),
    _c("act_flow", "i32", "n_heap", "state [host]: active flows (flow rows), sorted (round-robin order)"),
    # ---- monitors (docs/engine.md, "Monitors"; one row when no experiment of the batch uses them)
    _c("mon_q", "i64", "n_monq", "state [node]: queue monitor: data bytes queued at port j of an experiment "
       "at sample k, at EI_MON_QLO + k * EI_MON_NPORT + j (k < EI_MON_CAP)"),
    _c("mon_w", "i64", "n_monw", "state [node]: link monitor: bytes port j has put on the wire before "
       "sample k (port_wire_bytes), at EI_MON_WLO + k * EI_MON_NPORT + j"),
)


def numpy_dtype(col: Column) -> np.dtype:
    return np.dtype(_NP[col.ctype])


def c_struct_source() -> str:
    """The `struct Ctx` declaration the kernels are compiled with."""
    lines = [f"#define NCTR {NCTR}", f"#define NCCD {NCCD}", f"#define NCCI {NCCI}", f"#define NHOPI {NHOPI}", f"#define NPT {NPT}",
             f"#define NEXP_I {NEXP_I}", f"#define NEXP_D {NEXP_D}",
             f"#define NPI {NPI}", f"#define NLR {NLR}", f"#define MAX_LINK_DOWN {MAX_LINK_DOWN}", f"#define NDOWN {NDOWN}",
             f"#define FLOWLET_ENTRIES {FLOWLET_ENTRIES}",
             *(f"#define SCHEMA_DOWN_{k.upper()} {v}" for k, v in DOWN.items()),
             *(f"#define SCHEMA_PT_{k.upper()} {v}" for k, v in PT.items()),
             *(f"#define SCHEMA_PI_{k.upper()} {v}" for k, v in PI.items()),
             *(f"#define SCHEMA_PFC_{k.upper()} {v}" for k, v in PFC.items()),
             *(f"#define SCHEMA_ACKS_{k.upper()} {v}" for k, v in ACKS.items()),
             f"#define NLK {NLK}", *(f"#define SCHEMA_LK_{k.upper()} {v}" for k, v in LK.items()),
             f"#define SR_WORDS {SR_WORDS}", f"#define SR_WINDOW {SR_WINDOW}", f"#define SR_DUPTHRESH {SR_DUPTHRESH}",
             f"#define NHT {NHT}", f"#define NPATH {NPATH}", *(f"#define SCHEMA_HT_{k.upper()} {v}" for k, v in HT.items()), "struct Ctx {"]
    for s in SCALARS:
        lines.append(f"  int64_t {s};")
    for col in COLUMNS:
        # a parameter column is read-only to the kernels (MvRo, kernels/mv_backend.cuh): writing
        # one does not compile, and a GPU reads it through the read-only data path
        kind = f"{_CTYPES[col.ctype]}*" if is_kernel_written(col) else f"MvRo<{_CTYPES[col.ctype]}>"
        lines.append(f"  {kind} {col.name};  // {col.doc}")
    lines.append("};")
    return "\n".join(lines) + "\n"


def c_enum_source() -> str:
    """The kernels' CC_*, LB_* and TR_* enums: the codes of the congestion-control algorithms, the
    load balancers and the transports (mvopt/_cfg/algorithms.py), the values of an experiment's
    EI_CC, EI_SPRAY and EI_TRANSPORT slots."""
    enums = ([(f"CC_{c.name}", c.code) for c in CONGESTION_CONTROLS],
             [(f"LB_{name}", k) for k, name in enumerate(LOAD_BALANCERS)],
             [(f"TR_{name}", k) for k, name in enumerate(TRANSPORTS)])
    return "".join("enum { " + ", ".join(f"{n.upper()} = {k}" for n, k in e) + " };\n" for e in enums)


def c_check_source() -> str:
    """`static_assert`s that stop the build when the kernels' EI_* / ED_* enums do not list an
    experiment's parameter slots as EI / ED do (the batch builder writes them in that order)."""
    lines = []
    for prefix, slots, width in (("EI", EI, "NEXP_I"), ("ED", ED, "NEXP_D")):
        same = " && ".join(f"{prefix}_{name.upper()} == {k}" for k, name in enumerate(slots))
        lines.append(f"static_assert({same} && {prefix}_COUNT == {len(slots)} && {prefix}_COUNT <= {width},\n"
                     f"              \"schema.{prefix} does not list the {prefix}_* enum of mv_common.cuh in order\");")
    return "\n".join(lines) + "\n"
