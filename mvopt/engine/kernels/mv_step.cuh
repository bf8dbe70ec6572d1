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
// The "barrier" only has to separate the nodes of one experiment: the GPU's async launch lets
// each experiment move on alone (kernels/mv_cuda_main.cuh).
#pragma once

MV_DEV int parity(const Ctx* c, int64_t e) { return (int)(c->exp_iter[e] & 1); }

// Arrival time of the packet at position `pos` of in-ring q (port q of our peer), MV_INF if the
// ring holds none there that is visible in this iteration.
MV_DEV int64_t ring_t_at(const Ctx* c, int64_t q, int64_t pos, int par) {
  if (pos >= PORT_T(c, q, PT_TAIL + (par ^ 1))) return MV_INF;
  return ring_load_t(&c->pkt[ring_slot(c, q, pos)]);
}
// Earliest unconsumed arrival on in-ring q visible in this iteration.
MV_DEV int64_t ring_head_t(const Ctx* c, int64_t q, int par) {
  return ring_t_at(c, q, c->port_head[q * 2 + par], par);
}

MV_DEV void node_begin(Ctx* c, int64_t v, int par) {
  for (int64_t p = c->node_port_lo[v]; p < c->node_port_hi[v]; ++p) {
    int64_t q = c->port_peer[p];
    int64_t head = c->port_head[q * 2 + (par ^ 1)];
    c->port_head[q * 2 + par] = head;
    PORT_T(c, p, PT_TAIL + par) = PORT_T(c, p, PT_TAIL + (par ^ 1));
  }
}

// Earliest arrival among the packets this node sent in this iteration.
MV_DEV int64_t node_sent_min(const Ctx* c, int64_t v, int par) {
  int64_t m = MV_INF;
  for (int64_t p = c->node_port_lo[v]; p < c->node_port_hi[v]; ++p) {
    int64_t from = PORT_T(c, p, PT_TAIL + (par ^ 1));
    if (PORT_T(c, p, PT_TAIL + par) > from) m = mv_min(m, c->pkt[ring_slot(c, p, from)].t);
  }
  return m;
}

// ---- monitors (docs/engine.md, "Monitors") ---------------------------------------------------
// Sample k is the state at time k * interval after every event before that time: a node records
// the samples due by an event's time before it processes the event, and those due by the window's
// end when the window ends. Samples before the window were recorded in earlier windows: the first
// one left is exp_mon_k (set by the advance phase). MV_INF when monitors are off or the table is
// full, so that without monitors a window pays one comparison per event.
MV_DEV int64_t mon_next(const Ctx* c, int64_t e) {
  int64_t iv = EI(c, e, EI_MON_PS);
  if (iv <= 0) return MV_INF;
  int64_t k = c->exp_mon_k[e];
  return k < EI(c, e, EI_MON_CAP) ? k * iv : MV_INF;
}

// Record node v's samples due at or before t, starting with the one due at s (a multiple of the
// interval); returns the time of the next one, MV_INF once the cap is reached. Only v's own ports
// (rows), so the tables need no synchronisation. Not inlined: the event loops only pay a
// comparison with the next sample time.
MV_COLD int64_t mon_record(Ctx* c, int64_t e, int64_t v, int64_t s, int64_t t) {
  int64_t iv = EI(c, e, EI_MON_PS), cap = EI(c, e, EI_MON_CAP), np = EI(c, e, EI_MON_NPORT);
  int64_t qlo = EI(c, e, EI_MON_QLO), wlo = EI(c, e, EI_MON_WLO);
  int64_t lo = c->node_port_lo[v], hi = c->node_port_hi[v], j0 = lo - c->exp_port_lo[e];
  int64_t k = s / iv;
  for (; s <= t && k < cap; ++k, s += iv) {
    int64_t row = k * np + j0 - lo;
    for (int64_t p = lo; p < hi; ++p) {
      c->mon_q[qlo + row + p] = PORT_T(c, p, PT_QBYTES + Q_DATA);
      if (wlo >= 0) c->mon_w[wlo + row + p] = PORT_T(c, p, PT_WIRE_BYTES);
    }
  }
  return k < cap ? s : MV_INF;
}

// Ports whose next-event times a switch keeps cached (thread-local arrays refilled each window
// up to MV_TREE_PORTS ports; beyond, port_ta, port_td, port_what and the trees in port_tree,
// kept from one window to the next); wider switches take the same decisions by rescanning
// every port, once per event. 256 covers today's switch radixes: with 64, a 128-port
// spine rescanned and its rail-optimised experiment took 6.7 s instead of 3.1 s on one core
// (docs/performance.md), and on the GPU the widest switch's thread sets the pace of every window.
#ifndef MV_CACHE_PORTS
#define MV_CACHE_PORTS 256
#endif

// Switches with more cached ports than this find their next arrival and transmission with two
// tournament trees over the cached times (log2 ports per update) instead of a scan per event.
#ifndef MV_TREE_PORTS
#define MV_TREE_PORTS 8
#endif

// Tournament tree over val[0..n) padded to P (a power of two) leaves. Internal node i
// (1 <= i < P) holds the winner below it: its index w[i] and value tv[i], the smallest value,
// the lower index on ties (the order of a left-to-right scan). Leaf P + k is port k (val[k]).
// An update walks from the leaf to the root reading only siblings, whose addresses do not depend
// on what was read before: the loads of a walk can all be in flight at once (storing indices
// only, each level read two indices and then their values, a chain twice the tree's height).
MV_DEV void tree_child(const int64_t* tv, const int16_t* w, const int64_t* val, int n, int P, int i,
                       int64_t* v, int* k) {
  if (i >= P) { *k = i - P; *v = *k < n ? val[*k] : MV_INF; }
  else { *k = w[i]; *v = tv[i]; }
}
MV_DEV void tree_build(int64_t* tv, int16_t* w, const int64_t* val, int n, int P) {
  for (int i = P - 1; i >= 1; --i) {
    int64_t vl, vr;
    int l, r;
    tree_child(tv, w, val, n, P, 2 * i, &vl, &l);
    tree_child(tv, w, val, n, P, 2 * i + 1, &vr, &r);
    bool right = vr < vl;
    tv[i] = right ? vr : vl;
    w[i] = (int16_t)(right ? r : l);
  }
}
MV_DEV void tree_update(int64_t* tv, int16_t* w, const int64_t* val, int n, int P, int k) {
  int64_t v = val[k];
  int win = k;
  for (int i = P + k; i > 1; i >>= 1) {
    int64_t sv;
    int sk;
    tree_child(tv, w, val, n, P, i ^ 1, &sv, &sk);
    if (sv < v || (sv == v && (i & 1))) { v = sv; win = sk; }   // a left sibling wins ties
    tv[i >> 1] = v;
    w[i >> 1] = (int16_t)win;
  }
}
// The winner's index (P == 1: the only port).
MV_DEV int tree_min(const int16_t* w, int P) { return P > 1 ? w[1] : 0; }

// The caches of a switch with trees (n ports from lo) at the start of a window. They are exact at the end
// of every window: a port's next transmission and what it is depend on the switch's own state
// alone, and an in-ring's head packet only changes when the switch consumes it, except that an
// empty ring may have received packets since. So the first window fills them, and later ones
// only look again at the rings that were empty.
MV_DEV void switch_caches_begin(Ctx* c, int64_t v, int64_t lo, int64_t n, int P, int par) {
  int64_t* ta_p = c->port_ta + lo;
  int16_t* wa = c->port_tree + 4 * lo;
  int64_t* va = c->port_tree_t + 4 * lo;
  if (!c->node_cached[v]) {
    int64_t* td_p = c->port_td + lo;
    for (int64_t k = 0; k < n; ++k) {
      int what;
      ta_p[k] = ring_head_t(c, c->port_peer[lo + k], par);
      td_p[k] = switch_port_next(c, lo + k, &what);
      c->port_what[lo + k] = what;
    }
    tree_build(va, wa, ta_p, (int)n, P);
    tree_build(va + P, wa + P, td_p, (int)n, P);
    c->node_cached[v] = 1;
    return;
  }
  for (int64_t k = 0; k < n; ++k) {
    if (ta_p[k] < MV_INF) continue;
    int64_t t = ring_head_t(c, c->port_peer[lo + k], par);
    if (t >= MV_INF) continue;
    ta_p[k] = t;
    tree_update(va, wa, ta_p, (int)n, P, (int)k);
  }
}

// MV_PORT_CLASS_AGAIN: a transmission decides what its port sends again even when its start
// was not moved (switch_window_of); 0 takes the port's cached class then. Results do not depend
// on it. 0, the default: CPU, one core, workload (a) 8 x 16 MiB, five alternating pairs: medians
// 0.706 against 0.728 s; H200, groups mode, (a) 8 MiB x 4,096: 1.248 against 1.232 G packet-hops/s
// (thirteenth session; nvcc 13 spills more in the graph mode's window kernel with it, 60 / 204
// bytes instead of 32 / 32: `graph-classagain` in experiments/profile_gpu.py compares).
#ifndef MV_PORT_CLASS_AGAIN
#define MV_PORT_CLASS_AGAIN 0
#endif

// What port p sends at a start t: the class its next transmission was computed with (`what`,
// from switch_port_next: switch_port_class at that time, from the port's state, which every
// event that changes it recomputes), unless the start was moved up to a later event's time
// (`what` -1: more may be queued by then) or MV_PORT_CLASS_AGAIN asks to decide again.
MV_DEV int switch_start_class(const Ctx* c, int64_t p, int64_t t, int what) {
  return MV_PORT_CLASS_AGAIN || what < 0 ? switch_port_class(c, p, t) : what;
}

// MV_LATE_NEXT_ARRIVAL (a variant to measure on the GPU, where the direct path is off): a switch
// arrival stores its in-ring's next arrival time in the cache after the arrival, not before
// (see switch_window_of). Results do not depend on it.
#ifndef MV_LATE_NEXT_ARRIVAL
#define MV_LATE_NEXT_ARRIVAL 0
#endif

// MV_EVENT_PAIRS: a turn of a switch's event loop takes an arrival and then, if the next event
// is a transmission, that transmission too (0: one event per turn; see switch_window_of).
// Results do not depend on it (the same events in the same order). On by default on the GPU,
// whose warps it is for; off on the CPU (measured: docs/engine.md, "Event pairs").
#ifndef MV_EVENT_PAIRS
#if defined(MV_BACKEND_CUDA)
#define MV_EVENT_PAIRS 1
#else
#define MV_EVENT_PAIRS 0
#endif
#endif

// `now` is the time of the event being processed: a port whose data became sendable through an
// event at `now` (a RESUME, an ACK opening a window) cannot start before it. Ties: arrivals
// before transmissions, lower port index first.
// TREE: the switch has more than MV_TREE_PORTS ports (and at most MV_CACHE_PORTS): its caches
// and trees persist in the scratch columns. A smaller switch refills thread-local arrays at
// the start of each window: cheaper for a few ports than caches in memory, whose every store the
// compiler must assume may alias another column (measured on the CPU: workload (a), 4-port
// switches, 5-7 % slower with persisted caches). A wider one rescans every port per event.
template <bool TREE> MV_DEV void switch_window_of(Ctx* c, int64_t e, int64_t v, int64_t te, int par) {
  int64_t now = c->exp_T_ps[e];
  int64_t lo = c->node_port_lo[v], n = c->node_port_hi[v] - lo;
  bool cached = TREE || n <= MV_TREE_PORTS;
  const bool tree = TREE;
  int64_t ta_l[TREE ? 1 : MV_TREE_PORTS], td_l[TREE ? 1 : MV_TREE_PORTS];
  int32_t what_l[TREE ? 1 : MV_TREE_PORTS];
  int64_t* ta_p = TREE ? c->port_ta + lo : ta_l;
  int64_t* td_p = TREE ? c->port_td + lo : td_l;
  int32_t* what_p = TREE ? c->port_what + lo : what_l;
  int P = 1;
  while (TREE && P < n) P <<= 1;
  int16_t* wa = c->port_tree + 4 * lo;     // tree winners: arrivals, then transmissions
  int16_t* wd = wa + P;
  int64_t* va = c->port_tree_t + 4 * lo;   // and their values
  int64_t* vd = va + P;
  int64_t ms = mon_next(c, e);   // next monitor sample
  bool busy = false;             // processed an event in this window
  // recompute the cached next transmission of port p (an event may have changed it)
  auto refresh = [&](int64_t p) {
    int what;
    td_p[p - lo] = switch_port_next(c, p, &what);
    what_p[p - lo] = what;
    if (tree) tree_update(vd, wd, td_p, (int)n, P, (int)(p - lo));
  };
  if (TREE) switch_caches_begin(c, v, lo, n, P, par);
  else if (cached) {
    for (int64_t k = 0; k < n; ++k) {
      int what;
      ta_p[k] = ring_head_t(c, c->port_peer[lo + k], par);
      td_p[k] = switch_port_next(c, lo + k, &what);
      what_p[k] = what;
    }
  }
  int64_t ta, ia, td, id;   // the next arrival (time, port) and transmission (time, port, what)
  int what_d;
  // find them: the earliest in-ring head, and the earliest port start (one due before `now`
  // starts at `now`)
  auto pick = [&] {
    ta = MV_INF; ia = -1; td = MV_INF; id = -1;
    what_d = -1;
    bool scan = true;
    if (tree) {
      int ka = tree_min(wa, P), kd = tree_min(wd, P);
      if (ka < n && ta_p[ka] < MV_INF) { ta = ta_p[ka]; ia = lo + ka; }
      int64_t m = kd < n ? td_p[kd] : MV_INF;
      // transmissions due before `now` all start at `now`, the lowest port first: only then scan
      if (m >= now) {
        scan = false;
        if (m < MV_INF) { td = m; id = lo + kd; what_d = what_p[kd]; }
      }
    }
    for (int64_t k = 0; scan && k < n; ++k) {
      int64_t t, t2;
      int what;
      if (cached) { t = ta_p[k]; t2 = td_p[k]; what = what_p[k]; }
      else { t = ring_head_t(c, c->port_peer[lo + k], par); t2 = switch_port_next(c, lo + k, &what); }
      if (!tree && t < ta) { ta = t; ia = lo + k; }
      if (t2 < MV_INF && t2 < now) {   // due before `now`: starts then, what it sends decided then
        t2 = now;
        what = -1;
      }
      if (t2 < td) { td = t2; id = lo + k; what_d = what; }
    }
  };
  // the switch's state is left as the serial order of its events left it; `now` the last one's
  // time (every event: a monitor sample due by then first)
  auto begin_event = [&](int64_t t) {
    busy = true;
    now = t;
    if (ms <= now) ms = mon_record(c, e, v, ms, now);
    note_event(c, v, now);
  };
  auto out_of_slots = [&] {   // the compact capacities ran out: the experiment runs again
    c->node_next_ps[v] = c->node_prog_ps[v] = MV_CAP;
    note_window_end(c, v, busy, now);
  };
  // the window's end: the report, and the next pending event
  auto end_window = [&] {
    if (ms <= te) mon_record(c, e, v, ms, te);
    int64_t next = mv_min(mv_min(ta, td), node_sent_min(c, v, par));
    c->node_next_ps[v] = c->node_prog_ps[v] = next;
    // read only after a window that left nothing pending, so written only then (a busy
    // switch pays no store)
    if (next >= MV_INF) c->node_quiet[v] = !busy;
    note_window_end(c, v, busy, now);
  };
  // the arrival at ta on port ia (false: the compact capacities ran out, the window ended)
  auto arrival = [&]() -> bool {
    begin_event(ta);
    int64_t a = -1, b;   // ports whose cached transmission times the arrival may have changed
    int64_t q = c->port_peer[ia];
    int64_t head = c->port_head[q * 2 + par];
    // the in-ring's next arrival, once this one is consumed (first: alone() reads it; if the
    // arrival then runs out of slots, the experiment ends and is run again from its start with
    // full ones, so a persisted cache one packet ahead of port_head is never read). Without the
    // direct path nothing reads it before the arrival's end: MV_LATE_NEXT_ARRIVAL stores it
    // there, so that its load overlaps the arrival's own instead of stalling before it.
    const bool late = MV_LATE_NEXT_ARRIVAL && !MV_DIRECT;
    int64_t next_ta = cached ? ring_t_at(c, q, head + 1, par) : MV_INF;
    auto cache_next_arrival = [&] {
      ta_p[ia - lo] = next_ta;
      if (tree) tree_update(va, wa, ta_p, (int)n, P, (int)(ia - lo));
    };
    if (cached && !late) cache_next_arrival();
    // whether a transmission of port `out` at `now` would be the next event: no arrival at
    // `now` left (arrivals go first on ties), no port before `out` due by `now` (the lowest
    // port goes first). A tree answers for its minima only: conservative.
    auto alone = [&](int64_t out) -> bool {
      if (!cached) return false;
      int k0 = (int)(out - lo);
      if (tree) {
        int ka = tree_min(wa, P), kd = tree_min(wd, P);
        return !(ka < n && ta_p[ka] <= now) && !(kd < n && td_p[kd] <= now);
      }
      for (int k = 0; k < (int)n; ++k)
        if (ta_p[k] <= now || (k < k0 && td_p[k] <= now)) return false;
      return true;
    };
    bool ia_changed;
    b = switch_arrival(c, e, v, ia, ring_slot(c, q, head), ta, par, &ia_changed, alone);
    if (b == SW_OUT_OF_SLOTS) { out_of_slots(); return false; }
    c->port_head[q * 2 + par] = head + 1;
    if (cached && late) cache_next_arrival();
    if (ia_changed) a = ia;   // else only its in-ring (above) and the egress port b changed
    if (cached) {
      if (a >= 0) refresh(a);
      if (b >= 0 && b != a) refresh(b);
    }
    return true;
  };
  // the transmission of port id at td (false: as above)
  auto transmission = [&]() -> bool {
    begin_event(td);
    what_d = switch_start_class(c, id, td, what_d);
    int64_t b;   // the ingress port whose PFC state the dequeue changed (-1: none)
    if (!switch_transmit(c, e, v, id, what_d, td, par, &b)) { out_of_slots(); return false; }
    if (cached) {
      refresh(id);
      if (b >= 0 && b != id) refresh(b);
    }
    return true;
  };
  // The events in time order (ties: arrivals first). MV_EVENT_PAIRS: a turn of the loop takes the
  // next event if it is an arrival, and then the next one if it is a transmission. The order of
  // events is the same; the turn matters on a GPU, where a warp's lanes are different switches:
  // the lanes whose next event is an arrival run the arrival's code together, then all those
  // whose next event is a transmission run that code together, so a switch that forwards
  // (arrival, transmission, arrival, ...) takes half as many turns of its warp, each turn with
  // one scan of the ports more. 0: one event per turn.
#if MV_EVENT_PAIRS
  pick();
  for (;;) {
    if (ta >= te && td >= te) { end_window(); return; }
    if (ta <= td) {
      if (!arrival()) return;
      pick();
      if (!(td < ta && td < te)) continue;   // the next event is not a transmission in this window
    }
    if (!transmission()) return;
    pick();
  }
#else
  for (;;) {
    pick();
    if (ta >= te && td >= te) { end_window(); return; }
    if (!(ta <= td ? arrival() : transmission())) return;
  }
#endif
}

// MV_SILENT_HOST: the silent hosts' path below, on by default (0 builds the variant without).
// CPU, one core, 200 idle experiments (bench_gpu.idle_experiments), three alternating runs: 72.5
// against 79.3 us per window (medians). H200, 1,000 idle experiments, marginal cost of a window
// (experiments/profile_gpu.py, eleventh session): groups launch mode 6.2 against 6.8 us, graph
// 12.5 against 12.1 (graph runs such batches no more: GpuBackend's auto); workload (a) unchanged.
#ifndef MV_SILENT_HOST
#define MV_SILENT_HOST 1
#endif

MV_DEV void host_window(Ctx* c, int64_t e, int64_t v, int64_t te, int par) {
  int64_t p = c->node_port_lo[v];
  int64_t q = c->port_peer[p];
  int64_t notify = MV_INF;
  int64_t now = c->exp_T_ps[e];
  int64_t ms = mon_next(c, e);   // next monitor sample
  bool busy = false;             // processed an event in this window
  // A silent host (no active flow, no control packet queued, nothing arriving in this window: the
  // in-ring's next packet, if any, arrives at or after its end) has only task events until one of
  // them starts a flow: it takes them without the network checks of the general loop (in-ring,
  // timers, transmissions), which would find nothing. The events and their order are the general
  // loop's. (Compute phases: most hosts, most windows.)
  int64_t ta0;
  if (MV_SILENT_HOST && c->node_act_n[v] == 0 && PORT_QH(c, p, Q_CTL) < 0 && (ta0 = ring_head_t(c, q, par)) >= te) {
    for (;;) {
      int64_t tt = heap_top_t(c, v);
      if (tt >= te) {
        if (ms <= te) mon_record(c, e, v, ms, te);
        int64_t prog = mv_min(mv_min(ta0, tt), mv_min(notify, node_sent_min(c, v, par)));
        c->node_prog_ps[v] = c->node_next_ps[v] = prog;
        note_window_end(c, v, busy, now);
        return;
      }
      if (ms <= tt) ms = mon_record(c, e, v, ms, tt);
      now = tt;
      busy = true;
      note_event(c, v, tt);
      notify = mv_min(notify, host_task_event(c, e, v, tt));
      if (c->node_act_n[v] > 0) break;   // a flow started: the general loop takes over
    }
  }
  for (;;) {
    int64_t ta = ring_head_t(c, q, par);
    int64_t tt = heap_top_t(c, v);
    int64_t rto;
    int64_t tm = host_next_timer(c, e, v, &rto);
    int64_t tx = host_tx_time(c, e, v, p);
    if (tx < MV_INF && tx < now) tx = now;
    int64_t t = mv_min(mv_min(ta, tt), mv_min(tm, tx));
    if (t >= te) {
      if (ms <= te) mon_record(c, e, v, ms, te);
      int64_t prog = mv_min(mv_min(mv_min(ta, tt), mv_min(rto, tx)), mv_min(notify, node_sent_min(c, v, par)));
      c->node_prog_ps[v] = prog;
      c->node_next_ps[v] = mv_min(prog, tm);
      note_window_end(c, v, busy, now);
      return;
    }
    int64_t nt = MV_INF;
    if (ms <= t) ms = mon_record(c, e, v, ms, t);
    now = t;
    busy = true;
    note_event(c, v, t);
    if (ta == t) {
      int64_t head = c->port_head[q * 2 + par];
      nt = host_arrival(c, e, v, p, ring_slot(c, q, head), t);
      c->port_head[q * 2 + par] = head + 1;
    } else if (tt == t) {
      nt = host_task_event(c, e, v, t);
    } else if (tm == t) {
      host_fire_timers(c, e, v, t);
    } else if (!host_transmit(c, e, v, p, t, par)) {
      c->node_next_ps[v] = c->node_prog_ps[v] = MV_CAP;
      note_window_end(c, v, busy, now);
      return;
    }
    notify = mv_min(notify, nt);
  }
}

// ---- a switch's window as one lane per egress port (MV_SWITCH_LANES) -----------------------
// docs/engine.md, "Switch lanes". A switch's ports interact only through its shared buffer (MMU
// admission, the dynamic threshold, PFC) and its packet pool. When no decision of a window can
// depend on the order of the events of different ports (switch_lanes_apply), the window's
// events of each egress port — the arrivals routed to it in their serial order, the PFC frames
// its peer sent it, its transmissions — give the serial loop's results run apart from the other
// ports' events, port after port. This is the groundwork of running them on separate GPU lanes
// (performance.md, "Next steps"); here one thread runs the ports one after the other, and
// results are identical either way (tests/engine/test_engine.py). 0: the serial loop only.
// 1, the CPU's default: one thread runs the ports one after the other, each walking its own
// chain of arrivals, which is also faster there (workload (a) 8 x 16 MiB, one core, three
// alternating pairs: medians 0.682 against 0.771 s at 674fada; DCQCN 0.713 against 0.744 at
// a5d9ef4). 2: as 1, and the GPU's groups kernel runs each port's events on whichever warp of
// the block is free (mv_cuda_main.cuh: lanes_post, lanes_run, lanes_end). The GPU keeps 0:
// 2 is correct there but slower on workload (a), 1.341 against 1.368 G packet-hops/s (8 MiB x
// 4,096, fef8d49; 1 on the GPU: 1.194).
#ifndef MV_SWITCH_LANES
#if defined(MV_BACKEND_CUDA)
#define MV_SWITCH_LANES 0
#else
#define MV_SWITCH_LANES 1
#endif
#endif
#if MV_SWITCH_LANES == 2 && MV_PER_EVENT_WRITES
#error "MV_SWITCH_LANES 2 and MV_PER_EVENT_WRITES: ports on several threads would count hops without atomics"
#endif

// Whether switch v's window (end te, parity par; n <= MV_TREE_PORTS ports, node_begin done) may
// run port by port: from the state at its start and the packets that arrive in it (all visible
// now), no admission can fail, no byte goes to the headroom, no PFC state can change and the
// pool cannot run out, in any order of its events: no headroom in use, and every ingress port's
// bytes plus all its arrivals below the dynamic threshold computed with every arrival of the
// window counted as shared (the MMU puts bytes above it into the headroom with or without PFC);
// with PFC, no port paused or asking to pause, no PFC frame pending, and every arriving packet
// admitted; without PFC, room in the buffer for every arrival; never-used pool slots for every
// arrival; no monitor sample due (a sample records every port at one instant).
MV_DEV bool switch_lanes_apply(const Ctx* c, int64_t e, int64_t v, int64_t te, int par) {
  if (mon_next(c, e) <= te) return false;
  int64_t lo = c->node_port_lo[v], n = c->node_port_hi[v] - lo;
  int64_t data[MV_TREE_PORTS], biggest[MV_TREE_PORTS];   // per in-ring: data bytes, largest data packet
  int64_t arrivals = 0, data_all = 0;
  bool pfc = EI(c, e, EI_PFC);
  for (int64_t k = 0; k < n; ++k) {
    int64_t i = lo + k, q = c->port_peer[i];
    if (PORT_I(c, i, PI_IN_HDRM) || (pfc && PFC_BIT(c, i, PFC_IN_PAUSED | PFC_SENT))) return false;
    data[k] = biggest[k] = 0;
    for (int64_t pos = c->port_head[q * 2 + par];; ++pos) {
      if (ring_t_at(c, q, pos, par) >= te) break;
      const Pkt& pk = c->pkt[ring_slot(c, q, pos)];
      arrivals += 1;
      if (pk.type == PK_DATA) {
        data[k] += pk.bytes;
        biggest[k] = mv_max(biggest[k], (int64_t)pk.bytes);
      }
    }
    data_all += data[k];
  }
  if (arrivals == 0) return false;   // (the serial loop's window is as short)
  if (c->node_pool_hi[v] - c->node_pool_next[v] < arrivals) return false;
  if (!pfc && c->node_data_bytes[v] + data_all > c->node_buffer[v]) return false;
  int64_t free_b = c->node_buffer[v] - c->node_reserved[v] - (c->node_shared_used[v] + data_all);
  if (free_b < 0) free_b = 0;
  // the threshold only grows as shared bytes leave, so th is its least value in the window; an
  // ingress port's shared bytes never exceed `over`: no pause (shared >= th), no headroom (the
  // bytes above the reserve > th), and admission (a packet that fits the headroom, or whose bytes
  // with the shared ones fit the threshold)
  int64_t r = EI(c, e, EI_RESERVE);
  for (int64_t k = 0; k < n; ++k) {
    if (!data[k]) continue;
    int64_t i = lo + k, th = free_b >> PORT_LK(c, i, LK_SHIFT);
    int64_t over = mv_max(PORT_I(c, i, PI_IN_BYTES) + data[k] - r, (int64_t)0);
    if (over >= th) return false;
    if (pfc && biggest[k] > PORT_LK(c, i, LK_HEADROOM) && mv_max(biggest[k], over) > th) return false;
  }
  return true;
}

// The egress port (its index among v's ports) whose events include the packet in ring slot
// `slot` of in-ring k (our port lo + k): a PFC frame's own link's port, a packet's route, port k
// for a packet without a route (its drop is counted once, there). *queued: whether it will take
// a pool slot (a packet with a route: every admission passes in such a window).
MV_DEV int32_t switch_lane_of(const Ctx* c, int64_t e, int64_t v, int64_t lo, int64_t k, int64_t slot, bool* queued) {
  Pkt pk = c->pkt[slot];
  *queued = false;
  if (pk.type == PK_PAUSE || pk.type == PK_RESUME) return (int32_t)k;
  int64_t out = route_packet(c, e, v, &pk, pk.type == PK_DATA);   // (on a copy)
  *queued = out >= 0;
  return (int32_t)(out < 0 ? k : out - lo);
}

// Switch v's window port by port (switch_lanes_apply said it may), in three steps that a GPU
// could run on different lanes, with a barrier between them: the arrivals routed
// (switch_lanes_route), each egress port's events (switch_port_lane), the in-rings' heads and
// the window's report (switch_lanes_end).

// The window's first step: note each ingress port's bytes (`before`, for mmu_lanes_end), then
// route every arrival of the window once, in the serial loop's order (time, then lower
// in-ring), and chain each egress port's arrivals (`first[k * stride]`: port lo + k's first
// one, a ring slot; -1: none; the GPU's lanes keep a block's table port-major). Each arrival
// takes a pool slot here, so that ports running at once never take slots from the free list (switch_lanes_apply counted enough never-used ones: pool_alloc
// cannot fail): the ring packet's `next` holds it, and its `in_port` the in-ring's index (bit 8:
// the packet joins a queue; a PFC frame or a packet without a route does not, and its port
// returns the slot). The pool slot's `next` holds the ring slot of the port's next arrival
// until the arrival overwrites the pool slot (the port reads it first).
MV_DEV void switch_lanes_route(Ctx* c, int64_t e, int64_t v, int64_t te, int par, int32_t* first, int stride,
                               int64_t* before) {
  int64_t lo = c->node_port_lo[v], n = c->node_port_hi[v] - lo;
  mmu_lanes_begin(c, v, before);
  int64_t pos[MV_TREE_PORTS];
  int32_t tail[MV_TREE_PORTS];   // per egress port: its last arrival's pool slot so far
  for (int64_t k = 0; k < n; ++k) {
    pos[k] = c->port_head[c->port_peer[lo + k] * 2 + par];
    first[k * stride] = tail[k] = -1;
  }
  for (;;) {
    int64_t ta = MV_INF, ka = -1;
    for (int64_t k = 0; k < n; ++k) {
      int64_t t = ring_t_at(c, c->port_peer[lo + k], pos[k], par);
      if (t < ta) { ta = t; ka = k; }
    }
    if (ta >= te) return;
    int64_t slot = ring_slot(c, c->port_peer[lo + ka], pos[ka]++);
    bool queued;
    int32_t lane = switch_lane_of(c, e, v, lo, ka, slot, &queued);
    int32_t s = pool_alloc(c, v);
    c->pkt[slot].in_port = (int16_t)(ka | (queued ? 256 : 0));
    c->pkt[slot].next = s;
    c->pkt[s].next = -1;
    if (tail[lane] < 0) first[lane * stride] = (int32_t)slot;
    else c->pkt[tail[lane]].next = (int32_t)slot;
    tail[lane] = s;
  }
}

// Egress port p's events of the window in time order, as switch_window_of takes them: its
// arrivals (the chain from `first`, switch_lanes_route) and its transmissions, arrivals first on
// ties. Returns 1 if it had an event (*last: the time of its last one), 0 if none, -1 if a
// compact ring ran out (the experiment runs again).
MV_DEV int switch_port_lane(Ctx* c, int64_t e, int64_t v, int64_t te, int par, int64_t p, int32_t first,
                            int64_t* last) {
  int64_t lo = c->node_port_lo[v];
  auto never_alone = [](int64_t) { return false; };   // (the direct path: not port by port)
  int64_t now = c->exp_T_ps[e];
  int busy = 0;
  int what;
  int64_t td = switch_port_next(c, p, &what);
  int32_t rs = first;   // the ring slot of the port's next arrival (-1: none left)
  for (;;) {
    int64_t ta = rs >= 0 ? c->pkt[rs].t : MV_INF;
    int64_t tx = td;
    int what_x = what;
    if (tx < MV_INF && tx < now) {   // due before `now`: starts then, what it sends decided then
      tx = now;
      what_x = -1;
    }
    if (ta >= te && tx >= te) break;
    busy = 1;
    if (ta <= tx) {
      now = ta;
      int32_t s = c->pkt[rs].next;        // its pool slot
      int16_t tag = c->pkt[rs].in_port;   // its in-ring, and whether it joins a queue
      int32_t next_rs = c->pkt[s].next;   // (before the arrival overwrites the slot)
      bool changed;
      switch_arrival<true>(c, e, v, lo + (tag & 0xff), rs, ta, par, &changed, never_alone, s, tag & 256 ? p : -1);
      if (!(tag & 256)) pool_free_lane(c, v, s);   // a PFC frame, or dropped: no queue took the slot
      rs = next_rs;
    } else {
      now = tx;
      what_x = switch_start_class(c, p, tx, what_x);
      int64_t touched;   // (no PFC state changes in such a window)
      if (!switch_transmit<true>(c, e, v, p, what_x, tx, par, &touched)) return -1;   // a compact ring is full
    }
    td = switch_port_next(c, p, &what);
  }
  *last = now;
  return busy;
}

// Every arrival of the window was taken: the MMU's shared and data bytes follow the ingress
// ports' bytes (`before`: theirs at the window's start, mmu_lanes_begin), the in-rings' heads
// move past the arrivals, and the window's report is switch_window_of's (busy: a port had an
// event, the last at `last`).
MV_DEV void switch_lanes_end(Ctx* c, int64_t e, int64_t v, int64_t te, int par, bool busy, int64_t last,
                             const int64_t* before) {
  int64_t lo = c->node_port_lo[v], n = c->node_port_hi[v] - lo;
  mmu_lanes_end(c, e, v, before);
  int64_t next = node_sent_min(c, v, par);
  for (int64_t k = 0; k < n; ++k) {
    int64_t q = c->port_peer[lo + k];
    int64_t head = c->port_head[q * 2 + par];
    while (ring_t_at(c, q, head, par) < te) ++head;
    c->port_head[q * 2 + par] = head;
    int what;
    next = mv_min(next, mv_min(ring_t_at(c, q, head, par), switch_port_next(c, lo + k, &what)));
  }
  c->node_next_ps[v] = c->node_prog_ps[v] = next;
  if (next >= MV_INF) c->node_quiet[v] = !busy;
  if (busy) note_event(c, v, last);   // (MV_PER_EVENT_WRITES: the last event's time, as the serial loop)
  note_window_end(c, v, busy, last);
}

// The three steps on one thread, the ports one after the other.
MV_DEV void switch_window_lanes(Ctx* c, int64_t e, int64_t v, int64_t te, int par) {
  int64_t lo = c->node_port_lo[v], hi = c->node_port_hi[v];
  int64_t last = c->exp_T_ps[e];   // the window's last event, over all ports
  bool busy = false;
  int32_t first[MV_TREE_PORTS];
  int64_t before[MV_TREE_PORTS];
  switch_lanes_route(c, e, v, te, par, first, 1, before);
  for (int64_t p = lo; p < hi; ++p) {
    int64_t t = last;
    int r = switch_port_lane(c, e, v, te, par, p, first[p - lo], &t);
    if (r < 0) {   // the compact capacities ran out: the experiment runs again with full ones
      c->node_next_ps[v] = c->node_prog_ps[v] = MV_CAP;
      note_window_end(c, v, true, mv_max(last, t));
      return;
    }
    if (r > 0) {
      busy = true;
      last = mv_max(last, t);
    }
  }
  switch_lanes_end(c, e, v, te, par, busy, last, before);
}

// Whether switch v has nothing to do in this window (window start T, end te, parity par), so
// that it may skip it: it processed no event in its last window (so node_begin would copy equal
// values: nothing changed since its last copy), nothing was pending after it (next = MV_INF: no
// queued packet, PFC frame or packet in flight of its own), no packet is visible on an in-ring,
// and no monitor sample is due. Its report then stays what it was: next = progress = MV_INF.
// An idle window of a batch pays one load and a check per port for each such switch instead of
// its whole window (the rings, the queues, the caches).
MV_DEV bool switch_quiet(const Ctx* c, int64_t e, int64_t v, int64_t te, int par) {
  // node_next_ps first: a busy switch (something pending) leaves here on the row it writes anyway
  if (c->node_next_ps[v] < MV_INF || !c->node_quiet[v] || mon_next(c, e) <= te) return false;
  for (int64_t p = c->node_port_lo[v]; p < c->node_port_hi[v]; ++p) {
    int64_t q = c->port_peer[p];
    if (c->port_head[q * 2 + par] < PORT_T(c, q, PT_TAIL + (par ^ 1))) return false;
  }
  return true;
}

// Node v's window of its (running) experiment: phase 1 of the step.
// MV_TRACE_NODE(v): a hook at the start of node v's window, empty but in the memory-trace build
// of experiments/diag_l1_trace.py, which marks there where each node's accesses begin.
#ifndef MV_TRACE_NODE
#define MV_TRACE_NODE(v)
#endif
MV_DEV void node_window(Ctx* c, int64_t v) {
  MV_TRACE_NODE(v);
  int64_t e = c->node_exp[v];
  int par = parity(c, e);
  int64_t te = c->exp_T_ps[e] + c->exp_window_ps[e];
  bool host = c->node_is_host[v];
  if (!host && switch_quiet(c, e, v, te, par)) return;
  if (host) schedule_node(c, v);
  node_begin(c, v, par);
  if (host) host_window(c, e, v, te, par);
  else {
    int64_t n = c->node_port_hi[v] - c->node_port_lo[v];
    if (MV_SWITCH_LANES && n <= MV_TREE_PORTS && switch_lanes_apply(c, e, v, te, par)) switch_window_lanes(c, e, v, te, par);
    else if (n > MV_TREE_PORTS && n <= MV_CACHE_PORTS) switch_window_of<true>(c, e, v, te, par);
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
