// The flow level's passes over every dependency or every path entry: the batch's columns
// (mvopt/flow/batch.py, _experiment_columns: each task's successors, each flow's latency and
// its last ACK's way back) and the bytes each port carried (results.py), with the integer and
// double arithmetic of NumPy's operations there, in their order.

#include <cstdint>
#include <cmath>

namespace {

typedef int64_t i64;

// ceil(x / y) of x >= 0 (batch.py's -(-x // y)), without overflow for any y; 0 for y = 0 as
// numpy's integer division by zero gives
inline i64 ceil_div(i64 x, i64 y) {
    if (y == 0) return 0;
    const i64 q = x / y;
    return q * y < x ? q + 1 : q;
}

}  // namespace

// Each task's successors (CSR by predecessor): the owners of its dependency entries, in entry
// order (the entries are by owner: a stable counting sort by predecessor), and 0 where the
// successor starts on the host where the task finishes (dst of the predecessor is the
// successor's src), else `window_ps`. succ_offset (n_task + 1) is filled too.
extern "C" void mv_flow_successors(int64_t n_task, const int64_t *pred_offset, const int32_t *pred,
                                   const int32_t *src, const int32_t *dst, int64_t window_ps, int64_t *succ_offset,
                                   int64_t *succ, int64_t *succ_notify_ps) {
    for (i64 t = 0; t <= n_task; t++) succ_offset[t] = 0;
    const i64 n_dep = pred_offset[n_task];
    for (i64 k = 0; k < n_dep; k++) succ_offset[pred[k] + 1]++;
    for (i64 t = 0; t < n_task; t++) succ_offset[t + 1] += succ_offset[t];
    // (each predecessor's offset serves as its cursor, then is moved back to its start)
    for (i64 t = 0; t < n_task; t++)
        for (i64 k = pred_offset[t]; k < pred_offset[t + 1]; k++) {
            const i64 u = pred[k];
            succ[succ_offset[u]] = t;
            succ_notify_ps[succ_offset[u]] = dst[u] == src[t] ? 0 : window_ps;
            succ_offset[u]++;
        }
    for (i64 t = n_task; t > 0; t--) succ_offset[t] = succ_offset[t - 1];
    succ_offset[0] = 0;
}

// Each flow's latency and its last ACK's way back, from its entries (FlowPaths: data entries
// with is_data set): latency = round(sum over data entries of weight x (delay + a full packet's
// serialisation) / one) - that serialisation at the slowest data port; ack = the sum of
// ack_hop over its ACK entries. The sums are doubles added in entry order from 0 (batch.py's
// bincount), rounded half to even (numpy's round).
extern "C" void mv_flow_latency(int64_t n_flow, const int64_t *offset, const int64_t *port, const int64_t *weight,
                                const int8_t *is_data, const int64_t *first_wire, const int64_t *rate,
                                const int64_t *delay, const int64_t *ack_hop, int64_t ps_per_s, int64_t one,
                                int64_t *latency, int64_t *ack) {
    for (i64 f = 0; f < n_flow; f++) {
        const i64 bits_ps = first_wire[f] * 8 * ps_per_s;
        double hop = 0.0, back = 0.0;
        i64 bottleneck = INT64_MAX;
        for (i64 k = offset[f]; k < offset[f + 1]; k++) {
            const i64 p = port[k];
            if (!is_data[k]) { back += (double)ack_hop[p]; continue; }
            hop += (double)(weight[k] * (delay[p] + ceil_div(bits_ps, rate[p])));
            if (rate[p] < bottleneck) bottleneck = rate[p];
        }
        latency[f] = (i64)std::nearbyint(hop / (double)one) - ceil_div(bits_ps, bottleneck > 1 ? bottleneck : 1);
        ack[f] = (i64)back;
    }
}

// The bytes each port carried (results.py's port_tx_bytes): every entry's flow's wire bytes
// (bytes[f], 0 for a flow that did not end) times its weight / one, summed per port in entry
// order from 0 (bincount), rounded half to even.
extern "C" void mv_flow_port_bytes(int64_t n_flow, int64_t n_port, const int64_t *offset, const int64_t *port,
                                   const int64_t *weight, const double *bytes, int64_t one, double *sum,
                                   int64_t *out) {
    for (i64 p = 0; p < n_port; p++) sum[p] = 0.0;
    for (i64 f = 0; f < n_flow; f++)
        for (i64 k = offset[f]; k < offset[f + 1]; k++) sum[port[k]] += bytes[f] * (double)weight[k] / (double)one;
    for (i64 p = 0; p < n_port; p++) out[p] = (i64)std::nearbyint(sum[p]);
}
