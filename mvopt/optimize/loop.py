"""The generation loop: ask N trials, simulate their new configurations as ONE batch, tell.

One generation:

1. recover trials left RUNNING by dead processes (failed, then queued again as WAITING);
2. ask up to N trials, map each to an experiment (:meth:`SearchSpace.candidate`);
3. infeasible candidates (invalid, or violating a constraint of the space) are told at once
   (*rejected*; the simulation may find others infeasible too: out of GPU memory, a timeout);
   a configuration already simulated (cache, filled from the study's finished trials, so it
   survives restarts and is shared with other workers) is told from the cache;
4. the remaining configurations are *claimed* (:mod:`mvopt.optimize.claims`): one trial per
   configuration, across all workers, simulates; duplicates wait for it and copy its result;
5. the evaluator runs once on the distinct claimed configurations; every trial is told.
   A multi-fidelity run (:mod:`mvopt.optimize.fidelity`) runs them at flow level first, tells the
   trials it does not promote, records the flow level on the promoted ones (a resumed retry does
   not simulate it again), then runs the promoted ones at packet level as a second batch.

A heartbeat thread keeps this process's RUNNING trials alive in RDB storages. On an exception
or an interruption, this process's RUNNING trials are failed and queued again, so nothing is
lost and nothing is left RUNNING; on SIGKILL the next sweep (any worker, or ``--resume``) does it.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import optuna
from optuna.trial import FrozenTrial, TrialState

from mvopt.errors import MvoptError
from mvopt.optimize.artifacts import attach_breakdown_plot
from mvopt.optimize.claims import Claims, make_claims
from mvopt.optimize.evaluator import Evaluation, Evaluator, check_results
from mvopt.optimize.fidelity import FidelityPlan, flow_blind_paths, level_configs, combine_replicates, promotion_order
from mvopt.optimize.progress import GenerationReport, Progress, SilentProgress
from mvopt.optimize.records import Outcome, finish_of, identity_attrs, is_feasible_trial, outcome_from_trial, outcome_of
from mvopt.optimize.space import Candidate, SearchSpace
from mvopt.optimize.proposals import propose
from mvopt.optimize.scenarios import combine_scenarios, scenario_attrs
from mvopt.optimize.storage import (OWNER_ATTR, fail_and_retry, heartbeat_enabled, mark_owner, owner_tag, rdb_engine,
                                     recover_dead_trials)
from mvopt.optimize.writer import Finish, NewTrial, TrialWriter, frozen_running, trial_writer

__all__ = ["Budget", "RunSummary", "GenerationLoop"]

_log = logging.getLogger("mvopt.optimize")


@dataclass
class Budget:
    """When to stop: any limit reached ends the run after the current generation."""

    n_trials: int | None = None       # trials told by this run
    timeout_s: float | None = None    # wall-clock seconds for this run
    stop_file: str | None = None      # stop when this file exists
    study_trials: int | None = None   # stop when the study holds this many COMPLETE trials


@dataclass
class RunSummary:
    """What a run did."""

    generations: int = 0
    told: int = 0
    simulated: int = 0
    rejected: int = 0      # infeasible before any simulation (the space said no)
    infeasible: int = 0    # every trial told infeasible: rejected, or by the simulation
    cached: int = 0
    recovered: int = 0
    promoted: int = 0      # simulated at packet level after the flow level (multi-fidelity)
    elapsed_s: float = 0.0
    stopped: str = ""


@dataclass
class _Asked:
    trial_id: int
    number: int
    cand: Candidate
    written: dict[str, Any] = field(default_factory=dict)  # user attributes stored at creation
    params: dict[str, Any] = field(default_factory=dict)
    distributions: dict[str, Any] = field(default_factory=dict)
    system_attrs: dict[str, Any] = field(default_factory=dict)
    retry_of: int | None = None  # a queued retry: the trial it retries (the last failed attempt)


def _retry_of(study: optuna.Study, trial_id: int) -> int | None:
    history = study._storage.get_trial_system_attrs(trial_id).get("retry_history") or []
    return int(history[-1]) if history else None


class _Heartbeat:
    """Records heartbeats of this process's running trials in the background."""

    def __init__(self, study: optuna.Study, trial_ids: set[int], lock: threading.Lock, writer: TrialWriter) -> None:
        self.study, self.trial_ids, self.lock, self.writer = study, trial_ids, lock, writer
        inner = getattr(study._storage, "_backend", study._storage)
        self.interval = max(0.2, (getattr(inner, "heartbeat_interval", None) or 0) / 2)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> "_Heartbeat":
        if heartbeat_enabled(self.study._storage):
            self._thread = threading.Thread(target=self._run, name="mvopt-heartbeat", daemon=True)
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            with self.lock:
                ids = list(self.trial_ids)
            try:
                self.writer.heartbeat(ids)  # one transaction for all of them
            except Exception as e:  # a transient database error must not kill the worker
                _log.warning("heartbeat failed: %s", e)

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()


class GenerationLoop:
    """Runs generations of one study until a :class:`Budget` is spent.

    ``backend_name`` is recorded on every trial (defaults to the evaluator's name). Trials are
    created and told in batches through a :class:`~mvopt.optimize.writer.TrialWriter` (one
    transaction per batch); ``writer`` overrides the storage's default one (``trial_writer``).
    ``fidelity`` overrides the space's :attr:`~SearchSpace.fidelity_plan`.
    """

    def __init__(self, study: optuna.Study, space: SearchSpace, evaluator: Evaluator, *,
                 generation_size: int = 32, claims: Claims | None = None, progress: Progress | None = None,
                 poll_s: float = 1.0, backend_name: str | None = None, artifact_dir: str | None = None,
                 writer: TrialWriter | None = None, fidelity: FidelityPlan | None = None) -> None:
        if generation_size < 1:
            raise MvoptError(f"generation size must be >= 1, got {generation_size}")
        self.study, self.space, self.evaluator = study, space, evaluator
        self.generation_size = generation_size
        self.claims = claims or make_claims(rdb_engine(study._storage), study.study_name)
        self.progress = progress or SilentProgress()
        self.poll_s = poll_s
        self.backend = backend_name or evaluator.name
        self.artifact_dir = artifact_dir
        self.writer = writer or trial_writer(study._storage)
        self.fidelity = fidelity or space.fidelity_plan
        self._outbox: list[tuple[_Asked, Outcome, Finish]] = []
        self._told = self._told_infeasible = 0  # trials told in the current generation, and of them infeasible
        self._times: dict[str, float] = defaultdict(float)  # seconds per part of the current generation
        self.cache: dict[str, tuple[int, Outcome]] = {}
        self.pending: list[_Asked] = []
        self.running: set[int] = set()
        self._lock = threading.Lock()
        self._generation = 0
        self._study_limit: int | None = None  # Budget.study_trials of the run: trials are created only up to it
        self._simulated_before = False  # the first batch of a process may compile the simulator first
        self._best: list[float] | None = None
        self._load_cache()

    # ------------------------------------------------------------------ state from the storage

    def _load_cache(self) -> None:
        for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)):
            self._remember(t)

    def _remember(self, t: FrozenTrial) -> None:
        out = outcome_from_trial(t)
        if out is None or "duplicate_of" in t.user_attrs:
            if out is not None:
                self._update_best(out)
            return
        key = out.attrs.get("config_key")
        if key and key not in self.cache:
            self.cache[key] = (t.number, out)
        self._update_best(out)

    def _update_best(self, out: Outcome) -> None:
        if not self._decided(out) or not out.feasible or not all(v < float("inf") for v in out.values):
            return
        if self._best is None or out.values[0] < self._best[0]:
            self._best = list(out.values)

    def _trial(self, number: int) -> FrozenTrial:
        storage = self.study._storage
        return storage.get_trial(storage.get_trial_id_from_study_id_trial_number(self.study._study_id, number))

    def _is_dead(self, number: int) -> bool:
        return self._trial(number).state == TrialState.FAIL

    # ------------------------------------------------------------------ one generation

    def _own(self, trial_id: int) -> None:
        with self._lock:
            self.running.add(trial_id)

    def _ask(self, n: int) -> list[_Asked]:
        """Up to ``n`` new RUNNING trials: queued retries first, then the sampler's proposals.

        The proposals of a generation are created in the storage as one batch (with their
        identity attributes and a first heartbeat)."""
        if n <= 0:
            return []
        snapshot = self.study._storage.get_all_trials(self.study._study_id, deepcopy=False)
        out = []
        for _ in range(min(n, sum(1 for t in snapshot if t.state == TrialState.WAITING))):
            trial = self.study.ask()  # a queued retry: its parameters are fixed, nothing is sampled
            self._own(trial._trial_id)
            mark_owner(self.study, trial._trial_id)
            params = self.space.suggest(trial)
            out.append(_Asked(trial._trial_id, trial.number, self.space.candidate(params), params=params,
                              distributions=dict(trial.distributions), retry_of=_retry_of(self.study, trial._trial_id)))
        if len(out) < n:
            owner = owner_tag()
            new, cands = [], []
            t0 = time.perf_counter()
            proposals = propose(self.study, snapshot, n - len(out), self.space.suggest)
            t1 = time.perf_counter()
            for p in proposals:
                cand = self.space.candidate(p.params)
                attrs = identity_attrs(cand, self.backend)  # a running trial shows what it simulates
                new.append(NewTrial(p.params, p.distributions, {**p.system_attrs, OWNER_ATTR: owner}, attrs))
                cands.append(cand)
            t2 = time.perf_counter()
            created = self.writer.create_running(self.study._study_id, new, limit=self._study_limit,
                                                 heartbeat=heartbeat_enabled(self.study._storage))
            self._times["propose"] += t1 - t0
            self._times["map"] += t2 - t1
            self._times["create"] += time.perf_counter() - t2
            for c, t, cand in zip(created, new, cands):
                self._own(c.trial_id)
                out.append(_Asked(c.trial_id, c.number, cand, t.user_attrs, t.params, t.distributions, t.system_attrs))
        return out

    def _decided(self, out: Outcome) -> bool:
        """Whether ``out`` comes from the run's deciding level (a flow-level screen is never a best)."""
        return out.attrs.get("fidelity", self.fidelity.final_level) == self.fidelity.final_level

    def _improves(self, outcome: Outcome) -> bool:
        return self._decided(outcome) and outcome.feasible and all(v < float("inf") for v in outcome.values) and \
            (self._best is None or outcome.values[0] < self._best[0])

    def _tell(self, a: _Asked, outcome: Outcome, extra: dict[str, Any] | None = None) -> None:
        """Queue ``outcome`` for trial ``a``; :meth:`_flush` stores the queue as one batch."""
        if self.artifact_dir and outcome.attrs.get("breakdown") and self._improves(outcome):
            try:
                attach_breakdown_plot(self.study, a.trial_id, outcome.attrs["breakdown"], self.artifact_dir)
            except OSError as e:  # a full disk must not stop the search
                _log.warning("trial %d: breakdown plot not stored: %s", a.number, e)
        fin = finish_of(a.trial_id, outcome, extra, written=a.written)
        # what study.tell does before storing: the sampler's post-processing (a no-op for the built-in ones)
        frozen = frozen_running(a.number, a.trial_id, a.params, a.distributions, {**a.written, **fin.user_attrs},
                                {**a.system_attrs, **fin.system_attrs})
        self.study.sampler.after_trial(self.study, frozen, TrialState.COMPLETE, fin.values)
        self._outbox.append((a, outcome, fin))
        self._update_best(outcome)
        self._told += 1
        self._told_infeasible += not outcome.feasible

    def _flush(self) -> None:
        """Store every queued outcome in one batch (trials failed meanwhile by another worker are skipped)."""
        if not self._outbox:
            return
        batch, self._outbox = self._outbox, []
        t0 = time.perf_counter()
        self.writer.finish([fin for _, _, fin in batch])
        self._times["finish"] += time.perf_counter() - t0
        with self._lock:
            for a, _, _ in batch:
                self.running.discard(a.trial_id)

    def step(self, n: int) -> GenerationReport:
        """Run one generation of up to ``n`` new trials (plus trials waiting from earlier ones)."""
        rep = GenerationReport(index=self._generation, objective_names=self.space.objective_names)
        self._times = defaultdict(float)
        self._told = self._told_infeasible = 0
        t0 = time.perf_counter()
        rep.recovered = recover_dead_trials(self.study)
        asked = self._ask(n)
        rep.asked = len(asked)
        rep.sampler_s = time.perf_counter() - t0

        t1 = time.perf_counter()
        groups: dict[str, list[_Asked]] = defaultdict(list)
        for a in self.pending + asked:
            key = a.cand.key
            if not a.cand.feasible:
                self._tell(a, outcome_of(self.space, a.cand, None, self.backend, a.written or None))
                rep.rejected += 1
            elif key in self.cache:
                number, out = self.cache[key]
                self._tell(a, out, {"duplicate_of": number})
                rep.cached += 1
            else:
                groups[key].append(a)
        self.pending = []
        owners = self.claims.claim({k: g[0].number for k, g in groups.items()}, self._is_dead)
        to_simulate: list[str] = []
        for key, group in groups.items():
            owner = owners[key]
            if owner == group[0].number:
                to_simulate.append(key)
                continue
            other = self._trial(owner)
            if other.state == TrialState.COMPLETE and outcome_from_trial(other) is not None:
                self._remember(other)
                for a in group:
                    self._tell(a, self.cache[key][1], {"duplicate_of": owner})
                    rep.cached += 1
            else:
                self.pending.extend(group)
        self._flush()  # what is known before simulating is stored before it, in one batch
        rep.deferred = len(self.pending)
        tell_s = time.perf_counter() - t1

        t2 = time.perf_counter()
        self._sim_s = self._build_s = 0.0
        if self.fidelity.mode == "multi":
            rep.promoted = self._multi_fidelity(to_simulate, groups, rep)
        else:  # every configuration at its own level (the base's, which run.fidelity sets)
            for key, (ev, attrs) in zip(to_simulate, self._evaluate([groups[k][0] for k in to_simulate], None,
                                                                   self.fidelity.replicates)):
                self._tell_group(groups[key], ev, attrs, rep)
        rep.simulate_s, rep.build_s = self._sim_s, self._build_s
        rep.simulated = len(to_simulate)
        self._flush()
        rep.tell_s = tell_s + time.perf_counter() - t2 - rep.simulate_s  # storing, between and after the batches
        t = self._times
        rep.propose_s, rep.map_s, rep.create_s, rep.finish_s = t["propose"], t["map"], t["create"], t["finish"]
        rep.told, rep.infeasible = self._told, self._told_infeasible
        rep.best = self._best
        self._generation += 1
        return rep

    def _evaluate(self, asked: list[_Asked], level: str | None,
                  replicates: int) -> list[tuple[Evaluation, dict[str, Any]]]:
        """Simulate the trials' configurations at ``level`` (None: each at its own), each under
        every scenario of the space and over ``replicates`` seeds, as ONE batch; per trial its
        (combined) evaluation and the attributes that record the level and the scenarios."""
        names = [s.name for s in self.space.scenarios]
        # per trial, per scenario (or the trial's configuration alone), per seed
        runs = [[level_configs(c, level, replicates) for c in (a.cand.scenario_configs or (a.cand.config,))]
                for a in asked]
        flat = [c for per in runs for seeds in per for c in seeds]
        if not flat:
            return []
        if not self._simulated_before:
            self._simulated_before = True
            getattr(self.progress, "first_batch", lambda n: None)(len(flat))
        t0 = time.perf_counter()
        evs = check_results(flat, self.evaluator.evaluate(flat), self.evaluator.name)
        self._sim_s += time.perf_counter() - t0
        # the evaluator's wall time for building the batch (built in parallel: less than the sum)
        walls = [float(ev.sim_stats["build_wall_s"]) for ev in evs if "build_wall_s" in ev.sim_stats]
        self._build_s += max(walls) if walls else sum(float(ev.sim_stats.get("build_s", 0.0)) for ev in evs)
        out, at = [], 0
        for per in runs:
            block = [evs[at + s * replicates:at + (s + 1) * replicates] for s in range(len(per))]  # [scenario][seed]
            at += len(per) * replicates
            scen_attrs: dict[str, Any] = {}
            if names:  # scenarios combined seed by seed, then the seeds as replicates
                per_seed = [[block[s][r] for s in range(len(per))] for r in range(replicates)]
                combined = [combine_scenarios(seed, names, self.space.scenario_objective) for seed in per_seed]
                seed_evs = [ev for ev, _ in combined]
                scen_attrs = scenario_attrs(per_seed, names, [w for _, w in combined])
            else:
                seed_evs = block[0]
            ev, attrs = combine_replicates(seed_evs, [c.simulation.seed for c in per[0]])
            reached = per[0][0].simulation.fidelity
            level_attrs = {"fidelity": reached, **({f"{reached}_iteration_time_s": ev.iteration_time_s} if ev.ok else {})}
            out.append((ev, {**level_attrs, **attrs, **scen_attrs}))
        return out

    def _tell_group(self, group: list[_Asked], ev: Evaluation, attrs: dict[str, Any], rep: GenerationReport) -> None:
        """Tell the trial that simulated a configuration, and its duplicates of this generation."""
        out = outcome_of(self.space, group[0].cand, ev, self.backend, group[0].written or None, measured=attrs)
        out.attrs.update(attrs)
        self._tell(group[0], out)
        if group[0].cand.key is not None:
            self.cache[group[0].cand.key] = (group[0].number, out)
        for a in group[1:]:
            self._tell(a, out, {"duplicate_of": group[0].number})
            rep.cached += 1

    def _screened(self, a: _Asked) -> dict[str, Any] | None:
        """The flow level an earlier attempt of this (retried) trial finished and promoted, as
        recorded on it before its packet level was interrupted (None: none)."""
        if a.retry_of is None:
            return None
        attrs = self._trial(a.retry_of).user_attrs
        if attrs.get("promoted") is not True or "flow_iteration_time_s" not in attrs:
            return None
        return {k: attrs[k] for k in ("flow_iteration_time_s", "flow_blind") if k in attrs}

    def _multi_fidelity(self, keys: list[str], groups: dict[str, list[_Asked]], rep: GenerationReport) -> int:
        """Flow level for every configuration, packet level for the promoted ones; returns how many."""
        screened = {k: self._screened(groups[k][0]) for k in keys}
        fresh = [k for k in keys if screened[k] is None]
        flow = self._evaluate([groups[k][0] for k in fresh], "flow", 1)
        values, blind = [], []
        for k, (ev, attrs) in zip(fresh, flow):
            out = outcome_of(self.space, groups[k][0].cand, ev, self.backend, groups[k][0].written or None,
                             measured=attrs)
            values.append(out.values if ev.ok and out.feasible else None)
            blind.append(flow_blind_paths(groups[k][0].cand.overrides))
        chosen = promotion_order(values, [bool(b) for b in blind], self.fidelity.promote)
        promoted: dict[str, dict[str, Any]] = {}
        for i in chosen:
            ev, _ = flow[i]
            promoted[fresh[i]] = {"flow_iteration_time_s": ev.iteration_time_s, **({"flow_blind": blind[i]} if blind[i] else {})}
        for i, k in enumerate(fresh):
            if k not in promoted:
                ev, attrs = flow[i]
                self._tell_group(groups[k], ev, {**attrs, "promoted": False}, rep)
        promoted.update({k: s for k, s in screened.items() if s is not None})
        self._flush()  # the flow level's answers are stored before the packet level starts
        order = [fresh[i] for i in chosen] + [k for k in keys if screened[k] is not None]
        self.writer.set_user_attrs([(a.trial_id, {**promoted[k], "promoted": True}) for k in order for a in groups[k]])
        packet = self._evaluate([groups[k][0] for k in order], "packet", self.fidelity.replicates)
        for k, (ev, attrs) in zip(order, packet):
            self._tell_group(groups[k], ev, {**promoted[k], "promoted": True, **attrs}, rep)
        return len(order)

    # ------------------------------------------------------------------ the run

    def _grid_free(self) -> int | None:
        """Grid points neither finished nor running, plus queued retries (None: not a grid study)."""
        if not isinstance(self.study.sampler, optuna.samplers.GridSampler):
            return None
        taken, waiting = set(), 0
        for t in self.study._storage.get_all_trials(self.study._study_id, deepcopy=False):
            if t.state == TrialState.WAITING:
                waiting += 1
            elif "grid_id" in t.system_attrs:
                taken.add(t.system_attrs["grid_id"])
        return max(0, self.space.grid_size() - len(taken)) + waiting

    def _study_free(self) -> int | None:
        """Trials the study may still start under ``--study-trials`` (None: no such limit): the
        limit less its complete, running and waiting trials, whoever runs them."""
        if self._study_limit is None:
            return None
        trials = self.study._storage.get_all_trials(self.study._study_id, deepcopy=False)
        busy = sum(1 for t in trials if t.state in (TrialState.COMPLETE, TrialState.RUNNING, TrialState.WAITING))
        return max(0, self._study_limit - busy) + sum(1 for t in trials if t.state == TrialState.WAITING)

    def _study_complete(self) -> int:
        return len(self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)))

    def _others_running(self) -> bool:
        with self._lock:
            mine = set(self.running)
        return any(t._trial_id not in mine
                   for t in self.study.get_trials(deepcopy=False, states=(TrialState.RUNNING, TrialState.WAITING)))

    def _stop_reason(self, budget: Budget, summary: RunSummary, start: float) -> str | None:
        if budget.n_trials is not None and summary.told >= budget.n_trials:
            return "trial budget reached"
        if budget.timeout_s is not None and time.monotonic() - start >= budget.timeout_s:
            return "time budget reached"
        if budget.stop_file and os.path.exists(budget.stop_file):
            return f"stop file {budget.stop_file} exists"
        if budget.study_trials is not None:
            done = self._study_complete()
            if done >= budget.study_trials:
                return f"study has {done} complete trials"
        return None

    def run(self, budget: Budget) -> RunSummary:
        """Run generations until ``budget`` is spent (or a grid is done); never leaves trials RUNNING."""
        summary = RunSummary()
        start = time.monotonic()
        self._study_limit = budget.study_trials
        with _Heartbeat(self.study, self.running, self._lock, self.writer):
            try:
                while True:
                    reason = self._stop_reason(budget, summary, start)
                    n = 0 if reason else self.generation_size
                    if budget.n_trials is not None:
                        n = min(n, budget.n_trials - summary.told - len(self.pending))
                    frees = {why: f for why, f in (("grid exhausted", self._grid_free()),
                                                   ("study trials reached", self._study_free())) if f is not None}
                    if frees:
                        n = min(n, *frees.values())
                        if n == 0 and not self.pending and not reason:
                            if not self._others_running():
                                reason = min(frees, key=frees.__getitem__)
                            else:  # other workers still run the last trials: wait, take over the dead ones
                                time.sleep(self.poll_s)
                                summary.recovered += recover_dead_trials(self.study)
                                continue
                    if n <= 0 and not self.pending:
                        summary.stopped = reason or "trial budget reached"
                        break
                    if n <= 0:
                        time.sleep(self.poll_s)  # only duplicates of other workers' trials are left
                    rep = self.step(max(n, 0))
                    summary.generations += 1
                    summary.told += rep.told
                    summary.simulated += rep.simulated
                    summary.rejected += rep.rejected
                    summary.infeasible += rep.infeasible
                    summary.cached += rep.cached
                    summary.recovered += rep.recovered
                    summary.promoted += rep.promoted
                    rep.total_told = summary.told
                    if budget.study_trials is not None:
                        rep.study_complete, rep.study_target = self._study_complete(), budget.study_trials
                    self.progress.generation(rep, budget.n_trials)
            except BaseException:
                self.release()
                raise
        summary.elapsed_s = time.monotonic() - start
        return summary

    def release(self) -> int:
        """Fail and queue again this process's RUNNING trials (after an error or an interruption)."""
        with self._lock:
            ids = list(self.running)
            self.running.clear()
        self.pending = []
        self._outbox = []  # not stored: released with the others
        try:
            return fail_and_retry(self.study, ids)
        except Exception as e:  # the storage may be what failed; the next sweep will recover them
            _log.warning("could not release %d running trials: %s", len(ids), e)
            return 0

    def best_feasible(self) -> list[FrozenTrial]:
        """Feasible complete trials of the study (for summaries)."""
        return [t for t in self.study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,)) if is_feasible_trial(t)]
