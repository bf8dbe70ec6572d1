// The flow level's event loop, compiled for the host: one experiment per thread (OpenMP over the
// batch's experiments). It takes the same decisions with the same arithmetic as the array path
// (mvopt/flow/sim.py, maxmin.py): integer rates and shares, and the same IEEE double operations
// in the same order for the fluid transfers (compiled without contraction or fast math), so its
// results are the array path's bit for bit. sim.py's docstring describes the model.
//
// Rates are computed again only where they can change. Flows are linked when their data entries
// share a port (transitively); max-min rates of disjoint components are independent, and the
// water-filling of a component alone takes the decisions it takes inside the whole set, round by
// round. The dependency runs one way: data rates without ACKs (first pass) -> each port's ACK load
// -> data rates in what the ACKs leave (second pass). So the first pass is recomputed for the
// components of the flows that started or ended, each port's ACK load is an integer total updated
// in place from the flows whose first-pass rate changed, and the second pass is recomputed for
// those components and the components of the ports whose ACK load changed, but for a port whose
// change provably moves no rate (ack_change_moves_nothing). Every other flow keeps both its rates
// exactly. A component found is kept until a flow starts or ends on one of its ports (until then
// it holds exactly: see port_comp), so that an ACK-load change or an arrival reuses it.
//
// Every active transfer's time left (bits left / rate) is needed each step for the next end; it
// is computed as a product by the rate's reciprocal, a few ulps off the quotient, on vectors,
// and the quotient itself only where a decision (the least time left's ceil, whether a transfer
// ends) falls within that error: the same decisions as the array path's divisions.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

typedef int64_t i64;
// vectors of W doubles for the per-transfer loops (GCC/Clang vector extensions: the same IEEE
// operations element by element whatever the width), 4 wide where the CPU has AVX2, else 2
typedef double v2d __attribute__((vector_size(16)));
typedef double v4d __attribute__((vector_size(32)));
template <class V> struct Lanes {
    typedef V v;
    static const int W = sizeof(V) / sizeof(double);
    static inline v splat(double x) { v r; for (int j = 0; j < W; j++) r[j] = x; return r; }
    static inline v load(const double *p) { v r; __builtin_memcpy(&r, p, sizeof r); return r; }
    static inline void store(double *p, v x) { __builtin_memcpy(p, &x, sizeof x); }
};
static const int VW = 4;      // slots are padded to a multiple of the widest

static const i64 INF = (i64)1 << 62;
static const double PS_PER_BIT_UNIT = 1e9;    // sim.PS_PER_BIT_UNIT
// a product by the reciprocal is within 3 ulps (relative 3.4e-16) of the quotient: decisions
// closer than this to a threshold are taken on the quotient itself
static const double APPROX_BAND = 1e-14;
static const double PAD_BITS = 1e300;         // a padding slot's bits left (see pad_slots)
enum { RUNNING = 0, DONE = 1, TIMEOUT = 2, STUCK = 3 };

struct FlowCtx {
    // sizes
    i64 n_exp, weight_one;
    // params (read only)
    const i64 *exp_task_lo, *exp_flow_lo, *exp_port_lo, *exp_limit_ps;
    const int8_t *task_is_flow;
    const i64 *task_duration_ps, *task_min_ps, *task_npred, *task_flow;
    const i64 *succ_offset, *succ, *succ_notify_ps;
    const i64 *flow_task;
    const double *flow_bits;
    const i64 *flow_latency_ps;
    const i64 *path_offset, *path_port, *path_weight;
    const int8_t *path_is_data;
    const i64 *port_cap;
    // state out
    i64 *task_start_ps, *task_finish_ps, *flow_end_ps, *exp_T_ps, *exp_steps;
    int8_t *exp_status;
};

namespace {

// The transfers' loops over every active slot (a multiple of VW of them), as free functions of the
// vector width so that each is compiled for AVX2 and for the baseline; dispatched at run time.

// The least of left[0 .. nv) (two running minima: independent chains).
template <class V> __attribute__((always_inline)) inline double least_of(const double *left, size_t nv) {
    typedef Lanes<V> L;
    const int W = L::W;
    typename L::v lo = L::splat(PAD_BITS * PS_PER_BIT_UNIT), hi = lo;
    size_t i = 0;
    for (; i + 2 * W <= nv; i += 2 * W) {
        const typename L::v a = L::load(left + i), b = L::load(left + i + W);
        lo = a < lo ? a : lo;
        hi = b < hi ? b : hi;
    }
    if (i < nv) { const typename L::v a = L::load(left + i); lo = a < lo ? a : lo; }
    lo = hi < lo ? hi : lo;
    double m = lo[0];
    for (int j = 1; j < W; j++) m = lo[j] < m ? lo[j] : m;
    return m;
}

// Every slot's bits left less rate x dt (the array path's operation, in its order), and its time
// left after that by the reciprocal (rem x PS_PER_BIT_UNIT x inv); with NEAR, the slots whose
// time left before it was <= `unsure`, with their bits left before it, into near / near_rem.
// Returns how many.
template <class V, bool NEAR> __attribute__((always_inline)) inline size_t advance(
        double *__restrict rem, double *__restrict left, const double *__restrict rate,
        const double *__restrict inv, size_t nv, double unsure, double dt, double scale,
        size_t *__restrict near, double *__restrict near_rem) {
    typedef Lanes<V> L;
    const int W = L::W;
    const typename L::v vu = L::splat(unsure), vdt = L::splat(dt), vs = L::splat(scale);
    size_t n_near = 0;
    for (size_t i = 0; i < nv; i += W) {
        const typename L::v b = L::load(rem + i);
        if (NEAR) {
            const auto close = L::load(left + i) <= vu;
            bool any = false;
            for (int j = 0; j < W; j++) any |= close[j] != 0;
            if (any)
                for (int j = 0; j < W; j++)
                    if (close[j]) { near[n_near] = i + j; near_rem[n_near] = b[j]; n_near++; }
        }
        const typename L::v r = b - L::load(rate + i) * vdt;
        L::store(rem + i, r);
        L::store(left + i, r * vs * L::load(inv + i));
    }
    return n_near;
}

#if defined(__x86_64__) && defined(__GNUC__)
#define MV_AVX2 __attribute__((target("avx2")))
static bool has_avx2() { return __builtin_cpu_supports("avx2"); }
#else
#define MV_AVX2
static bool has_avx2() { return false; }
#endif

MV_AVX2 double least_of4(const double *left, size_t nv) { return least_of<v4d>(left, nv); }
double least_of2(const double *left, size_t nv) { return least_of<v2d>(left, nv); }
// (near: whether any slot may be near; where none is, the loop checks none)
MV_AVX2 size_t advance4(double *rem, double *left, const double *rate, const double *inv, size_t nv, double unsure,
                        double dt, double scale, size_t *near, double *near_rem, bool any_near) {
    return any_near ? advance<v4d, true>(rem, left, rate, inv, nv, unsure, dt, scale, near, near_rem)
                    : advance<v4d, false>(rem, left, rate, inv, nv, unsure, dt, scale, near, near_rem);
}
size_t advance2(double *rem, double *left, const double *rate, const double *inv, size_t nv, double unsure,
                double dt, double scale, size_t *near, double *near_rem, bool any_near) {
    return any_near ? advance<v2d, true>(rem, left, rate, inv, nv, unsure, dt, scale, near, near_rem)
                    : advance<v2d, false>(rem, left, rate, inv, nv, unsure, dt, scale, near, near_rem);
}

// ceil(x) as an integer, 0 for x <= 0 (the array path's maximum(ceil(x), 0).astype(int64)),
// without a libm call: exact for every double below 2**63
inline i64 ceil_nonneg(double x) {
    if (!(x > 0.0)) return 0;
    if (x >= 4503599627370496.0) return (i64)x;        // 2**52 and above: x is whole
    i64 i = (i64)x;
    return (double)i < x ? i + 1 : i;
}

// One experiment's run; ids local to it (task, flow, port minus the experiment's first row).
struct Exp {
    const FlowCtx &c;
    i64 t0, f0, p0, n_task, n_flow, n_port, limit;
    std::vector<i64> left, ready;
    // each flow's entries, local ports: data in [ent_lo[f], ent_ack[f]), ACKs in [ent_ack[f], ent_lo[f + 1])
    std::vector<i64> ent_lo, ent_ack, ent_w;
    std::vector<int32_t> ent_port;
    std::vector<i64> rate;                   // by flow (units)
    // the flows transferring, by slot: flow, bits left, rate (as the double the arithmetic uses)
    std::vector<i64> act_flow, active_pos;   // active_pos: a flow's slot, -1 when not active
    // (slots past the last active flow are padding, see pad_slots)
    std::vector<double> act_rem, act_rate, act_inv, left_ps, near_rem;
    std::vector<size_t> near;                // scratch of move_on
    bool avx2 = has_avx2();
    typedef std::pair<i64, i64> Due;         // (ready time, flow)
    std::priority_queue<Due, std::vector<Due>, std::greater<Due>> pending;
    std::vector<i64> stack, ended, changed, arrived;    // scratch of a step
    // the active flows with a data entry on each port, for the components
    std::vector<std::vector<int32_t>> port_flows;
    std::vector<i64> port_mark, flow_mark, comp, touched;
    // the components found, kept until a flow starts or ends on one of their ports (a component
    // is closed: every active flow on its ports is in it, every data port of its flows too, and
    // only a start or an end changes which flows a port links): each port's component (-1: none
    // kept), each component's flows and ports (slices of kept_flows and kept_ports) and whether
    // it still holds
    std::vector<i64> port_comp, kept_flows, kept_ports, kept_flow_lo, kept_port_lo;
    std::vector<int8_t> kept_valid;
    // each port's ACK load (the first pass's rates of the active flows whose ACKs cross it), and
    // the ports whose load an event may have changed, with their load before it
    std::vector<i64> ack_load, ack_before, ack_mark, ack_dirty;
    std::vector<i64> port_weight;            // the data weight of the active flows on each port
    i64 mark = 0;
    // water-filling scratch (per port, per flow)
    std::vector<i64> w_left, w_weight, w_share, w_link_min, f_first, first_before, live;
    struct Item { i64 f, lo, hi, m; };       // a flow of the water-filling: its data entries, its least share
    std::vector<Item> cur, next;

    Exp(const FlowCtx &ctx, i64 e) : c(ctx) {
        t0 = c.exp_task_lo[e]; n_task = c.exp_task_lo[e + 1] - t0;
        f0 = c.exp_flow_lo[e]; n_flow = c.exp_flow_lo[e + 1] - f0;
        p0 = c.exp_port_lo[e]; n_port = c.exp_port_lo[e + 1] - p0;
        limit = c.exp_limit_ps[e];
        left.assign(c.task_npred + t0, c.task_npred + t0 + n_task);
        ready.assign(c.task_min_ps + t0, c.task_min_ps + t0 + n_task);
        ent_lo.assign(n_flow + 1, 0); ent_ack.assign(n_flow, 0);
        const i64 e0 = c.path_offset[f0], n_ent = c.path_offset[f0 + n_flow] - e0;
        ent_w.resize(n_ent); ent_port.resize(n_ent);
        i64 k = 0;
        for (i64 f = 0; f < n_flow; f++) {
            ent_lo[f] = k;
            for (int data = 1; data >= 0; data--) {
                if (!data) ent_ack[f] = k;
                for (i64 x = c.path_offset[f0 + f]; x < c.path_offset[f0 + f + 1]; x++)
                    if (c.path_is_data[x] == data) {
                        ent_port[k] = (int32_t)(c.path_port[x] - p0); ent_w[k] = c.path_weight[x]; k++;
                    }
            }
        }
        ent_lo[n_flow] = k;
        rate.assign(n_flow, 0);
        active_pos.assign(n_flow, -1);
        port_flows.resize(n_port);
        port_mark.assign(n_port, 0); flow_mark.assign(n_flow, 0);
        port_comp.assign(n_port, -1);
        ack_load.assign(n_port, 0); ack_before.assign(n_port, 0); ack_mark.assign(n_port, 0);
        port_weight.assign(n_port, 0);
        w_left.assign(n_port, 0); w_weight.assign(n_port, 0); w_share.assign(n_port, 0);
        w_link_min.assign(n_port, 0);
        f_first.assign(n_flow, 0);
        for (i64 t = 0; t < n_task; t++) { c.task_start_ps[t0 + t] = -1; c.task_finish_ps[t0 + t] = -1; }
        for (i64 f = 0; f < n_flow; f++) c.flow_end_ps[f0 + f] = -1;
    }

    // ---------------------------------------------------------------- tasks
    // Tasks whose every predecessor finished (on `stack`): delays finish at once (and resolve
    // their successors), flows wait in `pending` for their ready time.
    void resolve() {
        while (!stack.empty()) {
            i64 u = stack.back(); stack.pop_back();
            c.task_start_ps[t0 + u] = ready[u];
            if (c.task_is_flow[t0 + u]) {
                pending.push(Due(ready[u], c.task_flow[t0 + u] - f0));
                continue;
            }
            i64 fin = ready[u] + c.task_duration_ps[t0 + u];
            c.task_finish_ps[t0 + u] = fin;
            successors_of(u, fin);
        }
    }

    // Record the finish of task `u` in its successors; push those now ready.
    void successors_of(i64 u, i64 fin) {
        for (i64 k = c.succ_offset[t0 + u]; k < c.succ_offset[t0 + u + 1]; k++) {
            i64 s = c.succ[k] - t0;
            i64 at = fin + c.succ_notify_ps[k];
            if (at > ready[s]) ready[s] = at;
            if (--left[s] == 0) stack.push_back(s);
        }
    }

    // ---------------------------------------------------------------- flows
    void attach(i64 f) {
        arrived.push_back(f);
        const size_t i = act_flow.size();
        active_pos[f] = (i64)i;
        act_flow.push_back(f);
        if (act_rem.size() < i + 1) grow_slots(i + 1);
        act_rem[i] = c.flow_bits[f0 + f];
        act_rate[i] = 0.0;
        act_inv[i] = 0.0;
        approx_left(i);
        f_first[f] = 0;                      // no ACK load until its first pass
        for (i64 k = ent_lo[f]; k < ent_ack[f]; k++) {
            port_flows[ent_port[k]].push_back((int32_t)f);
            port_weight[ent_port[k]] += ent_w[k];
            changed.push_back(ent_port[k]);
        }
    }

    void detach(i64 f) {
        i64 i = active_pos[f], last = (i64)act_flow.size() - 1;
        act_flow[i] = act_flow[last]; act_rem[i] = act_rem[last]; act_rate[i] = act_rate[last];
        act_inv[i] = act_inv[last]; left_ps[i] = left_ps[last];
        active_pos[act_flow[i]] = i;
        act_flow.pop_back();
        active_pos[f] = -1;
        for (i64 k = ent_lo[f]; k < ent_ack[f]; k++) {
            std::vector<int32_t> &on = port_flows[ent_port[k]];
            for (size_t j = 0; j < on.size(); j++)
                if (on[j] == f) { on[j] = on.back(); on.pop_back(); break; }
            port_weight[ent_port[k]] -= ent_w[k];
            drop_comp(ent_port[k]);
            changed.push_back(ent_port[k]);
        }
        drop_acks(f);
    }

    // A flow's ACK load on a port of its way back, at first-pass rate r (sim._Run._rates' load,
    // an integer: sums of it are exact in any order).
    i64 ack_share(i64 w, i64 r) const {
        const i64 one = c.weight_one;
        return (w * r) / (one + w) * one;
    }

    // Port p's ACK load changes by d (its load before the step kept for ack_change_moves_nothing).
    void ack_add(i64 p, i64 d) {
        if (ack_mark[p] != mark) { ack_mark[p] = mark; ack_before[p] = ack_load[p]; ack_dirty.push_back(p); }
        ack_load[p] += d;
    }

    // Take off flow f's ACK load (at its first-pass rate).
    void drop_acks(i64 f) {
        for (i64 k = ent_ack[f]; k < ent_lo[f + 1]; k++) ack_add(ent_port[k], -ack_share(ent_w[k], f_first[f]));
    }

    // Flow f's ACK load from first-pass rate `before` to its rate now.
    void move_acks(i64 f, i64 before) {
        const i64 now = f_first[f];
        for (i64 k = ent_ack[f]; k < ent_lo[f + 1]; k++) {
            const i64 d = ack_share(ent_w[k], now) - ack_share(ent_w[k], before);
            if (d) ack_add(ent_port[k], d);
        }
    }

    // A flow starts or ends on port p: its component no longer holds.
    void drop_comp(i64 p) {
        if (port_comp[p] >= 0) kept_valid[port_comp[p]] = 0;
    }

    // The components of a step's arrivals. One flow that starts joins the components of its
    // ports (those kept and still holding, copied; the others found) into one, kept; where
    // several start, the components of their ports no longer hold, and are found again.
    void join_arrivals() {
        if (arrived.size() != 1) {
            for (i64 f : arrived)
                for (i64 k = ent_lo[f]; k < ent_ack[f]; k++) drop_comp(ent_port[k]);
            arrived.clear();
            return;
        }
        const i64 f = arrived[0], m = mark;
        arrived.clear();
        if (ent_lo[f] == ent_ack[f]) return;   // (on no port: linked to nothing, as spreading finds it)
        const size_t comp0 = comp.size(), touched0 = touched.size();
        flow_mark[f] = m;
        comp.push_back(f);
        for (i64 k = ent_lo[f]; k < ent_ack[f]; k++) {
            const i64 q = ent_port[k];
            if (port_mark[q] == m) continue;
            const i64 id = port_comp[q];
            if (id >= 0 && kept_valid[id]) copy_comp(id);
            else find_comp(q);
        }
        keep_comp(comp0, touched0);
    }

    // Add kept component `id` (it holds) to `comp` and `touched`.
    void copy_comp(i64 id) {
        i64 *__restrict pm = port_mark.data(), *__restrict fm = flow_mark.data();
        const i64 m = mark;
        for (i64 i = kept_flow_lo[id]; i < kept_flow_lo[id + 1]; i++) {
            const i64 g = kept_flows[i];
            if (fm[g] != m) { fm[g] = m; comp.push_back(g); }
        }
        for (i64 i = kept_port_lo[id]; i < kept_port_lo[id + 1]; i++) {
            const i64 q = kept_ports[i];
            if (pm[q] != m) { pm[q] = m; touched.push_back(q); }
        }
    }

    // Add to `comp` every active flow linked to port `p` (transitively), their ports to
    // `touched`: the component kept for p where it still holds, else found and kept.
    void spread_from(i64 p) {
        i64 *__restrict pm = port_mark.data(), *__restrict fm = flow_mark.data();
        const i64 m = mark;
        if (pm[p] == m) return;
        const i64 id = port_comp[p];
        if (id >= 0 && kept_valid[id]) { copy_comp(id); return; }
        const size_t comp0 = comp.size(), touched0 = touched.size();
        find_comp(p);
        keep_comp(comp0, touched0);
    }

    // The component of `p` (not marked), found by its flows' data entries.
    void find_comp(i64 p) {
        i64 *__restrict pm = port_mark.data(), *__restrict fm = flow_mark.data();
        const i64 *lo = ent_lo.data(), *ack = ent_ack.data();
        const int32_t *ep = ent_port.data();
        const std::vector<int32_t> *on = port_flows.data();
        const i64 m = mark;
        pm[p] = m;
        touched.push_back(p);
        size_t head = comp.size();
        for (int32_t f : on[p])
            if (fm[f] != m) { fm[f] = m; comp.push_back(f); }
        for (; head < comp.size(); head++) {
            const i64 f = comp[head];
            for (i64 k = lo[f]; k < ack[f]; k++) {
                const i64 q = ep[k];
                if (pm[q] == m) continue;
                pm[q] = m;
                touched.push_back(q);
                for (int32_t g : on[q])
                    if (fm[g] != m) { fm[g] = m; comp.push_back(g); }
            }
        }
    }

    // Keep the component just found (comp and touched from comp0 and touched0). The store is
    // emptied when it outgrows the experiment's ports and flows, so it stays within a few
    // times what holds.
    void keep_comp(size_t comp0, size_t touched0) {
        if (kept_valid.empty()) { kept_flow_lo.assign(1, 0); kept_port_lo.assign(1, 0); }
        if (kept_flows.size() + kept_ports.size() > (size_t)(4 * (n_port + n_flow) + 4096)) {
            for (i64 q : kept_ports) port_comp[q] = -1;
            kept_flows.clear(); kept_ports.clear(); kept_valid.clear();
            kept_flow_lo.assign(1, 0); kept_port_lo.assign(1, 0);
        }
        const i64 id = (i64)kept_valid.size();
        kept_flows.insert(kept_flows.end(), comp.begin() + comp0, comp.end());
        kept_ports.insert(kept_ports.end(), touched.begin() + touched0, touched.end());
        for (size_t i = touched0; i < touched.size(); i++) {
            const i64 q = touched[i];
            if (port_comp[q] >= 0) kept_valid[port_comp[q]] = 0;
            port_comp[q] = id;
        }
        kept_valid.push_back(1);
        kept_flow_lo.push_back((i64)kept_flows.size());
        kept_port_lo.push_back((i64)kept_ports.size());
    }

    // Max-min rates (into `out`) of the flows of `comp` over their data entries, on capacities
    // `cap` (by local port): maxmin.max_min_rates' rounds, with each port's share computed once
    // a round (the same value the array path computes for each of its entries). A round's
    // decisions read only its shares, so the flows it fixes take their rates off the ports' room
    // as they are found (integer sums: the same in any order).
    template <class Cap>
    void max_min(const Cap &cap, i64 *__restrict out) {
        const i64 *lo = ent_lo.data(), *ack = ent_ack.data(), *ew = ent_w.data();
        const int32_t *ep = ent_port.data();
        i64 *__restrict wl = w_left.data(), *__restrict ww = w_weight.data(), *__restrict ws = w_share.data();
        i64 *__restrict lm = w_link_min.data();
        const size_t nc = comp.size();
        if (cur.size() < nc) { cur.resize(nc); next.resize(nc); }
        if (live.size() < touched.size()) live.resize(touched.size());
        Item *__restrict cu = cur.data(), *__restrict nx = next.data();
        i64 *__restrict lv = live.data();
        for (size_t i = 0; i < nc; i++) { const i64 f = comp[i]; cu[i] = Item{f, lo[f], ack[f], 0}; }
        // every active flow on a port of `touched` is in `comp` (it is closed), so a port's
        // weight is that of all its active flows
        const i64 *pw = port_weight.data();
        size_t n_live = 0;
        for (i64 p : touched) {
            ww[p] = pw[p];
            if (ww[p] > 0) { wl[p] = cap(p); lv[n_live++] = p; }
        }
        size_t n_cur = nc;
        while (n_cur) {
            for (size_t i = 0; i < n_live; i++) { const i64 p = lv[i]; ws[p] = wl[p] / ww[p]; lm[p] = INF; }
            for (size_t i = 0; i < n_cur; i++) {
                Item &x = cu[i];
                i64 m = INF;
                for (i64 k = x.lo; k < x.hi; k++) m = std::min(m, ws[ep[k]]);
                x.m = m;
                for (i64 k = x.lo; k < x.hi; k++) lm[ep[k]] = std::min(lm[ep[k]], m);
            }
            size_t n_next = 0;
            for (size_t i = 0; i < n_cur; i++) {
                const Item &x = cu[i];
                bool fixed = false;
                for (i64 k = x.lo; k < x.hi; k++) fixed |= ws[ep[k]] == lm[ep[k]];
                // (without a branch on `fixed`, which is unpredictable: a flow not fixed takes
                // nothing off its ports, and the rate it is given now is set again when it is)
                nx[n_next] = x;
                n_next += !fixed;
                out[x.f] = x.m;
                const i64 keep = -(i64)fixed;
                for (i64 k = x.lo; k < x.hi; k++) {
                    const i64 w = ew[k] & keep;
                    wl[ep[k]] -= w * x.m; ww[ep[k]] -= w;
                }
            }
            if (!n_next) break;
            size_t kept = 0;          // (without a branch: whether a port is done is unpredictable)
            for (size_t i = 0; i < n_live; i++) { const i64 p = lv[i]; lv[kept] = p; kept += ww[p] > 0; }
            n_live = kept;
            std::swap(cu, nx);
            n_cur = n_next;
        }
    }

    // Whether port p's change of ACK load leaves every second-pass rate of its component as it is
    // (p is outside the step's components, so its flows and their weights are unchanged and
    // their rates are the second pass's for the load before). Water-filling never lowers a
    // port's share from one round to the next (the flows fixed at a round take at most the
    // share of each of their ports), and a flow's minimum share at any round is at most its
    // rate; so a port whose first-round share, at the old and the new capacity alike, is above
    // the rate of every flow on it is no flow's minimum and no bottleneck in any round of either
    // computation, which then take the same decisions round by round (its capacity only shifts
    // what it has left).
    bool ack_change_moves_nothing(i64 p) const {
        const std::vector<int32_t> &on = port_flows[p];
        if (on.empty()) return true;
        i64 most = 0;
        for (int32_t f : on) most = std::max(most, rate[f]);
        const i64 w = port_weight[p], cap = c.port_cap[p0 + p];
        if (w <= 0) return false;
        const i64 before = std::max(cap - ack_before[p], (i64)0), now = std::max(cap - ack_load[p], (i64)0);
        return before / w > most && now / w > most;
    }

    // Rates after a step's starts and ends (sim._Run._rates: max-min without the ACKs, their
    // load off the way back, max-min of the data in what is left), recomputed where they can
    // change: the first pass for the components of the ports in `changed`, the second for those
    // and the components of the ports whose ACK load changed.
    void rates() {
        comp.clear(); touched.clear();
        join_arrivals();
        for (i64 p : changed) spread_from(p);
        const size_t nc = comp.size();
        if (first_before.size() < nc) first_before.resize(nc);
        for (size_t i = 0; i < nc; i++) first_before[i] = f_first[comp[i]];
        max_min([this](i64 p) { return c.port_cap[p0 + p]; }, f_first.data());
        for (size_t i = 0; i < nc; i++)
            if (f_first[comp[i]] != first_before[i]) move_acks(comp[i], first_before[i]);
        for (i64 p : ack_dirty)
            if (ack_load[p] != ack_before[p] && port_mark[p] != mark && !ack_change_moves_nothing(p)) spread_from(p);
        ack_dirty.clear();
        max_min([this](i64 p) { return std::max(c.port_cap[p0 + p] - ack_load[p], (i64)0); }, rate.data());
        for (i64 f : comp) {
            if (rate[f] < 1) rate[f] = 1;
            act_rate[active_pos[f]] = (double)rate[f];
            act_inv[active_pos[f]] = 1.0 / (double)rate[f];
            approx_left((size_t)active_pos[f]);
        }
    }

    // ---------------------------------------------------------------- transfers, vectorised
    // Every slot's time left by the reciprocal (left_ps) is kept from step to step: advance()
    // computes it after moving the bits left on, and rates() again for the slots whose rate it
    // set. The slots past the last active flow, up to a whole number of vectors, hold a transfer
    // that never ends (its bits left stay far above any active one's), so that the loops run
    // on whole vectors. Returns the number of slots they cover.
    size_t pad_slots() {
        const size_t n = act_flow.size(), nv = (n + VW - 1) / VW * VW;
        if (act_rem.size() < nv) grow_slots(nv);
        for (size_t i = n; i < nv; i++) {
            act_rem[i] = PAD_BITS; act_rate[i] = 1.0; act_inv[i] = 1.0; left_ps[i] = PAD_BITS * PS_PER_BIT_UNIT;
        }
        return nv;
    }

    void grow_slots(size_t n) {
        n = std::max(2 * n, (size_t)64);
        act_rem.resize(n); act_rate.resize(n); act_inv.resize(n); left_ps.resize(n);
        near.resize(n); near_rem.resize(n);
    }

    // slot i's time left by the reciprocal (advance()'s operations)
    void approx_left(size_t i) { left_ps[i] = act_rem[i] * PS_PER_BIT_UNIT * act_inv[i]; }

    // ceil of the least exact time left, from the least approximate one (> 0: the exact one
    // lies within APPROX_BAND of it; <= 0: so is the exact one, and its ceil is 0)
    i64 least_left(size_t n, double approx) {
        if (!(approx > 0.0)) return 0;
        const i64 lo = ceil_nonneg(approx * (1.0 - APPROX_BAND)), hi = ceil_nonneg(approx * (1.0 + APPROX_BAND));
        if (lo == hi) return lo;
        const double most = approx * (1.0 + APPROX_BAND);
        double least = 0.0;
        bool any = false;
        for (size_t i = 0; i < n; i++)
            if (left_ps[i] <= most) {
                const double q = exact_left(i);
                least = (!any || q < least) ? q : least;
                any = true;
            }
        return ceil_nonneg(least);
    }

    double exact_left(size_t i) const { return act_rem[i] * PS_PER_BIT_UNIT / act_rate[i]; }

    // The transfers that end by `d` ps from now (into `ended`, in slot order: exactly those whose
    // time left is <= d), and every slot's bits left moved on by d; `least` is the least time
    // left by the reciprocal (none is near where it is above d's band).
    void move_on(size_t nv, i64 d, double least) {
        const double by = (double)d, sure = by * (1.0 - APPROX_BAND), unsure = by * (1.0 + APPROX_BAND);
        const size_t n_near = (avx2 ? advance4 : advance2)(act_rem.data(), left_ps.data(), act_rate.data(),
                                                           act_inv.data(), nv, unsure, by / PS_PER_BIT_UNIT,
                                                           PS_PER_BIT_UNIT, near.data(), near_rem.data(),
                                                           least <= unsure);
        // (the slot's time left before the move: near_rem is its bits left then)
        for (size_t j = 0; j < n_near; j++) {
            const size_t i = near[j];
            const double a = near_rem[j] * PS_PER_BIT_UNIT * act_inv[i];
            if (a <= sure || near_rem[j] * PS_PER_BIT_UNIT / act_rate[i] <= by) ended.push_back(act_flow[i]);
        }
    }

    // ---------------------------------------------------------------- the loop
    void run(i64 e) {
        for (i64 t = 0; t < n_task; t++)
            if (left[t] == 0) stack.push_back(t);
        resolve();
        i64 T = 0, steps = 0;
        int8_t status = RUNNING;
        while (true) {
            const size_t n = act_flow.size();
            // a transfer ends at T + ceil(left), left = bits left x PS_PER_BIT_UNIT / rate in ps (a
            // double). `approx` is that product by the rate's reciprocal, within a few ulps of
            // left with the same sign; the exact division is done only where a decision falls
            // within that error: the least time left (ceil is monotone: the earliest end is that
            // of the least) and whether a transfer ends by T + d (d whole: exactly when left <= d)
            const size_t nv = pad_slots();
            const double least_approx = (avx2 ? least_of4 : least_of2)(left_ps.data(), nv);
            i64 nxt = INF;
            if (n) nxt = T + least_left(n, least_approx);
            if (!pending.empty() && pending.top().first < nxt) nxt = pending.top().first;
            if (nxt >= INF) { status = DONE; break; }
            if (nxt > limit) { status = TIMEOUT; T = limit; break; }
            // transfers that end now finish their task after the flow's latency; the others move on
            ended.clear();
            move_on(nv, nxt - T, least_approx);
            changed.clear();
            mark++;
            for (i64 f : ended) {
                c.flow_end_ps[f0 + f] = nxt;
                c.task_finish_ps[c.flow_task[f0 + f]] = nxt + c.flow_latency_ps[f0 + f];
                detach(f);
            }
            T = nxt;
            for (i64 f : ended) {
                i64 task = c.flow_task[f0 + f] - t0;
                successors_of(task, c.task_finish_ps[t0 + task]);
                resolve();
            }
            // arrivals
            while (!pending.empty() && pending.top().first <= T) {
                i64 f = pending.top().second;
                pending.pop();
                attach(f);
            }
            steps++;
            rates();
        }
        c.exp_T_ps[e] = T;
        c.exp_steps[e] = steps;
        if (status == DONE)
            for (i64 t = 0; t < n_task; t++)
                if (c.task_finish_ps[t0 + t] < 0) { status = STUCK; break; }
        c.exp_status[e] = status;
    }
};

}  // namespace

extern "C" void mv_flow_run(const FlowCtx *ctx, int64_t threads) {
#ifdef _OPENMP
#pragma omp parallel for schedule(dynamic, 1) num_threads((int)threads)
#endif
    for (i64 e = 0; e < ctx->n_exp; e++) {
        Exp x(*ctx, e);
        x.run(e);
    }
}

extern "C" int64_t mv_flow_sizeof_ctx() { return (int64_t)sizeof(FlowCtx); }
