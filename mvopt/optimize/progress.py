"""What a person sees while a study runs: one progress line per generation."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, TextIO

from mvopt.optimize.summary import format_value

if TYPE_CHECKING:
    from mvopt.engine.progress import BatchProgress

__all__ = ["GenerationReport", "Progress", "ConsoleProgress", "SilentProgress"]


@dataclass
class GenerationReport:
    """Counts and timings of one generation."""

    index: int
    asked: int = 0
    told: int = 0
    simulated: int = 0       # distinct configurations simulated in this generation's batch
    rejected: int = 0        # told infeasible without simulation (the space said no)
    infeasible: int = 0      # told infeasible: rejected, or by the simulation (out of memory, timeout...)
    cached: int = 0          # told from an earlier identical configuration
    deferred: int = 0        # waiting for another worker simulating the same configuration
    recovered: int = 0       # trials of dead processes failed and queued again
    promoted: int = 0        # of simulated: also simulated at packet level after the flow level (multi-fidelity)
    sampler_s: float = 0.0   # ask: recovery sweep + proposals + mapping to configurations + creating the trials
    simulate_s: float = 0.0  # the evaluator's batch (building the experiments included)
    tell_s: float = 0.0      # claims + storing the outcomes
    propose_s: float = 0.0   # of sampler_s: the Optuna sampler's proposals
    map_s: float = 0.0       # of sampler_s: parameters -> configurations (derived values, constraints, cost)
    create_s: float = 0.0    # of sampler_s: storing the new RUNNING trials (one batch)
    finish_s: float = 0.0    # of tell_s: storing the outcomes (one batch before simulating, one after)
    build_s: float = 0.0     # of simulate_s: building the experiments, as the evaluator reports it (sim_stats build_s)
    best: list[float] | None = None
    total_told: int = 0      # by this run so far
    study_complete: int = 0  # complete trials of the study, all workers together (with a study_target)
    study_target: int | None = None  # the run's --study-trials
    objective_names: list[str] = field(default_factory=list)

    @property
    def experiments_per_s(self) -> float:
        return self.simulated / self.simulate_s if self.simulate_s > 0 else 0.0


class Progress(Protocol):
    """Receives a report after every generation (and, optionally, through a method
    ``simulating(p: BatchProgress)``, how a long batch advances, and through ``first_batch(n)``,
    that the run's first batch of ``n`` configurations starts)."""

    def generation(self, report: GenerationReport, budget_trials: int | None) -> None: ...


class SilentProgress:
    """Shows nothing."""

    def generation(self, report: GenerationReport, budget_trials: int | None) -> None:
        return None

    def simulating(self, p: BatchProgress) -> None:
        return None


class ConsoleProgress:
    """One line per generation on stderr: a bar, trials done, best so far, experiments/s."""

    def __init__(self, stream: TextIO | None = None, width: int = 20) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self._sub_batch_shown = 0   # the sub-batch of the batch's last line (reports come every few seconds)

    def line(self, r: GenerationReport, budget_trials: int | None) -> str:
        """The progress line of report ``r``."""
        if r.study_target:  # several workers share the count: the bar is the study's
            head = f"{self._bar(r.study_complete, r.study_target)} {r.study_complete}/{r.study_target} study trials " \
                   f"({r.total_told} by this worker)"
        elif budget_trials:
            head = f"{self._bar(r.total_told, budget_trials)} {r.total_told}/{budget_trials} trials"
        else:
            head = f"{r.total_told} trials"
        best = "-" if not r.best else " / ".join(format_value(n, v) for n, v in zip(r.objective_names, r.best))
        extra = [f"{r.simulated} simulated" + (f" ({r.promoted} to packet level)" if r.promoted else "")]
        if r.infeasible:
            extra.append(f"{r.infeasible} infeasible")
        if r.cached:
            extra.append(f"{r.cached} cached")
        if r.deferred:
            extra.append(f"{r.deferred} waiting")
        if r.recovered:
            extra.append(f"{r.recovered} recovered")
        total = r.sampler_s + r.simulate_s + r.tell_s
        share = f"sampler {100 * r.sampler_s / total:.0f}%" if total > 0 else ""
        return (f"gen {r.index:3d} {head} | best {best} | {', '.join(extra)} | "
                f"{r.experiments_per_s:.1f} exp/s | {share}").rstrip(" |")

    def first_batch(self, n: int) -> None:
        """Before the run's first batch, which may start by compiling the simulator (cached after)."""
        print(f"        simulating {n} configuration{'s' if n != 1 else ''} (a first batch on this machine "
              "also compiles the simulator, which is then cached)", file=self.stream, flush=True)

    def _bar(self, done: int, total: int) -> str:
        fill = round(self.width * min(done, total) / total)
        return f"[{'#' * fill}{'.' * (self.width - fill)}]"

    def generation(self, report: GenerationReport, budget_trials: int | None) -> None:
        print(self.line(report, budget_trials), file=self.stream, flush=True)
        self._sub_batch_shown = 0

    @staticmethod
    def simulating_line(p: BatchProgress) -> str:
        """The line of a long batch's progress report ``p``."""
        return f"        simulating: {p.describe()}"

    def simulating(self, p: BatchProgress) -> None:
        # A sub-batch can end between two reports: say so, rather than show "2/2" with no "1/2".
        if p.sub_batch > self._sub_batch_shown:
            ended = f"1-{p.sub_batch}" if p.sub_batch > 1 else "1"
            print(f"        simulating: sub-batch{'es' if p.sub_batch > 1 else ''} {ended}/{p.sub_batches} ended",
                  file=self.stream, flush=True)
        self._sub_batch_shown = p.sub_batch
        print(self.simulating_line(p), file=self.stream, flush=True)
