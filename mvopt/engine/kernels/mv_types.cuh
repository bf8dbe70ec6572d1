// Records stored in the packet tables (layout mirrored by schema.PKT_DTYPE / INT_DTYPE).
#pragma once

struct Pkt {
  int64_t t;        // arrival time at the peer (ring) / enqueue time (queue)
  int32_t flow;     // the flow's row in the flow columns (global; -1 for PFC frames)
  int32_t seq;      // packet index (data), cumulative ack / expected (ACK, NACK)
  int32_t bytes;    // wire bytes
  int16_t type;     // PK_*
  int16_t flags;    // FL_*
  int32_t next;     // next slot in a queue / free list (-1 = none)
  int32_t in_port;  // switch: ingress port (global) for MMU accounting
  int32_t nint;     // INT hops recorded
  int32_t sendno;   // the flow's send counter when sent (spraying)
};

struct IntHop { int64_t ts; int64_t tx; int64_t qlen; int64_t port; };
