"""The ``simulation`` section: fidelity, limits, seed and optional monitors."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from mvopt._cfg.base import Section, field, non_negative, positive  # noqa: F401
from mvopt.errors import ConfigError


def _monitor_period(v: float) -> str | None:
    if v == 0:
        return None
    return None if v > 0 and round(v * 1000) >= 1 else "must be 0 (off) or at least 0.001 (1 ps)"


# The engine's clocks are int64 picoseconds with room above the limit for "never": at most
# 10⁹ ms (about 11.6 days of simulated time).
TIME_LIMIT_MS_MAX = 1e9


def _time_limit(v: float) -> str | None:
    return None if 0 < v <= TIME_LIMIT_MS_MAX else f"must be > 0 and at most {TIME_LIMIT_MS_MAX:g} ms"


@dataclass(frozen=True)
class SimulationConfig(Section):
    """How the engine runs one experiment."""

    fidelity: Literal["packet", "flow"] = field(
        "packet", doc="packet: the packet-level engine (congestion control, ECN, buffers, PFC); flow: the "
        "flow-level model (max-min fair rates over the same routes, recomputed at flow arrivals and ends; "
        "blind to congestion control, ECN, buffers and PFC; much cheaper). Same workload and results")
    seed: int = field(1, doc="seed of every random choice (ECN marking, spraying, ECMP salt)", check=non_negative)
    time_limit_ms: float = field(10_000.0, unit="ms", doc="simulated-time limit; an experiment not done "
                                 "by then is reported as timed out with a diagnostic", check=_time_limit)
    queue_monitor_ns: float = field(0.0, unit="ns", doc="queue monitor: record the data bytes queued at every "
                                    "port at every multiple of this period (rounded to whole ps; 0 = off, "
                                    "no cost): ExperimentResult.queue_samples, docs/engine.md 'Monitors'",
                                    check=_monitor_period)
    link_monitor: bool = field(False, doc="link monitor: also record every port's transmitted bytes at the "
                               "same times (utilisation per interval: ExperimentResult.link_tx_samples); "
                               "needs queue_monitor_ns > 0. Total bytes per port are always recorded "
                               "(ExperimentResult.port_tx_bytes)")
    monitor_max_samples: int = field(1000, doc="samples kept per port and monitor; later ones are counted "
                                     "(ExperimentResult.monitor_samples_dropped), not stored. Memory: ports x "
                                     "samples x 8 B per monitor", check=positive)

    def _check(self, path: str) -> None:
        if self.fidelity == "flow" and self.queue_monitor_ns > 0:
            raise ConfigError(f"{path}.queue_monitor_ns", "must be 0 with simulation.fidelity: flow (the flow "
                              "level has no queues to sample)", self.queue_monitor_ns)
        if self.link_monitor and self.queue_monitor_ns == 0:
            raise ConfigError(f"{path}.link_monitor", "needs simulation.queue_monitor_ns > 0 (the link "
                              "monitor samples at that period)", self.link_monitor)

    @property
    def monitor_interval_ps(self) -> int:
        """The sampling period in ps (0: monitors off)."""
        return int(round(self.queue_monitor_ns * 1000))
