"""Per-experiment :class:`~mvopt.engine.results.ExperimentResult` from a flow-level run.

The same result type as the packet engine's, with what the flow level knows: task start and
finish times (so the training breakdown works unchanged), flow completion times, bytes per
link direction, the data delivered. It has no packets and no queues: the packet counters other
than data sent and delivered are zero, queue maxima are zero, ``windows`` counts the rate
computations, and ``extra["fidelity"]`` is ``"flow"``.
"""

from __future__ import annotations

import numpy as np

from mvopt.engine.results import COUNTERS, ExperimentResult
from mvopt.flow.batch import FlowBatch
from mvopt.flow.compiled import port_bytes_carried
from mvopt.flow.sim import DONE, STUCK, TIMEOUT, FlowState
from mvopt.flow.xp import to_host

__all__ = ["extract_results"]

_STATUS = {DONE: "done", TIMEOUT: "timeout", STUCK: "stuck"}


def extract_results(batch: FlowBatch, state: FlowState) -> list[ExperimentResult]:
    """The results of every experiment of `batch`, in order."""
    start, finish = to_host(state.task_start_ps), to_host(state.task_finish_ps)
    flow_end = to_host(state.flow_end_ps)
    status, steps = to_host(state.exp_status), to_host(state.exp_steps)
    # bytes each port carried: every ended flow's wire bytes times its share on the port
    port_bytes = port_bytes_carried(batch, np.where(flow_end >= 0, batch.flow_bits / 8, 0.0))
    out = []
    for i, exp in enumerate(batch.experiments):
        t0, t1 = int(batch.exp_task_lo[i]), int(batch.exp_task_lo[i + 1])
        f0, f1 = int(batch.exp_flow_lo[i]), int(batch.exp_flow_lo[i + 1])
        p0, p1 = int(batch.exp_port_lo[i]), int(batch.exp_port_lo[i + 1])
        limit = int(exp.time_limit_ps)
        st = _STATUS[int(status[i])]
        s, f = start[t0:t1].copy(), finish[t0:t1].copy()
        if st == "done" and f.size and int(f.max()) > limit:
            st = "timeout"          # a chain of delays past the limit, after the last flow
        if st == "timeout":
            s = np.where(s > limit, -1, s)
            f = np.where(f > limit, -1, f)
        makespan = int(f.max(initial=0))
        flows = np.flatnonzero(exp.tasks.kind == 0)
        ended = f[flows] >= 0
        fct = np.where(ended, f[flows] - s[flows] + batch.flow_ack_ps[f0:f1], -1)
        size = exp.tasks.size_bytes[flows][ended]
        npkt = exp.params.flow_npkt[flows][ended]
        counters = dict.fromkeys(COUNTERS, 0)
        counters.update(data_packets_sent=int(npkt.sum()), data_bytes_sent=int(size.sum()),
                        data_packets_delivered=int(npkt.sum()), data_bytes_delivered=int(size.sum()))
        unfinished = int((f < 0).sum())
        diagnostic = "" if st == "done" else (
            f"flow level: {unfinished} of {f.size} tasks unfinished at "
            f"{'the simulated-time limit' if st == 'timeout' else 'the end (nothing left to run)'}")
        out.append(ExperimentResult(
            name=exp.name, status=st, end_ps=limit if st == "timeout" else makespan, makespan_ps=makespan,
            task_start_ps=s, task_finish_ps=f, flow_ids=flows, flow_fct_ps=fct,
            flow_standalone_ps=exp.params.flow_standalone_ps[flows].copy(), counters=counters,
            port_max_queue_bytes=np.zeros(p1 - p0, np.int64), windows=int(steps[i]),
            port_tx_bytes=port_bytes[p0:p1].copy(), diagnostic=diagnostic, extra={"fidelity": "flow"}))
    return out
