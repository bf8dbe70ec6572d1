// A node's window as one thread runs it, events in time order: the ring and monitor helpers, a
// switch's serial loop (switch_window_of) and a host's (host_window). What a switch or a host
// does to a packet is in mv_switch.cuh and mv_host.cuh; the switch lanes (mv_lanes.cuh) run a
// switch's window port by port instead; mv_step.cuh chooses.
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
// every port, once per event. 256 covers today's switch radixes: a rescan per event makes the
// widest switch's thread, which sets the pace of every window on a GPU, many times slower.
// (Both widths are backend_defaults.KERNEL_DEFINES: tests shrink them to reach these paths.)
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

// What port p sends at a start t: the class its next transmission was computed with (`what`,
// from switch_port_next: switch_port_class at that time, from the port's state, which every
// event that changes it recomputes), unless the start was moved up to a later event's time
// (`what` -1: more may be queued by then).
MV_DEV int switch_start_class(const Ctx* c, int64_t p, int64_t t, int what) {
  return what < 0 ? switch_port_class(c, p, t) : what;
}


// `now` is the time of the event being processed: a port whose data became sendable through an
// event at `now` (a RESUME, an ACK opening a window) cannot start before it. Ties: arrivals
// before transmissions, lower port index first.
// TREE: the switch has more than MV_TREE_PORTS ports (and at most MV_CACHE_PORTS): its caches
// and trees persist in the scratch columns. A smaller switch refills thread-local arrays at
// the start of each window: cheaper for a few ports than caches in memory, whose every store the
// compiler must assume may alias another column. A wider one rescans every port per event.
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
    // the in-ring's next arrival, once this one is consumed (if the arrival then runs out of
    // slots, the experiment ends and is run again from its start with full ones, so a persisted
    // cache one packet ahead of port_head is never read)
    if (cached) {
      ta_p[ia - lo] = ring_t_at(c, q, head + 1, par);
      if (tree) tree_update(va, wa, ta_p, (int)n, P, (int)(ia - lo));
    }
    bool ia_changed;
    b = switch_arrival(c, e, v, ia, ring_slot(c, q, head), ta, &ia_changed);
    if (b == SW_OUT_OF_SLOTS) { out_of_slots(); return false; }
    c->port_head[q * 2 + par] = head + 1;
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
  // The events in time order (ties: arrivals first), in pairs: a turn of the loop takes the next
  // event if it is an arrival, and then the next one if it is a transmission. The turn matters on
  // a GPU, where a warp's lanes are different switches: the lanes whose next event is an arrival
  // run the arrival's code together, then all those whose next event is a transmission run that
  // code together, so a switch that forwards (arrival, transmission, arrival, ...) takes half as
  // many turns of its warp, each turn with one scan of the ports more.
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
}

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
  if (c->node_act_n[v] == 0 && PORT_QH(c, p, Q_CTL) < 0 && (ta0 = ring_head_t(c, q, par)) >= te) {
    for (;;) {
      int64_t tt = heap_top_t(c, v);
      if (tt >= te) {
        if (ms <= te) mon_record(c, e, v, ms, te);
        int64_t prog = mv_min(mv_min(ta0, tt), mv_min(notify, node_sent_min(c, v, par)));
        c->node_prog_ps[v] = c->node_next_ps[v] = prog;
        c->node_quiet[v] = !busy;
        note_window_end(c, v, busy, now);
        return;
      }
      if (ms <= tt) ms = mon_record(c, e, v, ms, tt);
      now = tt;
      busy = true;
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
      c->node_quiet[v] = !busy;
      note_window_end(c, v, busy, now);
      return;
    }
    int64_t nt = MV_INF;
    if (ms <= t) ms = mon_record(c, e, v, ms, t);
    now = t;
    busy = true;
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
      c->node_quiet[v] = 0;
      note_window_end(c, v, busy, now);
      return;
    }
    notify = mv_min(notify, nt);
  }
}

// Whether host v has nothing to do in this window (window end te, parity par), so that it may
// skip it: it processed no event in its last window (node_begin would copy equal values), its own
// next event (a task event, a timer, a transmission: its last report) is at or after te, no packet
// is visible on its in-ring, no remote predecessor is pending (schedule_node) and no monitor sample
// is due. Its report stays what it was, still exact. (Compute phases: most hosts, most windows.)
MV_DEV bool host_quiet(const Ctx* c, int64_t e, int64_t v, int64_t te, int par) {
  if (c->node_next_ps[v] < te || !c->node_quiet[v] || c->node_remote_left[v] || mon_next(c, e) <= te) return false;
  int64_t q = c->port_peer[c->node_port_lo[v]];
  return c->port_head[q * 2 + par] >= PORT_T(c, q, PT_TAIL + (par ^ 1));
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

