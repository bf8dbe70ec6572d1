"""Where studies live: storage URLs, opening/resuming studies, and recovering dead trials.

* ``None`` -> ``sqlite:///mvopt.db`` in the working directory (``optuna-dashboard sqlite:///mvopt.db``).
* any Optuna RDB URL (``sqlite:///...``, ``postgresql://user:pw@host/db``) -> :class:`RDBStorage` with
  a heartbeat: a trial whose process stopped beating for ``grace`` seconds is failed and retried.
* a path ending in ``.db``, ``.sqlite`` or ``.sqlite3`` -> that SQLite file;
* any other path is a journal file -> :class:`JournalStorage` (no heartbeat).

Every trial this package runs records its owner (host, pid, process start time) as a system
attribute, so trials left RUNNING by a dead process on the same host are found at once on any
storage (the "own-trial sweep"); the heartbeat covers processes on other machines. A recovered
trial is marked FAIL and a WAITING copy with the same parameters is queued, so the next
``ask()`` (by any worker) runs it again.
"""

from __future__ import annotations

import copy
import os
import socket
from typing import Any, Sequence

import optuna
from optuna.storages import BaseStorage, JournalStorage, RDBStorage
from optuna.storages.journal import JournalFileBackend
from optuna.trial import FrozenTrial, TrialState

from mvopt.errors import MvoptError

__all__ = ["DEFAULT_STORAGE", "make_storage", "owner_tag", "mark_owner", "recover_dead_trials", "retry_trial",
           "rdb_engine", "postgres_url", "heartbeat_enabled", "record_heartbeats", "describe_storage", "fail_and_retry"]

DEFAULT_STORAGE = "sqlite:///mvopt.db"
SQLITE_SUFFIXES = (".db", ".sqlite", ".sqlite3")  # a plain path with these endings is a SQLite file
OWNER_ATTR = "mvopt:owner"
_DEFAULT_HEARTBEAT_S = 10


def describe_storage(url: str | None) -> str:
    """The storage argument as a user should see it (password hidden)."""
    url = url or DEFAULT_STORAGE
    if "://" in url and "@" in url:
        scheme, _, rest = url.partition("://")
        creds, _, host = rest.rpartition("@")
        user = creds.split(":", 1)[0]
        return f"{scheme}://{user}:***@{host}" if ":" in creds else url
    return url


def _local_file(url: str) -> str | None:
    """The file of a SQLite URL or journal path (None: a server, or SQLite in memory)."""
    if "://" not in url:
        return url
    if url.startswith("sqlite:///") and ":memory:" not in url:
        return url[len("sqlite:///"):].split("?", 1)[0]     # (a query, e.g. ?timeout=30, is not the file's)
    return None


def make_storage(url: str | None = None, *, heartbeat_s: int | None = _DEFAULT_HEARTBEAT_S,
                 grace_s: int | None = None, must_exist: bool = False) -> BaseStorage:
    """An Optuna storage for ``url`` (see module docstring); clear errors for missing drivers.
    ``must_exist``: a file storage (SQLite, journal) must be there already (for commands that
    only read a study: opening a missing one would create an empty database file)."""
    url = url or DEFAULT_STORAGE
    if "://" not in url and url.endswith(SQLITE_SUFFIXES):
        url = f"sqlite:///{url}"
    path = _local_file(url)
    if must_exist and path is not None and not os.path.exists(path):
        raise MvoptError(f"storage {url!r}: {path} does not exist (no study has been stored there)")
    if "://" not in url:
        try:
            return JournalStorage(JournalFileBackend(url))
        except OSError as e:
            raise MvoptError(f"journal storage {url!r} cannot be opened: {e}") from None
    if url.startswith(("postgresql", "postgres://")):
        url = postgres_url(url)
    engine_kwargs: dict[str, Any] = {}
    if url.startswith("sqlite"):
        engine_kwargs["connect_args"] = {"timeout": 60}
    else:
        engine_kwargs["pool_pre_ping"] = True
    hb = heartbeat_s if heartbeat_s and heartbeat_s > 0 else None
    try:
        storage = RDBStorage(url, engine_kwargs=engine_kwargs, heartbeat_interval=hb,
                             grace_period=(grace_s or 3 * hb) if hb else None,
                             heartbeat_stale_trial_callback=retry_trial if hb else None)
    except Exception as e:  # SQLAlchemy raises many kinds: say which storage, in one line
        raise MvoptError(f"storage {describe_storage(url)} cannot be opened: {type(e).__name__}: "
                         f"{str(e).splitlines()[0] if str(e) else ''}") from None
    if url.startswith("sqlite") and ":memory:" not in url:
        _sqlite_wal(storage.engine)
    return storage


def _sqlite_wal(engine: Any) -> None:
    """Write-ahead log with ``synchronous=NORMAL``: a commit no longer waits for the disk.

    Committed transactions still survive a killed process (only a power cut may lose the last
    ones), and readers (optuna-dashboard, other workers) no longer block the writer.
    """
    import sqlalchemy

    def on_connect(dbapi_conn: Any, _record: Any) -> None:
        cur = dbapi_conn.cursor()
        cur.execute("PRAGMA journal_mode=WAL")
        cur.execute("PRAGMA synchronous=NORMAL")
        cur.close()
    sqlalchemy.event.listen(engine, "connect", on_connect)
    engine.dispose()  # connections opened before the listener are replaced


def postgres_url(url: str) -> str:
    """A PostgreSQL URL with an installed driver. ``postgresql://`` means psycopg 3 to SQLAlchemy
    2.1, the ``postgres`` extra's driver, so the URL is used as written (``postgres://``, which
    SQLAlchemy does not know, is read as ``postgresql://``); with only psycopg2 installed it becomes
    ``postgresql+psycopg2://``. A URL naming its driver (``postgresql+DRIVER://``) is kept."""
    import importlib.util
    scheme, sep, rest = url.partition("://")
    if scheme in ("postgresql", "postgres"):
        if importlib.util.find_spec("psycopg") is not None:
            return f"postgresql://{rest}"
        if importlib.util.find_spec("psycopg2") is not None:
            return f"postgresql+psycopg2://{rest}"
        raise MvoptError("PostgreSQL storage needs a driver: pip install 'mvopt[postgres]' (psycopg 3)")
    return url


def _unwrap(storage: BaseStorage) -> BaseStorage:
    return getattr(storage, "_backend", storage)


def rdb_engine(storage: BaseStorage) -> Any | None:
    """The SQLAlchemy engine of an RDB storage (None for other storages)."""
    inner = _unwrap(storage)
    return inner.engine if isinstance(inner, RDBStorage) else None


def heartbeat_enabled(storage: BaseStorage) -> bool:
    """Whether the storage fails trials whose heartbeat stopped."""
    inner = _unwrap(storage)
    return isinstance(inner, RDBStorage) and inner.heartbeat_interval is not None


def record_heartbeats(storage: BaseStorage, trial_ids: Sequence[int]) -> None:
    """Record a heartbeat for each of ``trial_ids`` (no-op without heartbeat; one transaction)."""
    if heartbeat_enabled(storage) and trial_ids:
        from mvopt.optimize.writer import trial_writer
        trial_writer(storage).heartbeat(list(trial_ids))


_START_TIMES: dict[int, str] = {}


def _process_start(pid: int) -> str | None:
    """A token that changes when a pid is reused (start time from /proc), None if not running."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return "?"
        return "?"


def owner_tag() -> dict[str, Any]:
    """This process: host, pid and start token."""
    pid = os.getpid()
    if pid not in _START_TIMES:
        _START_TIMES[pid] = _process_start(pid) or "?"
    return {"host": socket.gethostname(), "pid": pid, "start": _START_TIMES[pid]}


def mark_owner(study: optuna.Study, trial_id: int) -> None:
    """Record that this process runs ``trial_id`` (and beat once, so the heartbeat covers it)."""
    study._storage.set_trial_system_attr(trial_id, OWNER_ATTR, owner_tag())
    record_heartbeats(study._storage, [trial_id])


def _owner_dead(owner: Any) -> bool:
    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return False
    start = _process_start(int(owner.get("pid", -1)))
    return start is None or (start != "?" and owner.get("start") not in ("?", start))


def retry_trial(study: optuna.Study, trial: FrozenTrial) -> None:
    """Queue a WAITING copy of a failed trial (same parameters; mvopt's own attributes dropped)."""
    system_attrs = {k: v for k, v in trial.system_attrs.items()
                    if not k.startswith("mvopt:") and not k.startswith("constraints")}
    history = list(system_attrs.get("retry_history", [])) + [trial.number]
    system_attrs.update({"failed_trial": system_attrs.get("failed_trial", trial.number), "retry_history": history})
    study.add_trial(optuna.create_trial(state=TrialState.WAITING, params=trial.params,
                                        distributions=trial.distributions, system_attrs=system_attrs))


def fail_and_retry(study: optuna.Study, trial_ids: Sequence[int]) -> int:
    """Fail the given RUNNING trials and queue their retries; returns how many this call failed."""
    storage = study._storage
    n = 0
    for tid in trial_ids:
        try:
            if not storage.set_trial_state_values(tid, state=TrialState.FAIL):
                continue
        except optuna.exceptions.UpdateFinishedTrialError:
            continue  # finished (or failed) by someone else meanwhile
        n += 1
        retry_trial(study, copy.deepcopy(storage.get_trial(tid)))
    return n


def recover_dead_trials(study: optuna.Study) -> int:
    """Fail and retry the trials left RUNNING by dead processes; returns how many were recovered.

    Heartbeat-stale trials (RDB storages) are handled by Optuna's ``fail_stale_trials`` with
    :func:`retry_trial` as callback; trials owned by a dead process of this host are recovered
    directly (any storage).
    """
    n = 0
    if heartbeat_enabled(study._storage):
        stale = len(_unwrap(study._storage)._get_stale_trial_ids(study._study_id))  # type: ignore[attr-defined]
        if stale:
            optuna.storages.fail_stale_trials(study)
            n += stale
    running = study.get_trials(deepcopy=False, states=(TrialState.RUNNING,))
    dead = [t._trial_id for t in running if _owner_dead(t.system_attrs.get(OWNER_ATTR))]
    n += fail_and_retry(study, dead)
    return n

