"""The flow-level event loop as array operations (the GPU's path; loop.cpp is the CPU's, bit for bit).

An event is a flow's arrival (its task became ready) or the end of a flow's fluid transfer.
Each step, every running experiment moves its clock to its earliest event and handles every
event at that time: transfers that end finish their task (after the flow's latency, see
:mod:`mvopt.flow.batch`), whose successors are resolved at once through chains of delay tasks
(their finish is known as soon as they are ready); flows whose ready time has come start; then
the max-min rates of the batch's active flows are computed again. Between events rates are
constant, so a transfer's end is exact: ``T + ceil(bits / rate)``.

Task scheduling is the packet engine's (docs/engine.md, "Task scheduling"): ready at the latest
of the start time and every predecessor's finish, plus the window when the predecessor finishes
on another host.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType

import numpy as np

from mvopt.flow.batch import FlowBatch, RATE_UNIT_BPS
from mvopt.flow.maxmin import max_min_rates
from mvopt.flow.paths import WEIGHT_ONE
from mvopt.flow.xp import ranges, segment_sum

__all__ = ["FlowState", "run_batch", "RUNNING", "DONE", "TIMEOUT", "STUCK"]

INF = 2**62
RUNNING, DONE, TIMEOUT, STUCK = 0, 1, 2, 3
# ps per bit at one RATE_UNIT_BPS: time = bits x this / rate
PS_PER_BIT_UNIT = 10**12 / RATE_UNIT_BPS


@dataclass
class FlowState:
    """What a run leaves (xp arrays): task times, flow ends, experiment clocks and statuses."""

    task_start_ps: object
    task_finish_ps: object
    flow_end_ps: object         # end of the fluid transfer (-1: not ended)
    exp_T_ps: object
    exp_status: object
    exp_steps: object           # rate computations per experiment


class _Run:
    """One batch on one array module."""

    def __init__(self, b: FlowBatch, xp: ModuleType) -> None:
        self.xp = xp
        a = {k: xp.asarray(getattr(b, k)) for k in (
            "exp_limit_ps", "task_exp", "task_is_flow", "task_duration_ps", "task_min_ps", "task_flow",
            "succ_offset", "succ", "succ_notify_ps", "flow_task", "flow_exp", "flow_bits", "flow_latency_ps",
            "path_offset", "path_port", "path_weight", "path_is_data", "port_cap")}
        self.a = a
        n_task, n_flow, E = b.task_exp.size, b.flow_task.size, b.n_exp
        self.left = xp.asarray(b.task_npred).copy()
        self.ready = a["task_min_ps"].copy()
        self.start = xp.full(n_task, -1, xp.int64)
        self.finish = xp.full(n_task, -1, xp.int64)
        self.flow_end = xp.full(n_flow, -1, xp.int64)
        self.remaining = a["flow_bits"].copy()
        self.rate = xp.zeros(n_flow, xp.int64)
        self.T = xp.zeros(E, xp.int64)
        self.status = xp.full(E, RUNNING, xp.int8)
        self.steps = xp.zeros(E, xp.int64)
        self.active = xp.zeros(0, xp.int64)      # flow rows transferring
        self.pending = xp.zeros(0, xp.int64)     # flow rows whose ready time is known, not yet started

    # ------------------------------------------------------------------ tasks
    def _ready_tasks(self, tasks) -> None:
        """Tasks whose every predecessor finished: delays finish (and resolve their successors at
        once), flows wait in `pending` for their ready time."""
        xp, a = self.xp, self.a
        while tasks.size:
            self.start[tasks] = self.ready[tasks]
            is_flow = a["task_is_flow"][tasks]
            self.pending = xp.concatenate([self.pending, a["task_flow"][tasks[is_flow]]])
            delays = tasks[~is_flow]
            self.finish[delays] = self.ready[delays] + a["task_duration_ps"][delays]
            tasks = self._successors_ready(delays)

    def _successors_ready(self, finished):
        """Record the finish of `finished` in their successors; those now ready."""
        xp, a = self.xp, self.a
        lo = a["succ_offset"][finished]
        row, entry = ranges(xp, lo, a["succ_offset"][finished + 1] - lo)
        if not entry.size:
            return xp.zeros(0, xp.int64)
        succ = a["succ"][entry]
        xp.maximum.at(self.ready, succ, self.finish[finished][row] + a["succ_notify_ps"][entry])
        tasks, times = xp.unique(succ, return_counts=True)
        self.left[tasks] -= times
        return tasks[self.left[tasks] == 0]

    # ------------------------------------------------------------------ flows
    def _rates(self) -> None:
        """Max-min rates of every active flow of the batch. ACKs go first at every port (the
        control queue's priority), so they are not shared fairly: they take their load off the
        links of the way back, and the data is shared fairly in what is left. Their load is that
        of the rates the data would get without them, slowed by the factor their own link's data
        slows by, 1 / (1 + ACK share): exact where the flows whose ACKs share a link slow as much
        as its data (a ring, the NICs of a collective)."""
        xp, a = self.xp, self.a
        act = self.active
        lo = a["path_offset"][act]
        flow, entry = ranges(xp, lo, a["path_offset"][act + 1] - lo)
        port, weight = a["path_port"][entry], a["path_weight"][entry]
        data = a["path_is_data"][entry]
        flow_d, port_d, weight_d = flow[data], port[data], weight[data]
        n = int(act.size)
        first = max_min_rates(xp, n, flow_d, port_d, weight_d, a["port_cap"])
        ack = ~data
        w = weight[ack]
        load = (w * first[flow[ack]]) // (WEIGHT_ONE + w) * WEIGHT_ONE
        acks = segment_sum(xp, port[ack], load, int(a["port_cap"].size))
        rate = max_min_rates(xp, n, flow_d, port_d, weight_d, xp.maximum(a["port_cap"] - acks, 0))
        self.rate[act] = xp.maximum(rate, 1)      # (a link's ACKs leave its data at least a unit)

    def step(self) -> bool:
        """Advance every running experiment to its next event; False when none is left running."""
        xp, a = self.xp, self.a
        E = self.T.size
        act, pend = self.active, self.pending
        nxt = xp.full(E, INF, xp.int64)
        act_exp = a["flow_exp"][act]
        left_ps = xp.ceil(self.remaining[act] * PS_PER_BIT_UNIT / self.rate[act])
        ends = self.T[act_exp] + xp.maximum(left_ps, 0).astype(xp.int64)
        xp.minimum.at(nxt, act_exp, ends)
        pend_exp = a["flow_exp"][pend]
        xp.minimum.at(nxt, pend_exp, self.ready[a["flow_task"][pend]])
        running = self.status == RUNNING
        idle = running & (nxt >= INF)
        over = running & ~idle & (nxt > a["exp_limit_ps"])
        self.status[idle] = DONE
        self.status[over] = TIMEOUT
        self.T = xp.where(over, a["exp_limit_ps"], self.T)
        running &= ~(idle | over)
        if not bool(running.any()):
            return False
        # transfers that end now finish their task after the flow's latency
        live = running[act_exp]
        end_now = live & (ends <= nxt[act_exp])
        ended = act[end_now]
        self.flow_end[ended] = ends[end_now]
        tasks = a["flow_task"][ended]
        self.finish[tasks] = ends[end_now] + a["flow_latency_ps"][ended]
        go_on = live & ~end_now
        moving = act[go_on]
        dt = (nxt[act_exp] - self.T[act_exp])[go_on]
        self.remaining[moving] = self.remaining[moving] - self.rate[moving] * (dt / PS_PER_BIT_UNIT)
        self.active = moving
        self.pending = pend[running[pend_exp]]
        self.T = xp.where(running, nxt, self.T)
        self._ready_tasks(self._successors_ready(tasks))
        # arrivals
        pend = self.pending
        due = self.ready[a["flow_task"][pend]] <= self.T[a["flow_exp"][pend]]
        self.active = xp.concatenate([self.active, pend[due]])
        self.pending = pend[~due]
        self.steps += running
        self._rates()
        return True

    def run(self) -> FlowState:
        xp, a = self.xp, self.a
        roots = xp.flatnonzero(self.left == 0)
        self._ready_tasks(roots)
        while self.step():
            pass
        unfinished = xp.zeros(self.T.size, xp.int64)
        xp.maximum.at(unfinished, a["task_exp"], (self.finish < 0).astype(xp.int64))
        self.status = xp.where((self.status == DONE) & (unfinished > 0), STUCK, self.status).astype(xp.int8)
        return FlowState(self.start, self.finish, self.flow_end, self.T, self.status, self.steps)


def run_batch(batch: FlowBatch, xp: ModuleType = np) -> FlowState:
    """Simulate every experiment of `batch` to its end (done, timed out or stuck)."""
    return _Run(batch, xp).run()
