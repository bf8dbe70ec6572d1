"""Claims: at most one trial of a study simulates a given configuration, across all workers.

Before simulating, a trial *claims* its configuration key. On RDB storages (SQLite, PostgreSQL)
the claim is a row of the table ``mvopt_claims`` in the study's own database, whose primary key
(study, config key) makes the first claim win atomically; a claim held by a trial that has
since failed (its worker died) is taken over with a compare-and-set update. Other storages
(journal files) get in-process claims only: several workers on one journal file may then
simulate a configuration twice (they still never lose a trial).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Protocol

import sqlalchemy as sa

__all__ = ["Claims", "RdbClaims", "LocalClaims", "make_claims"]


class Claims(Protocol):
    """Contract: ``claim({key: trial_number})`` returns ``{key: owner_trial_number}``.

    The owner is the trial that must simulate the key: the caller's own trial when it won, an
    earlier claimant otherwise. ``is_dead(n)`` says whether trial ``n`` failed, in which case its
    claim is taken over by the new claimant.
    """

    def claim(self, wanted: Mapping[str, int], is_dead: Callable[[int], bool]) -> dict[str, int]: ...


class LocalClaims:
    """Claims held in this process only."""

    def __init__(self) -> None:
        self._owners: dict[str, int] = {}

    def claim(self, wanted: Mapping[str, int], is_dead: Callable[[int], bool]) -> dict[str, int]:
        out = {}
        for key, number in wanted.items():
            owner = self._owners.get(key)
            if owner is None or (owner != number and is_dead(owner)):
                self._owners[key] = owner = number
            out[key] = owner
        return out


_metadata = sa.MetaData()
_table = sa.Table(
    "mvopt_claims", _metadata,
    sa.Column("study", sa.String(512), primary_key=True),
    sa.Column("config_key", sa.String(64), primary_key=True),
    sa.Column("trial_number", sa.Integer, nullable=False),
)


class RdbClaims:
    """Claims as rows of ``mvopt_claims`` in the study's database (atomic across processes)."""

    def __init__(self, engine: Any, study_name: str) -> None:
        self.engine = engine
        self.study = study_name
        _metadata.create_all(engine, checkfirst=True)

    def _insert(self, conn: Any, rows: list[dict[str, Any]]) -> None:
        dialect = self.engine.dialect.name
        if dialect == "postgresql":
            from sqlalchemy.dialects.postgresql import insert
        elif dialect == "sqlite":
            from sqlalchemy.dialects.sqlite import insert
        else:  # pragma: no cover - other databases: one row at a time
            for row in rows:
                try:
                    with conn.begin_nested():
                        conn.execute(_table.insert().values(**row))
                except sa.exc.IntegrityError:
                    pass
            return
        conn.execute(insert(_table).values(rows).on_conflict_do_nothing())

    def claim(self, wanted: Mapping[str, int], is_dead: Callable[[int], bool]) -> dict[str, int]:
        if not wanted:
            return {}
        rows = [{"study": self.study, "config_key": k, "trial_number": n} for k, n in wanted.items()]
        with self.engine.begin() as conn:
            for chunk in _chunks(rows, 500):
                self._insert(conn, chunk)
        owners = self._owners(wanted)
        for key, number in wanted.items():
            owner = owners[key]
            if owner != number and is_dead(owner):
                with self.engine.begin() as conn:
                    res = conn.execute(_table.update()
                                       .where(_table.c.study == self.study, _table.c.config_key == key,
                                              _table.c.trial_number == owner)
                                       .values(trial_number=number))
                owners[key] = number if res.rowcount == 1 else self._owners({key: number})[key]
        return owners

    def _owners(self, keys: Iterable[str]) -> dict[str, int]:
        keys = list(keys)
        out: dict[str, int] = {}
        with self.engine.connect() as conn:
            for chunk in _chunks(keys, 500):
                q = sa.select(_table.c.config_key, _table.c.trial_number).where(
                    _table.c.study == self.study, _table.c.config_key.in_(chunk))
                out.update({k: n for k, n in conn.execute(q)})
        return out


def _chunks(items: list[Any], n: int) -> Iterable[list[Any]]:
    for i in range(0, len(items), n):
        yield items[i:i + n]


def make_claims(engine: Any | None, study_name: str) -> Claims:
    """RDB claims when the storage is a database, in-process claims otherwise."""
    return RdbClaims(engine, study_name) if engine is not None else LocalClaims()
