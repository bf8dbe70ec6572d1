"""Batched trial writes (mvopt.optimize.writer): the rows are Optuna's own, read back unchanged.

Every writer is compared with Optuna's storage API on the same trials (parameters of every
distribution kind, nested user attributes, the constraint, finite and infinite values), on
SQLite, a journal file and — when the server of ``.ci/services`` and its driver are there —
PostgreSQL; trial numbers stay unique when batches and Optuna's own ``ask`` interleave across
processes; a trial failed meanwhile is not told.
"""

from __future__ import annotations

import math
import multiprocessing
import uuid

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

import postgres_server
from mvopt.optimize import make_storage
from mvopt.optimize.writer import (Finish, JournalTrialWriter, NewTrial, RdbTrialWriter, TrialWriter,
                                   trial_writer)

PG_URL = postgres_server.URL
_pg_reason = postgres_server.skip_reason


DISTS = {
    "network.cc": CategoricalDistribution(["dcqcn", "hpcc", None, True]),
    "network.ecn.kmin_kb": FloatDistribution(5.0, 400.0, log=True),
    "network.hpcc.eta": FloatDistribution(0.8, 0.98, step=0.02),
    "collective.channels": IntDistribution(1, 16, log=True),
    "k": IntDistribution(2, 10, step=2),
}


def _new(i: int) -> NewTrial:
    params = {"network.cc": ["dcqcn", "hpcc", None, True][i % 4], "network.ecn.kmin_kb": 5.0 * 1.37 ** (i % 12),
              "network.hpcc.eta": 0.8 + 0.02 * (i % 10), "collective.channels": 1 + i % 16, "k": 2 + 2 * (i % 5)}
    return NewTrial(params, dict(DISTS), {"mvopt:owner": {"host": "h", "pid": i, "start": "?"}, "grid_id": i},
                    {"config": {"cluster": {"k": 4, "link_gbps": [100, 400]}, "name": f"t{i}"},
                     "config_key": f"key{i}", "backend": "cpu", "mvopt_version": "x"})


def _finish(tid: int, i: int) -> Finish:
    feasible = i % 3 != 0
    values = [1e-3 * (1 + i), 1234.5 * i] if feasible else [math.inf, math.inf]
    return Finish(tid, values, {"constraints:violation": 0.0 if feasible else 0.25 * i + 1e-9},
                  {"feasible": feasible, "reason": None if feasible else f"reason {i}", "status": "ok",
                   "breakdown": {"compute": 0.5, "dp_comm": 0.25}, "sim_stats": {"windows": 12.0},
                   "duplicate_of": i - 1, "backend": "gpu"})  # backend differs from creation: overwritten


def _record(study: optuna.Study, writer: TrialWriter, n: int = 7) -> list[optuna.trial.FrozenTrial]:
    created = writer.create_running(study._study_id, [_new(i) for i in range(n)], heartbeat=True)
    assert [c.number for c in created] == list(range(n))
    running = study.get_trials(deepcopy=False)
    assert [t.state for t in running] == [TrialState.RUNNING] * n
    done = writer.finish([_finish(c.trial_id, i) for i, c in enumerate(created)])
    assert sorted(done) == sorted(c.trial_id for c in created)
    return study.get_trials()


def _comparable(t: optuna.trial.FrozenTrial) -> tuple:
    return (t.number, t.state, t.values, t.params, t.distributions, t.user_attrs, t.system_attrs, t.constraints,
            t.intermediate_values, t.datetime_start is not None, t.datetime_complete is not None)


def _check_against_api(url_a: str, url_b: str, fresh) -> None:
    sa, sb = make_storage(url_a), make_storage(url_b)
    name = f"w-{uuid.uuid4().hex[:6]}"
    a = optuna.create_study(study_name=name, storage=sa, directions=["minimize", "minimize"])
    b = optuna.create_study(study_name=name + "-api", storage=sb, directions=["minimize", "minimize"])
    wa, wb = trial_writer(a._storage), TrialWriter(b._storage)
    assert type(wa) is not TrialWriter  # a batch writer
    ta, tb = _record(a, wa), _record(b, wb)
    assert [_comparable(x) for x in ta] == [_comparable(y) for y in tb]
    # read back by a new process-like storage object (nothing served from this process's cache)
    ra = optuna.load_study(study_name=name, storage=fresh(url_a)).get_trials()
    assert [_comparable(x) for x in ra] == [_comparable(y) for y in tb]
    import datetime
    now = datetime.datetime.now()
    for x, y in zip(ra, tb):  # naive local times, as Optuna's (a UTC/local mix-up would be hours off)
        assert abs((x.datetime_start - now).total_seconds()) < 60 and abs((x.datetime_complete - now).total_seconds()) < 60
        assert abs((x.datetime_start - y.datetime_start).total_seconds()) < 60
    assert math.isinf(ra[0].values[0]) and ra[0].constraints == {"violation": 1e-9}


def test_sqlite_batches_equal_the_api(tmp_path):
    _check_against_api(f"sqlite:///{tmp_path / 'a.db'}", f"sqlite:///{tmp_path / 'b.db'}", make_storage)
    assert isinstance(trial_writer(make_storage(f"sqlite:///{tmp_path / 'a.db'}")), RdbTrialWriter)


def test_journal_batches_equal_the_api(tmp_path):
    _check_against_api(str(tmp_path / "a.log"), str(tmp_path / "b.log"), make_storage)
    assert isinstance(trial_writer(make_storage(str(tmp_path / "a.log"))), JournalTrialWriter)


@pytest.mark.skipif(_pg_reason() is not None, reason=str(_pg_reason()))
def test_postgres_batches_equal_the_api():
    _check_against_api(PG_URL, PG_URL, make_storage)


def test_heartbeats_are_recorded_in_one_batch(tmp_path):
    storage = make_storage(f"sqlite:///{tmp_path / 'h.db'}", heartbeat_s=1, grace_s=1)
    study = optuna.create_study(study_name="h", storage=storage, directions=["minimize", "minimize"])
    writer = trial_writer(study._storage)
    created = writer.create_running(study._study_id, [_new(i) for i in range(5)], heartbeat=True)
    inner = study._storage._backend
    assert inner._get_stale_trial_ids(study._study_id) == []
    import time
    time.sleep(2.5)  # grace period 1 s (SQLite's clock has whole seconds): every trial is stale...
    assert len(inner._get_stale_trial_ids(study._study_id)) == 5
    writer.heartbeat([c.trial_id for c in created])  # ...until one batch beats for all of them
    assert inner._get_stale_trial_ids(study._study_id) == []


@pytest.mark.parametrize("kind", ["sqlite", "journal"])
def test_a_trial_failed_meanwhile_is_not_told(tmp_path, kind):
    url = f"sqlite:///{tmp_path / 'f.db'}" if kind == "sqlite" else str(tmp_path / "f.log")
    study = optuna.create_study(study_name="f", storage=make_storage(url), directions=["minimize", "minimize"])
    writer = trial_writer(study._storage)
    created = writer.create_running(study._study_id, [_new(i) for i in range(3)])
    study._storage.set_trial_state_values(created[1].trial_id, TrialState.FAIL)  # another worker recovered it
    done = writer.finish([_finish(c.trial_id, i + 1) for i, c in enumerate(created)])
    assert sorted(done) == [created[0].trial_id, created[2].trial_id]
    states = [t.state for t in optuna.load_study(study_name="f", storage=make_storage(url)).get_trials()]
    assert states == [TrialState.COMPLETE, TrialState.FAIL, TrialState.COMPLETE]


def _create_in_process(url: str, name: str, batches: int, use_api: bool) -> None:
    study = optuna.load_study(study_name=name, storage=make_storage(url, heartbeat_s=None))
    writer = trial_writer(study._storage)
    for b in range(batches):
        if use_api:
            for _ in range(5):
                study.ask()
        else:
            writer.create_running(study._study_id, [_new(i) for i in range(20)])


def _check_concurrent_numbers(url: str) -> None:
    name = f"c-{uuid.uuid4().hex[:6]}"
    optuna.create_study(study_name=name, storage=make_storage(url, heartbeat_s=None), directions=["minimize"] * 2)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_create_in_process, args=(url, name, 6, use_api)) for use_api in (False, False, True)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    trials = optuna.load_study(study_name=name, storage=make_storage(url, heartbeat_s=None)).get_trials()
    assert len(trials) == 2 * 6 * 20 + 6 * 5
    assert sorted(t.number for t in trials) == list(range(len(trials)))  # unique, no gaps
    by_id = sorted(trials, key=lambda t: t._trial_id)
    assert [t.number for t in by_id] == list(range(len(trials)))  # numbers follow creation order


def test_concurrent_batches_keep_numbers_unique_sqlite(tmp_path):
    _check_concurrent_numbers(f"sqlite:///{tmp_path / 'c.db'}")


@pytest.mark.skipif(_pg_reason() is not None, reason=str(_pg_reason()))
def test_concurrent_batches_keep_numbers_unique_postgres():
    _check_concurrent_numbers(PG_URL)


def _create_limited(url: str, name: str, limit: int) -> None:
    study = optuna.load_study(study_name=name, storage=make_storage(url, heartbeat_s=None))
    writer = trial_writer(study._storage)
    for _ in range(6):
        writer.create_running(study._study_id, [_new(i) for i in range(7)], limit=limit)


def _check_concurrent_limit(url: str) -> None:
    """Three processes creating batches of 7 under a limit of 50 trials: exactly 50, numbered 0-49."""
    name = f"l-{uuid.uuid4().hex[:6]}"
    optuna.create_study(study_name=name, storage=make_storage(url, heartbeat_s=None), directions=["minimize"] * 2)
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_create_limited, args=(url, name, 50)) for _ in range(3)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    trials = optuna.load_study(study_name=name, storage=make_storage(url, heartbeat_s=None)).get_trials()
    assert sorted(t.number for t in trials) == list(range(50))


def test_concurrent_creations_keep_the_study_limit_sqlite(tmp_path):
    _check_concurrent_limit(f"sqlite:///{tmp_path / 'l.db'}")


@pytest.mark.skipif(_pg_reason() is not None, reason=str(_pg_reason()))
def test_concurrent_creations_keep_the_study_limit_postgres():
    _check_concurrent_limit(PG_URL)
