"""Writing a whole generation of trials at once: one transaction (or one journal append) per batch.

Optuna's storage API stores one item per call, and an RDB storage commits each call: creating a
trial with its parameters and attributes, setting each user attribute, setting the constraint
and telling the values were about 55 ms of SQLite time per trial (measured; docs/optimizer.md),
a minute per generation of 1,000. A :class:`TrialWriter` takes a whole batch instead:

* :class:`RdbTrialWriter` (SQLite and PostgreSQL, both tested; MySQL has a code path, untested):
  one transaction creates every new RUNNING trial of a generation (rows of ``trials``,
  ``trial_params``, ``trial_user_attributes``, ``trial_system_attributes`` and
  ``trial_heartbeats``), one transaction finishes a batch (state, ``trial_values``, attributes). The rows are exactly those Optuna's own ``RDBStorage`` writes
  (same tables, same encodings: JSON attributes, internal parameter representation, naive-UTC
  datetimes, ±inf value types, trial numbers counted under the study's row lock), so Optuna,
  optuna-dashboard and this package read them back unchanged (tests compare field by field). It
  is used only when the database schema is the one this code was written against
  (:data:`SCHEMA_VERSIONS`); any other schema falls back to the storage API.
* :class:`JournalTrialWriter` (journal files): the same operations as Optuna's
  ``JournalStorage`` logs, appended in one locked write (one ``fsync`` instead of one per item).
* :class:`ApiTrialWriter`: Optuna's storage API, item by item (in-memory and other storages).

Only RUNNING trials are finished: a trial failed meanwhile (its heartbeat went stale, another
worker recovered it) is skipped, as ``study.tell(..., skip_if_finished=True)`` would.
"""

from __future__ import annotations

import datetime
import json
import logging
from dataclasses import dataclass, field
from typing import Any, Iterator, Sequence

import optuna
from optuna.distributions import BaseDistribution, distribution_to_json
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.trial import FrozenTrial, TrialState

__all__ = ["NewTrial", "Finish", "Created", "TrialWriter", "ApiTrialWriter", "RdbTrialWriter",
           "JournalTrialWriter", "trial_writer", "frozen_running", "SCHEMA_VERSIONS"]

_log = logging.getLogger("mvopt.optimize")

# Optuna RDB schema revisions (alembic) whose tables RdbTrialWriter writes directly.
SCHEMA_VERSIONS = frozenset({"v3.2.0.a"})
_CHUNK = 400  # rows per IN (...) list


@dataclass
class NewTrial:
    """A RUNNING trial to create: the sampler's parameters and the attributes known at creation."""

    params: dict[str, Any]
    distributions: dict[str, BaseDistribution]
    system_attrs: dict[str, Any] = field(default_factory=dict)
    user_attrs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Created:
    trial_id: int
    number: int


@dataclass
class Finish:
    """Tell a RUNNING trial COMPLETE with ``values``, after setting the given attributes."""

    trial_id: int
    values: list[float]
    system_attrs: dict[str, Any] = field(default_factory=dict)
    user_attrs: dict[str, Any] = field(default_factory=dict)


class TrialWriter:
    """Creates and finishes trials of one study in batches (this base class: one API call per item)."""

    kind = "api"

    def __init__(self, storage: BaseStorage) -> None:
        self.storage = storage

    def create_running(self, study_id: int, trials: Sequence[NewTrial], *, heartbeat: bool = False,
                       limit: int | None = None) -> list[Created]:
        """Create ``trials`` as RUNNING trials (with a first heartbeat when ``heartbeat``), in order.

        ``limit``: the study may hold at most this many trials that are running, waiting or
        complete; only the first trials that fit are created (exact for RDB storages, where the
        count is taken in the creating transaction; a count read just before for the others)."""
        out = []
        now = datetime.datetime.now()
        if limit is not None:
            trials = trials[:_room(limit, self.storage.get_all_trials(study_id, deepcopy=False))]
        for t in trials:
            template = FrozenTrial(number=-1, trial_id=-1, state=TrialState.RUNNING, value=None, values=None,
                                   datetime_start=now, datetime_complete=None, params=dict(t.params),
                                   distributions=dict(t.distributions), user_attrs=dict(t.user_attrs),
                                   system_attrs=dict(t.system_attrs), intermediate_values={})
            tid = self.storage.create_new_trial(study_id, template_trial=template)
            out.append(Created(tid, self.storage.get_trial_number_from_id(tid)))
        if heartbeat:
            self.heartbeat([c.trial_id for c in out])
        return out

    def finish(self, items: Sequence[Finish]) -> list[int]:
        """Finish ``items``; returns the trial ids actually told (those still RUNNING)."""
        done = []
        for it in items:
            try:
                for k, v in it.system_attrs.items():
                    self.storage.set_trial_system_attr(it.trial_id, k, v)
                for k, v in it.user_attrs.items():
                    self.storage.set_trial_user_attr(it.trial_id, k, v)
                if self.storage.set_trial_state_values(it.trial_id, TrialState.COMPLETE, list(it.values)):
                    done.append(it.trial_id)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue  # failed (recovered) by another worker meanwhile
        return done

    def set_user_attrs(self, items: Sequence[tuple[int, dict[str, Any]]]) -> list[int]:
        """Set user attributes on RUNNING trials, ``(trial_id, attrs)`` each (what a trial has
        learnt before it is finished); returns the trial ids written (those still RUNNING)."""
        done = []
        for tid, attrs in items:
            try:
                if self.storage.get_trial(tid).state != TrialState.RUNNING:
                    continue
                for k, v in attrs.items():
                    self.storage.set_trial_user_attr(tid, k, v)
                done.append(tid)
            except optuna.exceptions.UpdateFinishedTrialError:
                continue  # failed (recovered) by another worker meanwhile
        return done

    def heartbeat(self, trial_ids: Sequence[int]) -> None:
        """Record a heartbeat for each trial (no-op when the storage has no heartbeat)."""
        inner = _unwrap(self.storage)
        if isinstance(inner, RDBStorage) and inner.heartbeat_interval is not None:
            for tid in trial_ids:
                inner.record_heartbeat(tid)


ApiTrialWriter = TrialWriter

_COUNTED = (TrialState.RUNNING, TrialState.WAITING, TrialState.COMPLETE)  # what a study-size limit counts


def _room(limit: int, trials: Any) -> int:
    return max(0, limit - sum(1 for t in trials if t.state in _COUNTED))


def _unwrap(storage: BaseStorage) -> BaseStorage:
    return getattr(storage, "_backend", storage)


def _chunks(items: Sequence[Any], n: int = _CHUNK) -> Iterator[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def _utc_naive(dt: datetime.datetime) -> datetime.datetime:
    """How Optuna's RDB schema stores datetimes (naive UTC; ``TrialModel`` converts on read)."""
    return dt.astimezone(datetime.timezone.utc).replace(tzinfo=None)


class RdbTrialWriter(TrialWriter):
    """Batches as single transactions on Optuna's own tables (see the module docstring)."""

    kind = "rdb"

    def __init__(self, storage: BaseStorage) -> None:
        super().__init__(storage)
        from optuna.storages._rdb import models

        self.rdb: RDBStorage = _unwrap(storage)  # type: ignore[assignment]
        self.engine = self.rdb.engine
        self.m = models
        self.dialect = self.engine.dialect.name

    # -------------------------------------------------------------------------------- helpers

    def _insert_returning_ids(self, conn: Any, table: Any, rows: list[dict[str, Any]], id_col: Any) -> list[int]:
        import sqlalchemy as sa

        if self.dialect in ("sqlite", "postgresql") and getattr(self.engine.dialect, "insert_executemany_returning", False):
            ids: list[int] = []
            for chunk in _chunks(rows):
                res = conn.execute(sa.insert(table).returning(id_col, sort_by_parameter_order=True), list(chunk))
                ids.extend(res.scalars().all())
            return ids
        return [conn.execute(sa.insert(table).values(**r)).inserted_primary_key[0] for r in rows]

    def _upsert_attrs(self, conn: Any, table: Any, rows: list[dict[str, Any]]) -> None:
        """Set (trial_id, key) -> value_json: delete the pairs being written, then insert them."""
        import sqlalchemy as sa

        if not rows:
            return
        by_key: dict[str, list[int]] = {}
        for r in rows:
            by_key.setdefault(r["key"], []).append(r["trial_id"])
        for key, ids in by_key.items():
            for chunk in _chunks(ids):
                conn.execute(sa.delete(table).where(table.c.key == key, table.c.trial_id.in_(chunk)))
        conn.execute(sa.insert(table), rows)

    def _heartbeat_conn(self, conn: Any, trial_ids: Sequence[int]) -> None:
        import sqlalchemy as sa

        hb = self.m.TrialHeartbeatModel.__table__
        existing: set[int] = set()
        for chunk in _chunks(list(trial_ids)):
            existing.update(conn.execute(sa.select(hb.c.trial_id).where(hb.c.trial_id.in_(chunk))).scalars())
            conn.execute(sa.update(hb).where(hb.c.trial_id.in_(chunk)).values(heartbeat=sa.func.current_timestamp()))
        new = [{"trial_id": t} for t in trial_ids if t not in existing]
        if new:
            conn.execute(sa.insert(hb), new)

    # -------------------------------------------------------------------------------- API

    def create_running(self, study_id: int, trials: Sequence[NewTrial], *, heartbeat: bool = False,
                       limit: int | None = None) -> list[Created]:
        import sqlalchemy as sa

        if not trials:
            return []
        m = self.m
        tt = m.TrialModel.__table__
        start = _utc_naive(datetime.datetime.now().astimezone())
        with self.engine.begin() as conn:
            if self.dialect != "sqlite":  # Optuna's creators lock the study row too: numbers stay unique
                st = m.StudyModel.__table__
                conn.execute(sa.select(st.c.study_id).where(st.c.study_id == study_id).with_for_update()).all()
            # Inserting first takes SQLite's write lock, so the count below sees every earlier trial.
            ids = self._insert_returning_ids(
                conn, tt, [{"study_id": study_id, "number": None, "state": TrialState.RUNNING,
                            "datetime_start": start, "datetime_complete": None} for _ in trials], tt.c.trial_id)
            if limit is not None:  # counted under the same lock as the numbers: two workers cannot both take the room
                counted = conn.execute(sa.select(sa.func.count(tt.c.trial_id)).where(
                    tt.c.study_id == study_id, tt.c.state.in_(_COUNTED))).scalar_one()
                keep = max(0, limit - (counted - len(ids)))
                if keep < len(ids):
                    for chunk in _chunks(ids[keep:]):
                        conn.execute(sa.delete(tt).where(tt.c.trial_id.in_(chunk)))
                    ids, trials = ids[:keep], trials[:keep]
                if not ids:
                    return []
            first = min(ids)
            base = conn.execute(sa.select(sa.func.count(tt.c.trial_id))
                                .where(tt.c.study_id == study_id, tt.c.trial_id < first)).scalar_one()
            numbers = {tid: base + i for i, tid in enumerate(sorted(ids))}
            conn.execute(sa.update(tt).where(tt.c.trial_id == sa.bindparam("tid")).values(number=sa.bindparam("num")),
                         [{"tid": tid, "num": n} for tid, n in numbers.items()])
            params, uattrs, sattrs = [], [], []
            for tid, t in zip(ids, trials):
                for name, value in t.params.items():
                    dist = t.distributions[name]
                    params.append({"trial_id": tid, "param_name": name, "param_value": dist.to_internal_repr(value),
                                   "distribution_json": distribution_to_json(dist)})
                uattrs += [{"trial_id": tid, "key": k, "value_json": json.dumps(v)} for k, v in t.user_attrs.items()]
                sattrs += [{"trial_id": tid, "key": k, "value_json": json.dumps(v)} for k, v in t.system_attrs.items()]
            for table, rows in ((m.TrialParamModel.__table__, params), (m.TrialUserAttributeModel.__table__, uattrs),
                                (m.TrialSystemAttributeModel.__table__, sattrs)):
                if rows:
                    conn.execute(sa.insert(table), rows)
            if heartbeat:
                self._heartbeat_conn(conn, ids)
        return [Created(tid, numbers[tid]) for tid in ids]

    def finish(self, items: Sequence[Finish]) -> list[int]:
        import sqlalchemy as sa

        if not items:
            return []
        m = self.m
        tt = m.TrialModel.__table__
        now = _utc_naive(datetime.datetime.now().astimezone())
        ids = [it.trial_id for it in items]
        with self.engine.begin() as conn:
            done: set[int] = set()
            for chunk in _chunks(ids):
                cond = (tt.c.trial_id.in_(chunk), tt.c.state == TrialState.RUNNING)
                if getattr(self.engine.dialect, "update_returning", False):
                    res = conn.execute(sa.update(tt).where(*cond)
                                       .values(state=TrialState.COMPLETE, datetime_complete=now)
                                       .returning(tt.c.trial_id))
                    done.update(res.scalars())
                else:  # pragma: no cover - MySQL: lock the rows, then update them
                    mine = conn.execute(sa.select(tt.c.trial_id).where(*cond).with_for_update()).scalars().all()
                    if mine:
                        conn.execute(sa.update(tt).where(tt.c.trial_id.in_(mine))
                                     .values(state=TrialState.COMPLETE, datetime_complete=now))
                    done.update(mine)
            todo = [it for it in items if it.trial_id in done]
            if not todo:
                return []
            vt = m.TrialValueModel.__table__
            for chunk in _chunks([it.trial_id for it in todo]):
                conn.execute(sa.delete(vt).where(vt.c.trial_id.in_(chunk)))
            values = []
            for it in todo:
                for objective, v in enumerate(it.values):
                    stored, vtype = m.TrialValueModel.value_to_stored_repr(float(v))
                    values.append({"trial_id": it.trial_id, "objective": objective, "value": stored, "value_type": vtype})
            if values:
                conn.execute(sa.insert(vt), values)
            self._upsert_attrs(conn, m.TrialSystemAttributeModel.__table__,
                               [{"trial_id": it.trial_id, "key": k, "value_json": json.dumps(v)}
                                for it in todo for k, v in it.system_attrs.items()])
            self._upsert_attrs(conn, m.TrialUserAttributeModel.__table__,
                               [{"trial_id": it.trial_id, "key": k, "value_json": json.dumps(v)}
                                for it in todo for k, v in it.user_attrs.items()])
        return [it.trial_id for it in todo]

    def set_user_attrs(self, items: Sequence[tuple[int, dict[str, Any]]]) -> list[int]:
        import sqlalchemy as sa

        if not items:
            return []
        tt = self.m.TrialModel.__table__
        with self.engine.begin() as conn:
            running: set[int] = set()
            for chunk in _chunks([tid for tid, _ in items]):
                running.update(conn.execute(sa.select(tt.c.trial_id).where(
                    tt.c.trial_id.in_(chunk), tt.c.state == TrialState.RUNNING)).scalars())
            self._upsert_attrs(conn, self.m.TrialUserAttributeModel.__table__,
                               [{"trial_id": tid, "key": k, "value_json": json.dumps(v)}
                                for tid, attrs in items if tid in running for k, v in attrs.items()])
        return [tid for tid, _ in items if tid in running]

    def heartbeat(self, trial_ids: Sequence[int]) -> None:
        if not trial_ids or self.rdb.heartbeat_interval is None:
            return
        with self.engine.begin() as conn:
            self._heartbeat_conn(conn, list(trial_ids))


class JournalTrialWriter(TrialWriter):
    """Batches as one append of Optuna ``JournalStorage`` operations (one lock, one fsync)."""

    kind = "journal"

    def __init__(self, storage: BaseStorage) -> None:
        super().__init__(storage)
        self.js: JournalStorage = storage  # type: ignore[assignment]

    def _append(self, ops: list[tuple[Any, dict[str, Any]]]) -> None:
        """Append ``(op_code, fields)`` logs in one write and replay them (caller holds the lock)."""
        worker = self.js._replay_result.worker_id
        self.js._backend.append_logs([{"op_code": op, "worker_id": worker, **f} for op, f in ops])
        self.js._sync_with_backend()

    def create_running(self, study_id: int, trials: Sequence[NewTrial], *, heartbeat: bool = False,
                       limit: int | None = None) -> list[Created]:
        from optuna.storages.journal._storage import JournalOperation

        if limit is not None:
            trials = trials[:_room(limit, self.storage.get_all_trials(study_id, deepcopy=False))]
        if not trials:
            return []
        start = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
        ops = []
        for t in trials:
            ops.append((JournalOperation.CREATE_TRIAL, {
                "study_id": study_id, "datetime_start": start, "state": int(TrialState.RUNNING),
                "value": None, "values": None,
                "distributions": {k: distribution_to_json(d) for k, d in t.distributions.items()},
                "params": {k: t.distributions[k].to_internal_repr(v) for k, v in t.params.items()},
                "user_attrs": t.user_attrs, "system_attrs": t.system_attrs, "intermediate_values": {}}))
        with self.js._thread_lock:
            self._append(ops)
            replay = self.js._replay_result
            last = replay._last_created_trial_id_by_this_process
            ids = list(range(last - len(trials) + 1, last + 1))  # one append: contiguous ids
            out = []
            for tid, t in zip(ids, trials):
                got = replay._trials.get(tid)
                if got is None or got.params != t.params or got.system_attrs != json.loads(json.dumps(t.system_attrs)):
                    raise RuntimeError(f"journal storage: created trials not found where expected (trial id {tid})")
                out.append(Created(tid, got.number))
        return out

    def finish(self, items: Sequence[Finish]) -> list[int]:
        from optuna.storages.journal._storage import JournalOperation

        if not items:
            return []
        complete = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="microseconds")
        with self.js._thread_lock:
            self.js._sync_with_backend()
            trials = self.js._replay_result._trials
            todo = [it for it in items if it.trial_id in trials and trials[it.trial_id].state == TrialState.RUNNING]
            ops: list[tuple[Any, dict[str, Any]]] = []
            for it in todo:
                ops += [(JournalOperation.SET_TRIAL_SYSTEM_ATTR, {"trial_id": it.trial_id, "system_attr": {k: v}})
                        for k, v in it.system_attrs.items()]
                ops += [(JournalOperation.SET_TRIAL_USER_ATTR, {"trial_id": it.trial_id, "user_attr": {k: v}})
                        for k, v in it.user_attrs.items()]
                ops.append((JournalOperation.SET_TRIAL_STATE_VALUES, {
                    "trial_id": it.trial_id, "state": int(TrialState.COMPLETE),
                    "values": [float(v) for v in it.values], "datetime_complete": complete}))
            if ops:
                self._append(ops)
        return [it.trial_id for it in todo]


    def set_user_attrs(self, items: Sequence[tuple[int, dict[str, Any]]]) -> list[int]:
        from optuna.storages.journal._storage import JournalOperation

        if not items:
            return []
        with self.js._thread_lock:
            self.js._sync_with_backend()
            trials = self.js._replay_result._trials
            todo = [(tid, attrs) for tid, attrs in items if tid in trials and trials[tid].state == TrialState.RUNNING]
            ops = [(JournalOperation.SET_TRIAL_USER_ATTR, {"trial_id": tid, "user_attr": {k: v}})
                   for tid, attrs in todo for k, v in attrs.items()]
            if ops:
                self._append(ops)
        return [tid for tid, _ in todo]


def _rdb_schema_ok(rdb: RDBStorage) -> bool:
    try:
        return rdb.get_current_version() in SCHEMA_VERSIONS
    except Exception:  # noqa: BLE001 - an unreadable version means: use the API
        return False


def trial_writer(storage: BaseStorage, *, batch: bool = True) -> TrialWriter:
    """The fastest writer that is exact for ``storage`` (``batch=False``: always the API)."""
    inner = _unwrap(storage)
    if batch and isinstance(inner, RDBStorage):
        if _rdb_schema_ok(inner):
            return RdbTrialWriter(storage)
        _log.warning("Optuna database schema %s is not one mvopt writes in batches (%s): storing trials "
                     "one call at a time", inner.get_current_version(), ", ".join(sorted(SCHEMA_VERSIONS)))
    if batch and isinstance(storage, JournalStorage):
        return JournalTrialWriter(storage)
    return TrialWriter(storage)


def frozen_running(number: int, trial_id: int, params: dict[str, Any], distributions: dict[str, BaseDistribution],
                    user_attrs: dict[str, Any], system_attrs: dict[str, Any]) -> FrozenTrial:
    """A RUNNING FrozenTrial as ``study.tell`` passes it to ``sampler.after_trial`` (built, not read back)."""
    return FrozenTrial(number=number, trial_id=trial_id, state=TrialState.RUNNING, value=None, values=None,
                       datetime_start=datetime.datetime.now(), datetime_complete=None, params=dict(params),
                       distributions=dict(distributions), user_attrs=dict(user_attrs),
                       system_attrs=dict(system_attrs), intermediate_values={})

