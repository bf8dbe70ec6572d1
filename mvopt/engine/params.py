"""Resolution of an experiment's settings into the numbers the model uses.

Everything derived from the configuration (ECN thresholds per port, PFC headroom and shift,
buffer sizes, congestion-control constants, base RTTs, windows) is computed here once, in
Python, and used by every backend and by the reference simulator alike, so that they cannot
disagree about a default. Also the counter-based hash that stands for every random choice.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Mapping, Sequence

import numpy as np

from mvopt._cfg.algorithms import CONGESTION_CONTROLS, LOAD_BALANCERS, TRANSPORTS
from mvopt._cfg.network import NetworkConfig, check_packet_bytes
from mvopt.engine.tasks import FLOW, TaskGraph
from mvopt.errors import ConfigError

__all__ = ["Experiment", "ResolvedParams", "resolve", "ser_ps", "mix64", "mix64_array", "hash64", "hash_from", "hash_prefixes", "uniform01",
           "CC_NONE", "CC_DCQCN", "CC_HPCC", "CC_DCTCP", "CC_TIMELY", "CC_CODES", "LB_ECMP", "LB_SPRAY", "LB_ADAPTIVE",
           "TR_GBN", "TR_SR", "TAG_ECN", "TAG_ECMP", "TAG_SPRAY"]

PS_PER_S = 10**12
# the kernels' CC_* codes of the congestion-control algorithms (declared in mvopt/_cfg/algorithms.py)
CC_CODES = {c.name: c.code for c in CONGESTION_CONTROLS}
CC_NONE, CC_DCQCN, CC_HPCC, CC_DCTCP, CC_TIMELY = (CC_CODES[n] for n in ("none", "dcqcn", "hpcc", "dctcp", "timely"))
# the kernels' LB_* and TR_* codes: positions in mvopt/_cfg/algorithms.py
LB_ECMP, LB_SPRAY, LB_ADAPTIVE = (LOAD_BALANCERS.index(n) for n in ("ecmp", "spray", "adaptive"))
TR_GBN, TR_SR = (TRANSPORTS.index(n) for n in ("gbn", "sr"))
# Hash domain tags: each random choice draws from its own stream.
TAG_ECN, TAG_ECMP, TAG_SPRAY = 1, 2, 3
MASK64 = (1 << 64) - 1


def ser_ps(nbytes: int, rate_bps: int) -> int:
    """Serialization time in ps: ceil(bytes * 8e12 / rate) (exact integer arithmetic)."""
    return -(-(nbytes * 8 * PS_PER_S) // rate_bps)


def ser_ps_array(nbytes: int, rate_bps: np.ndarray) -> np.ndarray:
    """ser_ps for every rate of an int64 array (exact: bytes * 8e12 < 2**63 for packets of up to
    32,767 bytes, params checks them)."""
    bits_ps = nbytes * 8 * PS_PER_S
    if bits_ps >= 2**63:
        raise ValueError(f"ser_ps_array: {nbytes} bytes overflow int64 picosecond arithmetic")
    return -(np.int64(-bits_ps) // np.asarray(rate_bps, np.int64))


def mix64(z: int) -> int:
    """splitmix64 finaliser (same constants as the kernels' ``mv_mix64``)."""
    z = (z + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def hash64(seed: int, tag: int, a: int, b: int = 0, c: int = 0, d: int = 0) -> int:
    """Counter-based hash of (seed, tag, a, b, c, d): the only source of randomness."""
    h = mix64(int(seed) & MASK64)
    for x in (tag, a, b, c, d):
        h = mix64(h ^ (x & MASK64))
    return h


def mix64_array(z: np.ndarray) -> np.ndarray:
    """mix64 of every element of a uint64 array (wrapping arithmetic, as the kernels')."""
    with np.errstate(over="ignore"):
        z = z + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def hash_from(prefix: np.ndarray, b, c=0, d=0) -> np.ndarray:
    """hash64 from its state after (seed, tag, a) (`prefix`, uint64) with b, c, d: the kernels'
    mv_hash_from, element-wise."""
    h = mix64_array(prefix ^ np.asarray(b, np.int64).astype(np.uint64))
    h = mix64_array(h ^ np.asarray(c, np.int64).astype(np.uint64))
    return mix64_array(h ^ np.asarray(d, np.int64).astype(np.uint64))


def hash_prefixes(seed: int, tags: tuple[int, ...], a: np.ndarray) -> np.ndarray:
    """hash64's state after (seed, tag, a) for each tag and each a: an array [len(a), len(tags)]
    of uint64. hash64(seed, tag, a, b, c, d) continues from it with b, c, d (the kernels'
    mv_hash_from, hash_from here), so that a switch's hashes start from its row of node_hash
    instead of running the first three rounds per packet."""
    a = np.asarray(a, np.int64).astype(np.uint64)
    h0 = mix64_array(np.array([int(seed) & MASK64], np.uint64))   # (int: a NumPy seed would overflow)
    cols = [mix64_array(mix64_array(h0 ^ np.uint64(tag)) ^ a) for tag in tags]
    return np.stack(cols, axis=1) if cols else np.zeros((a.size, 0), np.uint64)


def uniform01(h: int) -> float:
    """A double in [0, 1) from the top 53 bits of a hash."""
    return (h >> 11) * (1.0 / (1 << 53))


@dataclass(frozen=True)
class Experiment:
    """One experiment as the engine takes it: a compiled topology, network settings, tasks."""

    topology: object            # mvopt.cluster.CompiledTopology
    network: NetworkConfig
    tasks: TaskGraph
    seed: int = 1
    time_limit_ps: int = 10 * 10**12
    name: str = "experiment"
    # Monitors (docs/engine.md, "Monitors"): off by default, and then they cost nothing.
    queue_monitor_ps: int = 0       # sample every port's data queue at every multiple of this (0 = off)
    link_monitor: bool = False      # also sample every port's transmitted bytes (needs queue_monitor_ps)
    monitor_max_samples: int = 1000  # samples stored per port and monitor; later ones are only counted
    # Explicit per-flow paths (docs/engine.md, "ECMP"): flow task id -> the switches (node ids) its
    # data passes, in order; its ACKs and NACKs pass ack_paths[task], by default the same switches
    # backwards. Flows without one hash (network.ecmp_hash).
    paths: Mapping[int, Sequence[int]] | None = None
    ack_paths: Mapping[int, Sequence[int]] | None = None

    @cached_property
    def params(self) -> "ResolvedParams":
        return resolve(self)


@dataclass(frozen=True)
class ResolvedParams:
    """Per-experiment numbers (per port, per switch, per flow) derived from the configuration."""

    window_ps: int
    cc: int
    lb: int                     # LB_*: how switches pick a data packet's next hop
    transport: int              # TR_*: go-back-N or selective repeat
    pfc: bool
    ecn: bool
    payload: int
    header: int
    ack_bytes: int
    pfc_frame_bytes: int
    min_wire_bytes: int         # the smallest packet of the experiment (ACK, PFC frame or a flow's last packet)
    nack_interval_ps: int
    rto_ps: int
    # per port
    port_kmin: np.ndarray       # int64 bytes
    port_kmax: np.ndarray       # int64 bytes
    port_pmax: np.ndarray       # float64
    port_headroom: np.ndarray   # int64 bytes (ingress headroom of the switch owning the port's peer side)
    port_shift: np.ndarray      # int32
    # per switch (index = node - n_host)
    sw_buffer: np.ndarray       # int64 bytes
    sw_reserve: int
    sw_slots: np.ndarray        # int64 packet descriptors
    resume_offset: int
    # per flow task (index = task id; zeros for delays)
    flow_npkt: np.ndarray       # int64
    flow_line_bps: np.ndarray   # int64
    flow_base_rtt_ps: np.ndarray  # int64
    flow_win_bytes: np.ndarray  # int64 (0 = no window)
    flow_standalone_ps: np.ndarray  # int64
    # congestion control constants (doubles, bits/s and ps)
    dcqcn_g: float
    dcqcn_alpha_ps: int
    dcqcn_dec_ps: int
    dcqcn_inc_ps: int
    dcqcn_f: int
    dcqcn_rai: float
    dcqcn_rhai: float
    dcqcn_first: float
    dcqcn_min: float
    dcqcn_clamp: bool
    hpcc_eta: float
    hpcc_max_stage: int
    hpcc_wai: float
    hpcc_min: float
    hpcc_int_multi: int         # INT quantised as the HPCC simulator's INT_MULTI (0: exact values)
    dctcp_g: float
    dctcp_rai: float
    dctcp_min: float
    timely_alpha: float
    timely_beta: float
    timely_delta: float
    timely_t_low_ps: int
    timely_t_high_ps: int
    timely_min_rtt_ps: int
    timely_min: float
    timely_hai_n: int
    flowlet_ps: int             # adaptive routing's flowlet gap (0: per packet)
    switch_ack_data: bool       # switches queue ACK/NACKs with data (network.switch_ack_queue 'data')
    pause_host_acks: bool       # a PAUSE stops a host's ACK/NACKs too (network.pfc.pause_host_acks)
    var_win: bool

    @property
    def lb_spray(self) -> bool:
        """Data packets are routed one by one (spraying or adaptive routing), so that they reorder."""
        return self.lb != LB_ECMP


def _ps(us: float) -> int:
    return int(round(us * 1e6))


def _path_stats(topo, src: int, dst: int, payload: int) -> tuple[int, int, int]:
    """(sum of propagation delays, sum of per-hop serialization of one payload, bottleneck rate)."""
    port = int(topo.node_port_offset[src])
    delay = ser = 0
    bottleneck = None
    hops = 0
    while True:
        rate = int(topo.port_rate_bps[port])
        delay += int(topo.port_delay_ps[port])
        ser += ser_ps(payload, rate)
        bottleneck = rate if bottleneck is None else min(bottleneck, rate)
        node = int(topo.port_peer_node[port])
        if node == dst:
            return delay, ser, bottleneck
        hops += 1
        if hops > topo.n_node:
            raise ConfigError("cluster", f"no route from host {src} to host {dst}", show_value=False)
        nh = topo.next_hop_ports(node, dst)
        if len(nh) == 0:
            raise ConfigError("cluster", f"no route from host {src} to host {dst}", show_value=False)
        port = int(nh[0])


def _largest_rtt_and_window(topo, payload: int, use_win: bool) -> tuple[int, int]:
    """The largest base RTT and the largest window (0 without windows) of any ordered pair of
    distinct hosts, each as resolve() derives a flow's: the HPCC simulator's maxRtt and maxBdp."""
    off = np.asarray(topo.node_port_offset, np.int64)
    rate = np.asarray(topo.port_rate_bps, np.int64)
    n_host = int(topo.n_host)
    rtt_max = win_max = 0
    for s in range(n_host):
        nic = int(rate[off[s]])
        for d in range(n_host):
            if d != s:
                pdelay, pser, _ = _path_stats(topo, s, d, payload)
                rtt = 2 * pdelay + pser
                rtt_max = max(rtt_max, rtt)
                win_max = max(win_max, rtt * nic // (8 * PS_PER_S) if use_win else 0)
    return rtt_max, win_max


def resolve(exp: Experiment) -> ResolvedParams:
    """Derive every per-port, per-switch and per-flow number of one experiment."""
    topo, net, tasks = exp.topology, exp.network, exp.tasks
    n_host = int(topo.n_host)
    tasks.validate(n_host)
    if exp.queue_monitor_ps < 0:
        raise ConfigError("simulation.queue_monitor_ns", "must be >= 0", exp.queue_monitor_ps / 1000)
    if exp.link_monitor and exp.queue_monitor_ps == 0:
        raise ConfigError("simulation.link_monitor", "needs simulation.queue_monitor_ns > 0 (the link monitor "
                          "samples at that period)", True)
    if exp.monitor_max_samples < 1:
        raise ConfigError("simulation.monitor_max_samples", "must be > 0", exp.monitor_max_samples)
    delays = np.asarray(topo.port_delay_ps, np.int64)
    if delays.size == 0 or delays.min() <= 0:
        raise ConfigError("cluster.link_delay_ns", "must be > 0 on every link (the engine's window "
                          "is the smallest link delay)", int(delays.min()) / 1000 if delays.size else 0)
    window = int(delays.min())
    # the packet record keeps wire bytes and a switch's ingress port index in 16 bits
    check_packet_bytes(net)
    if int(np.diff(np.asarray(topo.node_port_offset, np.int64)).max(initial=0)) > 32767:
        raise ConfigError("cluster", "a switch may have at most 32767 ports", show_value=False)
    rate = np.asarray(topo.port_rate_bps, np.int64)
    nic_bps = int(rate[np.asarray(topo.node_port_offset[:n_host], np.int64)].max())
    bw_gbps = rate / 1e9
    cc = CC_CODES[net.cc]
    # ECN thresholds (KB = 1000 B as in the reference) per port
    if cc == CC_DCTCP:
        kmin_d = kmax_d = 30 * bw_gbps / 10
        pmax_d = 1.0
    else:
        kmin_d, kmax_d, pmax_d = 100 * bw_gbps / 25, 400 * bw_gbps / 25, 0.2
    kmin = np.full(rate.shape, net.ecn.kmin_kb) if net.ecn.kmin_kb is not None else kmin_d
    kmax = np.full(rate.shape, net.ecn.kmax_kb) if net.ecn.kmax_kb is not None else kmax_d
    pmax = net.ecn.pmax if net.ecn.pmax is not None else pmax_d
    port_kmin = np.round(np.asarray(kmin, float) * 1000).astype(np.int64)
    port_kmax = np.round(np.asarray(kmax, float) * 1000).astype(np.int64)
    if (port_kmax < port_kmin).any():
        raise ConfigError("network.ecn.kmax_kb", "must be >= kmin_kb on every port", net.ecn.kmax_kb)
    port_pmax = np.full(rate.shape, float(pmax))
    # PFC: headroom = headroom_bdp x one-way BDP of the link (bytes); shift by speed over NIC rate
    headroom = np.floor(net.pfc.headroom_bdp * rate.astype(float) * delays.astype(float) / 8e12).astype(np.int64)
    if net.pfc.shift is not None:
        shift = np.full(rate.shape, net.pfc.shift, np.int32)
    else:
        doublings = np.floor(np.log2(np.maximum(rate, 1) / nic_bps) + 1e-9).astype(np.int32)
        shift = np.clip(3 - doublings, 0, 16).astype(np.int32)
    # switch buffers
    n_sw = int(topo.n_node) - n_host
    off = np.asarray(topo.node_port_offset, np.int64)
    sw_buffer = np.zeros(n_sw, np.int64)
    sw_slots = np.zeros(n_sw, np.int64)
    for s in range(n_sw):
        ports = slice(off[n_host + s], off[n_host + s + 1])
        fastest = float(rate[ports].max()) / 1e9 if off[n_host + s + 1] > off[n_host + s] else 100.0
        mb = net.buffer_mb if net.buffer_mb is not None else 16 * fastest / 50
        sw_buffer[s] = int(round(mb * 2**20))
        nports = int(off[n_host + s + 1] - off[n_host + s])
        sw_slots[s] = net.switch_packet_slots or (sw_buffer[s] // (net.payload_bytes + net.header_bytes) + 64 * nports)
    # flows
    n = tasks.n
    npkt = np.zeros(n, np.int64)
    line = np.zeros(n, np.int64)
    base_rtt = np.zeros(n, np.int64)
    win = np.zeros(n, np.int64)
    standalone = np.zeros(n, np.int64)
    payload, header = net.payload_bytes, net.header_bytes
    use_win = net.resolved_window
    fl = np.nonzero(tasks.kind == FLOW)[0]
    smallest_last = 1 << 30          # payload of the smallest last packet of a flow
    if fl.size:
        # per (src, dst) pair once (a training graph has few), in Python integers (no overflow):
        # path stats, line rate, base RTT, window
        src, dst = tasks.src[fl].astype(np.int64), tasks.dst[fl].astype(np.int64)
        pairs, inv = np.unique(src * n_host + dst, return_inverse=True)
        per_pair = []
        for key in pairs.tolist():
            s, d = divmod(key, n_host)
            pdelay, pser, bottleneck = _path_stats(topo, s, d, payload)
            rtt, nic = 2 * pdelay + pser, int(rate[off[s]])
            w = rtt * nic // (8 * PS_PER_S) if use_win else 0
            ppb = 8 * PS_PER_S // bottleneck if (8 * PS_PER_S) % bottleneck == 0 else 0
            per_pair.append((nic, rtt, w, bottleneck, ppb))
        nic_p, rtt_p, win_p, bott_p, ppb_p = (np.array(col, np.int64) for col in zip(*per_pair))
        size = tasks.size_bytes[fl].astype(np.int64)
        npkt[fl] = -(-size // payload)
        smallest_last = int(((size - 1) % payload + 1).min())
        line[fl], base_rtt[fl], win[fl] = nic_p[inv], rtt_p[inv], win_p[inv]
        total = size + npkt[fl] * header
        # standalone = base RTT + ceil(total * 8e12 / bottleneck): a multiplication where the rate
        # divides 8e12 (every common rate), else ser_ps in Python integers
        ppb = ppb_p[inv]
        ser = total * ppb
        for i in np.nonzero(ppb == 0)[0].tolist():
            ser[i] = ser_ps(int(total[i]), int(bott_p[inv[i]]))
        standalone[fl] = base_rtt[fl] + ser
        if net.global_window:       # after the standalone times, which stay the pair's own (HPCC)
            base_rtt[fl], win[fl] = _largest_rtt_and_window(topo, payload, use_win)
    if n and npkt.max() >= 2**31:      # packet indices are int32 (struct Pkt, the flow columns)
        t = int(npkt.argmax())
        raise ConfigError("network.payload_bytes", f"task {t} ({int(tasks.size_bytes[t])} B) would be "
                          f"{int(npkt[t])} packets, more than 2**31 - 1: use larger packets", payload)
    # the smallest packet a port can put on the wire (it sizes the wire rings): an ACK/NACK, a PFC
    # frame, or the last packet of the flow with the smallest remainder
    min_wire = min(net.ack_bytes, net.pfc.frame_bytes, header + smallest_last)
    _check_explicit_paths(exp)
    bw_nic = nic_bps / 1e9
    d = net.dcqcn
    return ResolvedParams(
        window_ps=window, cc=cc, lb=LOAD_BALANCERS.index(net.lb),
        transport=TRANSPORTS.index(net.resolved_transport), pfc=net.pfc.enabled, ecn=net.ecn.enabled,
        payload=payload, header=header, ack_bytes=net.ack_bytes, pfc_frame_bytes=net.pfc.frame_bytes,
        min_wire_bytes=min_wire,
        nack_interval_ps=_ps(net.nack_interval_us), rto_ps=_ps(net.rto_us),
        port_kmin=port_kmin, port_kmax=port_kmax, port_pmax=port_pmax, port_headroom=headroom,
        port_shift=shift, sw_buffer=sw_buffer, sw_reserve=net.pfc.reserve_bytes, sw_slots=sw_slots,
        resume_offset=net.pfc.resume_offset_bytes,
        flow_npkt=npkt, flow_line_bps=line, flow_base_rtt_ps=base_rtt, flow_win_bytes=win,
        flow_standalone_ps=standalone,
        dcqcn_g=float(d.resolved("g")), dcqcn_alpha_ps=_ps(d.resolved("alpha_interval_us")),
        dcqcn_dec_ps=_ps(d.resolved("decrease_interval_us")), dcqcn_inc_ps=_ps(d.resolved("rp_timer_us")),
        dcqcn_f=d.fast_recovery_steps,
        dcqcn_rai=(d.rate_ai_mbps if d.rate_ai_mbps is not None else 5 * bw_nic / 25) * 1e6,
        dcqcn_rhai=(d.rate_hai_mbps if d.rate_hai_mbps is not None else 50 * bw_nic / 25) * 1e6,
        dcqcn_first=d.rate_on_first_cnp, dcqcn_min=d.min_rate_mbps * 1e6, dcqcn_clamp=d.clamp_target_rate,
        hpcc_eta=net.hpcc.eta, hpcc_max_stage=net.hpcc.max_stage,
        hpcc_wai=(net.hpcc.w_ai_mbps if net.hpcc.w_ai_mbps is not None else 10 * bw_nic / 25) * 1e6,
        hpcc_min=net.hpcc.min_rate_mbps * 1e6, hpcc_int_multi=net.hpcc.int_multi or 0,
        dctcp_g=net.dctcp.g, dctcp_rai=net.dctcp.rate_ai_mbps * 1e6, dctcp_min=net.dctcp.min_rate_mbps * 1e6,
        timely_alpha=net.timely.alpha, timely_beta=net.timely.beta, timely_delta=net.timely.delta_mbps * 1e6,
        timely_t_low_ps=_ps(net.timely.t_low_us), timely_t_high_ps=_ps(net.timely.t_high_us),
        timely_min_rtt_ps=_ps(net.timely.min_rtt_us), timely_min=net.timely.min_rate_mbps * 1e6,
        timely_hai_n=net.timely.hai_after,
        flowlet_ps=_ps(net.flowlet_gap_ns / 1000) if net.flowlet_gap_ns is not None else 0,
        var_win=net.var_win, switch_ack_data=net.switch_ack_queue == "data",
        pause_host_acks=net.pfc.pause_host_acks,
    )


def _check_explicit_paths(exp: Experiment) -> None:
    """What the rest of the configuration asks of explicit paths (Experiment.paths): a mapping,
    ECMP, and every flow's paths under the HPCC simulator's hash. The paths themselves are
    checked against the topology where they become routes (routes.explicit_path_rows)."""
    net, tasks = exp.network, exp.tasks
    for name in ("paths", "ack_paths"):
        given = getattr(exp, name)
        if given is not None and not isinstance(given, Mapping):
            raise ConfigError(name, "a mapping from flow task id to the switch node ids of its path",
                              type(given).__name__)
    if not exp.paths:
        if exp.ack_paths:
            raise ConfigError("ack_paths", "ACK paths go with data paths (paths), which are empty", show_value=False)
        if net.ecmp_hash == "hpcc":
            raise ConfigError("network.ecmp_hash", "'hpcc' hashes the 5-tuples of HPCC flow files: give them to "
                              "mvopt simulate --hpcc-flows, or pass mvopt.io.hpcc_paths.hpcc_flow_paths's paths as "
                              "Experiment.paths and ack_paths; else 'mvopt'", net.ecmp_hash)
        return
    if net.lb != "ecmp":
        raise ConfigError("network.lb", "explicit per-flow paths send every packet of a flow one way: 'ecmp'", net.lb)
    if net.ecmp_hash == "hpcc":
        flows = set(np.flatnonzero(tasks.kind == FLOW).tolist())
        missing = sorted(flows - set(map(int, exp.paths)))
        missing_ack = sorted(flows - set(map(int, exp.ack_paths or {})))
        if missing or missing_ack:
            t = (missing or missing_ack)[0]
            raise ConfigError(f"{'paths' if missing else 'ack_paths'}[{t}]", "network.ecmp_hash 'hpcc' routes every "
                              "flow and its ACKs by the HPCC simulator's paths (mvopt.io.hpcc_paths.hpcc_flow_paths)",
                              "missing")
