// THE step. One iteration = two phases separated by barriers:
//   1. window    (per node)       each node processes all its events in [T, T + W) of its
//                                 experiment, in time order; a host first pulls the finish times
//                                 of remote predecessors that finished before T (schedule_node).
//                                 Everything sent in the window arrives at >= T + W
//                                 (W = minimum link delay), so nodes are independent; a node
//                                 writes only its own rows (and the ring slots beyond its
//                                 published tail, which no reader looks at in this window).
//   2. advance   (per experiment) reduces the nodes' next-event times: T <- max(T + W, earliest
//                                 pending event) (idle skipping), or ends the experiment.
// The "barrier" only has to separate the nodes of one experiment (the GPU's groups kernel uses
// a block's barrier: kernels/mv_cuda_main.cuh). A node's window runs its systems (mv_host.cuh,
// mv_switch.cuh) in one of two schedules: events in time order on one thread (mv_window.cuh),
// or, for a switch, port by port (mv_lanes.cuh).
#pragma once

// Node v's window of its (running) experiment: phase 1 of the step.
// MV_TRACE_NODE(v): a hook at the start of node v's window, empty but in the memory-trace build
// of experiments/diag_l1_trace.py, which marks there where each node's accesses begin.
#ifndef MV_TRACE_NODE
#define MV_TRACE_NODE(v)
#endif
// `lanes`: whether a switch's window may run port by port here (switch_window_lanes; the GPU's
// groups kernel runs those windows itself and calls this with false for the others). KIND: what
// the caller knows v is (NODE_HOST, NODE_SWITCH: the other kind's code left out where this is
// inlined), else NODE_ANY.
enum { NODE_ANY = 0, NODE_HOST = 1, NODE_SWITCH = 2 };
template <int KIND = NODE_ANY>
MV_DEV void node_window(Ctx* c, int64_t v, bool lanes) {
  MV_TRACE_NODE(v);
  int64_t e = c->node_exp[v];
  int par = parity(c, e);
  int64_t te = c->exp_T_ps[e] + c->exp_window_ps[e];
  bool host = KIND == NODE_HOST || (KIND == NODE_ANY && c->node_is_host[v]);
  // a quiet node skips its window (a switch before the lanes' scans, which would find nothing to do)
  if (host ? host_quiet(c, e, v, te, par) : switch_quiet(c, e, v, te, par)) return;
  if (lanes && switch_lanes_fit(c, v)) {
    // (serial: the scans did node_begin's copies; one call site of the serial windows below, as
    // nvcc inlines them: a second one made it spill more)
    if (switch_window_lanes(c, e, v, te, par) != LANES_SERIAL) return;
  } else {
    if (host) schedule_node(c, v);
    node_begin(c, v, par);
  }
  if (host) host_window(c, e, v, te, par);
  else {   // (wide switches keep their caches from one window to the next)
    int64_t n = c->node_port_hi[v] - c->node_port_lo[v];
    if (n > MV_TREE_PORTS && n <= MV_CACHE_PORTS) switch_window_of<true>(c, e, v, te, par);
    else switch_window_of<false>(c, e, v, te, par);
  }
}

// Phase 2 of the step for experiment e from its nodes' reports: the earliest pending event
// (`next`), the earliest one that can make progress (`prog`; MV_CAP if a node ran out of slots), and the
// tasks finished and flows acknowledged so far. The window count is written last, after a
// fence (`publish`): on the GPU it is the signal that lets the experiment's nodes start the next
// window (a caller whose nodes are ordered by a barrier of their own needs no fence).
MV_DEV void advance_with(Ctx* c, int64_t e, int64_t next, int64_t prog, int64_t done, int64_t acked,
                         bool publish = true) {
  int64_t w = c->exp_window_ps[e];
  int64_t iv = EI(c, e, EI_MON_PS);   // the nodes recorded every sample due by the window's end
  if (iv > 0) c->exp_mon_k[e] = (c->exp_T_ps[e] + w) / iv + 1;
  int64_t t = mv_max(c->exp_T_ps[e] + w, next);
  if (prog == MV_CAP) c->exp_status[e] = ST_CAPACITY;
  else if (done == c->exp_n_task[e] && acked == c->exp_n_flow[e]) c->exp_status[e] = ST_DONE;
  else if (prog >= MV_INF) c->exp_status[e] = ST_STUCK;
  else if (t > c->exp_limit_ps[e]) c->exp_status[e] = ST_TIMEOUT;
  else c->exp_T_ps[e] = t;
  if (!publish) {
    c->exp_iter[e] += 1;
    return;
  }
  MV_FENCE();
  MV_STORE_SHARED(c->exp_iter[e], c->exp_iter[e] + 1);
}

// Node v's report folded into an experiment's: the earliest next and progress times, the tasks
// and flows finished so far (minima and sums: the order of the nodes cannot change the result).
MV_DEV void fold_report(const Ctx* c, int64_t v, int64_t* next, int64_t* prog, int64_t* done, int64_t* acked) {
  *next = mv_min(*next, c->node_next_ps[v]);
  *prog = mv_min(*prog, c->node_prog_ps[v]);
  *done += c->node_tasks_done[v];
  *acked += c->node_flows_acked[v];
}

// Phase 2 by a reduction over the experiment's nodes (the CPU's form; the GPU's nodes report
// through atomics instead).
MV_DEV void advance_exp(Ctx* c, int64_t e) {
  if (c->exp_status[e] != ST_RUN) return;
  int64_t next = MV_INF, prog = MV_INF, done = 0, acked = 0;
  for (int64_t v = c->exp_node_lo[e]; v < c->exp_node_hi[e]; ++v) fold_report(c, v, &next, &prog, &done, &acked);
  advance_with(c, e, next, prog, done, acked);
}
