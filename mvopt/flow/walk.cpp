// The ECMP paths of one experiment's flows through its dense routing tables, for the flow level
// (mvopt/flow/paths.py): the walk of mvopt.engine.routes.flow_paths, which the packet engine's
// kernels take per packet, one flow after another instead of one hop at a time over numpy
// arrays. The same table entries, next-hop sets and hash (hash64(seed, TAG_ECMP, switch, flow),
// continued from each switch's prefix as the kernels' mv_hash_from does).

#include <cstdint>

namespace {

typedef int64_t i64;
const int SET_BITS = 8;    // routes._SET_BITS: a table entry is (a << SET_BITS) | n

inline uint64_t mix64(uint64_t z) {    // params.mix64
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

}  // namespace

// One way of every flow (from host start[i] to host end[i], hashed by flow id[i]) into
// ports[i * width ...]: the host's own port, then each switch's egress port, -1 after the last.
// A walk stops where a switch has no route (or at a host next to the source); one that reaches
// another host than end[i] keeps only the host's port and sets lost[i] (routes.flow_paths: a
// data way astray leaves no way back, so a flow already lost is not walked). `width` is 1 + the
// switches a walk covers at most. count[i]: the ports of row i; reached[i]: whether its walk
// reached end[i].
extern "C" void mv_flow_walk(int64_t n_flow, int64_t width, const int64_t *id, const int64_t *start,
                             const int64_t *end, int64_t n_host, const int64_t *node_port_lo,
                             const int64_t *port_peer_node, const uint64_t *ecmp_prefix, const int32_t *rtab,
                             const int32_t *rtab_nh, int64_t *ports, int64_t *count, int8_t *reached,
                             int8_t *lost) {
    for (i64 i = 0; i < n_flow; i++) {
        i64 *row = ports + i * width;
        row[0] = node_port_lo[start[i]];
        for (i64 j = 1; j < width; j++) row[j] = -1;
        count[i] = 1;
        reached[i] = port_peer_node[row[0]] == end[i];
        if (lost[i]) continue;
        i64 node = port_peer_node[row[0]], hop = 0;
        while (node >= n_host && hop + 1 < width) {
            const int32_t x = rtab[(node - n_host) * n_host + end[i]];
            const i64 n = x & ((1 << SET_BITS) - 1), a = x >> SET_BITS;
            if (n == 0) break;                   // no route: the caller walks it again
            i64 k = a;
            if (n > 1) {
                const uint64_t h = mix64(mix64(mix64(ecmp_prefix[node] ^ (uint64_t)id[i])));
                const uint64_t un = (uint64_t)n;
                k = rtab_nh[a + (i64)((un & (un - 1)) == 0 ? h & (un - 1) : h % un)];
            }
            const i64 egress = node_port_lo[node] + k;
            row[++hop] = egress;
            node = port_peer_node[egress];
        }
        if (hop > 0 && node < n_host && node != end[i]) {   // astray: reached another host
            for (i64 j = 1; j < width; j++) row[j] = -1;
            lost[i] = 1;
            continue;
        }
        count[i] = hop + 1;
        reached[i] = node == end[i];
    }
}

// The flows' entries (FlowPaths, CSR) from their ways' ports ([n_flow, width] rows, count[i]
// of row i used): each flow's data ports (weight `one`), then its ACK ports (ack_weight[i]);
// offset (n_flow + 1) must hold the cumulative counts already.
extern "C" void mv_flow_pack(int64_t n_flow, int64_t data_width, const int64_t *data, const int64_t *data_count,
                             int64_t ack_width, const int64_t *ack, const int64_t *ack_count,
                             const int64_t *ack_weight, int64_t one, const int64_t *offset, int64_t *port,
                             int64_t *weight, int8_t *is_data) {
    for (i64 i = 0; i < n_flow; i++) {
        i64 k = offset[i];
        for (i64 j = 0; j < data_count[i]; j++, k++) {
            port[k] = data[i * data_width + j]; weight[k] = one; is_data[k] = 1;
        }
        for (i64 j = 0; j < ack_count[i]; j++, k++) {
            port[k] = ack[i * ack_width + j]; weight[k] = ack_weight[i]; is_data[k] = 0;
        }
    }
}
