// Shared definitions of the kernels: parameter indices, hashing, time arithmetic, packet
// pools and rings. `struct Ctx` (every column) is generated from mvopt/engine/schema.py and
// inserted by the loader after mv_types.cuh.
#pragma once

#define MV_INF 0x3fffffffffffffffLL
#define MV_CAP (-2LL)   // a node's next/progress time when it ran out of packet slots (a wire ring, or a
                        // compact switch pool): the experiment ends ST_CAPACITY (see advance_with)
#define PS_PER_S 1000000000000LL
#define MAX_INT_HOPS 5

enum { PK_DATA = 0, PK_ACK = 1, PK_NACK = 2, PK_PAUSE = 3, PK_RESUME = 4 };
enum { FL_CE = 1, FL_ECHO = 2 };
// ST_CAPACITY: out of compact packet slots, to be run again with full ones (mvopt/engine/capacity.py)
// ST_CANCELLED: set by the host between launches (another backend has the result: engine/race.py)
// ST_ERROR is the host's (batch.STATUS): ST_CAPACITY with full capacities, which cannot run out.
enum { ST_RUN = 0, ST_DONE = 1, ST_STUCK = 2, ST_TIMEOUT = 3, ST_ERROR = 4, ST_CAPACITY = 5, ST_CANCELLED = 6 };
enum { Q_CTL = 0, Q_DATA = 1 };
// CC_*, LB_* and TR_* (congestion control, load balancing, transport) are generated from
// mvopt/_cfg/algorithms.py (engine/schema.py)
enum { TAG_ECN = 1, TAG_ECMP = 2, TAG_SPRAY = 3 };

// exp_i[e * NEXP_I + k]
// EI_SPRAY: how switches route data packets (LB_*; 0, LB_ECMP: per flow), EI_TRANSPORT: TR_*
enum { EI_SEED = 0, EI_CC, EI_SPRAY, EI_TRANSPORT, EI_PFC, EI_ECN, EI_PAYLOAD, EI_HEADER, EI_ACK, EI_PFC_FRAME,
       EI_NACK_PS, EI_RTO_PS, EI_RESERVE, EI_RESUME, EI_VARWIN, EI_DCQCN_F, EI_HPCC_STAGE, EI_DCQCN_CLAMP,
       // monitors: sampling period (ps, 0 = off), samples kept per port, the experiment's ports, and the
       // first row of its queue / link tables in mon_q / mon_w (-1: that monitor is off)
       EI_MON_PS, EI_MON_CAP, EI_MON_NPORT, EI_MON_QLO, EI_MON_WLO,
       EI_COMPACT_POOLS /* 1: switch pools are a first try, running out is ST_CAPACITY, not a drop */,
       EI_TIMELY_HAI_N,
       EI_FLOWLET_PS /* adaptive routing's flowlet gap (0: per packet) */,
       EI_ACKS /* where ACK/NACKs wait: ACKS_* bits */,
       // links going down during the run (0: none), then NDOWN slots per link from EI_DOWN, by time
       EI_DOWN_N, EI_DOWN, EI_COUNT };
// EI_ACKS: switches queue ACK/NACKs in the data queue (network.switch_ack_queue 'data'); a PAUSE
// stops a host's ACK/NACKs too (network.pfc.pause_host_acks)
enum { ACKS_SWITCH_DATA = SCHEMA_ACKS_SWITCH_DATA, ACKS_HOST_PAUSE = SCHEMA_ACKS_HOST_PAUSE };
// A link going down: EI(c, e, EI_DOWN + k * NDOWN + D_*): its time, its two ports, and the offsets
// of the dense routing table's rows once it (and every earlier one) is down
enum { D_AT_PS = 0, D_PORT, D_PEER, D_RTAB, D_RTNH, D_COUNT };
// exp_d[e * NEXP_D + k]
enum { ED_DCQCN_G = 0, ED_DCQCN_ALPHA_PS, ED_DCQCN_DEC_PS, ED_DCQCN_INC_PS, ED_DCQCN_RAI,
       ED_DCQCN_RHAI, ED_DCQCN_FIRST, ED_DCQCN_MIN, ED_HPCC_ETA, ED_HPCC_WAI, ED_HPCC_MIN,
       ED_DCTCP_G, ED_DCTCP_RAI, ED_DCTCP_MIN, ED_TIMELY_ALPHA, ED_TIMELY_BETA, ED_TIMELY_DELTA,
       ED_TIMELY_T_LOW_PS, ED_TIMELY_T_HIGH_PS, ED_TIMELY_MIN_RTT_PS, ED_TIMELY_MIN,
       ED_HPCC_INT_MULTI /* INT quantised as the HPCC simulator's, in units of this (0: exact; int_hop_*) */,
       ED_COUNT };
// Counters (node_ctr[v * NCTR + k]), same order as mvopt.engine.results.COUNTERS.
enum { C_DATA_SENT = 0, C_DATA_BYTES_SENT, C_DATA_DELIV, C_DATA_BYTES_DELIV, C_DATA_DROP,
       C_DATA_BYTES_DROP, C_RETX, C_OOO, C_CTL_SENT, C_CTL_DROP, C_NACKS, C_ECN, C_PAUSES,
       C_RESUMES, C_HOPS /* not counted here: the sum of the ports' ring tails, on the host */, C_TIMEOUTS,
       C_COUNT };
// Congestion-control state of a flow: f_ccd[f * NCCD + k], f_cci[f * NCCI + k]; HPCC's last INT
// per hop in f_hop[f * NHOPI + k] (rows only in batches with HPCC experiments).
// TIMELY: the previous RTT sample and the EWMA of RTT differences (ps), the timed packet's sequence
// number (-1: none in flight) and send time.
enum { CD_RT = 0, CD_ALPHA, CD_U, CD_RC, CD_PREV_RTT, CD_RTT_DIFF, CD_COUNT };
enum { CI_FLAGS = 0, CI_ALPHA_T, CI_DEC_T, CI_INC_T, CI_STAGE, CI_LAST_SEQ, CI_ECN_CNT, CI_BATCH,
       CI_HIGH_SEQ, CI_CWR, CI_LAST_BYTES /* wire bytes of the last data packet (HPCC pacing) */,
       CI_RTT_SEQ, CI_RTT_SENT_T, CI_COUNT };
enum { HI_NHOP = 0, HI_HOP0 /* HOP0 + 3*i: ts, tx, qlen */, HI_COUNT = HI_HOP0 + 3 * MAX_INT_HOPS };
// A port's transmit record (port_tx[p * NPT + k], 64 bytes): ring tails by parity, busy-until time
// and wire bytes in the first 32-byte sector; queued bytes by class, bytes and data packets
// dequeued in the second (schema.PT mirrors it).
enum { PT_TAIL = 0 /* + parity */, PT_FREE = 2, PT_WIRE_BYTES = 3, PT_QBYTES = 4 /* + class */, PT_TX_BYTES = 6,
       PT_DEQ = 7, PT_COUNT = 8 };
// A port's ingress record (port_in[p * NPI + k], 32 bytes), for the link the port's packets come in
// over: MMU ingress and headroom bytes, when a PFC frame was requested, and the PFC state as bits
// of one word (PFC_*: we asked the peer to pause, what we last signalled, the peer paused us)
// (schema.PI and schema.PFC mirror them).
enum { PI_IN_BYTES = 0, PI_IN_HDRM, PI_PFC_PS, PI_PFC, PI_COUNT };
enum { PFC_IN_PAUSED = 1, PFC_SENT = 2, PFC_PAUSED = 4 };
// A link class (link[l * NLK + k], one 64-byte line; port p's is row PORT_W(c, p, PW_LINK)): rate,
// propagation delay, serialization ps per byte (0: use the rate), ECN Kmin and Kmax of its
// egress, PFC headroom and dynamic-threshold shift of its ingress (schema.LK mirrors it). The
// batch holds each distinct class once: every port of a class reads the same line.
enum { LK_RATE = 0, LK_DELAY, LK_PPB, LK_KMIN, LK_KMAX, LK_HEADROOM, LK_SHIFT, LK_COUNT };
// The table widths (NCTR, NCCD, NCCI, NEXP_I, NEXP_D, NPT, NPI) come from schema.py with struct Ctx;
// these checks stop the build if an enum outgrows its table.
static_assert(EI_COUNT <= NEXP_I && ED_COUNT <= NEXP_D && C_COUNT == NCTR && CD_COUNT <= NCCD && CI_COUNT <= NCCI &&
              HI_COUNT <= NHOPI && PT_COUNT == NPT && PI_COUNT == NPI && LK_COUNT <= NLK &&
              EI_DOWN + NDOWN * MAX_LINK_DOWN <= NEXP_I && D_COUNT == NDOWN && D_AT_PS == SCHEMA_DOWN_AT_PS &&
              D_PORT == SCHEMA_DOWN_PORT && D_PEER == SCHEMA_DOWN_PEER && D_RTAB == SCHEMA_DOWN_D_RTAB &&
              D_RTNH == SCHEMA_DOWN_D_RTNH,
              "schema.py table widths are too small for the kernel's enums");
static_assert((FLOWLET_ENTRIES & (FLOWLET_ENTRIES - 1)) == 0, "a flowlet table's entry is a hash masked by its size");
static_assert(PT_TAIL == SCHEMA_PT_TAIL && PT_FREE == SCHEMA_PT_FREE_PS && PT_WIRE_BYTES == SCHEMA_PT_WIRE_BYTES &&
              PT_QBYTES == SCHEMA_PT_QBYTES && PT_TX_BYTES == SCHEMA_PT_TX_BYTES && PT_DEQ == SCHEMA_PT_DEQ,
              "schema.PT does not mirror the PT_* enum");
static_assert(PI_IN_BYTES == SCHEMA_PI_IN_BYTES && PI_IN_HDRM == SCHEMA_PI_IN_HDRM && PI_PFC_PS == SCHEMA_PI_PFC_PS &&
              PI_PFC == SCHEMA_PI_PFC && PFC_IN_PAUSED == SCHEMA_PFC_IN_PAUSED && PFC_SENT == SCHEMA_PFC_SENT &&
              PFC_PAUSED == SCHEMA_PFC_PAUSED, "schema.PI / schema.PFC do not mirror the PI_* / PFC_* enums");
static_assert(LK_RATE == SCHEMA_LK_RATE && LK_DELAY == SCHEMA_LK_DELAY && LK_PPB == SCHEMA_LK_PPB &&
              LK_KMIN == SCHEMA_LK_KMIN && LK_KMAX == SCHEMA_LK_KMAX && LK_HEADROOM == SCHEMA_LK_HEADROOM &&
              LK_SHIFT == SCHEMA_LK_SHIFT, "schema.LK does not mirror the LK_* enum");
enum { CF_CNP_ALPHA = 1, CF_CNP_DEC = 2, CF_STARTED = 4, CF_HP_INIT = 8 };



MV_DEV uint64_t mv_mix64(uint64_t z) {
  z += 0x9E3779B97F4A7C15ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The hash of (seed, tag, a, b, c, d) (params.hash64: six rounds of mv_mix64, one per input)
// from its state after (seed, tag, a), `prefix`: a node's hashes go on from its row of
// node_hash (word SCHEMA_HT_* per tag: params.hash_prefixes, built with the batch), three
// rounds of dependent 64-bit multiplies per packet instead of six.
MV_DEV uint64_t mv_hash_from(uint64_t prefix, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t h = mv_mix64(prefix ^ b);
  h = mv_mix64(h ^ c);
  return mv_mix64(h ^ d);
}

MV_DEV double mv_uniform(uint64_t h) { return (double)(h >> 11) * (1.0 / 9007199254740992.0); }

// ceil(bytes * 8e12 / rate): exact serialization time in ps
MV_DEV int64_t mv_ser(int64_t bytes, int64_t rate_bps) {
  return (bytes * 8 * PS_PER_S + rate_bps - 1) / rate_bps;
}

MV_DEV int64_t mv_min(int64_t a, int64_t b) { return a < b ? a : b; }
MV_DEV int64_t mv_max(int64_t a, int64_t b) { return a > b ? a : b; }
MV_DEV double mv_fmin(double a, double b) { return a < b ? a : b; }
MV_DEV double mv_fmax(double a, double b) { return a > b ? a : b; }

MV_DEV int64_t EI(const Ctx* c, int64_t e, int k) { return c->exp_i[e * NEXP_I + k]; }
MV_DEV double ED(const Ctx* c, int64_t e, int k) { return c->exp_d[e * NEXP_D + k]; }
// Node v's hash state after (seed, tag, node_local[v]): word `word` (SCHEMA_HT_*) of its node_hash row.
MV_DEV uint64_t node_hash_prefix(const Ctx* c, int64_t v, int word) {
  return (uint64_t)c->node_hash[NHT * v + word];
}
MV_DEV void ctr_add(Ctx* c, int64_t v, int k, int64_t x) { c->node_ctr[v * NCTR + k] += x; }

MV_DEV void copy_int(Ctx* c, int64_t dst_slot, int64_t src_slot, int n) {
  if (!c->has_int) return;
  for (int i = 0; i < n; ++i) c->pkt_int[dst_slot * MAX_INT_HOPS + i] = c->pkt_int[src_slot * MAX_INT_HOPS + i];
}

// ---- node packet pools: free list through Pkt.next ----------------------------------------
// A slot comes from the free list of returned slots, else from the never-used rest of the
// pool (a bump pointer), so the slots need no initialisation before a run. A switch's windows
// run port by port (the switch lanes, mv_step.cuh) keep the slots their ports free on lists of the ports'
// own (port_pool: head, count), so that ports on different threads share no
// list: a port's arrivals take from its own list first (switch_port_lane). The node's other
// windows take from those lists last, when the node's list and the never-used rest are empty.
#define PORT_POOL_HEAD(c, p) ((c)->port_pool[(p) * 2])
#define PORT_POOL_N(c, p) ((c)->port_pool[(p) * 2 + 1])
// A free list of slots: its head and count, in memory (a port's, port_pool) or in a port task's
// registers for its window (switch_port_lane).
struct FreeList { int32_t head, n; };
MV_DEV void list_push(Ctx* c, int32_t& head, int32_t& n, int32_t s) {
  c->pkt[s].next = head;
  head = s;
  n += 1;
}
MV_DEV int32_t list_pop(Ctx* c, int32_t& head, int32_t& n) {
  int32_t s = head;
  head = c->pkt[s].next;
  n -= 1;
  return s;
}
MV_DEV int32_t port_pool_pop(Ctx* c, int64_t p) { return list_pop(c, PORT_POOL_HEAD(c, p), PORT_POOL_N(c, p)); }
MV_DEV int32_t pool_alloc(Ctx* c, int64_t v) {
  int32_t s = c->node_pool_free[v];
  if (s >= 0) { c->node_pool_free[v] = c->pkt[s].next; return s; }
  s = c->node_pool_next[v];
  if (s < c->node_pool_hi[v]) {
    c->node_pool_next[v] = s + 1;
    return s;
  }
  for (int64_t p = c->node_port_lo[v]; p < c->node_port_hi[v]; ++p)   // (the ports' lists, last)
    if (PORT_POOL_N(c, p) > 0) return port_pool_pop(c, p);
  return -1;
}
MV_DEV void pool_free(Ctx* c, int64_t v, int32_t s) {
  c->pkt[s].next = c->node_pool_free[v];
  c->node_pool_free[v] = s;
}
// A node counter where several ports of a switch may add at once (the switch lanes).
MV_DEV void ctr_add_lane(Ctx* c, int64_t v, int k, int64_t x) { mv_add_old(&c->node_ctr[v * NCTR + k], x); }

// ---- a port's queue heads and tails (port_q) and wire record (port_wire), 16 bytes each ----
enum { PW_RING_LO = 0, PW_RING_CAP, PW_LINK };
#define PORT_W(c, p, k) ((int64_t)(c)->port_wire[(p) * 4 + (k)])
// ... its link class's field k (LK_*)
#define PORT_LK(c, p, k) ((c)->link[PORT_W(c, p, PW_LINK) * NLK + (k)])
#define PORT_QH(c, p, q) ((c)->port_q[(p) * 4 + (q)])
#define PORT_QT(c, p, q) ((c)->port_q[(p) * 4 + 2 + (q)])
// ... and its transmit record (port_tx, PT_* above) and ingress record (port_in, PI_*)
#define PORT_T(c, p, k) ((c)->port_tx[(p) * PT_COUNT + (k)])
#define PORT_I(c, p, k) ((c)->port_in[(p) * PI_COUNT + (k)])
// port p's PFC state: one bit (PFC_*); set or clear one; whether its peer was last told another
// pause state than the one we want (a PFC frame is due)
#define PFC_BIT(c, p, b) ((PORT_I(c, p, PI_PFC) & (b)) != 0)
MV_DEV void pfc_set(Ctx* c, int64_t p, int64_t b, bool on) {
  int64_t w = PORT_I(c, p, PI_PFC);
  PORT_I(c, p, PI_PFC) = on ? (w | b) : (w & ~b);
}
MV_DEV bool pfc_word_due(int64_t w) {   // (of a PFC word)
  return ((w ^ (w >> 1)) & PFC_IN_PAUSED) != 0;   // (PFC_SENT is the bit above PFC_IN_PAUSED)
}
MV_DEV bool pfc_due(const Ctx* c, int64_t p) { return pfc_word_due(PORT_I(c, p, PI_PFC)); }

// ---- port queues (q = Q_CTL or Q_DATA) ------------------------------------------------------
// Slot s holds a packet of `bytes` wire bytes whose `next` is already -1 (its writer stored it so).
// Returns whether the packet is the queue's new head (the queue was empty).
MV_DEV bool q_push(Ctx* c, int64_t p, int q, int32_t s, int64_t bytes) {
  int32_t t = PORT_QT(c, p, q);
  if (t < 0) PORT_QH(c, p, q) = s; else c->pkt[t].next = s;
  PORT_QT(c, p, q) = s;
  int64_t qb = PORT_T(c, p, PT_QBYTES + q) + bytes;
  PORT_T(c, p, PT_QBYTES + q) = qb;
  if (q == Q_DATA && qb > c->port_qmax[p]) c->port_qmax[p] = qb;
  return t < 0;
}
// Unlinks the head packet of queue q; returns its slot. (Loading the whole packet here, for the
// caller, makes the window kernel spill.)
MV_DEV int32_t q_pop(Ctx* c, int64_t p, int q) {
  int32_t s = PORT_QH(c, p, q);
  int32_t next = c->pkt[s].next;
  PORT_QH(c, p, q) = next;
  if (next < 0) PORT_QT(c, p, q) = -1;
  PORT_T(c, p, PT_QBYTES + q) -= c->pkt[s].bytes;
  return s;
}

// ---- wire rings ----------------------------------------------------------------------------
// A ring's packet is written once (by its sender) and read whole once (by its receiver, a window
// later). On a GPU both go through the L2 as evict-first lines (st.global.cs / ld.global.cs): a
// window's ring traffic, larger than the L2 in big batches, then pushes out other packets rather
// than the nodes' port records and queues, which their threads read again and again in the
// window. Slots are 32-byte aligned
// (32-byte records in a column of their own, which CuPy aligns to 256 bytes: GpuBackend checks
// it): two 16-byte accesses each; the packet in registers goes through a union (a Pkt alone is
// only 8-byte aligned).
#if defined(MV_BACKEND_CUDA)
union MvPktVec { Pkt p; longlong2 q[2]; };   // 16-byte aligned, wherever the compiler puts it
#endif
MV_DEV void ring_store(Pkt* dst, const Pkt& v) {
#if defined(MV_BACKEND_CUDA)
  MvPktVec u;
  u.p = v;
  __stcs(reinterpret_cast<longlong2*>(dst), u.q[0]);
  __stcs(reinterpret_cast<longlong2*>(dst) + 1, u.q[1]);
#else
  *dst = v;
#endif
}
MV_DEV Pkt ring_load(const Pkt* src) {
#if defined(MV_BACKEND_CUDA)
  MvPktVec u;
  u.q[0] = __ldcs(reinterpret_cast<const longlong2*>(src));
  u.q[1] = __ldcs(reinterpret_cast<const longlong2*>(src) + 1);
  return u.p;
#else
  return *src;
#endif
}
// A ring packet's arrival time alone (a switch reads it ahead of the packet: the next arrival of
// an in-ring), as an evict-first line too on a GPU, as the packet is.
MV_DEV int64_t ring_load_t(const Pkt* src) {
#if defined(MV_BACKEND_CUDA)
  return (int64_t)__ldcs(reinterpret_cast<const long long*>(&src->t));
#else
  return src->t;
#endif
}
MV_DEV int64_t ring_slot(const Ctx* c, int64_t p, int64_t pos) {
  return PORT_W(c, p, PW_RING_LO) + (pos & (PORT_W(c, p, PW_RING_CAP) - 1));   // capacities are powers of two
}

// What sending on port p needs of its parameters (read-only): its ring's start and capacity,
// its link class's picoseconds per byte (0: the rate does not divide 8e12), rate and delay.
struct PortWire { int64_t ring_lo, cap, ppb, rate, delay; };
MV_DEV PortWire port_wire(const Ctx* c, int64_t p) {
  PortWire w;
  w.ring_lo = PORT_W(c, p, PW_RING_LO);
  w.cap = PORT_W(c, p, PW_RING_CAP);
  w.ppb = PORT_LK(c, p, LK_PPB);
  w.rate = w.ppb ? 0 : PORT_LK(c, p, LK_RATE);
  w.delay = PORT_LK(c, p, LK_DELAY);
  return w;
}
// Serialization time of `bytes` on a port: a multiplication where the rate divides 8e12 (every
// common rate), else mv_ser's division; both give exactly ceil(bytes * 8e12 / rate).
MV_DEV int64_t port_ser(const PortWire& w, int64_t bytes) {
  return w.ppb ? bytes * w.ppb : mv_ser(bytes, w.rate);
}

// MV_PUSH_LOCK (the pull-vs-lock ablation, docs/engine.md "Ablations"; results do not depend on
// it): 1 writes every packet under its receiver's lock, 2 under its experiment's one lock, as a
// design in which senders push into the receiver's structures would have to. 0 (the model):
// the sender appends to its own ring, which the receiver reads; no lock, no atomic.
#ifndef MV_PUSH_LOCK
#define MV_PUSH_LOCK 0
#endif

// A node's last event time (node_event_ps), written once when a window with events ends, not
// at every event.
MV_DEV void note_window_end(Ctx* c, int64_t v, bool busy, int64_t last_t) {
  if (busy) c->node_event_ps[v] = last_t;
}

// Put a packet on the wire of port p (owned by the caller; its parameters w), starting at t.
// Returns the time the port is free again, or -1 if the ring is full (compact capacities only:
// full ones cannot fill).
MV_DEV int64_t wire_append(Ctx* c, int64_t v, int64_t p, int par, int64_t t, const Pkt* pk, int64_t int_src,
                           const PortWire& w) {
  int64_t tail = PORT_T(c, p, PT_TAIL + par);
  int64_t head_seen = c->port_head[p * 2 + (par ^ 1)];
  if (tail - head_seen >= w.cap) return -1;
  int64_t end = t + port_ser(w, pk->bytes);
  int64_t s = w.ring_lo + (tail & (w.cap - 1));
  // every load before the ring store, which comes last but for the port's own stores: on a GPU
  // it is an asm statement that clobbers memory, so a load after it could not be issued before
  // it, and would stall the warp where it is used (a warp issues in order)
  int64_t wire_bytes = PORT_T(c, p, PT_WIRE_BYTES);
  Pkt out = *pk;
  out.t = end + w.delay;
  out.next = -1;
  if (int_src >= 0) copy_int(c, s, int_src, out.nint);
  ring_store(&c->pkt[s], out);
  PORT_T(c, p, PT_TAIL + par) = tail + 1;
  PORT_T(c, p, PT_FREE) = end;
  PORT_T(c, p, PT_WIRE_BYTES) = wire_bytes + out.bytes;
  // No hop counter: a port's ring tail counts its packets, and the host sums them (C_HOPS)
  return end;
}
MV_DEV int64_t wire_send(Ctx* c, int64_t v, int64_t p, int par, int64_t t, const Pkt* pk, int64_t int_src) {
  PortWire w = port_wire(c, p);
#if MV_PUSH_LOCK
  int32_t* lock = MV_PUSH_LOCK == 2 ? &c->exp_lock[16 * (int64_t)c->node_exp[v]]     // one cache line each
                                    : &c->node_lock[c->port_node[c->port_peer[p]]];
  mv_lock(lock);
  int64_t end = wire_append(c, v, p, par, t, pk, int_src, w);
  mv_unlock(lock);
  return end;
#else
  return wire_append(c, v, p, par, t, pk, int_src, w);
#endif
}
