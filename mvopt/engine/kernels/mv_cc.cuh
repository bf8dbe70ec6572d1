// Congestion control at the sender (one flow = one row): DCQCN, HPCC, DCTCP, TIMELY, none.
// Semantics: docs/engine.md and the design note network-model.md.
#pragma once

MV_DEV double* CD(Ctx* c, int64_t f, int k) { return &c->f_ccd[f * NCCD + k]; }
MV_DEV int64_t* CI(Ctx* c, int64_t f, int k) { return &c->f_cci[f * NCCI + k]; }
MV_DEV int64_t* HI(Ctx* c, int64_t f, int k) { return &c->f_hop[f * NHOPI + k]; }   // batches with HPCC only

MV_DEV void cc_init(Ctx* c, int64_t e, int64_t f) {
  double line = (double)c->f_line_bps[f];
  c->f_rate[f] = line;
  for (int k = 0; k < NCCD; ++k) *CD(c, f, k) = 0.0;
  for (int k = 0; k < NCCI; ++k) *CI(c, f, k) = 0;
  if (c->has_int) *HI(c, f, HI_NHOP) = 0;   // hop records are read only below HI_NHOP
  *CD(c, f, CD_RT) = line;
  *CD(c, f, CD_RC) = line;
  *CD(c, f, CD_ALPHA) = 1.0;
  *CD(c, f, CD_U) = 1.0;
  *CI(c, f, CI_ALPHA_T) = MV_INF;
  *CI(c, f, CI_DEC_T) = MV_INF;
  *CI(c, f, CI_INC_T) = MV_INF;
  *CI(c, f, CI_RTT_SEQ) = -1;
}

// ---- DCQCN ---------------------------------------------------------------------------------
MV_DEV void dcqcn_cnp(Ctx* c, int64_t e, int64_t f, int64_t t) {
  int64_t* fl = CI(c, f, CI_FLAGS);
  *fl |= CF_CNP_ALPHA | CF_CNP_DEC;
  if (!(*fl & CF_STARTED)) {
    *fl |= CF_STARTED;
    *fl &= ~(int64_t)CF_CNP_ALPHA;
    *CD(c, f, CD_ALPHA) = 1.0;
    c->f_rate[f] = ED(c, e, ED_DCQCN_FIRST) * c->f_rate[f];
    *CD(c, f, CD_RT) = c->f_rate[f];
    *CI(c, f, CI_ALPHA_T) = t + (int64_t)ED(c, e, ED_DCQCN_ALPHA_PS);
    // a decrease falling on an alpha update runs after it (timers fire alpha, decrease, increase)
    *CI(c, f, CI_DEC_T) = t + (int64_t)ED(c, e, ED_DCQCN_DEC_PS);
  }
}

MV_DEV void dcqcn_increase(Ctx* c, int64_t e, int64_t f) {
  double line = (double)c->f_line_bps[f];
  int64_t* stage = CI(c, f, CI_STAGE);
  int64_t F = EI(c, e, EI_DCQCN_F);
  double* rt = CD(c, f, CD_RT);
  // fast recovery while stage < F, then additive, then hyper increase (stage before the step)
  if (*stage == F) *rt = mv_fmin(line, *rt + ED(c, e, ED_DCQCN_RAI));
  else if (*stage > F) *rt = mv_fmin(line, *rt + ED(c, e, ED_DCQCN_RHAI));
  c->f_rate[f] = (c->f_rate[f] + *rt) / 2.0;
  *stage += 1;
}

// Fire the DCQCN timers due at t (alpha update, then decrease check, then increase).
MV_DEV void dcqcn_timers(Ctx* c, int64_t e, int64_t f, int64_t t) {
  int64_t* fl = CI(c, f, CI_FLAGS);
  if (*CI(c, f, CI_ALPHA_T) == t) {
    double g = ED(c, e, ED_DCQCN_G);
    double* a = CD(c, f, CD_ALPHA);
    *a = (*fl & CF_CNP_ALPHA) ? (1.0 - g) * *a + g : (1.0 - g) * *a;
    *fl &= ~(int64_t)CF_CNP_ALPHA;
    *CI(c, f, CI_ALPHA_T) = t + (int64_t)ED(c, e, ED_DCQCN_ALPHA_PS);
  }
  if (*CI(c, f, CI_DEC_T) == t) {
    if (*fl & CF_CNP_DEC) {
      // the target follows the rate unless this decrease directly follows another one (ns-3's
      // EcnClampTgtRate off): then the target stays where the last increase left it
      if (EI(c, e, EI_DCQCN_CLAMP) || *CI(c, f, CI_STAGE) != 0) *CD(c, f, CD_RT) = c->f_rate[f];
      c->f_rate[f] = mv_fmax(ED(c, e, ED_DCQCN_MIN), c->f_rate[f] * (1.0 - *CD(c, f, CD_ALPHA) / 2.0));
      *CI(c, f, CI_STAGE) = 0;
      *fl &= ~(int64_t)CF_CNP_DEC;
      *CI(c, f, CI_INC_T) = t + (int64_t)ED(c, e, ED_DCQCN_INC_PS);
    }
    *CI(c, f, CI_DEC_T) = t + (int64_t)ED(c, e, ED_DCQCN_DEC_PS);
  }
  if (*CI(c, f, CI_INC_T) == t) {
    dcqcn_increase(c, e, f);
    *CI(c, f, CI_INC_T) = t + (int64_t)ED(c, e, ED_DCQCN_INC_PS);
  }
}

MV_DEV int64_t cc_next_timer(Ctx* c, int64_t e, int64_t f) {
  if (EI(c, e, EI_CC) != CC_DCQCN) return MV_INF;
  return mv_min(*CI(c, f, CI_ALPHA_T), mv_min(*CI(c, f, CI_DEC_T), *CI(c, f, CI_INC_T)));
}

// ---- HPCC ----------------------------------------------------------------------------------
// An INT record as the HPCC simulator's switches write it (ED_HPCC_INT_MULTI m > 0; int-header.h
// IntHop): time in whole ns, tx bytes in units of 128 m B, queue length in units of 80 m B, in
// counters of 24, 20 and 17 bits; m = 0: exact values (ps, bytes).
MV_DEV void int_hop_set(const Ctx* c, int64_t e, IntHop* h, int64_t t, int64_t tx, int64_t q, int64_t port) {
  int64_t m = (int64_t)ED(c, e, ED_HPCC_INT_MULTI);
  if (m > 0) {
    t = (t / 1000) & 0xffffff;
    tx = (tx / (128 * m)) & 0xfffff;
    q = (q / (80 * m)) & 0x1ffff;
  }
  h->ts = t; h->tx = tx; h->qlen = q; h->port = port;
}
// Hop i's time (ps) and tx bytes since the flow's last record of it, and the lesser of the two
// queue lengths (bytes): with m > 0 from the counters, read with wrap-around as GetTimeDelta and
// GetBytesDelta do.
struct IntDelta { int64_t tau, dtx, q; };
MV_DEV IntDelta int_hop_delta(const Ctx* c, int64_t e, const IntHop& h, int64_t ts, int64_t tx, int64_t qlen) {
  int64_t m = (int64_t)ED(c, e, ED_HPCC_INT_MULTI);
  IntDelta d{h.ts - ts, h.tx - tx, mv_min(h.qlen, qlen)};
  if (m > 0) {
    d.tau = (d.tau & 0xffffff) * 1000;
    d.dtx = (d.dtx & 0xfffff) * 128 * m;
    d.q *= 80 * m;
  }
  return d;
}

// ns-3 UpdateRateHp (single aggregate rate). An ACK past last_update_seq commits Rc and the
// stage (and moves last_update_seq to snd_nxt, used hops or not); other ACKs ("fast react")
// set only the sending rate. A rate change re-derives the pending pacing gap of the last packet
// at the new rate (ns-3 ChangeRate): next_tx += ser(b, new) - ser(b, old).
MV_DEV void hpcc_ack(Ctx* c, int64_t e, int64_t f, int64_t ack, int64_t slot, int nint) {
  int64_t* fl = CI(c, f, CI_FLAGS);
  if (!c->has_int) return;
  const IntHop* hop = &c->pkt_int[slot * MAX_INT_HOPS];
  if (!(*fl & CF_HP_INIT)) {
    *fl |= CF_HP_INIT;
    *CI(c, f, CI_LAST_SEQ) = c->f_snd_nxt[f];
  } else {
    bool fast = ack <= *CI(c, f, CI_LAST_SEQ);
    double T = (double)c->f_base_rtt_ps[f];
    double U = 0.0;
    int64_t dt = 0;
    bool used = false;
    int n = nint < (int)*HI(c, f, HI_NHOP) ? nint : (int)*HI(c, f, HI_NHOP);
    for (int i = 0; i < n; ++i) {
      IntDelta d = int_hop_delta(c, e, hop[i], *HI(c, f, HI_HOP0 + 3 * i), *HI(c, f, HI_HOP0 + 3 * i + 1),
                                 *HI(c, f, HI_HOP0 + 3 * i + 2));
      int64_t tau = d.tau, q = d.q;
      if (tau <= 0) continue;
      used = true;
      double rate = (double)PORT_LK(c, hop[i].port, LK_RATE);
      double tx_rate = (double)d.dtx * 8.0 / ((double)tau * 1e-12);
      double u = tx_rate / rate + (double)q * 8.0 / (rate * (T * 1e-12));
      if (u > U) { U = u; dt = tau; }
    }
    if (used) {
      if ((double)dt > T) dt = (int64_t)T;
      double* uu = CD(c, f, CD_U);
      *uu = (*uu * (T - (double)dt) + U * (double)dt) / T;
      double k = *uu / ED(c, e, ED_HPCC_ETA);
      double rc = *CD(c, f, CD_RC);
      double r;
      int64_t stage;
      if (k >= 1.0 || *CI(c, f, CI_STAGE) >= EI(c, e, EI_HPCC_STAGE)) {
        r = rc / k + ED(c, e, ED_HPCC_WAI);
        stage = 0;
      } else {
        r = rc + ED(c, e, ED_HPCC_WAI);
        stage = *CI(c, f, CI_STAGE) + 1;
      }
      r = mv_fmin((double)c->f_line_bps[f], mv_fmax(ED(c, e, ED_HPCC_MIN), r));
      int64_t b = *CI(c, f, CI_LAST_BYTES);
      c->f_next_tx[f] += mv_ser(b, (int64_t)r) - mv_ser(b, (int64_t)c->f_rate[f]);
      c->f_rate[f] = r;
      if (!fast) {
        *CD(c, f, CD_RC) = r;
        *CI(c, f, CI_STAGE) = stage;
      }
    }
    if (!fast && c->f_snd_nxt[f] > *CI(c, f, CI_LAST_SEQ)) *CI(c, f, CI_LAST_SEQ) = c->f_snd_nxt[f];
  }
  *HI(c, f, HI_NHOP) = nint;
  for (int i = 0; i < nint; ++i) {
    *HI(c, f, HI_HOP0 + 3 * i) = hop[i].ts;
    *HI(c, f, HI_HOP0 + 3 * i + 1) = hop[i].tx;
    *HI(c, f, HI_HOP0 + 3 * i + 2) = hop[i].qlen;
  }
}

// ---- DCTCP (HandleAckDctcp of the reference, in packets) -----------------------------------
MV_DEV void dctcp_ack(Ctx* c, int64_t e, int64_t f, int64_t ack, bool ecn) {
  bool new_batch = false;
  int64_t* cnt = CI(c, f, CI_ECN_CNT);
  int64_t* last = CI(c, f, CI_LAST_SEQ);
  int64_t* fl = CI(c, f, CI_FLAGS);
  if (ecn) *cnt += 1;
  if (ack > *last) {
    new_batch = true;
    if (!(*fl & CF_STARTED)) {
      *fl |= CF_STARTED;
      *last = c->f_snd_nxt[f];
      *CI(c, f, CI_BATCH) = c->f_snd_nxt[f] + 1;
    } else {
      double g = ED(c, e, ED_DCTCP_G);
      double frac = mv_fmin(1.0, (double)*cnt / (double)*CI(c, f, CI_BATCH));
      *CD(c, f, CD_ALPHA) = (1.0 - g) * *CD(c, f, CD_ALPHA) + g * frac;
      *last = c->f_snd_nxt[f];
      *cnt = 0;
      *CI(c, f, CI_BATCH) = c->f_snd_nxt[f] - ack + 1;
    }
  }
  if (*CI(c, f, CI_CWR) && ack > *CI(c, f, CI_HIGH_SEQ)) *CI(c, f, CI_CWR) = 0;
  if (ecn && !*CI(c, f, CI_CWR)) {
    *CI(c, f, CI_CWR) = 1;
    *CI(c, f, CI_HIGH_SEQ) = c->f_snd_nxt[f];
    c->f_rate[f] = mv_fmax(ED(c, e, ED_DCTCP_MIN), c->f_rate[f] * (1.0 - *CD(c, f, CD_ALPHA) / 2.0));
  }
  if (!*CI(c, f, CI_CWR) && new_batch)
    c->f_rate[f] = mv_fmin((double)c->f_line_bps[f], c->f_rate[f] + ED(c, e, ED_DCTCP_RAI));
}

// ---- TIMELY (Mittal et al., SIGCOMM'15, Algorithm 1) -----------------------------------------
// The RTT sample: one data packet per flow is timed at a time (TCP's RTT timing): the first new
// packet sent while none is timed; its sample is the arrival of the ACK that acknowledges it
// minus its send time. A retransmission of the timed packet drops the timing (Karn: whose ACK
// it would be is ambiguous).
MV_DEV void timely_on_send(Ctx* c, int64_t f, int64_t seq, bool fresh, int64_t t) {
  int64_t* timed = CI(c, f, CI_RTT_SEQ);
  if (seq == *timed) *timed = -1;
  if (*timed < 0 && fresh) { *timed = seq; *CI(c, f, CI_RTT_SENT_T) = t; }
}

// One RTT sample (ps): the EWMA of RTT differences, then the rate by the RTT's region (below
// T_low, above T_high) or by the normalised gradient. The first sample only sets the previous RTT.
MV_DEV void timely_update(Ctx* c, int64_t e, int64_t f, double rtt) {
  int64_t* fl = CI(c, f, CI_FLAGS);
  double* prev = CD(c, f, CD_PREV_RTT);
  if (!(*fl & CF_STARTED)) { *fl |= CF_STARTED; *prev = rtt; return; }
  double a = ED(c, e, ED_TIMELY_ALPHA), beta = ED(c, e, ED_TIMELY_BETA), delta = ED(c, e, ED_TIMELY_DELTA);
  double* diff = CD(c, f, CD_RTT_DIFF);
  *diff = (1.0 - a) * *diff + a * (rtt - *prev);
  *prev = rtt;
  double gradient = *diff / ED(c, e, ED_TIMELY_MIN_RTT_PS);
  int64_t* calm = CI(c, f, CI_STAGE);   // consecutive samples with a gradient <= 0
  *calm = gradient <= 0.0 ? *calm + 1 : 0;
  double t_high = ED(c, e, ED_TIMELY_T_HIGH_PS), r = c->f_rate[f];
  if (rtt < ED(c, e, ED_TIMELY_T_LOW_PS)) r = r + delta;
  else if (rtt > t_high) r = r * (1.0 - beta * (1.0 - t_high / rtt));
  else if (gradient <= 0.0) {
    int64_t n = EI(c, e, EI_TIMELY_HAI_N);
    r = r + (double)(*calm >= n ? n : 1) * delta;
  } else r = r * (1.0 - beta * gradient);
  c->f_rate[f] = mv_fmin((double)c->f_line_bps[f], mv_fmax(ED(c, e, ED_TIMELY_MIN), r));
}

// `sacked`: the data packet a selective-repeat ACK acknowledges (-1 under go-back-N)
MV_DEV void timely_ack(Ctx* c, int64_t e, int64_t f, int64_t t, int64_t ack, int64_t sacked) {
  int64_t* timed = CI(c, f, CI_RTT_SEQ);
  if (*timed < 0 || (ack <= *timed && sacked != *timed)) return;
  *timed = -1;
  timely_update(c, e, f, (double)(t - *CI(c, f, CI_RTT_SENT_T)));
}

// A data packet `seq` of flow f leaves at t; `fresh`: sent for the first time.
MV_DEV void cc_on_send(Ctx* c, int64_t e, int64_t f, int64_t seq, bool fresh, int64_t t) {
  if (EI(c, e, EI_CC) == CC_TIMELY) timely_on_send(c, f, seq, fresh, t);
}

// Reaction to an ACK or NACK carrying cumulative `ack`, ECN echo `ecn`, INT in `slot`, and the
// selectively acknowledged packet `sacked` (-1 under go-back-N).
MV_DEV void cc_on_ack(Ctx* c, int64_t e, int64_t f, int64_t t, int64_t ack, bool ecn, int64_t slot, int nint,
                      int64_t sacked) {
  int64_t cc = EI(c, e, EI_CC);
  if (cc == CC_DCQCN) { if (ecn) dcqcn_cnp(c, e, f, t); }
  else if (cc == CC_HPCC) hpcc_ack(c, e, f, ack, slot, nint);
  else if (cc == CC_DCTCP) dctcp_ack(c, e, f, ack, ecn);
  else if (cc == CC_TIMELY) timely_ack(c, e, f, t, ack, sacked);
}
