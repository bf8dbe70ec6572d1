"""What the engine returns per experiment."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ExperimentResult", "COUNTERS", "port_utilisation", "link_utilisation_samples", "monitor_fields"]

# Counters every backend reports (int64 each), in this order.
COUNTERS = (
    "data_packets_sent",      # data packets put on the wire by hosts (incl. retransmissions)
    "data_bytes_sent",        # their payload bytes
    "data_packets_delivered",  # data packets accepted in order by receivers
    "data_bytes_delivered",   # their payload bytes
    "data_packets_dropped",   # data packets dropped by switches (buffer/slots exhausted)
    "data_bytes_dropped",     # their payload bytes
    "data_packets_retransmitted",  # data packets sent again (go-back-N / RTO)
    "out_of_order_packets",   # data packets discarded by receivers (sequence gap or duplicate)
    "control_packets_sent",   # ACK + NACK + PFC frames
    "control_packets_dropped",
    "nacks_sent",
    "ecn_marks",
    "pfc_pauses",             # PAUSE frames sent
    "pfc_resumes",
    "packet_hops",            # link traversals of every packet (data + control)
    "timeouts",               # RTO firings
)


@dataclass
class ExperimentResult:
    """Outcome of one experiment.

    ``status`` is ``done``, ``stuck`` (nothing can progress: PFC deadlock or lost work; see
    ``diagnostic``) or ``timeout`` (simulated-time limit reached). Times are picoseconds.

    Monitors (docs/engine.md, "Monitors"; only when the experiment asks for them, else None / 0):
    ``queue_samples[p, k]`` is the data bytes queued at port ``p`` at time ``k *
    monitor_interval_ps`` (after every event before that time); ``link_tx_samples[p, k]`` the
    bytes port ``p`` had put on the wire by then (transmissions started before it; see
    :func:`link_utilisation_samples`). Samples run from time 0 to ``end_ps`` (both included), at
    most ``monitor_max_samples`` of them; ``monitor_samples_dropped`` counts the samples per port
    that came later and were not stored.
    """

    name: str
    status: str
    end_ps: int
    makespan_ps: int
    task_start_ps: np.ndarray
    task_finish_ps: np.ndarray
    flow_ids: np.ndarray          # task ids of the flows
    flow_fct_ps: np.ndarray       # start to the sender's receipt of the last ACK (-1 if not)
    flow_standalone_ps: np.ndarray
    counters: dict[str, int]
    port_max_queue_bytes: np.ndarray
    windows: int
    port_tx_bytes: np.ndarray = None  # type: ignore[assignment]  # every byte each port sent (incl. ACK, PFC)
    diagnostic: str = ""
    extra: dict = field(default_factory=dict)
    monitor_interval_ps: int = 0                 # 0: monitors off
    queue_samples: np.ndarray | None = None      # int64 [ports, samples]
    link_tx_samples: np.ndarray | None = None    # int64 [ports, samples] (link monitor)
    monitor_samples_dropped: int = 0             # per port, past the cap

    @property
    def ok(self) -> bool:
        return self.status == "done"

    @property
    def makespan_s(self) -> float:
        return self.makespan_ps / 1e12

    @property
    def flow_slowdown(self) -> np.ndarray:
        fct = self.flow_fct_ps.astype(float)
        return np.maximum(1.0, fct / np.maximum(self.flow_standalone_ps, 1))

    def same_as(self, other: "ExperimentResult") -> bool:
        """Bit-identical outcomes (used by determinism and batch-invariance tests)."""
        return (self.status == other.status and self.end_ps == other.end_ps
                and self.makespan_ps == other.makespan_ps
                and np.array_equal(self.task_start_ps, other.task_start_ps)
                and np.array_equal(self.task_finish_ps, other.task_finish_ps)
                and np.array_equal(self.flow_fct_ps, other.flow_fct_ps)
                and self.counters == other.counters
                and np.array_equal(self.port_max_queue_bytes, other.port_max_queue_bytes)
                and _same_array(self.port_tx_bytes, other.port_tx_bytes)
                and self.monitor_interval_ps == other.monitor_interval_ps
                and self.monitor_samples_dropped == other.monitor_samples_dropped
                and _same_array(self.queue_samples, other.queue_samples)
                and _same_array(self.link_tx_samples, other.link_tx_samples))


def _same_array(a: np.ndarray | None, b: np.ndarray | None) -> bool:
    """Both absent, or equal in shape and values."""
    if a is None or b is None:
        return a is None and b is None
    return a.shape == b.shape and np.array_equal(a, b)


def port_utilisation(result: ExperimentResult, topology) -> np.ndarray:
    """Average utilisation of every link direction over the experiment: bytes x 8 / (rate x end)."""
    end = max(result.end_ps, 1)
    return result.port_tx_bytes * 8 * 10**12 / (np.asarray(topology.port_rate_bps, float) * end)


def link_utilisation_samples(result: ExperimentResult, topology) -> np.ndarray:
    """Utilisation of every link direction in each monitor interval, [ports, samples - 1]: the
    bytes whose transmission started in [k I, (k + 1) I) x 8 / (rate x I). A packet counts whole
    in the interval in which it starts, so an interval can exceed 1 by up to one packet's share."""
    if result.link_tx_samples is None:
        raise ValueError("the experiment ran without the link monitor (simulation.link_monitor)")
    rate = np.asarray(topology.port_rate_bps, float)[:, None]
    return np.diff(result.link_tx_samples, axis=1) * 8 * 10**12 / (rate * result.monitor_interval_ps)


def monitor_fields(interval_ps: int, cap: int, end_ps: int, queue: np.ndarray, link: np.ndarray | None,
                   final_queue: np.ndarray, final_link: np.ndarray | None) -> dict:
    """The monitor fields of a result (docs/engine.md, "Monitors"), from the samples a simulator
    recorded (``[ports, n]``: every sample up to the end of its last window, at most ``cap``) and
    the ports' state at the end: the samples at ``k * interval <= end_ps``. A simulator's last
    window ends after ``end_ps`` except on a timeout, where it may end before the limit; nothing
    happens between the two (no event was pending before the limit), so those samples are the
    final state. Shared by the engine and the reference, whose windows need not end alike."""
    due = end_ps // interval_ps + 1
    n = min(due, cap)

    def fit(rec: np.ndarray, final: np.ndarray) -> np.ndarray:
        if rec.shape[1] >= n:
            return rec[:, :n].copy()
        tail = np.repeat(np.asarray(final, np.int64)[:, None], n - rec.shape[1], axis=1)
        return np.concatenate([rec, tail], axis=1)

    return {"monitor_interval_ps": int(interval_ps), "monitor_samples_dropped": int(due - n),
            "queue_samples": fit(queue, final_queue),
            "link_tx_samples": None if link is None else fit(link, final_link)}
