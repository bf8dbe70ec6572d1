"""The ``network`` section: transport, congestion control, load balancing, switch buffers.

Defaults follow the HPCC ns-3 simulator (see docs/model.md). Fields left at null are derived
from the port rate when the experiment is built (``default_doc`` says how).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from mvopt._cfg.algorithms import CC_NAMES, LOAD_BALANCERS, PER_PACKET_LOAD_BALANCERS, TRANSPORTS, congestion_control
from mvopt._cfg.base import Section, at_least, field, in_range, non_negative, positive
from mvopt.errors import ConfigError

# network.ecmp_hash: mvopt's own per-flow hash, or the HPCC simulator's (mvopt/io/hpcc_paths.py)
ECMP_HASHES = ("mvopt", "hpcc")
# network.switch_ack_queue: where a switch queues ACK/NACKs (docs/engine.md, "Switch arrival")
SWITCH_ACK_QUEUES = ("priority", "data")
# the engine's packet record keeps a packet's wire bytes in 16 bits (mvopt/engine/kernels/mv_types.cuh)
MAX_PACKET_BYTES = 32767


@dataclass(frozen=True)
class DcqcnConfig(Section):
    """DCQCN (Mellanox model). Null fields take the chosen profile's value."""

    profile: Literal["reference", "paper"] = field(
        "reference", doc="parameter profile: 'reference' (HPCC ns-3 scripts) or 'paper' (DCQCN paper timers)")
    g: Optional[float] = field(None, doc="alpha gain", default_doc="1/256", check=in_range(0.0, 1.0))
    alpha_interval_us: Optional[float] = field(None, unit="us", doc="alpha update period",
                                               default_doc="1 (reference) / 50 (paper)", check=positive)
    decrease_interval_us: Optional[float] = field(None, unit="us", doc="rate-decrease check period",
                                                  default_doc="4 (reference) / 50 (paper)", check=positive)
    rp_timer_us: Optional[float] = field(None, unit="us", doc="rate-increase timer",
                                         default_doc="300 (reference) / 55 (paper)", check=positive)
    fast_recovery_steps: int = field(1, doc="F: fast-recovery steps before additive increase", check=at_least(0))
    rate_ai_mbps: Optional[float] = field(None, unit="Mb/s", doc="additive increase R_AI",
                                          default_doc="5*bw/25 (20 at 100G)", check=positive)
    rate_hai_mbps: Optional[float] = field(None, unit="Mb/s", doc="hyper increase R_HAI",
                                           default_doc="50*bw/25 (200 at 100G)", check=positive)
    rate_on_first_cnp: float = field(1.0, doc="fraction of the rate kept at the first CNP",
                                     check=in_range(0.0, 1.0))
    min_rate_mbps: float = field(1000.0, unit="Mb/s", doc="minimum sending rate", check=positive)
    clamp_target_rate: bool = field(
        False, doc="at a rate decrease, also set the target rate to the current rate even right after "
        "another decrease (ns-3's CLAMP_TARGET_RATE; off = only once some increase step has run)")

    PROFILES = {
        "reference": {"g": 1 / 256, "alpha_interval_us": 1.0, "decrease_interval_us": 4.0, "rp_timer_us": 300.0},
        "paper": {"g": 1 / 256, "alpha_interval_us": 50.0, "decrease_interval_us": 50.0, "rp_timer_us": 55.0},
    }

    def resolved(self, name: str) -> float:
        value = getattr(self, name)
        return self.PROFILES[self.profile][name] if value is None else value


@dataclass(frozen=True)
class HpccConfig(Section):
    """HPCC (Li et al., SIGCOMM'19)."""

    eta: float = field(0.95, doc="target utilisation eta", check=in_range(0.01, 1.0))
    max_stage: int = field(5, doc="additive-increase stages before a multiplicative update", check=at_least(0))
    w_ai_mbps: Optional[float] = field(None, unit="Mb/s", doc="additive increase W_AI",
                                       default_doc="10*bw/25 (40 at 100G)", check=positive)
    min_rate_mbps: float = field(100.0, unit="Mb/s", doc="minimum sending rate", check=positive)
    int_multi: Optional[int] = field(
        None, doc="INT as the HPCC simulator's switches record it (its INT_MULTI m): time in whole ns, tx bytes in "
        "units of 128 m B, queue length in units of 80 m B, in counters of 24, 20 and 17 bits that the sender reads "
        "with wrap-around", default_doc="exact values", check=positive)


@dataclass(frozen=True)
class DctcpConfig(Section):
    """Rate-based DCTCP as on RDMA NICs."""

    g: float = field(1 / 16, doc="alpha gain", check=in_range(0.0, 1.0))
    rate_ai_mbps: float = field(615.0, unit="Mb/s", doc="additive increase per window", check=positive)
    min_rate_mbps: float = field(100.0, unit="Mb/s", doc="minimum sending rate", check=positive)


@dataclass(frozen=True)
class TimelyConfig(Section):
    """TIMELY (Mittal et al., SIGCOMM'15): rate control on the RTT and its gradient. Defaults are
    the paper's."""

    t_low_us: float = field(50.0, unit="us", doc="T_low: below this RTT the rate increases additively",
                            check=positive)
    t_high_us: float = field(500.0, unit="us", doc="T_high: above this RTT the rate decreases multiplicatively",
                             check=positive)
    delta_mbps: float = field(10.0, unit="Mb/s", doc="additive increase step delta", check=positive)
    beta: float = field(0.8, doc="multiplicative decrease factor beta", check=in_range(0.0, 1.0))
    alpha: float = field(0.875, doc="EWMA weight of the newest RTT difference", check=in_range(0.0, 1.0))
    min_rtt_us: float = field(20.0, unit="us", doc="minimum RTT that normalises the gradient", check=positive)
    hai_after: int = field(5, doc="N: after N consecutive completions with a non-positive gradient, "
                           "increase by N x delta (hyperactive increase)", check=at_least(1))
    min_rate_mbps: float = field(100.0, unit="Mb/s", doc="minimum sending rate", check=positive)

    def _check(self, path: str) -> None:
        if self.t_low_us > self.t_high_us:
            raise ConfigError(f"{path}.t_high_us", f"must be >= t_low_us ({self.t_low_us})", self.t_high_us)


@dataclass(frozen=True)
class EcnConfig(Section):
    """RED-style ECN marking on egress queues (at dequeue)."""

    enabled: bool = field(True, doc="mark ECN (DCQCN and DCTCP need it)")
    kmin_kb: Optional[float] = field(None, unit="KB", doc="marking starts above this queue",
                                     default_doc="100*bw/25 (30*bw/10 with DCTCP)", check=non_negative)
    kmax_kb: Optional[float] = field(None, unit="KB", doc="every packet marked above this queue",
                                     default_doc="400*bw/25 (30*bw/10 with DCTCP)", check=non_negative)
    pmax: Optional[float] = field(None, doc="marking probability at kmax",
                                  default_doc="0.2 (1.0 with DCTCP)", check=in_range(0.0, 1.0))

    def _check(self, path: str) -> None:
        if self.kmin_kb is not None and self.kmax_kb is not None and self.kmin_kb > self.kmax_kb:
            raise ConfigError(f"{path}.kmax_kb", f"must be >= kmin_kb ({self.kmin_kb})", self.kmax_kb)


@dataclass(frozen=True)
class PfcConfig(Section):
    """Priority flow control (lossless operation)."""

    enabled: bool = field(True, doc="PFC on (lossless); off = lossy with tail drop")
    reserve_bytes: int = field(4096, unit="B", doc="per ingress-port reserved buffer", check=non_negative)
    headroom_bdp: float = field(3.0, doc="headroom per ingress port, in link bandwidth-delay products",
                                check=non_negative)
    shift: Optional[int] = field(None, doc="dynamic threshold shift (threshold = free >> shift)",
                                 default_doc="3 at NIC rate, one less per doubling of port speed",
                                 check=in_range(0, 16))
    resume_offset_bytes: int = field(3072, unit="B", doc="resume when shared use + this <= threshold",
                                     check=non_negative)
    frame_bytes: int = field(64, unit="B", doc="pause/resume frame size", check=positive)
    pause_host_acks: bool = field(
        False, doc="a PAUSE a host receives also stops its ACK/NACKs (the HPCC simulator's ACK_HIGH_PRIO 0: the "
        "hosts' ACK queue in the data's class); off: it stops the host's data only")


@dataclass(frozen=True)
class NetworkConfig(Section):
    """Transport, congestion control, load balancing and switch settings."""

    cc: Literal[CC_NAMES] = field("dcqcn", doc="congestion control")
    lb: Literal[LOAD_BALANCERS] = field("ecmp", doc="load balancing among equal-cost next hops: per-flow ECMP, "
                                        "per-packet spraying, or adaptive (per packet, the shortest data queue)")
    flowlet_gap_ns: Optional[float] = field(
        None, unit="ns", doc="adaptive routing per flowlet: a switch keeps sending a flow's data packets to the "
        "next hop its last one took while they arrive closer together than this gap (docs/engine.md)",
        default_doc="per packet", check=positive)
    ecmp_hash: Literal[ECMP_HASHES] = field(
        "mvopt", doc="how a switch picks a flow's next hop among equal-cost ones: mvopt's counter-based hash of "
        "(seed, switch, flow), or hpcc, the HPCC simulator's hash of the flow's 5-tuple (needs HPCC flow files: "
        "mvopt simulate --hpcc-flows)")
    transport: Optional[Literal[TRANSPORTS]] = field(
        None, doc="hosts' transport: go-back-N with an in-order receiver (gbn) or selective repeat with an "
        "out-of-order receiver and selective acknowledgements (sr)",
        default_doc="sr with spray and adaptive (per-packet routes reorder a flow), else gbn")
    payload_bytes: int = field(1000, unit="B", doc="payload per data packet (RoCE MTU e.g. 4096; payload + "
                               f"header at most {MAX_PACKET_BYTES:,})", check=in_range(1, MAX_PACKET_BYTES))
    header_bytes: int = field(48, unit="B", doc="header bytes per data packet", check=non_negative)
    ack_bytes: int = field(60, unit="B", doc="ACK/NACK size", check=positive)
    buffer_mb: Optional[float] = field(None, unit="MB", doc="shared buffer per switch",
                                       default_doc="16*bw/50 (32 MB at 100 Gb/s), bw = fastest port", check=positive)
    window: Optional[bool] = field(None, doc="window-limit flows to base-RTT x line rate",
                                   default_doc="true for hpcc and dctcp, else false")
    var_win: bool = field(True, doc="scale the window by rate / line rate")
    global_window: bool = field(False, doc="every flow's window and base RTT are the largest of any pair of hosts "
                                "(the HPCC simulator's GLOBAL_T 1), not its own pair's")
    switch_ack_queue: Literal[SWITCH_ACK_QUEUES] = field(
        "priority", doc="where a switch queues ACK/NACKs: priority, a control queue served before data; or data, "
        "in the data queue of the egress port, first in first out with data packets, counted by the MMU and PFC "
        "(the HPCC simulator's switches, whatever its ACK_HIGH_PRIO)")
    nack_interval_us: float = field(500.0, unit="us", doc="at most one NACK per flow per interval",
                                    check=non_negative)
    rto_us: float = field(1000.0, unit="us", doc="sender retransmission timeout (go back to the "
                          "first unacknowledged byte when nothing was acknowledged for this long)",
                          check=positive)
    ecn: EcnConfig = field(EcnConfig, doc="ECN marking")
    pfc: PfcConfig = field(PfcConfig, doc="priority flow control")
    dcqcn: DcqcnConfig = field(DcqcnConfig, doc="DCQCN parameters")
    hpcc: HpccConfig = field(HpccConfig, doc="HPCC parameters")
    dctcp: DctcpConfig = field(DctcpConfig, doc="DCTCP parameters")
    timely: TimelyConfig = field(TimelyConfig, doc="TIMELY parameters")
    switch_packet_slots: Optional[int] = field(
        None, doc="packet descriptors per switch (a packet arriving when none is free is treated "
                  "as arriving at a full buffer)",
        default_doc="buffer / (payload + header) + 64 per port", check=positive)

    def _check(self, path: str) -> None:
        check_packet_bytes(self, path)
        if self.flowlet_gap_ns is not None and self.lb != "adaptive":
            raise ConfigError(f"{path}.flowlet_gap_ns", f"applies to network.lb: adaptive only (lb is {self.lb!r})",
                              self.flowlet_gap_ns)

    @property
    def resolved_transport(self) -> str:
        """The transport a null ``transport`` stands for: selective repeat where packets are routed one
        by one (they arrive out of order), go-back-N otherwise."""
        if self.transport is not None:
            return self.transport
        return "sr" if self.lb in PER_PACKET_LOAD_BALANCERS else "gbn"

    @property
    def resolved_window(self) -> bool:
        return self.window if self.window is not None else congestion_control(self.cc).windowed


def check_packet_bytes(net: NetworkConfig, path: str = "network") -> None:
    """A data packet (payload + header) must fit the engine's 16-bit byte count: checked when a
    configuration is built, and again by the engine for sections constructed in code."""
    if net.payload_bytes + net.header_bytes > MAX_PACKET_BYTES:
        raise ConfigError(f"{path}.payload_bytes", f"payload + header must be at most {MAX_PACKET_BYTES} bytes "
                          f"(header_bytes {net.header_bytes})", net.payload_bytes)
