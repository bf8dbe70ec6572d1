// Host systems: the NIC of one host — receiver (ACKs; go-back-N's in-order delivery and NACKs, or
// selective repeat's out-of-order delivery), sender (flows, round-robin, pacing, windows,
// retransmissions, RTO), congestion control, and the tasks of the host.
#pragma once

// ---- selective repeat (docs/engine.md): a flow's bit of packet s in a ring of SR_WORDS words
MV_DEV bool sr_bit(const int64_t* map, int64_t f, int64_t s) {
  int64_t k = s & (SR_WINDOW - 1);
  return ((map[f * SR_WORDS + (k >> 6)] >> (k & 63)) & 1) != 0;
}
MV_DEV void sr_set(int64_t* map, int64_t f, int64_t s, bool on) {
  int64_t k = s & (SR_WINDOW - 1);
  uint64_t w = (uint64_t)map[f * SR_WORDS + (k >> 6)], b = 1ULL << (k & 63);
  map[f * SR_WORDS + (k >> 6)] = (int64_t)(on ? (w | b) : (w & ~b));
}
MV_DEV bool flow_sr(const Ctx* c, int64_t e) { return EI(c, e, EI_TRANSPORT) == TR_SR; }
// The packet selective repeat retransmits next (-1: none): a hole presumed lost.
MV_DEV int64_t sr_retx_seq(const Ctx* c, int64_t f) {
  int64_t r = c->f_rtx_nxt[f];
  return r < mv_min(c->f_lost_hi[f], c->f_snd_nxt[f]) ? r : -1;
}
// Moves f_rtx_nxt past the packets selectively acknowledged (and up to f_snd_una), after any change
// of what it depends on: an ACK, an RTO, a retransmission.
MV_DEV void sr_settle(Ctx* c, int64_t f) {
  int64_t r = mv_max(c->f_rtx_nxt[f], c->f_snd_una[f]);
  int64_t lim = mv_min(c->f_lost_hi[f], c->f_snd_nxt[f]);
  while (r < lim && sr_bit(c->f_sack_map, f, r)) ++r;
  c->f_rtx_nxt[f] = (int32_t)r;
}

MV_DEV bool flow_win_bound(const Ctx* c, int64_t e, int64_t f) {
  int64_t w = c->f_win[f];
  if (w == 0) return false;
  if (EI(c, e, EI_VARWIN)) w = mv_max(1, (int64_t)((double)w * c->f_rate[f] / (double)c->f_line_bps[f]));
  return (c->f_snd_nxt[f] - c->f_snd_una[f]) * EI(c, e, EI_PAYLOAD) >= w;
}
// A retransmission of selective repeat is neither window-bound nor limited by the receive window;
// new data is limited by both.
MV_DEV bool flow_can_send(const Ctx* c, int64_t e, int64_t f) {
  if (flow_sr(c, e)) {
    if (sr_retx_seq(c, f) >= 0) return true;
    if (c->f_snd_nxt[f] - c->f_snd_una[f] >= SR_WINDOW) return false;
  }
  return c->f_snd_nxt[f] < c->f_npkt[f] && !flow_win_bound(c, e, f);
}
// RTO: in lossy mode, and with PFC when packets are routed one by one: reordering can leave a gap
// whose NACK the per-flow NACK rate limit suppresses (go-back-N), or a packet dropped for want of
// a switch's packet slot that no selective acknowledgement declares lost (selective repeat with
// PFC), with nothing left in flight to recover it.
MV_DEV int64_t flow_rto_t(const Ctx* c, int64_t e, int64_t f) {
  if ((EI(c, e, EI_PFC) && EI(c, e, EI_SPRAY) == LB_ECMP) || c->f_snd_nxt[f] <= c->f_snd_una[f]) return MV_INF;
  return c->f_progress_ps[f] + EI(c, e, EI_RTO_PS);
}

// The active flows of a host, kept sorted by flow row (the order of their task ids); round robin
// follows that order.
MV_DEV void host_remove_active(Ctx* c, int64_t v, int32_t j) {
  int64_t base = c->node_heap_lo[v];
  int32_t n = c->node_act_n[v];
  for (int32_t k = j; k + 1 < n; ++k) c->act_flow[base + k] = c->act_flow[base + k + 1];
  c->node_act_n[v] = n - 1;
}
MV_DEV void host_insert_active(Ctx* c, int64_t v, int32_t f) {
  int64_t base = c->node_heap_lo[v];
  int32_t j = c->node_act_n[v];
  while (j > 0 && c->act_flow[base + j - 1] > f) { c->act_flow[base + j] = c->act_flow[base + j - 1]; --j; }
  c->act_flow[base + j] = f;
  c->node_act_n[v] += 1;
}

// Control packet (ACK/NACK) of flow f into the host's control queue; `sacked`: the data packet a
// selective-repeat ACK acknowledges (in the record's sendno, which only data packets use otherwise).
MV_DEV void host_queue_ctl(Ctx* c, int64_t e, int64_t v, int64_t p, int type, int32_t f, int64_t seq,
                           int16_t flags, int64_t int_src, int nint, int64_t t, int64_t sacked = 0) {
  int32_t s = pool_alloc(c, v);
  if (s < 0) { ctr_add(c, v, C_CTL_DROP, 1); return; }
  Pkt pk;
  pk.t = t; pk.flow = f; pk.seq = (int32_t)seq; pk.next = -1; pk.sendno = (int32_t)sacked; pk.bytes = (int16_t)EI(c, e, EI_ACK);
  pk.in_port = -1; pk.type = (int8_t)type; pk.flags = (int8_t)flags; pk.nint = (int8_t)nint; pk.hop = 0;
  c->pkt[s] = pk;
  if (int_src >= 0) copy_int(c, s, int_src, nint);
  q_push(c, p, Q_CTL, s, pk.bytes);
}

// The head of host port p's control queue (-1: none), or -1 while a PAUSE stops it
// (ACKS_HOST_PAUSE: the HPCC simulator's ACK queue in the data's class).
MV_DEV int32_t host_ctl_head(const Ctx* c, int64_t e, int64_t p) {
  return (EI(c, e, EI_ACKS) & ACKS_HOST_PAUSE) && PFC_BIT(c, p, PFC_PAUSED) ? -1 : PORT_QH(c, p, Q_CTL);
}

// Returns when a remote task successor is notified (MV_INF if none).
MV_DEV int64_t host_arrival(Ctx* c, int64_t e, int64_t v, int64_t p, int64_t slot, int64_t t) {
  Pkt pk = ring_load(&c->pkt[slot]);
  int64_t notify = MV_INF;
  if (pk.type == PK_PAUSE || pk.type == PK_RESUME) { pfc_set(c, p, PFC_PAUSED, pk.type == PK_PAUSE); return notify; }
  int32_t f = pk.flow;
  if (pk.type == PK_DATA && flow_sr(c, e)) {   // selective repeat: every packet acknowledged
    int64_t exp_seq = c->f_rx_next[f], s = pk.seq;
    bool fresh = s == exp_seq || (s > exp_seq && s - exp_seq < SR_WINDOW && !sr_bit(c->f_rx_map, f, s));
    if (!fresh) ctr_add(c, v, C_OOO, 1);   // (as go-back-N's: an arrival the receiver discards)
    if (fresh) {
      ctr_add(c, v, C_DATA_DELIV, 1);
      ctr_add(c, v, C_DATA_BYTES_DELIV, pk.bytes - EI(c, e, EI_HEADER));
      if (s == exp_seq) {   // in order: up to the next packet not received, clearing the ring behind
        int64_t n = exp_seq + 1;
        while (sr_bit(c->f_rx_map, f, n)) { sr_set(c->f_rx_map, f, n, false); ++n; }
        c->f_rx_next[f] = (int32_t)n;
      } else {
        sr_set(c->f_rx_map, f, s, true);
      }
    }
    host_queue_ctl(c, e, v, p, PK_ACK, f, c->f_rx_next[f], (pk.flags & FL_CE) ? FL_ECHO : 0, slot, pk.nint, t, s);
    if (fresh && s == exp_seq && c->f_rx_next[f] == c->f_npkt[f]) notify = task_finished(c, v, c->f_task[f], t);
    return notify;
  }
  if (pk.type == PK_DATA) {
    int64_t exp_seq = c->f_rx_next[f];
    if (pk.seq == exp_seq) {
      c->f_rx_next[f] = exp_seq + 1;
      ctr_add(c, v, C_DATA_DELIV, 1);
      ctr_add(c, v, C_DATA_BYTES_DELIV, pk.bytes - EI(c, e, EI_HEADER));
      host_queue_ctl(c, e, v, p, PK_ACK, f, exp_seq + 1, (pk.flags & FL_CE) ? FL_ECHO : 0, slot, pk.nint, t);
      if (exp_seq + 1 == c->f_npkt[f]) notify = task_finished(c, v, c->f_task[f], t);
    } else {
      ctr_add(c, v, C_OOO, 1);
      if (pk.seq > exp_seq && (t >= c->f_nack_ps[f] || exp_seq != c->f_last_nack[f])) {
        c->f_nack_ps[f] = t + EI(c, e, EI_NACK_PS);
        c->f_last_nack[f] = exp_seq;
        ctr_add(c, v, C_NACKS, 1);
        host_queue_ctl(c, e, v, p, PK_NACK, f, exp_seq, (pk.flags & FL_CE) ? FL_ECHO : 0, slot, pk.nint, t);
      }
    }
    return notify;
  }
  // ACK / NACK at the sender
  if (c->f_done_ps[f] >= 0) return notify;
  int64_t a = pk.seq;
  if (a > c->f_snd_una[f]) { c->f_snd_una[f] = a; c->f_progress_ps[f] = t; }
  if (flow_sr(c, e)) {
    int64_t s = pk.sendno;
    if (s >= c->f_snd_una[f]) {   // received out of order: a hole below it
      sr_set(c->f_sack_map, f, s, true);
      if (!EI(c, e, EI_PFC)) c->f_lost_hi[f] = (int32_t)mv_max(c->f_lost_hi[f], s - SR_DUPTHRESH + 1);
    }
    sr_settle(c, f);
  } else if (pk.type == PK_NACK) c->f_snd_nxt[f] = c->f_snd_una[f];
  else if (c->f_snd_nxt[f] < c->f_snd_una[f]) c->f_snd_nxt[f] = c->f_snd_una[f];
  cc_on_ack(c, e, f, t, a, (pk.flags & FL_ECHO) != 0, slot, pk.nint, flow_sr(c, e) ? (int64_t)pk.sendno : -1);
  if (c->f_snd_una[f] == c->f_npkt[f]) {
    c->f_done_ps[f] = t;
    c->node_flows_acked[v] += 1;
    if (t > c->node_last_ps[v]) c->node_last_ps[v] = t;
    int64_t base = c->node_heap_lo[v];
    for (int32_t j = 0; j < c->node_act_n[v]; ++j)
      if (c->act_flow[base + j] == f) { host_remove_active(c, v, j); break; }
  }
  return notify;
}

// Task event at the top of the heap: a task starts (a flow activates, a delay task begins), or
// a delay task finishes.
MV_DEV int64_t host_task_event(Ctx* c, int64_t e, int64_t v, int64_t t) {
  int32_t key = c->heap_task[c->node_heap_lo[v]];
  int32_t k = key >> 1;
  heap_pop(c, v);
  if (key & 1) return task_finished(c, v, k, t);
  if (c->task_kind[k] != 0) { heap_push(c, v, t + c->task_dur_ps[k], 2 * k + 1); return MV_INF; }
  int32_t f = c->task_flow[k];     // flows are rows of their own (flow columns), in task order
  host_insert_active(c, v, f);
  c->f_next_tx[f] = t;
  c->f_progress_ps[f] = t;
  cc_init(c, e, f);
  return MV_INF;
}

// Earliest flow timer; *rto gets the earliest RTO alone (a timer that can make progress).
MV_DEV int64_t host_next_timer(Ctx* c, int64_t e, int64_t v, int64_t* rto) {
  int64_t base = c->node_heap_lo[v], m = MV_INF;
  *rto = MV_INF;
  for (int32_t j = 0; j < c->node_act_n[v]; ++j) {
    int32_t f = c->act_flow[base + j];
    int64_t r = flow_rto_t(c, e, f);
    *rto = mv_min(*rto, r);
    m = mv_min(m, mv_min(cc_next_timer(c, e, f), r));
  }
  return m;
}

MV_DEV void host_fire_timers(Ctx* c, int64_t e, int64_t v, int64_t t) {
  int64_t base = c->node_heap_lo[v];
  for (int32_t j = 0; j < c->node_act_n[v]; ++j) {
    int32_t f = c->act_flow[base + j];
    if (EI(c, e, EI_CC) == CC_DCQCN) dcqcn_timers(c, e, f, t);
    if (flow_rto_t(c, e, f) == t) {
      if (flow_sr(c, e)) {   // every packet outstanding and not selectively acknowledged is lost
        c->f_lost_hi[f] = c->f_snd_nxt[f];
        c->f_rtx_nxt[f] = c->f_snd_una[f];
        sr_settle(c, f);
      } else {
        c->f_snd_nxt[f] = c->f_snd_una[f];
      }
      c->f_progress_ps[f] = t;
      ctr_add(c, v, C_TIMEOUTS, 1);
    }
  }
}

// Earliest transmission start of the host port, MV_INF if nothing to send.
MV_DEV int64_t host_tx_time(Ctx* c, int64_t e, int64_t v, int64_t p) {
  int64_t avail = MV_INF;
  int32_t h = host_ctl_head(c, e, p);
  if (h >= 0) avail = c->pkt[h].t;
  if (!PFC_BIT(c, p, PFC_PAUSED)) {
    int64_t base = c->node_heap_lo[v];
    for (int32_t j = 0; j < c->node_act_n[v]; ++j) {
      int32_t f = c->act_flow[base + j];
      if (flow_can_send(c, e, f)) avail = mv_min(avail, c->f_next_tx[f]);
    }
  }
  return avail >= MV_INF ? MV_INF : mv_max(avail, PORT_T(c, p, PT_FREE));
}

MV_DEV bool host_transmit(Ctx* c, int64_t e, int64_t v, int64_t p, int64_t t, int par) {
  int32_t h = host_ctl_head(c, e, p);
  if (h >= 0 && c->pkt[h].t <= t) {
    int32_t s = q_pop(c, p, Q_CTL);
    ctr_add(c, v, C_CTL_SENT, 1);
    pool_free(c, v, s);   // (before the send, as switch_transmit's)
    return wire_send(c, v, p, par, t, &c->pkt[s], s) >= 0;
  }
  int64_t base = c->node_heap_lo[v];
  int32_t n = c->node_act_n[v];
  int32_t first = 0;   // the first active flow with an id above the last one served
  while (first < n && c->act_flow[base + first] <= c->node_rr[v]) ++first;
  for (int32_t step = 0; step < n; ++step) {
    int32_t k = first + step;          // < 2n (first <= n): (first + step) % n without a division
    int32_t f = c->act_flow[base + (k >= n ? k - n : k)];
    if (!flow_can_send(c, e, f) || c->f_next_tx[f] > t) continue;
    c->node_rr[v] = f;
    if (c->f_snd_nxt[f] == c->f_snd_una[f]) c->f_progress_ps[f] = t;   // RTO measures from here
    int64_t seq = flow_sr(c, e) ? sr_retx_seq(c, f) : -1;
    if (seq >= 0) {   // selective repeat's retransmission of a hole
      c->f_rtx_nxt[f] = (int32_t)(seq + 1);
      sr_settle(c, f);
    } else {
      seq = c->f_snd_nxt[f];
      c->f_snd_nxt[f] = (int32_t)(seq + 1);
      if (flow_sr(c, e)) sr_set(c->f_sack_map, f, seq, false);   // (the ring's bit of seq - SR_WINDOW)
    }
    int64_t pay = EI(c, e, EI_PAYLOAD);
    int64_t left = c->f_size[f] - seq * pay;
    if (left < pay) pay = left;
    Pkt pk;
    pk.t = 0; pk.flow = f; pk.seq = (int32_t)seq; pk.bytes = (int16_t)(pay + EI(c, e, EI_HEADER));
    pk.type = PK_DATA; pk.flags = 0; pk.next = -1; pk.in_port = -1; pk.nint = 0; pk.hop = 0;
    pk.sendno = (int32_t)c->f_sends[f];
    c->f_sends[f] += 1;
    bool fresh = seq >= c->f_max_sent[f];
    if (!fresh) ctr_add(c, v, C_RETX, 1); else c->f_max_sent[f] = seq + 1;
    cc_on_send(c, e, f, seq, fresh, t);
    c->f_next_tx[f] = t + mv_ser(pk.bytes, (int64_t)c->f_rate[f]);
    *CI(c, f, CI_LAST_BYTES) = pk.bytes;   // for a later rate change (HPCC)
    ctr_add(c, v, C_DATA_SENT, 1);
    ctr_add(c, v, C_DATA_BYTES_SENT, pay);
    return wire_send(c, v, p, par, t, &pk, -1) >= 0;
  }
  return true;  // unreachable when host_tx_time said something was ready
}
