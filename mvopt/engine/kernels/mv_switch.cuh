// Switch systems: arrivals (routing, MMU admission, PFC), and port transmissions (dequeue,
// ECN marking, INT). One thread owns one switch and processes its events in time order.
#pragma once

// ---- MMU (HPCC switch-mmu semantics; data class only) --------------------------------------
MV_DEV int64_t mmu_shared_of(const Ctx* c, int64_t e, int64_t i) {
  int64_t r = EI(c, e, EI_RESERVE);
  return PORT_I(c, i, PI_IN_BYTES) > r ? PORT_I(c, i, PI_IN_BYTES) - r : 0;
}
MV_DEV int64_t mmu_threshold(const Ctx* c, int64_t v, int64_t i) {
  int64_t free_b = c->node_buffer[v] - c->node_reserved[v] - c->node_shared_used[v];
  if (free_b < 0) free_b = 0;
  return free_b >> PORT_LK(c, i, LK_SHIFT);
}
MV_DEV bool mmu_admit(const Ctx* c, int64_t e, int64_t v, int64_t i, int64_t b) {
  if (EI(c, e, EI_PFC))
    return !(b + PORT_I(c, i, PI_IN_HDRM) > PORT_LK(c, i, LK_HEADROOM) && b + mmu_shared_of(c, e, i) > mmu_threshold(c, v, i));
  return c->node_data_bytes[v] + b <= c->node_buffer[v];
}
MV_DEV void mmu_enqueue(Ctx* c, int64_t e, int64_t v, int64_t i, int64_t b) {
  int64_t r = EI(c, e, EI_RESERVE);
  int64_t nb = PORT_I(c, i, PI_IN_BYTES) + b;
  if (nb <= r) PORT_I(c, i, PI_IN_BYTES) += b;
  else if (nb - r > mmu_threshold(c, v, i)) PORT_I(c, i, PI_IN_HDRM) += b;
  else {
    PORT_I(c, i, PI_IN_BYTES) += b;
    c->node_shared_used[v] += mv_min(b, nb - r);
  }
  c->node_data_bytes[v] += b;
}
MV_DEV void mmu_dequeue(Ctx* c, int64_t e, int64_t v, int64_t i, int64_t b) {
  int64_t r = EI(c, e, EI_RESERVE);
  int64_t from_hdrm = mv_min(PORT_I(c, i, PI_IN_HDRM), b);
  int64_t over = PORT_I(c, i, PI_IN_BYTES) > r ? PORT_I(c, i, PI_IN_BYTES) - r : 0;
  int64_t from_shared = mv_min(b - from_hdrm, over);
  PORT_I(c, i, PI_IN_HDRM) -= from_hdrm;
  PORT_I(c, i, PI_IN_BYTES) -= b - from_hdrm;
  c->node_shared_used[v] -= from_shared;
  c->node_data_bytes[v] -= b;
}
// The MMU's accounting in a window run port by port (the switch lanes; switch_lanes_decide said so:
// no headroom in use, every admission passes, and no decision of the window reads the MMU's
// state). Each of b bytes (b < 0: leaving) of ingress port i changes that port's bytes alone, by
// an add that is atomic where ports run at once on different lanes, and returns nothing (the
// lane does not wait for it); the switch's shared and data bytes follow once, at the window's
// end (switch_lanes_end), from each ingress port's bytes before (the scan's records) and after: the
// shared bytes change by max(0, after - reserve) - max(0, before - reserve), as mmu_enqueue and
// mmu_dequeue change them, event by event, without headroom. (One add per packet instead of
// three, one of them waited for.)
MV_DEV void mmu_lane_add(Ctx* c, int64_t i, int64_t b) { mv_add_old(&PORT_I(c, i, PI_IN_BYTES), b); }
// PFC: request a PAUSE/RESUME on the link of ingress port i (the frame leaves on port i).
// Pause is considered after an enqueue (after_enqueue), resume after a dequeue. Returns whether
// it changed port i's PFC state (and so possibly what port i sends next).
MV_DEV bool pfc_check(Ctx* c, int64_t e, int64_t v, int64_t i, int64_t t, bool after_enqueue) {
  if (!EI(c, e, EI_PFC)) return false;
  int64_t shared = mmu_shared_of(c, e, i);
  int64_t th = mmu_threshold(c, v, i);
  bool paused = PFC_BIT(c, i, PFC_IN_PAUSED), want = paused;
  if (after_enqueue && !want && (PORT_I(c, i, PI_IN_HDRM) > 0 || shared >= th)) want = true;
  else if (!after_enqueue && want && PORT_I(c, i, PI_IN_HDRM) == 0 && (shared == 0 || shared + EI(c, e, EI_RESUME) <= th)) want = false;
  if (want == paused) return false;
  pfc_set(c, i, PFC_IN_PAUSED, want);
  if (want != PFC_BIT(c, i, PFC_SENT)) PORT_I(c, i, PI_PFC_PS) = t;
  return true;
}

// Links going down (docs/engine.md, "Links going down"; the callers check links_go_down first, so
// experiments without any pay one load): whether any of experiment e's links goes down, how many
// are down at t (they are listed by time), and whether port i's link is one of them.
MV_DEV bool links_go_down(const Ctx* c, int64_t e) { return EI(c, e, EI_DOWN_N) != 0; }
MV_DEV int64_t links_down_by(const Ctx* c, int64_t e, int64_t t) {
  int64_t n = EI(c, e, EI_DOWN_N), k = 0;
  while (k < n && EI(c, e, EI_DOWN + k * NDOWN + D_AT_PS) <= t) ++k;
  return k;
}
MV_DEV bool link_down_at(const Ctx* c, int64_t e, int64_t i, int64_t t) {
  for (int64_t k = links_down_by(c, e, t) - 1; k >= 0; --k)
    if (EI(c, e, EI_DOWN + k * NDOWN + D_PORT) == i || EI(c, e, EI_DOWN + k * NDOWN + D_PEER) == i) return true;
  return false;
}

// Adaptive routing per flowlet (EI_FLOWLET_PS = gap > 0): the egress of a data packet of flow f at
// switch v, routed at t, whose adaptive choice among the n next hops (from the dense table's row
// `row` and rtab_nh from a, else route_nh from a) is `best`: the port of the flow's entry in the
// switch's table (its flow id modulo the table's size) while the entry is younger than the gap
// and its port still a next hop, else `best`; `commit` records it in the entry. Out of line, so
// that the kernels' code for other experiments keeps its shape.
MV_COLD int64_t flowlet_route(const Ctx* c, int64_t v, int32_t f, int64_t t, int64_t gap, bool commit, int32_t row,
                              int64_t a, int64_t n, int64_t best) {
  int64_t slot = (v * FLOWLET_ENTRIES + (c->f_local[f] & (FLOWLET_ENTRIES - 1))) * 2;
  if (c->node_flowlet[slot + 1] > 0 && t - c->node_flowlet[slot] < gap) {
    int64_t keep = c->node_port_lo[v] + c->node_flowlet[slot + 1] - 1;
    for (int64_t j = 0; j < n; ++j)
      if ((row >= 0 ? c->node_port_lo[v] + c->rtab_nh[a + j] : (int64_t)c->route_nh[a + j]) == keep) {
        best = keep;
        break;
      }
  }
  if (commit) {
    c->node_flowlet[slot] = t;
    c->node_flowlet[slot + 1] = best - c->node_port_lo[v] + 1;
  }
  return best;
}

// Next-hop port towards local destination host `dst` for a packet of flow f: from the switch's
// row of its topology's dense table (engine/routes.py: n next hops, the port's index among the
// switch's ports or the first of the set's in rtab_nh), else (a topology without one) by binary
// search over its ranges of destinations. `lb` (LB_*): per flow (ECMP, every control packet),
// or per data packet by a hash (spraying) or by the shortest data queue (adaptive; per flowlet
// with EI_FLOWLET_PS, `commit`: the choice is recorded in the switch's flowlet table). A packet
// routed at t, after links of its experiment went down, takes the rows of the table computed
// without them (link_down_at; an experiment with links going down has a dense table).
MV_DEV int64_t route(const Ctx* c, int64_t e, int64_t v, int32_t dst, int32_t f, int lb, int32_t seq, int32_t sendno,
                     int64_t t, bool commit) {
  int32_t row = c->node_rtab[v];
  int64_t a, n, nh = 0;
  if (links_go_down(c, e)) {   // the rows of the table without the links down at t
    int64_t k = links_down_by(c, e, t) - 1;
    if (k >= 0) {
      row += (int32_t)EI(c, e, EI_DOWN + k * NDOWN + D_RTAB);
      nh = EI(c, e, EI_DOWN + k * NDOWN + D_RTNH);
    }
  }
  if (row >= 0) {
    int32_t x = c->rtab[row + dst];
    a = x >> 8;
    n = x & 0xff;
    if (n == 1) return c->node_port_lo[v] + a;
    a += c->node_rtnh[v] + nh;
  } else {
    int32_t lo = c->node_route_lo[v], hi = c->node_route_hi[v] - 1;
    while (lo < hi) {   // last range whose first destination <= dst
      int32_t mid = (lo + hi + 1) / 2;
      if (c->route_dst_lo[mid] <= dst) lo = mid; else hi = mid - 1;
    }
    a = c->route_nh_lo[lo];
    n = c->route_nh_hi[lo] - a;
    if (n == 1) return c->route_nh[a];
  }
  if (n <= 0) return -1;
  // hash64(seed, TAG_SPRAY / TAG_ECMP, node_local[v], f_local[f], ...), from the switch's row
  uint64_t h = lb != LB_ECMP ? mv_hash_from(node_hash_prefix(c, v, SCHEMA_HT_SPRAY), c->f_local[f], seq, sendno)
                             : mv_hash_from(node_hash_prefix(c, v, SCHEMA_HT_ECMP), c->f_local[f], 0, 0);
  // h % n; a mask when n is a power of two (fat-trees of k = 2^j, most ECMP sets): the same
  // value, without the 64-bit division a GPU runs as a ~70-instruction routine
  uint64_t un = (uint64_t)n;
  int64_t k = (int64_t)((un & (un - 1)) == 0 ? h & (un - 1) : h % un);
  auto port_of = [&](int64_t j) -> int64_t {
    return row >= 0 ? c->node_port_lo[v] + c->rtab_nh[a + j] : (int64_t)c->route_nh[a + j];
  };
  if (lb != LB_ADAPTIVE) return port_of(k);
  // adaptive: the first next hop with the fewest bytes in its data queue, in cyclic order from
  // the hashed one (ties go where spraying would send the packet); per flowlet: flowlet_route
  int64_t best = port_of(k), best_q = PORT_T(c, best, PT_QBYTES + Q_DATA);
  for (int64_t j = 1; j < n; ++j) {
    int64_t p = port_of(k + j < n ? k + j : k + j - n);
    int64_t q = PORT_T(c, p, PT_QBYTES + Q_DATA);
    if (q < best_q) { best = p; best_q = q; }
  }
  int64_t gap = EI(c, e, EI_FLOWLET_PS);
  return gap ? flowlet_route(c, v, f, t, gap, commit, row, a, n, best) : best;
}

// The switches a packet has passed before this one, counting this one from now on.
MV_DEV int packet_hop_advance(Pkt* pk) {
  int hop = pk->hop;
  if (hop < 127) pk->hop = (int8_t)(hop + 1);
  return hop;
}
// A packet's egress port (-1: no route), advancing its hop count (`commit`: the switch's own routing
// of the packet, which a flowlet table records; a lane scan's look ahead does not): from its flow's path (f_path,
// routes.flow_paths: the batch builder ran `route` for every flow's ECMP path ahead of time), one
// load instead of the table entries and the hash; the switch routes it itself where the path
// holds -1 (spraying, adaptive routing, no dense table, beyond NPATH switches; a batch without paths: has_paths 0,
// routes.wants_paths).
MV_DEV int64_t route_packet(const Ctx* c, int64_t e, int64_t v, Pkt* pk, bool data, int64_t t, bool commit = false) {
  int32_t f = pk->flow;
  int hop = packet_hop_advance(pk);
  if (c->has_paths && hop < NPATH) {
    int16_t k = c->f_path[(int64_t)f * 2 * NPATH + (data ? 0 : NPATH) + hop];
    if (k >= 0) return c->node_port_lo[v] + k;
  }
  int32_t dst = data ? c->f_dst_local[f] : c->f_src_local[f];
  return route(c, e, v, dst, f, data ? (int)EI(c, e, EI_SPRAY) : LB_ECMP, pk->seq, pk->sendno, t, commit);
}

// Whether a packet of type `type` waits in its egress port's data queue at a switch of experiment
// e: a data packet; an ACK/NACK where switches queue them with data (ACKS_SWITCH_DATA: first in first
// out with the data, its bytes counted by the MMU and PFC), else in the control queue, served first.
MV_DEV bool switch_queues_as_data(const Ctx* c, int64_t e, int type) {
  return type == PK_DATA || ((EI(c, e, EI_ACKS) & ACKS_SWITCH_DATA) && (type == PK_ACK || type == PK_NACK));
}

// A packet of b bytes (a data packet or not) dropped at switch v, counted.
MV_DEV void switch_drop(Ctx* c, int64_t e, int64_t v, bool data, int64_t b) {
  ctr_add(c, v, data ? C_DATA_DROP : C_CTL_DROP, 1);
  if (data) ctr_add(c, v, C_DATA_BYTES_DROP, b - EI(c, e, EI_HEADER));
}

// A counter of switch v: a lane-safe add where ports of the switch may run at once (LANE).
template <bool LANE> MV_DEV void switch_ctr_add(Ctx* c, int64_t v, int k, int64_t x) {
  if (LANE) ctr_add_lane(c, v, k, x); else ctr_add(c, v, k, x);
}

// A packet leaving port p at t, taken from its data queue: MMU release of its ingress port, PFC
// resume check; a data packet also ECN marking and INT (if `int_slot` >= 0 holds its records; an
// ACK/NACK queued with data carries neither: its CE bit is the echo, its INT the data's). Returns
// the ingress port whose PFC state changed (-1: none).
// LANE: a window run port by port (the switch lanes): the shared state by lane-safe adds, and no
// PFC check (switch_lanes_decide: no PFC state can change in such a window).
template <bool LANE = false>
MV_DEV int64_t switch_data_leaves(Ctx* c, int64_t e, int64_t v, int64_t p, Pkt* pk, int64_t t, int64_t int_slot) {
  int64_t touched = -1;
  int64_t i = c->node_port_lo[v] + pk->in_port;
  if (LANE) mmu_lane_add(c, i, -(int64_t)pk->bytes);
  else {
    mmu_dequeue(c, e, v, i, pk->bytes);
    if (pfc_check(c, e, v, i, t, false)) touched = i;
  }
  if (pk->type != PK_DATA) return touched;
  int64_t q = PORT_T(c, p, PT_QBYTES + Q_DATA);
  if (EI(c, e, EI_ECN) && !(pk->flags & FL_CE)) {
    bool mark = false;
    int64_t kmin = PORT_LK(c, p, LK_KMIN), kmax = PORT_LK(c, p, LK_KMAX);
    if (q > kmax) mark = true;
    else if (q > kmin) {
      double prob = c->link_pmax[PORT_W(c, p, PW_LINK)] * (double)(q - kmin) / (double)(kmax - kmin);
      uint64_t h = mv_hash_from(node_hash_prefix(c, v, SCHEMA_HT_ECN), p - c->exp_port_lo[e], PORT_T(c, p, PT_DEQ), 0);
      mark = mv_uniform(h) < prob;
    }
    if (mark) {
      pk->flags |= FL_CE;
      switch_ctr_add<LANE>(c, v, C_ECN, 1);
    }
  }
  PORT_T(c, p, PT_DEQ) += 1;
  if (int_slot >= 0 && c->has_int && EI(c, e, EI_CC) == CC_HPCC && pk->nint < MAX_INT_HOPS) {
    int_hop_set(c, e, &c->pkt_int[int_slot * MAX_INT_HOPS + pk->nint], t, PORT_T(c, p, PT_TX_BYTES),
                PORT_T(c, p, PT_QBYTES) + PORT_T(c, p, PT_QBYTES + 1), p);
    pk->nint += 1;
  }
  return touched;
}

// What a switch does to a packet that arrives on its port i (ring slot `slot`, at t): a PFC frame
// sets port i's pause state; any other packet is routed, admitted by the MMU, and joins its
// egress port's queue in a pool slot (or is dropped: no route, no admission, no slot). Returns
// the egress port whose next transmission the packet may have changed: the one whose queue it
// became the head of (-1: none, also when it joined a queue behind others; a PFC frame changes
// only port i; SW_OUT_OF_SLOTS: the compact pool ran out, the experiment must run again with
// full capacities). *i_changed: whether what port i itself sends next may have changed (a PFC
// frame received, or its PFC state changed). The caller recomputes those ports' next
// transmissions: what a port sends next depends on its queues' heads, its PFC state and its free
// time alone. The packet leaves its queue at a transmission event (switch_transmit).
//
// How the switch's window is scheduled decides only how the shared state is kept (LANE: a
// window run port by port, the switch lanes): switch_lane_scan routed the packet already
// (`routed`: its egress port, -1 none) and its port task took its pool slot (`given`); admission
// passes and no PFC state changes (switch_lanes_decide), and the shared state changes by
// lane-safe adds.
#define SW_OUT_OF_SLOTS (-2)
template <bool LANE = false>
MV_DEV int64_t switch_arrival(Ctx* c, int64_t e, int64_t v, int64_t i, int64_t slot, int64_t t, bool* i_changed,
                              int32_t given = -1, int64_t routed = -1) {
  // i: our port on the link the packet came over; slot: its ring slot
  Pkt pk = ring_load(&c->pkt[slot]);
  *i_changed = false;
  // over a link that is down (never in a window of the switch lanes: switch_lanes_decide), a
  // packet is lost and a PAUSE too; a RESUME still lifts a pause (the link's loss clears it)
  bool dead = !LANE && links_go_down(c, e) && link_down_at(c, e, i, t);
  if (pk.type == PK_PAUSE || pk.type == PK_RESUME) {
    if (dead && pk.type == PK_PAUSE) return -1;
    pfc_set(c, i, PFC_PAUSED, pk.type == PK_PAUSE);
    *i_changed = true;
    return -1;
  }
  bool data = pk.type == PK_DATA;
  int64_t out;
  if (LANE) {
    packet_hop_advance(&pk);
    out = routed;
  } else {
    out = dead ? -1 : route_packet(c, e, v, &pk, data, t, true);
  }
  int64_t b = pk.bytes;
  if (dead) {
    switch_drop(c, e, v, data, b);
    return -1;
  }
  if (out < 0) {
    switch_ctr_add<LANE>(c, v, data ? C_DATA_DROP : C_CTL_DROP, 1);
    return -1;
  }
  bool as_data = switch_queues_as_data(c, e, pk.type);
  if (!LANE && as_data && !mmu_admit(c, e, v, i, b)) {
    switch_drop(c, e, v, data, b);
    return -1;
  }
  pk.t = t;
  pk.next = -1;
  pk.in_port = (int16_t)(i - c->node_port_lo[v]);
  int32_t s = given;
  if (!LANE) {
    s = pool_alloc(c, v);
    if (s < 0) {
      if (EI(c, e, EI_COMPACT_POOLS)) return SW_OUT_OF_SLOTS;
      switch_drop(c, e, v, data, b);
      return -1;
    }
  }
  c->pkt[s] = pk;
  copy_int(c, s, slot, pk.nint);
  bool head;
  if (as_data) {   // (the MMU's accounting is independent of the pool and the queue: order free)
    if (LANE) mmu_lane_add(c, i, b); else mmu_enqueue(c, e, v, i, b);
    head = q_push(c, out, Q_DATA, s, b);
    if (!LANE) *i_changed = pfc_check(c, e, v, i, t, true);
  } else {
    head = q_push(c, out, Q_CTL, s, b);
  }
  return head ? out : -1;
}

// What port p's next transmission depends on, as loaded: the time a PFC frame is due (MV_INF:
// none), its control and data heads' times (MV_INF: none, or data paused), and when it is free.
struct PortNextState { int64_t pfc_ps, tc, tdata, free; };
MV_DEV PortNextState port_next_state(const Ctx* c, int64_t p) {
  PortNextState s;
  int64_t w = PORT_I(c, p, PI_PFC);
  s.pfc_ps = pfc_word_due(w) ? PORT_I(c, p, PI_PFC_PS) : MV_INF;
  int32_t hc = PORT_QH(c, p, Q_CTL), hd = PORT_QH(c, p, Q_DATA);
  s.tc = hc >= 0 ? c->pkt[hc].t : MV_INF;
  s.tdata = hd >= 0 && !(w & PFC_PAUSED) ? c->pkt[hd].t : MV_INF;
  // (read only where port_next_of uses it: a port with nothing to send, the common case, reads less)
  s.free = mv_min(s.pfc_ps, mv_min(s.tc, s.tdata)) < MV_INF ? PORT_T(c, p, PT_FREE) : 0;
  return s;
}
// What a port sends if it starts at t: the highest-priority class available by then (a PFC frame,
// due at pfc_ps, then control, its head's time tc, then data).
MV_DEV int port_class_of(int64_t pfc_ps, int64_t tc, int64_t t) {
  return pfc_ps <= t ? 2 : tc <= t ? Q_CTL : Q_DATA;
}
// The earliest time a port in state s can start a transmission (MV_INF if it has nothing to
// send), and what it sends then (*what).
MV_DEV int64_t port_next_of(const PortNextState& s, int* what) {
  int64_t avail = mv_min(s.pfc_ps, mv_min(s.tc, s.tdata));
  if (avail >= MV_INF) {
    *what = -1;
    return MV_INF;
  }
  int64_t t = mv_max(avail, s.free);
  *what = port_class_of(s.pfc_ps, s.tc, t);
  return t;
}
// What port p sends if it starts at t.
MV_DEV int switch_port_class(const Ctx* c, int64_t p, int64_t t) {
  int64_t pfc_ps = pfc_due(c, p) ? PORT_I(c, p, PI_PFC_PS) : MV_INF;
  if (pfc_ps <= t) return 2;   // (the control head is not read then)
  int32_t hc = PORT_QH(c, p, Q_CTL);
  return port_class_of(pfc_ps, hc >= 0 ? c->pkt[hc].t : MV_INF, t);
}
// Earliest time port p can start a transmission (MV_INF if it has nothing to send), and what.
MV_DEV int64_t switch_port_next(const Ctx* c, int64_t p, int* what) {
  return port_next_of(port_next_state(c, p), what);
}

// Returns false if the ring was full (internal error). *touched: the ingress port whose PFC
// state the dequeue changed (-1 if none).
// LANE: a window run port by port (the switch lanes; no PFC frame is due in one, so the PFC
// branch below, with its plain writes, never runs on a lane).
// `lane` (a port task's, or null): what the task keeps of its port for the window.
struct LanePort {
  int32_t *list_head, *list_n;   // the port's own free list (in the task's registers), which takes the sent slot
};
template <bool LANE = false>
MV_DEV bool switch_transmit(Ctx* c, int64_t e, int64_t v, int64_t p, int what, int64_t t, int par, int64_t* touched,
                            LanePort* lane = nullptr) {
  *touched = -1;
  if (what == 2) {
    Pkt pk;
    pk.t = 0; pk.flow = -1; pk.seq = 0; pk.bytes = (int16_t)EI(c, e, EI_PFC_FRAME);
    bool pause = PFC_BIT(c, p, PFC_IN_PAUSED);
    pk.type = pause ? PK_PAUSE : PK_RESUME; pk.flags = 0; pk.next = -1;
    pk.in_port = -1; pk.nint = 0; pk.sendno = 0; pk.hop = 0;
    pfc_set(c, p, PFC_SENT, pause);
    ctr_add(c, v, pk.type == PK_PAUSE ? C_PAUSES : C_RESUMES, 1);
    ctr_add(c, v, C_CTL_SENT, 1);
    return wire_send(c, v, p, par, t, &pk, -1) >= 0;
  }
  int32_t s = q_pop(c, p, what);
  Pkt* pk = &c->pkt[s];
  if (what == Q_DATA) *touched = switch_data_leaves<LANE>(c, e, v, p, pk, t, s);
  PORT_T(c, p, PT_TX_BYTES) += pk->bytes;
  // the slot back to a list before the packet goes on the wire (wire_append copies it, all but
  // its `next`), so that the list's loads come before the ring store (wire_append's comment)
  if (LANE) list_push(c, *lane->list_head, *lane->list_n, s);   // (a port's own list on a lane)
  else pool_free(c, v, s);
  return wire_send(c, v, p, par, t, pk, s) >= 0;
}
