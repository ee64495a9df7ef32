"""Shared fixtures: a log per backend, a manual clock."""

from __future__ import annotations

import functools
import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from eventlog import EventLog, ManualClock, open_log

PG_URL_ENV = "FLIGHTLOG_TEST_PG_URL"
BACKENDS = ["sqlite-file", "sqlite-memory", "postgres"]
# The backends several processes can open at once (parametrize `backend` with indirect=True).
SHARED_BACKENDS = ["sqlite-file", pytest.param("postgres", marks=pytest.mark.postgres)]


def pg_url() -> str | None:
    return os.environ.get(PG_URL_ENV) or None


@functools.cache
def pg_unavailable() -> str | None:
    """Why the PostgreSQL tests cannot run here, or None when they can."""
    url = pg_url()
    if url is None:
        return f"PostgreSQL not configured: set {PG_URL_ENV}=postgresql://… (.ci/run does)"
    try:
        import psycopg
    except ImportError:
        return "psycopg is not installed: pip install -e '.[postgres]'"
    try:
        psycopg.connect(url, connect_timeout=5).close()
    except psycopg.Error as e:
        return f"PostgreSQL at {PG_URL_ENV} is not reachable: {str(e).strip()}"
    return None


def new_pg_schema() -> str:
    """A fresh schema name; a log opened on `pg_schema_url(name)` creates it."""
    return f"t_{uuid.uuid4().hex[:12]}"


def pg_schema_url(schema: str) -> str:
    """The test server's URL with `schema` first on the search_path."""
    base = pg_url() or ""
    return f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"


def drop_pg_schema(schema: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(pg_url() or "", autocommit=True) as conn:
        conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def require_or_skip(reason: str) -> None:
    """Skip for want of a service, except where FLIGHTLOG_REQUIRE_SERVICES=1 (.ci/run sets it):
    there a missing PostgreSQL or browser is a failure, so CI cannot pass by skipping."""
    if os.environ.get("FLIGHTLOG_REQUIRE_SERVICES") == "1":
        pytest.fail(f"required service missing: {reason}", pytrace=False)
    pytest.skip(reason)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres" and (reason := pg_unavailable()):
        require_or_skip(reason)
    return str(request.param)


@pytest.fixture
def log_factory(backend: str, tmp_path) -> Iterator[Callable[..., EventLog]]:
    """Opens logs on the parametrized backend; every log opened by one test shares one database.

    On PostgreSQL each test gets a fresh schema (the log creates it), dropped afterwards.
    """
    opened: list[EventLog] = []
    schema = None
    if backend == "postgres":
        schema = new_pg_schema()
        target = pg_schema_url(schema)
    elif backend == "sqlite-file":
        target = str(tmp_path / "log.db")
    else:
        target = ":memory:"

    def factory(**kwargs: object) -> EventLog:
        if backend == "sqlite-memory" and opened:
            return opened[0]  # an in-memory database exists only for its one connection
        log = open_log(target, **kwargs)  # type: ignore[arg-type]
        opened.append(log)
        return log

    yield factory
    for log in opened:
        if not log.closed:
            log.close()
    if schema is not None:
        drop_pg_schema(schema)


@pytest.fixture
def db_target(backend: str, tmp_path) -> Iterator[str]:
    """A database that other processes can open too: a SQLite file path, or a PostgreSQL URL
    naming a fresh schema (created by the first log opened on it, dropped afterwards)."""
    if backend == "sqlite-file":
        yield str(tmp_path / "log.db")
        return
    if backend != "postgres":
        raise ValueError(f"{backend}: only one log object can open this database")
    schema = new_pg_schema()
    yield pg_schema_url(schema)
    drop_pg_schema(schema)


@pytest.fixture
def log(log_factory: Callable[..., EventLog], clock: ManualClock) -> EventLog:
    return log_factory(clock=clock)
