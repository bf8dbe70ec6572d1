"""The PostgreSQL server of the tests: ``.ci/services`` starts it (the README's test command
runs that first); ``MVOPT_TEST_POSTGRES_URL`` names another one. Without a server or without
the driver (psycopg 3, extra ``postgres``) the tests that need it are skipped, with the reason in
pytest's summary (``-ra``)."""

from __future__ import annotations

import os

URL = os.environ.get("MVOPT_TEST_POSTGRES_URL", "postgresql://mvopt@127.0.0.1:54329/mvopt_test")


def _driver():
    try:
        import psycopg
        return psycopg
    except ImportError:
        import psycopg2  # (an older install: the tests then show what a plain URL does with it)
        return psycopg2


def skip_reason() -> str | None:
    """Why the PostgreSQL tests cannot run here (None: they can)."""
    try:
        driver = _driver()
    except ImportError:
        return "no PostgreSQL driver is installed (pip install '.[test]' or '.[postgres]': psycopg 3)"
    try:
        driver.connect(URL, connect_timeout=3).close()
    except Exception as e:  # noqa: BLE001 - any failure to connect is the reason to skip
        return (f"no PostgreSQL server at {URL}: start one with `.ci/services` (the README's test command does): "
                f"{str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__}")
    return None


def create_database(name: str) -> str:
    """A new, empty database on the test server; its URL."""
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f'CREATE DATABASE "{name}"')
    return URL.rsplit("/", 1)[0] + "/" + name


def drop_database(name: str) -> None:
    """Drop a database of the test server (connections to it are closed first)."""
    _admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _admin(*statements: str) -> None:
    conn = _driver().connect(URL)
    try:
        conn.autocommit = True
        cur = conn.cursor()
        for sql in statements:
            cur.execute(sql)
    finally:
        conn.close()
