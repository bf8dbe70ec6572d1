"""What the engine returns per experiment."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

__all__ = ["ExperimentResult", "COUNTERS", "port_utilisation"]

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
                and np.array_equal(self.port_max_queue_bytes, other.port_max_queue_bytes))


def port_utilisation(result: ExperimentResult, topology) -> np.ndarray:
    """Average utilisation of every link direction over the experiment: bytes x 8 / (rate x end)."""
    end = max(result.end_ps, 1)
    return result.port_tx_bytes * 8 * 10**12 / (np.asarray(topology.port_rate_bps, float) * end)
