"""The algorithms a configuration chooses among, each declared once.

Congestion control (``network.cc``), load balancing (``network.lb``) and the inter-server
collective algorithm (``collective.algorithm``). The configuration's allowed values, the CLI's
choices, the HPCC simulator's ``CC_MODE`` codes and the kernels' ``CC_*`` enum
(:func:`mvopt.engine.schema.c_enum_source`) all come from these tables; nothing else spells the
lists out.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["CongestionControl", "CONGESTION_CONTROLS", "CC_NAMES", "congestion_control", "LOAD_BALANCERS",
           "PER_PACKET_LOAD_BALANCERS", "TRANSPORTS", "COLLECTIVE_ALGORITHMS", "ALL_TO_ALL_ALGORITHMS"]


@dataclass(frozen=True)
class CongestionControl:
    """One congestion-control algorithm of the engine."""

    name: str                  # its value of network.cc (and its parameter section's name, if any)
    code: int                  # CC_<NAME> in the kernels: the experiment's EI_CC slot
    title: str                 # how papers and other simulators write it
    hpcc_cc_mode: int | None   # CC_MODE of the HPCC simulator's config.txt (None: it has none)
    windowed: bool             # flows are window-limited unless network.window says otherwise


# Codes are positions: the kernels switch on them, so a new algorithm takes the next one.
CONGESTION_CONTROLS: tuple[CongestionControl, ...] = (
    CongestionControl("none", 0, "none", None, windowed=False),
    CongestionControl("dcqcn", 1, "DCQCN", 1, windowed=False),
    CongestionControl("hpcc", 2, "HPCC", 3, windowed=True),
    CongestionControl("dctcp", 3, "DCTCP", 8, windowed=True),
    # the HPCC simulator's CC_MODE 7 is its own TIMELY variant (per-packet RTT from a timestamp
    # in the packet), not this one: its configurations are refused rather than approximated
    CongestionControl("timely", 4, "TIMELY", None, windowed=False),
)
CC_NAMES: tuple[str, ...] = tuple(c.name for c in CONGESTION_CONTROLS)

# How a switch picks a data packet's egress among equal-cost next hops: per-flow ECMP hashing,
# per-packet spraying (a hash), or adaptive routing (the shortest data queue, per packet). Codes
# are positions: the kernels' LB_* enum and an experiment's EI_SPRAY slot (0: per flow).
LOAD_BALANCERS: tuple[str, ...] = ("ecmp", "spray", "adaptive")
# those that route each data packet on its own, so that a flow's packets overtake each other
PER_PACKET_LOAD_BALANCERS: tuple[str, ...] = ("spray", "adaptive")

# The hosts' transport (network.transport): go-back-N with an in-order receiver, or selective
# repeat with an out-of-order receiver (docs/engine.md). Codes are positions: the kernels' TR_*.
TRANSPORTS: tuple[str, ...] = ("gbn", "sr")

# NCCL_ALGO of inter-server collectives: "auto" picks ring or tree by their closed-form times
COLLECTIVE_ALGORITHMS: tuple[str, ...] = ("ring", "tree", "auto")

# --- all-to-all algorithms (collective.all_to_all; mvopt/comm/alltoall.py) ---------------------
# concurrent: every pair's transfer at once (one NCCL group of sends and receives, all in flight:
# NCCL spreads a group's rounds over its point-to-point channels);
# pairwise: NCCL's group on one channel: each rank sends to one peer at a time in NCCL's round
# order, receives independent;
# hierarchical: intra-server exchange to the GPU on the destination's rail first, then pairwise
# between servers rail by rail (NCCL's PXN).
ALL_TO_ALL_ALGORITHMS: tuple[str, ...] = ("concurrent", "pairwise", "hierarchical")
# --- end of all-to-all algorithms -------------------------------------------------------------


def congestion_control(name: str) -> CongestionControl:
    """The algorithm named `name` (one of CC_NAMES; the configuration has checked it)."""
    return CONGESTION_CONTROLS[CC_NAMES.index(name)]
