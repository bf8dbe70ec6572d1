// Records stored in the packet tables (layout mirrored by schema.PKT_DTYPE / INT_DTYPE).
#pragma once

// 32 bytes: one 32-byte sector of device memory (a GPU reads a packet in one). Kernels assemble a
// packet in registers and store it once. (Aligned to 16 bytes, so that a GPU could copy it with two
// vector accesses, it made the window kernel spill and gained nothing.)
struct Pkt {
  int64_t t;        // arrival time at the peer (ring) / enqueue time (queue)
  int32_t flow;     // the flow's row in the flow columns (global; -1 for PFC frames)
  int32_t seq;      // packet index (data), cumulative ack / expected (ACK, NACK)
  int32_t next;     // next slot in a queue / free list (-1 = none)
  int32_t sendno;   // the flow's send counter when sent (spraying)
  int16_t bytes;    // wire bytes (payload + header <= 32767, checked with the configuration)
  int16_t in_port;  // switch: ingress port, as an index among the switch's ports (MMU accounting)
  int8_t type;      // PK_*
  int8_t flags;     // FL_*
  int8_t nint;      // INT hops recorded
  int8_t hop;       // switches the packet has passed (its row of f_path; saturates at 127)
};

struct IntHop { int64_t ts; int64_t tx; int64_t qlen; int64_t port; };
