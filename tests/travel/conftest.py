"""Fixtures for replay and time travel: a seeded mixed workload in a SQLite file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from eventlog import EventLog, ManualClock, open_log
from tools.bench.workload import fill

RUNS = 12  # 1,200 events: a dozen runs, two per session, six sessions interleaved
SEED = 11


def make_log(path: Path, runs: int = RUNS, seed: int = SEED) -> int:
    """Fill a new log at `path` with the seeded workload; returns its head."""
    clock = ManualClock()
    log = open_log(path, clock=clock)
    try:
        return fill(log, runs, seed, clock=clock)
    finally:
        log.close()


@pytest.fixture(scope="session")
def workload_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One seeded workload log for the session; tests copy it before writing to it."""
    path = tmp_path_factory.mktemp("workload") / "workload.db"
    make_log(path)
    return path


@pytest.fixture
def db(workload_db: Path, tmp_path: Path) -> Path:
    """A private copy of the workload log (snapshots written to it stay in this test)."""
    import sqlite3

    target = tmp_path / "log.db"
    src = sqlite3.connect(workload_db)
    dst = sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return target


@pytest.fixture
def open_db(db: Path) -> Iterator[Callable[..., EventLog]]:
    """Opens the private copy; every log it opened is closed after the test."""
    opened: list[EventLog] = []

    def opener(**kwargs: object) -> EventLog:
        log = open_log(db, **kwargs)  # type: ignore[arg-type]
        opened.append(log)
        return log

    yield opener
    for log in opened:
        log.close()
