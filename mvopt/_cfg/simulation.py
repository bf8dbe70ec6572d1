"""The ``simulation`` section: limits, seed and optional monitors."""

from __future__ import annotations

from dataclasses import dataclass

from mvopt._cfg.base import Section, field, non_negative, positive


@dataclass(frozen=True)
class SimulationConfig(Section):
    """How the engine runs one experiment."""

    seed: int = field(1, doc="seed of every random choice (ECN marking, spraying, ECMP salt)", check=non_negative)
    time_limit_ms: float = field(10_000.0, unit="ms", doc="simulated-time limit; an experiment not done "
                                 "by then is reported as timed out with a diagnostic", check=positive)
    queue_monitor_ns: float = field(0.0, unit="ns", doc="sample every port's queue at this period (0 = off)",
                                    check=non_negative)
    link_monitor: bool = field(False, doc="record per-link transmitted bytes (utilisation)")
