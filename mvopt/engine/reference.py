"""The slow, sequential, obviously-correct reference of the network model (the tests' oracle).

It implements docs/engine.md literally, one experiment at a time, with a global heap of events
keyed ``(time, node, category, k1, k2)``:

* categories at one node and time, in order: packet arrivals (``k1`` = the receiving node's own
  port on that link), task events (``k1`` = task id; ``k2`` 0 = ready, 1 = delay finished, 2 = a
  remote completion's notification, which does nothing but is pending until then, as in the
  engine, where it holds idle skipping back to ``finish + W``), flow
  timers (``k1`` = flow id; ``k2`` = DCQCN alpha, decrease, increase, then RTO), transmissions
  (``k1`` = port id). Nodes interact only through packets that take at least one link delay, so
  this per-node order is the whole ordering contract.
* The heap is drained window by window exactly as the engine's iterations do: ``T = 0``; process
  every event in ``[T, T + W)``; stop when done (tasks finished, flows acknowledged), stuck or
  past the time limit; else ``T <- max(T + W, earliest pending event)``. Counters therefore
  include everything that happens in the window in which the experiment completes.

Points docs/engine.md leaves open, and how they are settled here (the kernels must agree):

* A port transmits at the earliest ``t >= free_at`` at which it has something to send, even
  when that something appeared at ``t`` through another port's transmission at ``t`` (a
  dequeue on port 5 queuing a RESUME on port 2 sends it at once).
* Host round robin: over the host's active flows in flow-id order, starting after the id of the
  last flow served.
* Windows with ``var_win``: ``win_eff = max(1, int(win * rate / line))`` (double arithmetic,
  left to right, truncated); a flow is window-bound when ``(snd_nxt - snd_una) * payload >=
  win_eff``.
* PFC frame slot: a port sends a frame whenever the pause state it wants its peer in differs
  from the last state it sent (a RESUME queued before a pending PAUSE left cancels both).
  PAUSE is only considered after an enqueue and RESUME only after a dequeue, as documented.
* NACKs, like ACKs, carry the CE echo and the INT of the packet that triggered them (as HPCC
  ns-3), and congestion control reacts to both. A NACK sets ``snd_nxt = a``, which equals
  ``snd_una`` since feedback of a flow always arrives in order (one ECMP path, FIFO queues).
* RTO (lossy mode, and with PFC when packets are routed one by one: reordering can leave a gap
  whose NACK the NACK rate limit suppresses): armed while ``snd_nxt > snd_una``,
  due ``rto`` after the last *progress*: an ACK that
  advanced ``snd_una``, an RTO firing, or a data send made while nothing was outstanding (so a
  flow that was idle, e.g. paused, does not time out at once when it sends again).
* ECN: a packet already CE is not counted again; ``ecn_marks`` counts packets newly marked.
  INT is appended only with HPCC. ``tx_bytes`` counts every packet dequeued from the port's
  queues (data and control, as ns-3), not PFC frames. An ACK/NACK in a switch's data queue
  (``switch_ack_data``) is neither marked nor stamped with INT and does not advance
  ``dequeues`` (the ECN hash's count of data packets).
* DCQCN as ns-3: the first CNP sets alpha = 1 and clears the alpha flag but keeps the decrease
  flag; the increase event uses the stage *before* incrementing it (``F`` = number of fast
  recovery steps); timers tie-break alpha < decrease < increase instead of ns-3's +1 ns.
* HPCC: ``U`` starts at 1 (ns-3). Hop ``i`` is used when the ACK and the stored record both
  have it and ``tau = ts - ts_prev > 0``; ``txRate = dB * 8.0 / (tau * 1e-12)``, ``u =
  txRate / B + min(q, q_prev) * 8.0 / (B * (T * 1e-12))``; when no hop is used the rate is
  left alone (a committing ACK still moves ``last_update_seq``); with ``hpcc_int_multi`` the
  deltas come from the HPCC simulator's counters (``int_hop_delta``). The first feedback records the
  hops and sets ``last_update_seq = snd_nxt``. A rate change moves ``next_tx`` by
  ``ser(b, floor(new)) - ser(b, floor(old))``, ``b`` the wire bytes of the flow's last data
  packet (ns-3 ``ChangeRate``; DCQCN and DCTCP leave ``next_tx`` alone, as ns-3 does).
* Counters: ACK/NACK/PFC count in ``control_packets_sent`` when the originator puts them on
  the wire; ``nacks_sent`` when the receiver generates one; ``packet_hops`` at every
  transmission start. Switch packet slots are shared by data and control packets.
* Monitors (docs/engine.md): sample ``k`` at ``k * I`` is recorded before the first event at or
  after that time, over every port at once (nodes are independent, so this equals each node
  recording its own), and at each window end for every sample due by ``T + W``; the result
  keeps those up to ``end_ps`` (``results.monitor_fields``).
* Selective repeat keeps, per flow, the sets the kernels keep as bit rings (received beyond
  ``expected``; selectively acknowledged beyond ``snd_una``) as Python sets; the window of
  ``SR_WINDOW`` packets bounds them alike. ``snd_nxt`` is the next new packet (so
  ``max_sent == snd_nxt``), ``lost_hi`` and ``rtx_nxt`` as docs/engine.md defines them.
* Adaptive routing compares the bytes in the candidates' data queues at the arrival, after every
  event of the switch at an earlier time and before its transmissions at the same time.
* Adaptive routing per flowlet: a switch's table has ``FLOWLET_ENTRIES`` entries, a flow's the
  one its id names modulo that; a data packet routed at ``t`` to a switch
  with more than one next hop takes the entry's port when the entry was written less than the
  gap before ``t`` and its port is a next hop, else the adaptive choice; either way the entry
  becomes ``(t, port)``.
* A link going down at ``at``: a packet whose arrival over it (its last bit at the far end) is
  at or after ``at`` is lost (a PAUSE too; a RESUME still lifts the pause), and a packet routed
  at or after ``at`` takes the routes computed without it; the ports keep sending what they
  queued, which is lost.
* Stuck: nothing pending except DCQCN timers (they cannot unblock anything). ``end_ps`` is the
  completion time (last task finish or last ACK) when done, the last event processed when
  stuck, ``time_limit_ps`` on timeout (windows starting at or before the limit are processed).
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right, insort
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Optional

import numpy as np

from mvopt.engine.params import (CC_DCQCN, CC_DCTCP, CC_HPCC, CC_TIMELY, LB_ADAPTIVE, LB_ECMP, TAG_ECMP, TAG_ECN, TAG_SPRAY,
                                 TR_SR, Experiment, ResolvedParams, hash64, ser_ps, uniform01)
from mvopt.engine.results import COUNTERS, ExperimentResult, monitor_fields
from mvopt.engine.schema import FLOWLET_ENTRIES, SR_DUPTHRESH, SR_WINDOW
from mvopt.engine.tasks import FLOW

__all__ = ["simulate_reference", "simulate_reference_many"]

# Event categories: their order at one node and one time.
ARRIVAL, TASK, TIMER, TRANSMIT = 0, 1, 2, 3
TASK_READY, TASK_DELAY_DONE, TASK_NOTIFY = 0, 1, 2
# Flow timers, in their order within one flow at one time.
T_ALPHA, T_DECREASE, T_INCREASE, T_RTO = 0, 1, 2, 3
# Packet kinds.
DATA, ACK, NACK, PFC = "data", "ack", "nack", "pfc"
MAX_INT_HOPS = 5


@dataclass(frozen=True)
class IntHop:
    """One switch's INT record (HPCC): dequeue time, port tx bytes before, queue after, rate. With
    ``hpcc_int_multi`` m > 0, the HPCC simulator's counters instead (``int_hop``)."""

    ts_ps: int
    tx_bytes: int
    qlen_bytes: int
    rate_bps: int


def int_hop(t: int, tx: int, q: int, rate: int, m: int) -> IntHop:
    """The INT record of a dequeue at ``t``: exact (m = 0), or as the HPCC simulator's switches
    write it with INT_MULTI m: ns, 128 m B and 80 m B units in 24, 20 and 17-bit counters."""
    if m > 0:
        t, tx, q = (t // 1000) % (1 << 24), (tx // (128 * m)) % (1 << 20), (q // (80 * m)) % (1 << 17)
    return IntHop(t, tx, q, rate)


def int_hop_delta(new: IntHop, old: IntHop, m: int) -> tuple[int, int, int]:
    """(time in ps, tx bytes, lesser queue bytes) of ``new`` against ``old``: with m > 0 read from
    the counters with wrap-around (the HPCC simulator's GetTimeDelta, GetBytesDelta)."""
    tau, dtx, q = new.ts_ps - old.ts_ps, new.tx_bytes - old.tx_bytes, min(new.qlen_bytes, old.qlen_bytes)
    if m > 0:
        tau, dtx, q = tau % (1 << 24) * 1000, dtx % (1 << 20) * 128 * m, q * 80 * m
    return tau, dtx, q


@dataclass
class Packet:
    """A packet on a wire or in a queue. ``dst`` is the host it travels to."""

    kind: str
    wire_bytes: int
    flow: int = -1
    seq: int = 0                 # data: packet index; ACK/NACK: the cumulative value a
    payload: int = 0
    dst: int = -1
    sends: int = 0               # data: sends of its flow before this one (spraying)
    sacked: int = 0              # selective repeat's ACK: the data packet it acknowledges
    ce: bool = False             # data: congestion experienced; ACK/NACK: the echo
    hops: tuple[IntHop, ...] = ()
    pause: bool = False          # PFC: PAUSE (True) or RESUME (False)
    ingress: int = -1            # switch port it arrived on (MMU accounting)


class Slot:
    """A re-armable scheduled action (port wake-up, flow timer) with at most one live event.

    ``live`` slots count as pending work for stuck detection; DCQCN timers do not.
    """

    __slots__ = ("due", "gen", "live")

    def __init__(self, live: bool = True) -> None:
        self.due: Optional[int] = None
        self.gen = 0
        self.live = live


# ------------------------------------------------------------------------------------ entities


class Port:
    """One direction of a link, owned by the sending node."""

    def __init__(self, pid: int, topo: Any) -> None:
        self.id = pid
        self.node = int(topo.port_node[pid])
        self.peer_node = int(topo.port_peer_node[pid])
        self.peer_port = int(topo.port_peer_port[pid])
        self.rate_bps = int(topo.port_rate_bps[pid])
        self.delay_ps = int(topo.port_delay_ps[pid])
        self.control: deque[Packet] = deque()
        self.control_bytes = 0
        self.data: deque[Packet] = deque()        # switches only
        self.data_bytes = 0
        self.max_data_bytes = 0
        self.paused = False          # our data class is paused by the peer
        self.pfc_want = False        # we want the peer paused (switch ingress side)
        self.pfc_sent = False        # the state our last PFC frame told the peer
        self.free_at = 0
        self.wake = Slot()
        self.dequeues = 0            # data packets dequeued so far (ECN hash counter)
        self.tx_bytes = 0
        self.wire_bytes = 0          # every byte put on the wire (incl. PFC frames)

    @property
    def pfc_pending(self) -> bool:
        return self.pfc_want != self.pfc_sent

    def push_data(self, pkt: Packet) -> None:
        self.data.append(pkt)
        self.data_bytes += pkt.wire_bytes
        self.max_data_bytes = max(self.max_data_bytes, self.data_bytes)

    def pop_data(self) -> Packet:
        pkt = self.data.popleft()
        self.data_bytes -= pkt.wire_bytes
        return pkt

    def push_control(self, pkt: Packet) -> None:
        self.control.append(pkt)
        self.control_bytes += pkt.wire_bytes

    def pop_control(self) -> Packet:
        pkt = self.control.popleft()
        self.control_bytes -= pkt.wire_bytes
        return pkt


@dataclass
class Ingress:
    """MMU counters of one switch ingress port (data class)."""

    headroom: int
    shift: int
    bytes: int = 0
    hdrm: int = 0


class SwitchState:
    """A switch: its ports and the shared-buffer MMU (HPCC ``switch-mmu.cc``)."""

    def __init__(self, node: int, ports: list[Port], p: ResolvedParams, n_host: int) -> None:
        s = node - n_host
        self.node = node
        self.ports = ports
        self.buffer = int(p.sw_buffer[s])
        self.slots = int(p.sw_slots[s])
        self.reserve = p.sw_reserve
        self.resume_offset = p.resume_offset
        # Ingress q (our port on the link) receives what the peer's port peer(q) sends.
        self.ingress = {q.id: Ingress(headroom=int(p.port_headroom[q.peer_port]), shift=int(p.port_shift[q.id]))
                        for q in ports}
        self.fixed = sum(i.headroom for i in self.ingress.values()) + self.reserve * len(ports)
        self.shared_used = 0
        self.data_bytes = 0          # all data queues of the switch
        self.slots_used = 0

    def shared_of(self, i: int) -> int:
        return max(0, self.ingress[i].bytes - self.reserve)

    def threshold(self, i: int) -> int:
        return (self.buffer - self.fixed - self.shared_used) >> self.ingress[i].shift

    def admits(self, i: int, b: int, pfc: bool) -> bool:
        """MMU admission of a data packet of ``b`` bytes arriving on ingress ``i``."""
        if pfc:
            ing = self.ingress[i]
            return not (b + ing.hdrm > ing.headroom and b + self.shared_of(i) > self.threshold(i))
        return self.data_bytes <= self.buffer - b

    def enqueue(self, i: int, b: int) -> None:
        ing = self.ingress[i]
        new = ing.bytes + b
        if new <= self.reserve:
            ing.bytes += b
        elif new - self.reserve > self.threshold(i):
            ing.hdrm += b
        else:
            ing.bytes += b
            self.shared_used += min(b, new - self.reserve)
        self.data_bytes += b

    def dequeue(self, i: int, b: int) -> None:
        ing = self.ingress[i]
        from_hdrm = min(ing.hdrm, b)
        from_shared = min(b - from_hdrm, max(0, ing.bytes - self.reserve))
        ing.hdrm -= from_hdrm
        ing.bytes -= b - from_hdrm
        self.shared_used -= from_shared
        self.data_bytes -= b

    def should_pause(self, i: int) -> bool:
        return self.ingress[i].hdrm > 0 or self.shared_of(i) >= self.threshold(i)

    def may_resume(self, i: int) -> bool:
        shared = self.shared_of(i)
        return self.ingress[i].hdrm == 0 and (shared == 0 or shared + self.resume_offset <= self.threshold(i))


class FlowReceiver:
    """Receiver side of one flow at its dst host."""

    def __init__(self) -> None:
        self.expected = 0
        self.nack_timer = 0
        self.last_nack = -1
        self.received: set[int] = set()   # selective repeat: packets received beyond `expected`


class FlowSender:
    """Sender side of one flow at its src host (created when the flow becomes active)."""

    def __init__(self, fid: int, src: int, dst: int, size: int, start: int, p: ResolvedParams) -> None:
        self.id = fid
        self.src = src
        self.dst = dst
        self.size = size
        self.n = int(p.flow_npkt[fid])
        self.line = int(p.flow_line_bps[fid])
        self.win = int(p.flow_win_bytes[fid])
        if self.win < 0:
            raise ValueError(f"flow {fid}: negative window {self.win} B from resolve() (int64 overflow of "
                             "base_rtt * line?)")
        self.base_rtt = int(p.flow_base_rtt_ps[fid])
        self.payload = p.payload
        self.var_win = p.var_win
        self.start = start
        self.rate = float(self.line)
        self.snd_nxt = 0
        self.snd_una = 0
        self.next_tx = start
        self.progress = start
        self.max_sent = 0            # highest seq sent + 1 (retransmission detection)
        self.last_bytes = 0          # wire bytes of the last data packet sent (HPCC rate changes)
        self.sends = 0
        self.done_at = -1
        self.sr = p.transport == TR_SR
        self.sacked: set[int] = set()     # selective repeat: acknowledged beyond snd_una
        self.lost_hi = 0                  # un-acknowledged packets below it are presumed lost
        self.rtx_nxt = 0                  # the next one to retransmit if below min(lost_hi, snd_nxt)
        self.rto = Slot()
        self.cc: CongestionControl = CongestionControl()
        self.cc_timers: dict[int, Slot] = {}

    @property
    def outstanding(self) -> bool:
        return self.snd_nxt > self.snd_una

    def window_bound(self) -> bool:
        if self.win == 0:
            return False
        win = max(1, int(self.win * self.rate / self.line)) if self.var_win else self.win
        return (self.snd_nxt - self.snd_una) * self.payload >= win

    def can_send(self) -> bool:
        """Has a hole to retransmit (selective repeat), or unsent packets and room in its window
        (pacing aside)."""
        if self.done_at >= 0:
            return False
        if self.sr:
            if self.retx_seq() is not None:
                return True
            if self.snd_nxt - self.snd_una >= SR_WINDOW:
                return False
        return self.snd_nxt < self.n and not self.window_bound()

    def retx_seq(self) -> Optional[int]:
        """Selective repeat: the hole to retransmit next (None: none)."""
        return self.rtx_nxt if self.rtx_nxt < min(self.lost_hi, self.snd_nxt) else None

    def settle(self) -> None:
        """Selective repeat: move rtx_nxt to at least snd_una and past acknowledged packets."""
        r = max(self.rtx_nxt, self.snd_una)
        while r < min(self.lost_hi, self.snd_nxt) and r in self.sacked:
            r += 1
        self.rtx_nxt = r

    def packet_payload(self, seq: int) -> int:
        return min(self.payload, self.size - seq * self.payload)


class HostState:
    """A host: its NIC port, active flows (by id) for round robin, and flow receivers."""

    def __init__(self, node: int, port: Port) -> None:
        self.node = node
        self.port = port
        self.active: list[FlowSender] = []          # sorted by flow id
        self.last_served = -1
        self.receivers: dict[int, FlowReceiver] = {}

    def activate(self, flow: FlowSender) -> None:
        insort(self.active, flow, key=lambda f: f.id)

    def deactivate(self, flow: FlowSender) -> None:
        self.active.remove(flow)

    def next_flow(self, t: int) -> Optional[FlowSender]:
        """The next eligible flow at ``t`` in round-robin order after the last one served."""
        ids = [f.id for f in self.active]
        first = bisect_right(ids, self.last_served)
        for k in range(len(self.active)):
            flow = self.active[(first + k) % len(self.active)]
            if flow.can_send() and flow.next_tx <= t:
                return flow
        return None

    def earliest_data(self) -> Optional[int]:
        """When the earliest flow that can send is allowed to by its pacing (None: no flow can)."""
        times = [f.next_tx for f in self.active if f.can_send()]
        return min(times) if times else None


# ------------------------------------------------------------------------------------ congestion control


class CongestionControl:
    """``none``: the rate stays at line rate. Subclasses react to feedback and timers."""

    def on_feedback(self, flow: FlowSender, fb: Packet, now: int) -> None:
        """React to an ACK/NACK (after snd_una/snd_nxt were updated)."""

    def on_send(self, flow: FlowSender, seq: int, fresh: bool, now: int) -> None:
        """A data packet ``seq`` leaves (``fresh``: for the first time)."""

    def on_timer(self, flow: FlowSender, kind: int, now: int) -> None:
        raise AssertionError("no timers")


class Dcqcn(CongestionControl):
    """DCQCN, Mellanox model (network-model.md; ns-3 ``rdma-hw.cc`` *Mlx functions)."""

    def __init__(self, p: ResolvedParams, line: float, arm: Callable[[int, Optional[int]], None]) -> None:
        self.p = p
        self.line = line
        self.arm = arm
        self.target = line
        self.alpha = 1.0
        self.stage = 0
        self.started = False
        self.cnp_alpha = False
        self.cnp_decrease = False

    def on_feedback(self, flow: FlowSender, fb: Packet, now: int) -> None:
        if not fb.ce:
            return
        self.cnp_alpha = self.cnp_decrease = True
        if not self.started:
            self.started = True
            self.alpha = 1.0
            self.cnp_alpha = False
            flow.rate = self.p.dcqcn_first * flow.rate
            self.target = flow.rate
            self.arm(T_ALPHA, now + self.p.dcqcn_alpha_ps)
            self.arm(T_DECREASE, now + self.p.dcqcn_dec_ps)

    def on_timer(self, flow: FlowSender, kind: int, now: int) -> None:
        p = self.p
        if kind == T_ALPHA:
            self.alpha = (1 - p.dcqcn_g) * self.alpha + p.dcqcn_g if self.cnp_alpha else (1 - p.dcqcn_g) * self.alpha
            self.cnp_alpha = False
            self.arm(T_ALPHA, now + p.dcqcn_alpha_ps)
        elif kind == T_DECREASE:
            if self.cnp_decrease:
                if p.dcqcn_clamp or self.stage != 0:   # ns-3's EcnClampTgtRate
                    self.target = flow.rate
                flow.rate = max(p.dcqcn_min, flow.rate * (1 - self.alpha / 2))
                self.stage = 0
                self.cnp_decrease = False
                self.arm(T_INCREASE, now + p.dcqcn_inc_ps)
            self.arm(T_DECREASE, now + p.dcqcn_dec_ps)
        else:
            if self.stage == p.dcqcn_f:
                self.target = min(self.line, self.target + p.dcqcn_rai)
            elif self.stage > p.dcqcn_f:
                self.target = min(self.line, self.target + p.dcqcn_rhai)
            flow.rate = (flow.rate + self.target) / 2
            self.stage += 1
            self.arm(T_INCREASE, now + p.dcqcn_inc_ps)


class Hpcc(CongestionControl):
    """HPCC with INT (network-model.md; ns-3 ``UpdateRateHp``, single aggregate rate).

    A rate change re-derives the pending pacing gap of the flow's last packet at the new rate,
    as ns-3's ``ChangeRate`` moves ``m_nextAvail``: next_tx += ser(b, new) - ser(b, old).
    """

    def __init__(self, p: ResolvedParams, line: float) -> None:
        self.p = p
        self.line = line
        self.rc = line
        self.stage = 0
        self.u = 1.0
        self.last_update_seq = 0
        self.hops: Optional[tuple[IntHop, ...]] = None

    def on_feedback(self, flow: FlowSender, fb: Packet, now: int) -> None:
        if self.hops is None:                      # the first feedback only records the hops
            self.hops = fb.hops
            self.last_update_seq = flow.snd_nxt
            return
        commit = fb.seq > self.last_update_seq
        update = self._utilisation(fb.hops, float(flow.base_rtt))
        if update is not None:
            self.u = update
            k = self.u / self.p.hpcc_eta
            if k >= 1 or self.stage >= self.p.hpcc_max_stage:
                rate = (self.rc / k if k > 0 else math.inf) + self.p.hpcc_wai
                stage = 0
            else:
                rate = self.rc + self.p.hpcc_wai
                stage = self.stage + 1
            rate = min(self.line, max(self.p.hpcc_min, rate))
            b = flow.last_bytes
            flow.next_tx += ser_ps(b, math.floor(rate)) - ser_ps(b, math.floor(flow.rate))
            flow.rate = rate
            if commit:
                self.rc, self.stage = rate, stage
        self.hops = fb.hops
        if commit:
            self.last_update_seq = max(self.last_update_seq, flow.snd_nxt)

    def _utilisation(self, hops: tuple[IntHop, ...], T: float) -> Optional[float]:
        """The new EWMA utilisation U from the hops of one ACK, or None if no hop is usable."""
        assert self.hops is not None
        best, dt = 0.0, 0
        used = False
        for new, old in zip(hops, self.hops):
            tau, dtx, q = int_hop_delta(new, old, self.p.hpcc_int_multi)
            if tau <= 0:
                continue
            used = True
            rate = float(new.rate_bps)
            tx_rate = float(dtx) * 8.0 / (float(tau) * 1e-12)
            u = tx_rate / rate + float(q) * 8.0 / (rate * (T * 1e-12))
            if u > best:
                best, dt = u, tau
        if not used:
            return None
        dt = min(dt, int(T))
        return (self.u * (T - float(dt)) + best * float(dt)) / T


class Dctcp(CongestionControl):
    """Rate-based DCTCP (ns-3 ``HandleAckDctcp``, in packets)."""

    def __init__(self, p: ResolvedParams, line: float) -> None:
        self.p = p
        self.line = line
        self.alpha = 1.0
        self.ecn_count = 0
        self.last_update_seq = 0
        self.batch = 0
        self.cwr = False
        self.high_seq = 0

    def on_feedback(self, flow: FlowSender, fb: Packet, now: int) -> None:
        p, a = self.p, fb.seq
        self.ecn_count += fb.ce
        new_batch = a > self.last_update_seq
        if new_batch:
            if self.last_update_seq == 0:
                self.batch = flow.snd_nxt + 1
            else:
                frac = min(1.0, float(self.ecn_count) / float(self.batch))
                self.alpha = (1 - p.dctcp_g) * self.alpha + p.dctcp_g * frac
                self.ecn_count = 0
                self.batch = flow.snd_nxt - a + 1
            self.last_update_seq = flow.snd_nxt
        if self.cwr and a > self.high_seq:
            self.cwr = False
        if fb.ce and not self.cwr:
            self.cwr = True
            self.high_seq = flow.snd_nxt
            flow.rate = max(p.dctcp_min, flow.rate * (1 - self.alpha / 2))
        if not self.cwr and new_batch:
            flow.rate = min(self.line, flow.rate + p.dctcp_rai)


class Timely(CongestionControl):
    """TIMELY (Mittal et al., SIGCOMM'15, Algorithm 1) on one timed packet per flow at a time
    (docs/engine.md, "Congestion control")."""

    def __init__(self, p: ResolvedParams, line: float) -> None:
        self.p = p
        self.line = line
        self.timed = -1          # the timed data packet (-1: none)
        self.sent_at = 0
        self.prev_rtt: Optional[float] = None
        self.rtt_diff = 0.0
        self.calm = 0            # consecutive samples with a gradient <= 0

    def on_send(self, flow: FlowSender, seq: int, fresh: bool, now: int) -> None:
        if seq == self.timed:    # retransmitted: whose ACK it would be is ambiguous (Karn)
            self.timed = -1
        if self.timed < 0 and fresh:
            self.timed, self.sent_at = seq, now

    def on_feedback(self, flow: FlowSender, fb: Packet, now: int) -> None:
        sacked = fb.sacked if flow.sr else -1
        if self.timed < 0 or (fb.seq <= self.timed and sacked != self.timed):
            return
        self.timed = -1
        self.update(flow, float(now - self.sent_at))

    def update(self, flow: FlowSender, rtt: float) -> None:
        """One RTT sample (ps); the first only sets the previous RTT."""
        p = self.p
        if self.prev_rtt is None:
            self.prev_rtt = rtt
            return
        self.rtt_diff = (1.0 - p.timely_alpha) * self.rtt_diff + p.timely_alpha * (rtt - self.prev_rtt)
        self.prev_rtt = rtt
        gradient = self.rtt_diff / float(p.timely_min_rtt_ps)
        self.calm = self.calm + 1 if gradient <= 0.0 else 0
        t_high, r = float(p.timely_t_high_ps), flow.rate
        if rtt < float(p.timely_t_low_ps):
            r = r + p.timely_delta
        elif rtt > t_high:
            r = r * (1.0 - p.timely_beta * (1.0 - t_high / rtt))
        elif gradient <= 0.0:
            n = p.timely_hai_n
            r = r + float(n if self.calm >= n else 1) * p.timely_delta
        else:
            r = r * (1.0 - p.timely_beta * gradient)
        flow.rate = min(self.line, max(p.timely_min, r))


# ------------------------------------------------------------------------------------ the simulator


def _pinned_routes(exp: Experiment) -> dict[tuple[int, bool], dict[int, int]]:
    """Explicit paths (Experiment.paths, ack_paths) as (flow task, data way) -> {switch: egress
    port}: a path passes each switch once, so the switch alone says where the packet goes."""
    from mvopt.engine.routes import explicit_path_rows, pinned_ports

    explicit_path_rows(exp)     # the engine's checks: the same inputs refused
    out: dict[tuple[int, bool], dict[int, int]] = {}
    acks = exp.ack_paths or {}
    for t, data in (exp.paths or {}).items():
        t, src, dst = int(t), int(exp.tasks.src[t]), int(exp.tasks.dst[t])
        back = acks.get(t, list(data)[::-1])
        for is_data, a, b, sw in ((True, src, dst, data), (False, dst, src, back)):
            ports = pinned_ports(exp.topology, a, b, sw, "paths")
            out[t, is_data] = {int(v): p for v, p in zip(sw, ports)}
    return out


class ReferenceSimulator:
    """One experiment, simulated event by event. Use :func:`simulate_reference`."""

    def __init__(self, exp: Experiment) -> None:
        topo, tasks = exp.topology, exp.tasks
        tasks.validate(int(topo.n_host))
        self.exp = exp
        self.p = p = exp.params
        self.topo = topo
        self.tasks = tasks
        self.seed = exp.seed
        self.n_host = int(topo.n_host)
        self.W = p.window_ps
        self.ports = [Port(i, topo) for i in range(len(topo.port_node))]
        off = [int(x) for x in topo.node_port_offset]
        self.node_ports = [self.ports[off[v]:off[v + 1]] for v in range(int(topo.n_node))]
        self.hosts = [HostState(h, self.node_ports[h][0]) for h in range(self.n_host)]
        self.switches = {v: SwitchState(v, self.node_ports[v], p, self.n_host)
                         for v in range(self.n_host, int(topo.n_node))}
        self.counters = dict.fromkeys(COUNTERS, 0)
        self.out_of_order_bytes = 0      # payload of out_of_order_packets (conservation checks)
        self.flows: dict[int, FlowSender] = {}
        self.pinned = _pinned_routes(exp)
        # links going down: (time, port, peer port) by time, and the routes once each is down
        from mvopt.engine.routes import down_epochs, links_down
        self.down = list(links_down(topo))
        self.down_routes = [topo, *down_epochs(topo)]
        # adaptive routing per flowlet: per switch, entry -> (time of its last packet, egress port)
        self.flowlets: dict[tuple[int, int], tuple[int, int]] = {}
        # tasks
        n = tasks.n
        self.task_start = np.full(n, -1, np.int64)
        self.task_finish = np.full(n, -1, np.int64)
        self.preds_left = np.diff(tasks.pred_offset).astype(np.int64)
        self.ready_bound = tasks.start_ps.astype(np.int64).copy()
        self.successors: list[list[int]] = [[] for _ in range(n)]
        for t in range(n):
            for q in tasks.preds_of(t):
                self.successors[int(q)].append(t)
        self.tasks_left = n
        self.flows_unacked = int((tasks.kind == FLOW).sum())
        # event heap
        self.heap: list[tuple] = []
        self.seq = 0
        self.live = 0
        self.now = 0
        self.last_event = 0
        # monitors: sample k at k * interval, recorded before the first event at or after it
        self.mon_ps = int(exp.queue_monitor_ps)
        self.mon_cap = int(exp.monitor_max_samples)
        self.mon_next: Optional[int] = 0 if self.mon_ps > 0 else None
        self.queue_samples: list[list[int]] = []        # per sample: every port's data bytes
        self.link_samples: list[list[int]] = []         # per sample: every port's wire bytes

    # -------------------------------------------------------------- monitors

    def _sample_until(self, t: int) -> None:
        """Record every sample due at or before ``t``: the state after every event before it."""
        while self.mon_next is not None and self.mon_next <= t:
            self.queue_samples.append([p.data_bytes for p in self.ports])
            if self.exp.link_monitor:
                self.link_samples.append([p.wire_bytes for p in self.ports])
            self.mon_next = self.mon_next + self.mon_ps if len(self.queue_samples) < self.mon_cap else None

    # -------------------------------------------------------------- scheduling

    def push(self, time: int, node: int, cat: int, k1: int, k2: int, action: Callable[..., None],
             *args: Any, slot: Optional[Slot] = None) -> None:
        """Schedule ``action(*args)`` at ``time`` on ``node``; a slot event is void once re-armed."""
        gen = slot.gen if slot is not None else 0
        heapq.heappush(self.heap, (time, node, cat, k1, k2, self.seq, slot, gen, action, args))
        self.seq += 1
        if slot is None or slot.live:
            self.live += 1

    def arm(self, slot: Slot, due: Optional[int], node: int, cat: int, k1: int, k2: int,
            action: Callable[..., None], *args: Any) -> None:
        """(Re)schedule the slot's single event at ``due`` (None: cancel)."""
        if due == slot.due:
            return
        if slot.due is not None:
            slot.gen += 1
            if slot.live:
                self.live -= 1
        slot.due = due
        if due is not None:
            self.push(due, node, cat, k1, k2, action, *args, slot=slot)

    def _is_stale(self, entry: tuple) -> bool:
        slot, gen = entry[6], entry[7]
        return slot is not None and slot.gen != gen

    def _pop_and_run(self) -> None:
        entry = heapq.heappop(self.heap)
        if self._is_stale(entry):
            return
        time, node, slot, action, args = entry[0], entry[1], entry[6], entry[8], entry[9]
        if slot is not None:
            slot.due = None
        if slot is None or slot.live:
            self.live -= 1
        self.now = time
        if action is not self._notified:      # a notification is no event of its node (stuck: end_ps)
            self.last_event = time
        action(*args)
        self._refresh_ports(node)

    def _next_event_time(self) -> Optional[int]:
        while self.heap and self._is_stale(self.heap[0]):
            heapq.heappop(self.heap)
        return self.heap[0][0] if self.heap else None

    # -------------------------------------------------------------- the run

    def run(self) -> ExperimentResult:
        for t in range(self.tasks.n):
            if self.preds_left[t] == 0:
                self._schedule_ready(t)
        T, windows, status = 0, 0, "done"
        while True:
            windows += 1
            end = T + self.W
            while self.heap and self.heap[0][0] < end:
                self._sample_until(self.heap[0][0])
                self._pop_and_run()
            self._sample_until(end)
            if self.tasks_left == 0 and self.flows_unacked == 0:
                status = "done"
                break
            nxt = self._next_event_time()
            if self.live == 0 or nxt is None:
                status = "stuck"
                break
            T = max(end, nxt)
            if T > self.exp.time_limit_ps:
                status = "timeout"
                break
        return self._result(status, windows)

    # -------------------------------------------------------------- tasks

    def _schedule_ready(self, t: int) -> None:
        node = int(self.tasks.start_node[t])
        self.push(int(self.ready_bound[t]), node, TASK, t, TASK_READY, self._task_ready, t)

    def _task_ready(self, t: int) -> None:
        self.task_start[t] = self.now
        host = int(self.tasks.src[t])
        if self.tasks.kind[t] == FLOW:
            flow = FlowSender(t, host, int(self.tasks.dst[t]), int(self.tasks.size_bytes[t]), self.now, self.p)
            flow.cc = self._make_cc(flow)
            self.flows[t] = flow
            self.hosts[host].activate(flow)
        else:
            self.push(self.now + int(self.tasks.duration_ps[t]), host, TASK, t, TASK_DELAY_DONE, self._task_finished, t)

    def _task_finished(self, t: int) -> None:
        """Task ``t`` finishes now on its finish node; notify successors (local 0, remote W)."""
        self.task_finish[t] = self.now
        self.tasks_left -= 1
        where = int(self.tasks.finish_node[t])
        remote = False
        for s in self.successors[t]:
            notify = 0 if int(self.tasks.start_node[s]) == where else self.W
            remote |= notify > 0
            self.ready_bound[s] = max(self.ready_bound[s], self.now + notify)
            self.preds_left[s] -= 1
            if self.preds_left[s] == 0:
                self._schedule_ready(s)
        if remote:   # the notification is pending until then, whether or not a successor gets ready
            self.push(self.now + self.W, where, TASK, t, TASK_NOTIFY, self._notified)

    def _notified(self) -> None:
        """A remote completion reaches its successors' hosts (nothing to do: their ready events
        are scheduled once every predecessor finished)."""

    # -------------------------------------------------------------- congestion control and timers

    def _make_cc(self, flow: FlowSender) -> CongestionControl:
        cc = self.p.cc
        if cc == CC_DCQCN:
            return Dcqcn(self.p, float(flow.line), lambda kind, due: self._arm_cc_timer(flow, kind, due))
        if cc == CC_HPCC:
            return Hpcc(self.p, float(flow.line))
        if cc == CC_DCTCP:
            return Dctcp(self.p, float(flow.line))
        if cc == CC_TIMELY:
            return Timely(self.p, float(flow.line))
        return CongestionControl()

    def _arm_cc_timer(self, flow: FlowSender, kind: int, due: Optional[int]) -> None:
        slot = flow.cc_timers.setdefault(kind, Slot(live=False))
        self.arm(slot, due, flow.src, TIMER, flow.id, kind, self._cc_timer, flow, kind)

    def _cc_timer(self, flow: FlowSender, kind: int) -> None:
        flow.cc.on_timer(flow, kind, self.now)

    def _update_rto(self, flow: FlowSender) -> None:
        due = (flow.progress + self.p.rto_ps
               if flow.done_at < 0 and flow.outstanding and (not self.p.pfc or self.p.lb_spray) else None)
        self.arm(flow.rto, due, flow.src, TIMER, flow.id, T_RTO, self._rto_fired, flow)

    def _rto_fired(self, flow: FlowSender) -> None:
        if flow.sr:
            flow.lost_hi = flow.snd_nxt
            flow.rtx_nxt = flow.snd_una
            flow.settle()
        else:
            flow.snd_nxt = flow.snd_una
        flow.progress = self.now
        self.counters["timeouts"] += 1
        self._update_rto(flow)

    # -------------------------------------------------------------- transmission

    def _refresh_ports(self, node: int) -> None:
        """Re-arm the wake-up of every port of ``node`` at its earliest possible transmission."""
        for port in self.node_ports[node]:
            self.arm(port.wake, self._next_send_time(port), node, TRANSMIT, port.id, 0, self._transmit, port)

    def _control_ready(self, port: Port) -> bool:
        """Whether ``port`` may send a control packet: it has one, and it is not a paused host port
        whose ACK/NACKs the PAUSE stops too (pause_host_acks)."""
        return bool(port.control) and not (port.paused and port.node < self.n_host and self.p.pause_host_acks)

    def _next_send_time(self, port: Port) -> Optional[int]:
        ready: Optional[int] = None
        if port.pfc_pending or self._control_ready(port):
            ready = self.now
        elif not port.paused:
            if port.node < self.n_host:
                ready = self.hosts[port.node].earliest_data()
            elif port.data:
                ready = self.now
        return None if ready is None else max(ready, port.free_at, self.now)

    def _transmit(self, port: Port) -> None:
        """Start the highest-priority transmission of ``port`` (it is free now)."""
        t = self.now
        assert port.free_at <= t
        if port.pfc_pending:
            port.pfc_sent = port.pfc_want
            self.counters["pfc_pauses" if port.pfc_want else "pfc_resumes"] += 1
            self.counters["control_packets_sent"] += 1
            self._send(port, Packet(PFC, self.p.pfc_frame_bytes, pause=port.pfc_want))
        elif self._control_ready(port):
            pkt = port.pop_control()
            if port.node < self.n_host:
                self.counters["control_packets_sent"] += 1
            else:
                self.switches[port.node].slots_used -= 1
                port.tx_bytes += pkt.wire_bytes
            self._send(port, pkt)
        elif port.node < self.n_host:
            flow = self.hosts[port.node].next_flow(t)
            assert flow is not None and not port.paused
            self._send(port, self._next_data_packet(self.hosts[port.node], flow))
        else:
            assert not port.paused
            self._send(port, self._switch_dequeue(self.switches[port.node], port))

    def _send(self, port: Port, pkt: Packet) -> None:
        ser = ser_ps(pkt.wire_bytes, port.rate_bps)
        port.free_at = self.now + ser
        port.wire_bytes += pkt.wire_bytes
        self.counters["packet_hops"] += 1
        peer = self.ports[port.peer_port]
        self.push(self.now + ser + port.delay_ps, port.peer_node, ARRIVAL, peer.id, 0, self._arrival, peer, pkt)

    def _next_data_packet(self, host: HostState, flow: FlowSender) -> Packet:
        t = self.now
        if not flow.outstanding:
            flow.progress = t
        seq = flow.retx_seq() if flow.sr else None
        if seq is not None:
            flow.rtx_nxt = seq + 1
            flow.settle()
        else:
            seq = flow.snd_nxt
            flow.snd_nxt += 1
        payload = flow.packet_payload(seq)
        pkt = Packet(DATA, payload + self.p.header, flow=flow.id, seq=seq, payload=payload, dst=flow.dst,
                     sends=flow.sends)
        fresh = seq >= flow.max_sent
        if not fresh:
            self.counters["data_packets_retransmitted"] += 1
        flow.max_sent = max(flow.max_sent, seq + 1)
        flow.cc.on_send(flow, seq, fresh, t)
        flow.sends += 1
        flow.next_tx = t + ser_ps(pkt.wire_bytes, math.floor(flow.rate))
        flow.last_bytes = pkt.wire_bytes
        host.last_served = flow.id
        self.counters["data_packets_sent"] += 1
        self.counters["data_bytes_sent"] += payload
        self._update_rto(flow)
        return pkt

    def _switch_dequeue(self, sw: SwitchState, port: Port) -> Packet:
        """Dequeue the head of the data queue: MMU, RESUME, tx bytes; a data packet also ECN and
        INT (an ACK/NACK queued with data: ``ce`` is its echo, its INT the data's)."""
        pkt = port.pop_data()
        sw.slots_used -= 1
        b = pkt.wire_bytes
        sw.dequeue(pkt.ingress, b)
        ingress = self.ports[pkt.ingress]
        if ingress.pfc_want and sw.may_resume(pkt.ingress):
            ingress.pfc_want = False
        if pkt.kind != DATA:
            port.tx_bytes += b
            return pkt
        if self.p.ecn and self._ecn_mark(port) and not pkt.ce:
            pkt.ce = True
            self.counters["ecn_marks"] += 1
        port.dequeues += 1
        if self.p.cc == CC_HPCC and len(pkt.hops) < MAX_INT_HOPS:
            hop = int_hop(self.now, port.tx_bytes, port.data_bytes + port.control_bytes, port.rate_bps,
                          self.p.hpcc_int_multi)
            pkt.hops = pkt.hops + (hop,)
        port.tx_bytes += b
        return pkt

    def _ecn_mark(self, port: Port) -> bool:
        """RED on the bytes left in the port's data queue after the dequeue."""
        q = port.data_bytes
        kmin, kmax = int(self.p.port_kmin[port.id]), int(self.p.port_kmax[port.id])
        if q > kmax:
            return True
        if q > kmin:
            prob = float(self.p.port_pmax[port.id]) * (q - kmin) / (kmax - kmin)
            return uniform01(hash64(self.seed, TAG_ECN, port.node, port.id, port.dequeues)) < prob
        return False

    # -------------------------------------------------------------- arrivals

    def _links_down(self) -> int:
        """How many links are down now (they go down in the order listed)."""
        return sum(1 for at, _, _ in self.down if at <= self.now)

    def _arrival(self, port: Port, pkt: Packet) -> None:
        """``pkt`` is fully received on ``port`` (the receiving node's own port on the link).
        Over a link that is down it is lost, a PAUSE too; a RESUME still lifts a pause."""
        if any(port.id in (a, b) for _, a, b in self.down[:self._links_down()]):
            if pkt.kind == PFC:
                if not pkt.pause:
                    port.paused = False
            elif pkt.kind == DATA:
                self.counters["data_packets_dropped"] += 1
                self.counters["data_bytes_dropped"] += pkt.payload
            else:
                self.counters["control_packets_dropped"] += 1
            return
        if pkt.kind == PFC:
            port.paused = pkt.pause
        elif port.node < self.n_host:
            host = self.hosts[port.node]
            if pkt.kind == DATA:
                self._receive_data(host, pkt)
            else:
                self._receive_feedback(pkt)
        else:
            self._switch_arrival(self.switches[port.node], port, pkt)

    def _switch_arrival(self, sw: SwitchState, ingress: Port, pkt: Packet) -> None:
        egress = self.ports[self._route(sw.node, pkt)]
        if pkt.kind != DATA and not self.p.switch_ack_data:
            if sw.slots_used >= sw.slots:
                self.counters["control_packets_dropped"] += 1
                return
            sw.slots_used += 1
            egress.push_control(pkt)
            return
        b = pkt.wire_bytes
        if not sw.admits(ingress.id, b, self.p.pfc) or sw.slots_used >= sw.slots:
            if pkt.kind != DATA:
                self.counters["control_packets_dropped"] += 1
                return
            self.counters["data_packets_dropped"] += 1
            self.counters["data_bytes_dropped"] += pkt.payload
            return
        sw.slots_used += 1
        pkt.ingress = ingress.id
        sw.enqueue(ingress.id, b)
        egress.push_data(pkt)
        if self.p.pfc and not ingress.pfc_want and sw.should_pause(ingress.id):
            ingress.pfc_want = True

    def _route(self, node: int, pkt: Packet) -> int:
        """Egress port: ECMP per flow (all control packets); per data packet, spraying's hash, or
        adaptive routing: the shortest data queue, the first in cyclic order from spraying's (per
        flowlet: the flow's entry of the switch's flowlet table decides while it is recent)."""
        pinned = self.pinned.get((pkt.flow, pkt.kind == DATA))
        if pinned is not None:
            return pinned[node]
        topo = self.down_routes[self._links_down()] if self.down else self.topo
        nexthops = [int(p) for p in topo.next_hop_ports(node, pkt.dst)]
        lb = self.p.lb if pkt.kind == DATA else LB_ECMP
        if lb == LB_ECMP:
            h = hash64(self.seed, TAG_ECMP, node, pkt.flow)
        else:
            h = hash64(self.seed, TAG_SPRAY, node, pkt.flow, pkt.seq, pkt.sends)
        k = h % len(nexthops)
        if lb != LB_ADAPTIVE or len(nexthops) == 1:
            return nexthops[k]
        order = nexthops[k:] + nexthops[:k]
        best = min(order, key=lambda p: self.ports[p].data_bytes)   # (min keeps the first of equals)
        gap = self.p.flowlet_ps
        if gap:   # per flowlet: the flow's entry keeps its egress while younger than the gap
            entry = (node, pkt.flow % FLOWLET_ENTRIES)
            last = self.flowlets.get(entry)
            if last is not None and self.now - last[0] < gap and last[1] in nexthops:
                best = last[1]
            self.flowlets[entry] = (self.now, best)
        return best

    def _receive_data(self, host: HostState, pkt: Packet) -> None:
        rx = host.receivers.setdefault(pkt.flow, FlowReceiver())
        t, e = self.now, rx.expected
        if self.p.transport == TR_SR:
            self._receive_data_sr(host, rx, pkt)
            return
        if pkt.seq == e:
            rx.expected += 1
            self.counters["data_packets_delivered"] += 1
            self.counters["data_bytes_delivered"] += pkt.payload
            self._send_feedback(host, pkt, ACK)
            if rx.expected == int(self.p.flow_npkt[pkt.flow]):
                self._task_finished(pkt.flow)
            return
        self.counters["out_of_order_packets"] += 1
        self.out_of_order_bytes += pkt.payload
        if pkt.seq > e and (t >= rx.nack_timer or e != rx.last_nack):
            rx.nack_timer = t + self.p.nack_interval_ps
            rx.last_nack = e
            self.counters["nacks_sent"] += 1
            self._send_feedback(host, pkt, NACK)

    def _receive_data_sr(self, host: HostState, rx: FlowReceiver, pkt: Packet) -> None:
        """Selective repeat: every new packet within the window is delivered, every packet acknowledged."""
        s, e = pkt.seq, rx.expected
        fresh = s == e or (e < s < e + SR_WINDOW and s not in rx.received)
        if not fresh:       # (as go-back-N's: an arrival the receiver discards)
            self.counters["out_of_order_packets"] += 1
            self.out_of_order_bytes += pkt.payload
        if fresh:
            self.counters["data_packets_delivered"] += 1
            self.counters["data_bytes_delivered"] += pkt.payload
            if s == e:
                rx.expected += 1
                while rx.expected in rx.received:
                    rx.received.remove(rx.expected)
                    rx.expected += 1
            else:
                rx.received.add(s)
        self._send_feedback(host, pkt, ACK)
        if fresh and s == e and rx.expected == int(self.p.flow_npkt[pkt.flow]):
            self._task_finished(pkt.flow)

    def _send_feedback(self, host: HostState, data: Packet, kind: str) -> None:
        rx = host.receivers[data.flow]
        fb = Packet(kind, self.p.ack_bytes, flow=data.flow, seq=rx.expected, dst=int(self.tasks.src[data.flow]),
                    ce=data.ce, hops=data.hops, sacked=data.seq)
        host.port.push_control(fb)

    def _receive_feedback(self, fb: Packet) -> None:
        flow = self.flows[fb.flow]
        if flow.done_at >= 0:
            return
        a = fb.seq
        if a > flow.snd_una:
            flow.snd_una = a
            flow.progress = self.now
        if flow.sr:
            if fb.sacked >= flow.snd_una:     # received out of order: a hole below it
                flow.sacked.add(fb.sacked)
                if not self.p.pfc:
                    flow.lost_hi = max(flow.lost_hi, fb.sacked - SR_DUPTHRESH + 1)
            flow.sacked = {s for s in flow.sacked if s >= flow.snd_una}
            flow.settle()
        else:
            flow.snd_nxt = max(flow.snd_nxt, flow.snd_una)
            if fb.kind == NACK:
                flow.snd_nxt = flow.snd_una      # == a: feedback of a flow arrives in order
        flow.cc.on_feedback(flow, fb, self.now)
        if flow.snd_una == flow.n:
            flow.done_at = self.now
            self.flows_unacked -= 1
            self.hosts[flow.src].deactivate(flow)
            for kind in flow.cc_timers:
                self._arm_cc_timer(flow, kind, None)
        self._update_rto(flow)

    # -------------------------------------------------------------- result

    def _in_network(self) -> tuple[int, int]:
        """Data packets (and payload bytes) still queued in switches or on wires."""
        pkts = [p for port in self.ports for p in port.data if p.kind == DATA]   # (ACK/NACKs may wait there)
        pkts += [e[9][1] for e in self.heap if e[8] == self._arrival and e[9][1].kind == DATA]
        return len(pkts), sum(p.payload for p in pkts)

    def _diagnostic(self) -> str:
        unfinished = [f"{t} ({int(self.tasks.src[t])}->{int(self.tasks.dst[t])}, "
                      f"acked {f.snd_una}/{f.n})" for t, f in self.flows.items() if f.done_at < 0]
        waiting = [int(t) for t in np.nonzero(self.task_start < 0)[0]]
        paused = [f"{p.id} (node {p.node})" for p in self.ports if p.paused]
        lines = [f"unfinished flows: {', '.join(unfinished[:20]) or 'none'}"
                 + (f" and {len(unfinished) - 20} more" if len(unfinished) > 20 else ""),
                 f"tasks never started: {len(waiting)}",
                 f"paused ports: {', '.join(paused[:40]) or 'none'}"]
        return "; ".join(lines)

    def _result(self, status: str, windows: int) -> ExperimentResult:
        flow_ids = np.nonzero(self.tasks.kind == FLOW)[0].astype(np.int64)
        fct = np.array([self.flows[t].done_at - self.flows[t].start if t in self.flows and self.flows[t].done_at >= 0
                        else -1 for t in flow_ids], np.int64)
        finished = self.task_finish[self.task_finish >= 0]
        makespan = int(finished.max()) if finished.size else 0
        if status == "done":
            acks = [f.done_at for f in self.flows.values()]
            end = max([makespan] + acks)
        elif status == "stuck":
            end = self.last_event
        else:
            end = self.exp.time_limit_ps
        in_net_pkts, in_net_bytes = self._in_network()
        monitors: dict = {}
        if self.mon_ps > 0:
            n_port = len(self.ports)

            def table(rows: list[list[int]]) -> np.ndarray:
                return np.array(rows, np.int64).reshape(len(rows), n_port).T

            wire = np.array([p.wire_bytes for p in self.ports], np.int64)
            monitors = monitor_fields(self.mon_ps, self.mon_cap, int(end), table(self.queue_samples),
                                      table(self.link_samples) if self.exp.link_monitor else None,
                                      np.array([p.data_bytes for p in self.ports], np.int64), wire)
        return ExperimentResult(
            name=self.exp.name, status=status, end_ps=int(end), makespan_ps=makespan,
            task_start_ps=self.task_start.copy(), task_finish_ps=self.task_finish.copy(),
            flow_ids=flow_ids, flow_fct_ps=fct, flow_standalone_ps=self.p.flow_standalone_ps[flow_ids].copy(),
            counters=dict(self.counters),
            port_max_queue_bytes=np.array([p.max_data_bytes for p in self.ports], np.int64),
            port_tx_bytes=np.array([p.wire_bytes for p in self.ports], np.int64),
            windows=windows, diagnostic="" if status == "done" else self._diagnostic(),
            extra={"data_packets_in_network": in_net_pkts, "data_bytes_in_network": in_net_bytes,
                   "out_of_order_bytes": self.out_of_order_bytes},
            **monitors)


def simulate_reference(exp: Experiment) -> ExperimentResult:
    """Simulate one experiment with the pure-Python reference (slow; for tests)."""
    return ReferenceSimulator(exp).run()


def simulate_reference_many(exps: Iterable[Experiment]) -> list[ExperimentResult]:
    """Simulate experiments one after the other (each is independent of the others)."""
    return [simulate_reference(e) for e in exps]
