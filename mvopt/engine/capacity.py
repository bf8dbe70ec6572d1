"""How many packet slots an experiment gets: its wire rings and its nodes' packet pools.

*Full* capacities hold the worst case the model allows: a ring holds every packet a port can put
on the wire (back to back, of the smallest size) before the receiver consumes it, a switch pool
the switch buffer in packets plus 64 per port. They are what the model means, and in batches of
large clusters they are most of the memory (a 512-NIC rail-optimised cluster: 3.1 M ring slots
of 32 B for packets that, at 4 KiB each, are rarely more than a few dozen per ring).

*Compact* capacities are a first try sized for traffic as it usually is: rings for twice the
data packets the port can send in that time (a link carries data one way and at most one ACK per
data packet the other way), switch pools for an eighth of the buffer plus 16 descriptors per
port. Slot numbers enter no decision of the kernels (no hash, no order), so an experiment that
never runs out of its compact slots gives exactly the results of a full run. One that does
stops at once with the internal status ``capacity`` (kernels: ``ST_CAPACITY``) and is run again
with full capacities (:func:`mvopt.engine.split.run_share`): slower for that experiment, never
different. A switch pool sized by the user (``network.switch_packet_slots``) is a model
parameter (running out of it drops the packet), so it is never made compact.
"""

from __future__ import annotations

import numpy as np

from mvopt.engine.params import Experiment, ResolvedParams, ser_ps_array

__all__ = ["HOST_POOL_SLOTS", "CAPACITY_MODES", "ring_capacity", "port_ring_capacities", "node_pool_slots",
           "pools_compact"]

HOST_POOL_SLOTS = 256          # control packets (ACK/NACK) a host NIC can hold
CAPACITY_MODES = ("auto", "full", "compact")
COMPACT_RING_EXTRA = 16        # control packets (PFC frames, NACKs) beyond the data/ACK bound
COMPACT_POOL_PER_PORT = 16
COMPACT_POOL_BUFFER_SHARE = 8  # a compact pool holds 1/8 of the buffer in full-size packets


def _pow2(need: np.ndarray) -> np.ndarray:
    """Rounded up to a power of two, so that a kernel finds a ring slot with a mask."""
    return (1 << np.ceil(np.log2(np.maximum(need, 1))).astype(np.int64)).astype(np.int64)


def ring_capacity(rate_bps: np.ndarray, delay_ps: np.ndarray, window_ps: int, max_pkt: int, min_pkt: int,
                  compact: bool = False) -> np.ndarray:
    """Slots a wire ring needs: a sent packet stays unconsumed for at most ser + delay + 2 windows.
    Full: that span filled with the smallest packets; compact: twice the largest ones (data one
    way, an ACK per data packet back) plus a few control frames, never above full."""
    rate = np.asarray(rate_bps, np.int64)
    max_ser, min_ser = ser_ps_array(max_pkt, rate), ser_ps_array(min_pkt, rate)
    span = max_ser + np.asarray(delay_ps, np.int64) + 2 * window_ps
    full = _pow2(span // min_ser + 4)
    if not compact:
        return full
    return np.minimum(full, _pow2(2 * (span // max_ser) + COMPACT_RING_EXTRA))


def port_ring_capacities(topo, p: ResolvedParams, compact: bool = False) -> np.ndarray:
    """Ring slots of every port of an experiment (build_batch and the planner's count)."""
    return ring_capacity(np.asarray(topo.port_rate_bps, np.int64), np.asarray(topo.port_delay_ps, np.int64),
                         p.window_ps, p.payload + p.header, p.min_wire_bytes, compact)


def pools_compact(exp: Experiment) -> bool:
    """Whether the experiment's switch pools may be made compact (the user did not size them)."""
    return exp.network.switch_packet_slots is None


def node_pool_slots(topo, p: ResolvedParams, compact: bool = False) -> np.ndarray:
    """Pool slots of every node of an experiment: a host's control packets, a switch's buffer
    (compact: `compact` is only passed for experiments whose pools_compact holds)."""
    slots = np.full(int(topo.n_node), HOST_POOL_SLOTS, np.int64)
    nh = int(topo.n_host)
    if compact:
        nports = np.diff(np.asarray(topo.node_port_offset, np.int64))[nh:]
        first = p.sw_buffer // (p.payload + p.header) // COMPACT_POOL_BUFFER_SHARE + COMPACT_POOL_PER_PORT * nports
        slots[nh:] = np.minimum(p.sw_slots, first)
    else:
        slots[nh:] = p.sw_slots
    return slots

