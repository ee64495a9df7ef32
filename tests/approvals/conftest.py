"""Fixtures for the approval gate: a System per backend, and Systems on one SQLite file."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from actors import System
from eventlog import EventLog, ManualClock


@pytest.fixture
def system(log: EventLog, clock: ManualClock) -> Iterator[System]:
    """A System without the scheduler thread: tests fire deadlines with tick()."""
    s = System.open(log, clock=clock, scheduler=False)
    yield s
    s.close()


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "flightlog.db"


@pytest.fixture
def open_system(db_path: Path, clock: ManualClock) -> Iterator[Callable[..., System]]:
    """Opens Systems on one SQLite file (each with its own log); closes them all afterwards."""
    opened: list[System] = []

    def factory(**kwargs: Any) -> System:
        kwargs.setdefault("clock", clock)
        kwargs.setdefault("scheduler", False)
        s = System.open(db_path, **kwargs)
        opened.append(s)
        return s

    yield factory
    for s in reversed(opened):
        s.close()
