// The switch lanes: a switch's window run port by port (docs/engine.md, "Switch lanes"), a
// schedule of the same switch systems as the serial loop (mv_window.cuh): switch_arrival and
// switch_transmit (mv_switch.cuh) with LANE set.
#pragma once

// A switch's ports interact only through its shared buffer (MMU
// admission, the dynamic threshold, PFC) and its packet pool. When no decision of a window can
// depend on the order of the events of different ports (switch_lanes_decide), the window runs
// in two steps of one task per port, tasks of one step independent of each other:
//   scan (switch_lane_scan), per in-ring j: node_begin's copies for port j, then every arrival
//     of the window on the in-ring routed (on a copy) and chained to the egress port it goes
//     to, in the ring's order; the facts the decision needs, in the switch's records (LaneRecs);
//   port (switch_port_lane), per egress port k: the window's events of port k — the arrivals
//     routed to it, merged from the in-rings' chains in the serial loop's order (time, then
//     lower in-ring), the PFC frames its peer sent it, its transmissions — with pool slots from
//     the port's own list (port_pool) or a share of the never-used slots fixed by the records;
// and the window's end (switch_lanes_end) follows from the records and the ports' reports.
// The results are the serial loop's (tests/engine). The CPU runs the steps on the switch's
// thread, task after task (switch_window_lanes); the GPU's groups kernel runs each step's tasks
// on whichever threads of the block are free (mv_cuda_main.cuh); the GPU's graph kernel runs
// the serial loop.
// Switches of at most this many ports run port by port (lane_bytes: the records of 32 ports take
// at most 161 bytes a port, the NLR words of the column). The rail switches of a rail-optimised
// cluster have 32 (16 servers of 8 NICs: 16 down, 16 up), and their windows are the longest there.
#ifndef MV_LANE_PORTS
#define MV_LANE_PORTS 32
#endif

// A window's records of a switch of n ports, what the scans found and the decision reads, packed
// by n (what a port task reads of them bounds its start: records laid out for the widest switch
// would cost a small one more sectors): per in-ring j a LaneHead, then the switch's LaneSwitch
// (read before any port task changes it), then per egress port k the count of the window's
// arrivals that join its queue (from every in-ring: the scans add to it, so it is zero before
// them), then per egress port k a row of n first arrivals, one entry per in-ring (port k's row is
// its own).
enum { LR_STOP = 1, LR_MORE = 2, LR_CALM = 4, LR_MON = 8 };
struct LaneHead {
  int64_t before;             // port j's MMU ingress bytes at the window's start
  int32_t data, pool_n;       // the arrivals' bytes the MMU counts (switch_queues_as_data); port j's
                              // own free slots (port_pool)
  int16_t arrivals, biggest;  // the window's arrivals on in-ring j (at most 32,767: else LR_STOP),
                              // the largest of those packets
  int32_t flags;              // LR_STOP: port j's headroom or PFC state in play, or counts too
                              // large; LR_MORE: a packet after the window on the in-ring; in-ring
                              // 0: LR_CALM (the switch was quiet, node_quiet), LR_MON (a monitor
                              // sample is due)
};
struct LaneSwitch {
  int64_t node_data, node_shared;   // the switch's data and shared bytes
  int64_t pool_next;                // its first never-used pool slot
};
struct LaneRecs {
  LaneHead* head;     // [n]
  LaneSwitch* sw;
  int64_t* want;      // [k]: the arrivals routed to port k that join its queue, from every in-ring
  int32_t* first;     // [k * n + j]: the ring slot of in-ring j's first arrival routed to port k, -1 none
  int64_t n;
};
// Bytes of the records of a switch of n ports.
MV_DEV constexpr int64_t lane_bytes(int64_t n) {
  return (n * (int64_t)sizeof(LaneHead) + (int64_t)sizeof(LaneSwitch) + n * 8 + n * n * 4 + 7) / 8 * 8;
}
MV_DEV constexpr bool lane_bytes_fit(int64_t n) {   // (for every width up to n)
  return n == 0 || (lane_bytes(n) <= n * NLR * 8 && lane_bytes_fit(n - 1));
}
static_assert(lane_bytes_fit(MV_LANE_PORTS), "the switch lanes' records: at most NLR words a port (schema.py)");
// The records of a switch of n ports at `base` (8-byte aligned, lane_bytes(n) bytes).
MV_DEV LaneRecs lane_recs(int64_t* base, int64_t n) {
  LaneRecs r;
  r.n = n;
  r.head = reinterpret_cast<LaneHead*>(base);
  r.sw = reinterpret_cast<LaneSwitch*>(r.head + n);
  r.want = reinterpret_cast<int64_t*>(r.sw + 1);
  r.first = reinterpret_cast<int32_t*>(r.want + n);
  return r;
}

// Step one for in-ring j of switch v (n <= MV_LANE_PORTS ports; window end te, parity par), into
// its records r. Each arrival's ring packet is tagged: `in_port` its egress port's index (bit 8: it joins
// that port's queue, taking a pool slot; a PFC frame or a packet without a route does not, and
// goes to port j), `next` the ring slot of the in-ring's next arrival routed to the same port.
// N: the most ports (n <= N); REGS: an entry per egress port in registers (N small), the
// records' rows written at the end, else the rows written as the arrivals come.
template <int N, bool REGS>
MV_DEV void switch_lane_scan(Ctx* c, int64_t e, int64_t v, int64_t te, int par, int64_t j, LaneRecs r) {
  int64_t lo = c->node_port_lo[v], n = c->node_port_hi[v] - lo, i = lo + j, q = c->port_peer[i];
  bool calm = c->node_next_ps[v] >= MV_INF && c->node_quiet[v];
  if (!calm) {   // node_begin, for port i (a calm switch's copies would write equal values)
    c->port_head[q * 2 + par] = c->port_head[q * 2 + (par ^ 1)];
    PORT_T(c, i, PT_TAIL + par) = PORT_T(c, i, PT_TAIL + (par ^ 1));
  }
  int32_t tail[N];     // per egress port: the last arrival chained so far
  int32_t first[N];    // REGS: its first arrival
  int32_t joined[N];   // REGS: its arrivals that join its queue
#pragma unroll
  for (int64_t k = 0; k < (REGS ? N : n); ++k) {
    tail[k] = -1;
    if (REGS) {
      first[k] = -1;
      joined[k] = 0;
    } else {
      r.first[k * n + j] = -1;
    }
  }
  int32_t arrivals = 0, biggest = 0;
  int64_t data = 0;
  int64_t pos = c->port_head[q * 2 + par];
  for (; ring_t_at(c, q, pos, par) < te; ++pos) {
    int64_t slot = ring_slot(c, q, pos);
    Pkt pk = c->pkt[slot];
    arrivals += 1;
    int32_t k = (int32_t)j;
    bool queued = false;
    if (switch_queues_as_data(c, e, pk.type)) {   // (the MMU counts it)
      data += pk.bytes;
      biggest = biggest > pk.bytes ? biggest : pk.bytes;
    }
    if (pk.type != PK_PAUSE && pk.type != PK_RESUME) {
      int64_t out = route_packet(c, e, v, &pk, pk.type == PK_DATA, ring_t_at(c, q, pos, par));   // (on the copy)
      if (out >= 0) {
        k = (int32_t)(out - lo);
        queued = true;
      }
    }
    c->pkt[slot].in_port = (int16_t)(k | (queued ? 256 : 0));
    c->pkt[slot].next = -1;
    auto chain = [&](int x) {   // the arrival joins egress port x's chain
      if (tail[x] < 0) {
        if (REGS) first[x] = (int32_t)slot;
        else r.first[x * n + j] = (int32_t)slot;
      } else {
        c->pkt[tail[x]].next = (int32_t)slot;
      }
      tail[x] = (int32_t)slot;
      if (REGS) joined[x] += queued;
      else if (queued) mv_add_old(&r.want[x], 1);   // (atomic: the other in-rings' scans add too)
    };
    if constexpr (REGS) {   // (tail[k] ... as a select over static indices)
#pragma unroll
      for (int x = 0; x < N; ++x) if (x == k) chain(x);
    } else {
      chain(k);
    }
  }
  if constexpr (REGS) {
#pragma unroll
    for (int x = 0; x < N; ++x) {
      if (x >= n) break;
      r.first[x * n + j] = first[x];
      if (joined[x]) mv_add_old(&r.want[x], joined[x]);
    }
  }
  bool pfc = EI(c, e, EI_PFC);
  int32_t flags = pos < PORT_T(c, q, PT_TAIL + (par ^ 1)) ? LR_MORE : 0;
  if (PORT_I(c, i, PI_IN_HDRM) || (pfc && PFC_BIT(c, i, PFC_IN_PAUSED | PFC_SENT))) flags |= LR_STOP;
  // more arrivals than the record's 16-bit counts hold (a long window of small packets on a fast
  // link), or more data bytes than its 32-bit sum: the window runs serially, the counts unread
  if (arrivals > 32767 || data > 0x7fffffff) flags |= LR_STOP;
  LaneHead* h = r.head + j;
  h->arrivals = (int16_t)mv_min(arrivals, (int32_t)32767);   // (a larger count is never used: LR_STOP)
  h->data = (int32_t)mv_min(data, (int64_t)0x7fffffff);
  h->biggest = (int16_t)biggest;
  h->pool_n = PORT_POOL_N(c, i);
  h->before = PORT_I(c, i, PI_IN_BYTES);
  if (j == 0) {
    r.sw->node_data = c->node_data_bytes[v];
    r.sw->node_shared = c->node_shared_used[v];
    r.sw->pool_next = c->node_pool_next[v];
    flags |= (calm ? LR_CALM : 0) | (mon_next(c, e) <= te ? LR_MON : 0);
  }
  h->flags = flags;
}
// switch_lane_scan for a switch of r.n ports: in registers up to MV_SMALL_SWITCH_PORTS ports.
MV_DEV void switch_lane_scan_of(Ctx* c, int64_t e, int64_t v, int64_t te, int par, int64_t j, LaneRecs r) {
#if MV_SMALL_SWITCH_PORTS > 0
  if (r.n <= MV_SMALL_SWITCH_PORTS) return switch_lane_scan<MV_SMALL_SWITCH_PORTS, true>(c, e, v, te, par, j, r);
#endif
  switch_lane_scan<MV_LANE_PORTS, false>(c, e, v, te, par, j, r);
}

// The never-used pool slots the egress ports of a window run port by port take beyond their own
// lists' (a port's share: the slots its queued arrivals need beyond its list's at the window's
// start), following one another in port order from the switch's first never-used slot. Port k's
// share into out[0] (k >= 0), or every port's into out[0..n) (k < 0: where one thread runs them
// all); returns where the last share ends. One pass over the ports' counts (r.want).
struct LaneShare { int64_t at, n; };
MV_DEV int64_t lane_shares(const LaneRecs& r, LaneShare* out, int64_t k) {
  int64_t from = r.sw->pool_next, n = r.n;
  for (int64_t x = 0; x < n; ++x) {
    int64_t mine = mv_max(r.want[x] - r.head[x].pool_n, (int64_t)0);
    if (k < 0) out[x] = LaneShare{from, mine};
    else if (x == k) out[0] = LaneShare{from, mine};
    from += mine;
  }
  return from;
}

enum { LANES_QUIET = 0, LANES_SERIAL = 1, LANES_RUN = 2 };
// A window runs port by port only with at least one arrival per this many ports of its switch,
// else serially: a few events cost less on one thread than the port tasks' setup (each reads the
// switch's records, a row per in-ring) costs on many. (A switch of at most 4 ports: any arrival.)
#ifndef MV_LANES_PORTS_PER_ARRIVAL
#define MV_LANES_PORTS_PER_ARRIVAL 4
#endif
// The fewest arrivals of a window of a switch of n ports that runs port by port.
MV_DEV int64_t lanes_min_arrivals(int64_t n) {
  return mv_max((n + MV_LANES_PORTS_PER_ARRIVAL - 1) / MV_LANES_PORTS_PER_ARRIVAL, (int64_t)1);
}
// How switch v's window runs, from its in-rings' records (n ports, window end te): LANES_QUIET,
// nothing to do (switch_quiet's case: it was quiet, nothing arrives and no sample is due);
// LANES_RUN, port by port: from the state at its start and the packets that arrive in it, no
// admission can fail, no byte goes to the headroom, no PFC state can change and the pool cannot
// run out, in any order of its events: no headroom in use, and every ingress port's bytes plus
// all its arrivals below the dynamic threshold computed with every arrival of the window counted
// as shared (the MMU puts bytes above it into the headroom with or without PFC); with PFC, no
// port paused or asking to pause, no PFC frame pending, and every arriving packet admitted;
// without PFC, room in the buffer for every arrival; enough never-used pool slots for the ports'
// shares (lane_shares: port k's, or every port's for k < 0, into `shares` where LANES_RUN); no
// monitor sample due (a sample records every port at one instant); no adaptive routing. Else LANES_SERIAL (also a
// window without arrivals: the serial loop's is as short). Reads the records and the switch's
// parameters only, so that every port task of the switch may call it.
MV_DEV int switch_lanes_decide(const Ctx* c, int64_t e, int64_t v, const LaneRecs& r, LaneShare* shares, int64_t k) {
  int64_t arrivals = 0, data_all = 0, n = r.n;
  int32_t flags = 0;
  for (int64_t j = 0; j < n; ++j) {
    arrivals += r.head[j].arrivals;
    data_all += r.head[j].data;
    flags |= r.head[j].flags;
  }
  if (!arrivals && (flags & (LR_CALM | LR_MORE | LR_MON)) == LR_CALM) return LANES_QUIET;
  // (adaptive routing reads the egress queues at each arrival: the serial loop's order decides;
  // links going down: the serial loop drops what arrives over them)
  if (arrivals < lanes_min_arrivals(n) || (flags & (LR_STOP | LR_MON)) ||
      EI(c, e, EI_SPRAY) == LB_ADAPTIVE || links_go_down(c, e))
    return LANES_SERIAL;
  if (lane_shares(r, shares, k) > c->node_pool_hi[v]) return LANES_SERIAL;
  bool pfc = EI(c, e, EI_PFC);
  if (!pfc && r.sw->node_data + data_all > c->node_buffer[v]) return LANES_SERIAL;
  int64_t free_b = c->node_buffer[v] - c->node_reserved[v] - (r.sw->node_shared + data_all);
  if (free_b < 0) free_b = 0;
  // the threshold only grows as shared bytes leave, so th is its least value in the window; an
  // ingress port's shared bytes never exceed `over`: no pause (shared >= th), no headroom (the
  // bytes above the reserve > th), and admission (a packet that fits the headroom, or whose bytes
  // with the shared ones fit the threshold)
  int64_t res = EI(c, e, EI_RESERVE), lo = c->node_port_lo[v];
  for (int64_t j = 0; j < n; ++j) {
    const LaneHead& h = r.head[j];
    if (!h.data) continue;
    int64_t th = free_b >> PORT_LK(c, lo + j, LK_SHIFT);
    int64_t over = mv_max(h.before + h.data - res, (int64_t)0);
    if (over >= th) return LANES_SERIAL;
    if (pfc && h.biggest > PORT_LK(c, lo + j, LK_HEADROOM) && mv_max((int64_t)h.biggest, over) > th)
      return LANES_SERIAL;
  }
  return LANES_RUN;
}

// Step two for egress port k of switch v (switch_lanes_decide said LANES_RUN; the records r of
// its n in-rings; its share of the never-used pool slots): its events of the window in time
// order, as switch_window_of takes them, arrivals first on ties, arrivals by time then in-ring. A
// queued arrival takes a slot of the port's own list, else of its share of never-used ones (what
// is left of the share joins the list at the end). Returns 1 if it had an event (*last: the time
// of its last one), 0 if none, -1 if a compact ring ran out (the experiment runs again). It keeps
// the time of each in-ring's next arrival for it, loaded once when that arrival becomes the next,
// so that an event waits on one load less than if it loaded the next arrivals' times again.
// N: the most in-rings it holds (n <= N); REGS: an entry per in-ring, in registers (N small:
// MV_SMALL_SWITCH_PORTS), else one per in-ring with arrivals for the port, in arrays.
template <int N, bool REGS>
MV_DEV int switch_port_lane(Ctx* c, int64_t e, int64_t v, int64_t te, int par, int64_t k, const LaneRecs& r,
                            LaneShare share, int64_t* last) {
  int64_t lo = c->node_port_lo[v], p = lo + k, n = r.n;
  int64_t fresh = share.at, fresh_n = share.n;
  int32_t at[N];     // per in-ring entry: the ring slot of its next arrival routed here, -1 none
  int8_t ring[N];    // ... which in-ring it is (REGS: entry i is in-ring i), in in-ring order (ties: the lower first)
  int64_t t_at[N];   // ... and its time (MV_INF: none), loaded once per arrival
  int m = N;         // entries in use (REGS: all of them, -1 beyond n)
  if constexpr (REGS) {
#pragma unroll
    for (int j = 0; j < N; ++j) {
      at[j] = j < n ? r.first[k * n + j] : -1;
      t_at[j] = at[j] >= 0 ? c->pkt[at[j]].t : MV_INF;
    }
  } else {   // the in-rings with arrivals for this port (few: a port of a wide switch hears from a few)
    m = 0;
    for (int64_t j = 0; j < n; ++j) {
      int32_t s = r.first[k * n + j];
      if (s < 0) continue;
      at[m] = s;
      ring[m] = (int8_t)j;
      t_at[m] = c->pkt[s].t;
      ++m;
    }
  }
  int64_t now = c->exp_T_ps[e];
  int busy = 0;
  int what;
  int64_t td = switch_port_next(c, p, &what);
  // the port's own free list, in registers for the window (only this task takes from and gives
  // to it then: a queued arrival's slot waits on one load, the slot's link), written back at its end
  FreeList held = FreeList{PORT_POOL_HEAD(c, p), PORT_POOL_N(c, p)};
  int32_t& list_head = held.head;
  int32_t& list_n = held.n;
  for (;;) {
    int64_t ta = MV_INF;
    int ia = -1;
#pragma unroll
    for (int i = 0; i < (REGS ? N : m); ++i) {
      int64_t t = t_at[i];
      if (t < ta) { ta = t; ia = i; }
    }
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
      int32_t rs = at[0];
      int64_t ja = ia;
      if constexpr (REGS) {   // (at[ia] as a select over static indices)
#pragma unroll
        for (int i = 1; i < N; ++i) if (i == ia) rs = at[i];
      } else {
        rs = at[ia];
        ja = ring[ia];
      }
      int16_t tag = c->pkt[rs].in_port;
      int32_t next = c->pkt[rs].next;   // (before the arrival reads the packet: its fields are tags)
      int64_t t_next = next >= 0 ? c->pkt[next].t : MV_INF;
      auto take = [&](int x) {   // entry x's next arrival
        at[x] = next;
        t_at[x] = t_next;
      };
      if constexpr (REGS) {
#pragma unroll
        for (int i = 0; i < N; ++i) if (i == ia) take(i);
      } else {
        take(ia);
      }
      int32_t s = -1;
      if (tag & 256) {
        if (list_n > 0) s = list_pop(c, list_head, list_n);
        else { s = (int32_t)fresh++; --fresh_n; }
      }
      bool changed;
      switch_arrival<true>(c, e, v, lo + ja, rs, ta, &changed, s, tag & 256 ? p : -1);
    } else {
      now = tx;
      what_x = switch_start_class(c, p, tx, what_x);
      int64_t touched;   // (no PFC state changes in such a window)
      LanePort lane{&list_head, &list_n};
      if (!switch_transmit<true>(c, e, v, p, what_x, tx, par, &touched, &lane)) {
        busy = -1;   // a compact ring is full
        break;
      }
    }
    td = switch_port_next(c, p, &what);
  }
  if (busy >= 0) {
    for (; fresh_n > 0; --fresh_n) list_push(c, list_head, list_n, (int32_t)fresh++);   // (the share's rest)
    *last = now;
  }
  PORT_POOL_HEAD(c, p) = held.head;
  PORT_POOL_N(c, p) = held.n;
  return busy;
}
// switch_port_lane for a switch of r.n ports: in registers up to MV_SMALL_SWITCH_PORTS ports.
MV_DEV int switch_port_lane_of(Ctx* c, int64_t e, int64_t v, int64_t te, int par, int64_t k, const LaneRecs& r,
                               LaneShare share, int64_t* last) {
#if MV_SMALL_SWITCH_PORTS > 0
  if (r.n <= MV_SMALL_SWITCH_PORTS) return switch_port_lane<MV_SMALL_SWITCH_PORTS, true>(c, e, v, te, par, k, r, share, last);
#endif
  return switch_port_lane<MV_LANE_PORTS, false>(c, e, v, te, par, k, r, share, last);
}

// Every port task ran (`out`: one found a compact ring full, and the experiment runs again with
// full capacities): the MMU's shared and data bytes follow the ingress ports' bytes (theirs at
// the window's start, in the records: mmu_lane_add), the never-used slots the ports' shares took
// are taken, the in-rings' heads move past the arrivals, and the window's report is
// switch_window_of's (busy: a port had an event, the last at `last`).
MV_DEV void switch_lanes_end(Ctx* c, int64_t e, int64_t v, int64_t te, int par, bool busy, int64_t last, bool out,
                             const LaneRecs& r) {
  if (out) {
    c->node_next_ps[v] = c->node_prog_ps[v] = MV_CAP;
    note_window_end(c, v, true, last);
    return;
  }
  int64_t lo = c->node_port_lo[v], n = c->node_port_hi[v] - lo, res = EI(c, e, EI_RESERVE);
  int64_t shared = 0, data = 0;
  for (int64_t k = 0; k < n; ++k) {
    int64_t after = PORT_I(c, lo + k, PI_IN_BYTES);
    shared += mv_max(after - res, (int64_t)0) - mv_max(r.head[k].before - res, (int64_t)0);
    data += after - r.head[k].before;
  }
  c->node_shared_used[v] += shared;
  c->node_data_bytes[v] += data;
  LaneShare last_share;
  c->node_pool_next[v] = (int32_t)lane_shares(r, &last_share, n - 1);
  if (n > MV_TREE_PORTS) c->node_cached[v] = 0;   // (a serial window refills its persisted caches)
  int64_t next = node_sent_min(c, v, par);
  for (int64_t k = 0; k < n; ++k) {
    int64_t q = c->port_peer[lo + k];
    int64_t head = c->port_head[q * 2 + par] + r.head[k].arrivals;
    c->port_head[q * 2 + par] = head;
    int what;
    next = mv_min(next, mv_min(ring_t_at(c, q, head, par), switch_port_next(c, lo + k, &what)));
  }
  c->node_next_ps[v] = c->node_prog_ps[v] = next;
  if (next >= MV_INF) c->node_quiet[v] = !busy;
  note_window_end(c, v, busy, last);
}

// Switch v's window port by port on one thread (n <= MV_LANE_PORTS ports): the scan of every
// in-ring, the decision, and for LANES_RUN every port task, one after the other, and the end.
// Returns the decision (LANES_SERIAL: the caller runs the serial window; LANES_QUIET: none).
MV_DEV int switch_window_lanes(Ctx* c, int64_t e, int64_t v, int64_t te, int par) {
  int64_t lo = c->node_port_lo[v], n = c->node_port_hi[v] - lo;
  // a window too light for lanes (switch_lanes_decide's first rule) runs serially without the
  // scans: the in-rings' arrivals counted first, up to that many
  node_begin(c, v, par);
  int64_t need = lanes_min_arrivals(n), got = 0;
  for (int64_t j = 0; j < n && got < need; ++j) {
    int64_t q = c->port_peer[lo + j];
    for (int64_t pos = c->port_head[q * 2 + par]; got < need && ring_t_at(c, q, pos, par) < te; ++pos) ++got;
  }
  if (got < need) return LANES_SERIAL;
  int64_t words[lane_bytes(MV_LANE_PORTS) / 8];
  LaneRecs r = lane_recs(words, n);
  for (int64_t k = 0; k < n; ++k) r.want[k] = 0;
  for (int64_t j = 0; j < n; ++j) switch_lane_scan_of(c, e, v, te, par, j, r);
  LaneShare shares[MV_LANE_PORTS];
  int how = switch_lanes_decide(c, e, v, r, shares, -1);
  if (how != LANES_RUN) return how;
  int64_t last = c->exp_T_ps[e];   // the window's last event, over all ports
  bool busy = false, out = false;
  for (int64_t k = 0; k < n && !out; ++k) {
    int64_t t = last;
    int got = switch_port_lane_of(c, e, v, te, par, k, r, shares[k], &t);
    out = got < 0;
    if (got != 0) last = mv_max(last, t);
    busy |= got > 0;
  }
  switch_lanes_end(c, e, v, te, par, busy, last, out, r);
  return how;
}

// Whether switch v's windows may run port by port (at most MV_LANE_PORTS ports, and not a switch
// whose serial windows rescan its ports, wider than MV_CACHE_PORTS: the tests' small cache limit
// keeps that path in reach).
MV_DEV bool switch_lanes_fit(const Ctx* c, int64_t v) {
  int64_t n = c->node_port_hi[v] - c->node_port_lo[v];
  return !c->node_is_host[v] && n >= 1 && n <= MV_LANE_PORTS && n <= MV_CACHE_PORTS;
}
