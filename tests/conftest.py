"""Shared fixtures: a log per backend, a manual clock."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest

from eventlog import EventLog, ManualClock, open_log

PG_URL_ENV = "FLIGHTLOG_TEST_PG_URL"
BACKENDS = ["sqlite-file", "sqlite-memory", "postgres"]


def pg_url() -> str | None:
    return os.environ.get(PG_URL_ENV) or None


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    if request.param == "postgres" and not pg_url():
        pytest.skip(f"PostgreSQL not configured: set {PG_URL_ENV}=postgresql://… (.ci/run does)")
    return str(request.param)


@pytest.fixture
def log_factory(backend: str, tmp_path) -> Iterator[Callable[..., EventLog]]:
    """Opens logs on the parametrized backend; every log opened by one test shares one database."""
    opened: list[EventLog] = []
    if backend == "postgres":
        schema = f"t_{uuid.uuid4().hex[:12]}"
        target = f"{pg_url()}{'&' if '?' in (pg_url() or '') else '?'}options=-csearch_path%3D{schema}"
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


@pytest.fixture
def log(log_factory: Callable[..., EventLog], clock: ManualClock) -> EventLog:
    return log_factory(clock=clock)
