// The flow level's event loop, compiled for the host: one experiment per thread (OpenMP over the
// batch's experiments). It takes the same decisions with the same arithmetic as the array path
// (mvopt/flow/sim.py, maxmin.py): integer rates and shares, and the same IEEE double operations
// in the same order for the fluid transfers (compiled without contraction or fast math), so its
// results are the array path's bit for bit. sim.py's docstring describes the model.
//
// Rates are computed again only for the flows of the link-sharing components an event touched
// (flows are linked when any of their data or ACK entries share a port, transitively): max-min
// rates of disjoint components are independent, and the water-filling of a component alone takes
// the decisions it takes inside the whole set, round by round, so the other flows keep their
// rates exactly.

#include <cmath>
#include <cstdint>
#include <queue>
#include <utility>
#include <vector>

typedef int64_t i64;

static const i64 INF = (i64)1 << 62;
static const double PS_PER_BIT_UNIT = 1e9;    // sim.PS_PER_BIT_UNIT
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

// One experiment's run; ids local to it (task, flow, port minus the experiment's first row).
struct Exp {
    const FlowCtx &c;
    i64 t0, f0, p0, e0, n_task, n_flow, n_port, limit;
    std::vector<i64> left, ready;
    std::vector<double> remaining;
    std::vector<i64> rate;
    std::vector<i64> active;                 // flows transferring
    std::vector<i64> active_pos;             // a flow's index in `active`, -1 when not active
    typedef std::pair<i64, i64> Due;         // (ready time, flow)
    std::priority_queue<Due, std::vector<Due>, std::greater<Due>> pending;
    std::vector<i64> stack, ended_flows, ends;   // scratch of a step
    // the flows on each port (data and ACK entries), for the components
    std::vector<std::vector<i64>> port_flows;
    std::vector<i64> port_mark, flow_mark, comp, touched_ports;
    i64 mark = 0;
    // water-filling scratch (per port, per flow)
    std::vector<i64> w_left, w_weight, w_link_min, w_cap2, f_min, f_first, cur, nxt_cur;

    Exp(const FlowCtx &ctx, i64 e) : c(ctx) {
        t0 = c.exp_task_lo[e]; n_task = c.exp_task_lo[e + 1] - t0;
        f0 = c.exp_flow_lo[e]; n_flow = c.exp_flow_lo[e + 1] - f0;
        p0 = c.exp_port_lo[e]; n_port = c.exp_port_lo[e + 1] - p0;
        e0 = c.path_offset[f0];
        limit = c.exp_limit_ps[e];
        left.assign(c.task_npred + t0, c.task_npred + t0 + n_task);
        ready.assign(c.task_min_ps + t0, c.task_min_ps + t0 + n_task);
        remaining.assign(c.flow_bits + f0, c.flow_bits + f0 + n_flow);
        rate.assign(n_flow, 0);
        active_pos.assign(n_flow, -1);
        port_flows.resize(n_port);
        port_mark.assign(n_port, 0); flow_mark.assign(n_flow, 0);
        w_left.assign(n_port, 0); w_weight.assign(n_port, 0); w_link_min.assign(n_port, 0);
        w_cap2.assign(n_port, 0);
        f_min.assign(n_flow, 0); f_first.assign(n_flow, 0);
        for (i64 t = 0; t < n_task; t++) { c.task_start_ps[t0 + t] = -1; c.task_finish_ps[t0 + t] = -1; }
        for (i64 f = 0; f < n_flow; f++) c.flow_end_ps[f0 + f] = -1;
    }

    i64 port_of(i64 entry) const { return c.path_port[entry] - p0; }
    i64 entry_lo(i64 f) const { return c.path_offset[f0 + f]; }
    i64 entry_hi(i64 f) const { return c.path_offset[f0 + f + 1]; }

    // ---------------------------------------------------------------- tasks
    // Tasks whose every predecessor finished: delays finish at once (and resolve their
    // successors), flows wait in `pending` for their ready time.
    void task_ready(i64 t) {
        stack.push_back(t);
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

    void finished(i64 u) {
        successors_of(u, c.task_finish_ps[t0 + u]);
        while (!stack.empty()) {
            i64 s = stack.back(); stack.pop_back();
            task_ready(s);
        }
    }

    // ---------------------------------------------------------------- flows
    void attach(i64 f) {
        active_pos[f] = (i64)active.size();
        active.push_back(f);
        for (i64 e = entry_lo(f); e < entry_hi(f); e++) port_flows[port_of(e)].push_back(f);
    }

    void detach(i64 f) {
        i64 i = active_pos[f], last = active.back();
        active[i] = last; active_pos[last] = i;
        active.pop_back(); active_pos[f] = -1;
        for (i64 e = entry_lo(f); e < entry_hi(f); e++) {
            std::vector<i64> &on = port_flows[port_of(e)];
            for (size_t j = 0; j < on.size(); j++)
                if (on[j] == f) { on[j] = on.back(); on.pop_back(); break; }
        }
    }

    // Add to `comp` every active flow linked to port `p` (transitively).
    void spread_from(i64 p) {
        if (port_mark[p] == mark) return;
        port_mark[p] = mark;
        touched_ports.push_back(p);
        size_t head = comp.size();
        for (i64 f : port_flows[p])
            if (flow_mark[f] != mark) { flow_mark[f] = mark; comp.push_back(f); }
        for (; head < comp.size(); head++) {
            i64 f = comp[head];
            for (i64 e = entry_lo(f); e < entry_hi(f); e++) {
                i64 q = port_of(e);
                if (port_mark[q] == mark) continue;
                port_mark[q] = mark;
                touched_ports.push_back(q);
                for (i64 g : port_flows[q])
                    if (flow_mark[g] != mark) { flow_mark[g] = mark; comp.push_back(g); }
            }
        }
    }

    // Max-min rates (into `out`) of the flows of `comp` over their data entries, on capacities
    // `cap` (by local port): maxmin.max_min_rates' rounds.
    template <class Cap>
    void max_min(const Cap &cap, std::vector<i64> &out) {
        for (i64 p : touched_ports) { w_left[p] = cap(p); w_weight[p] = 0; }
        cur.clear();
        for (i64 f : comp) {
            out[f] = 0;
            cur.push_back(f);
            for (i64 e = entry_lo(f); e < entry_hi(f); e++)
                if (c.path_is_data[e]) w_weight[port_of(e)] += c.path_weight[e];
        }
        while (!cur.empty()) {
            for (i64 f : cur) {
                i64 m = INF;
                for (i64 e = entry_lo(f); e < entry_hi(f); e++) {
                    if (!c.path_is_data[e]) continue;
                    i64 p = port_of(e);
                    i64 share = w_left[p] / w_weight[p];
                    if (share < m) m = share;
                    w_link_min[p] = INF;
                }
                f_min[f] = m;
            }
            for (i64 f : cur)
                for (i64 e = entry_lo(f); e < entry_hi(f); e++)
                    if (c.path_is_data[e]) {
                        i64 p = port_of(e);
                        if (f_min[f] < w_link_min[p]) w_link_min[p] = f_min[f];
                    }
            nxt_cur.clear();
            size_t n_fixed = 0;
            for (i64 f : cur) {
                bool fixed = false;
                for (i64 e = entry_lo(f); e < entry_hi(f) && !fixed; e++) {
                    if (!c.path_is_data[e]) continue;
                    i64 p = port_of(e);
                    fixed = w_left[p] / w_weight[p] == w_link_min[p];
                }
                if (fixed) { cur[n_fixed++] = f; out[f] = f_min[f]; }
                else nxt_cur.push_back(f);
            }
            // the shares above all read the round's capacities: update them after
            for (size_t i = 0; i < n_fixed; i++) {
                i64 f = cur[i];
                for (i64 e = entry_lo(f); e < entry_hi(f); e++)
                    if (c.path_is_data[e]) {
                        i64 p = port_of(e);
                        w_left[p] -= c.path_weight[e] * f_min[f];
                        w_weight[p] -= c.path_weight[e];
                    }
            }
            cur.swap(nxt_cur);
        }
    }

    // Rates of the flows of `comp` (sim._Run._rates): max-min without the ACKs, their load off
    // the way back, max-min of the data in what is left.
    void rates() {
        max_min([this](i64 p) { return c.port_cap[p0 + p]; }, f_first);
        for (i64 p : touched_ports) w_cap2[p] = 0;
        const i64 one = c.weight_one;
        for (i64 f : comp)
            for (i64 e = entry_lo(f); e < entry_hi(f); e++)
                if (!c.path_is_data[e]) {
                    i64 w = c.path_weight[e];
                    w_cap2[port_of(e)] += (w * f_first[f]) / (one + w) * one;
                }
        for (i64 p : touched_ports) {
            i64 room = c.port_cap[p0 + p] - w_cap2[p];
            w_cap2[p] = room > 0 ? room : 0;
        }
        max_min([this](i64 p) { return w_cap2[p]; }, rate);
        for (i64 f : comp) if (rate[f] < 1) rate[f] = 1;
    }

    // ---------------------------------------------------------------- the loop
    void run(i64 e) {
        for (i64 t = 0; t < n_task; t++)
            if (left[t] == 0) stack.push_back(t);
        while (!stack.empty()) { i64 s = stack.back(); stack.pop_back(); task_ready(s); }
        i64 T = 0, steps = 0;
        int8_t status = RUNNING;
        std::vector<i64> changed;          // ports of the flows that ended or arrived
        while (true) {
            i64 nxt = INF;
            ends.resize(active.size());
            for (size_t i = 0; i < active.size(); i++) {
                i64 f = active[i];
                double left_ps = std::ceil(remaining[f] * PS_PER_BIT_UNIT / (double)rate[f]);
                ends[i] = T + (i64)(left_ps > 0.0 ? left_ps : 0.0);
                if (ends[i] < nxt) nxt = ends[i];
            }
            if (!pending.empty() && pending.top().first < nxt) nxt = pending.top().first;
            if (nxt >= INF) { status = DONE; break; }
            if (nxt > limit) { status = TIMEOUT; T = limit; break; }
            // transfers that end now finish their task after the flow's latency; the others move on
            ended_flows.clear();
            changed.clear();
            double dt = (double)(nxt - T) / PS_PER_BIT_UNIT;
            for (size_t i = 0; i < active.size(); i++) {
                i64 f = active[i];
                if (ends[i] <= nxt) {
                    c.flow_end_ps[f0 + f] = ends[i];
                    i64 task = c.flow_task[f0 + f] - t0;
                    c.task_finish_ps[t0 + task] = ends[i] + c.flow_latency_ps[f0 + f];
                    ended_flows.push_back(f);
                } else {
                    remaining[f] = remaining[f] - (double)rate[f] * dt;
                }
            }
            for (i64 f : ended_flows) {
                for (i64 k = entry_lo(f); k < entry_hi(f); k++) changed.push_back(port_of(k));
                detach(f);
            }
            T = nxt;
            for (i64 f : ended_flows) finished(c.flow_task[f0 + f] - t0);
            // arrivals
            while (!pending.empty() && pending.top().first <= T) {
                i64 f = pending.top().second;
                pending.pop();
                attach(f);
                for (i64 k = entry_lo(f); k < entry_hi(f); k++) changed.push_back(port_of(k));
            }
            steps++;
            mark++;
            comp.clear(); touched_ports.clear();
            for (i64 p : changed) spread_from(p);
            if (!comp.empty()) rates();
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
