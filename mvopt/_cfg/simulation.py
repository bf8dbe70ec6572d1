"""The ``simulation`` section: limits, seed and optional monitors."""

from __future__ import annotations

from dataclasses import dataclass

from mvopt._cfg.base import Section, field, non_negative, positive  # noqa: F401


@dataclass(frozen=True)
class SimulationConfig(Section):
    """How the engine runs one experiment."""

    seed: int = field(1, doc="seed of every random choice (ECN marking, spraying, ECMP salt)", check=non_negative)
    time_limit_ms: float = field(10_000.0, unit="ms", doc="simulated-time limit; an experiment not done "
                                 "by then is reported as timed out with a diagnostic", check=positive)
    queue_monitor_ns: float = field(0.0, unit="ns", doc="sample every port's queue at this period (0 = off; "
                                    "sampling is not implemented yet, so only 0 is accepted)",
                                    check=lambda v: None if v == 0 else "must be 0 (queue sampling is not "
                                    "implemented yet; max queue per port is always reported)")
    link_monitor: bool = field(False, doc="print per-link utilisation in reports (bytes per port are "
                               "always recorded: ExperimentResult.port_tx_bytes)")
