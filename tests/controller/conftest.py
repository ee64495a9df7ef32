"""Fixtures for the controller: a System on a SQLite file, a driven harness, a started controller."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import Controller, System
from eventlog import ManualClock

from .helpers import ManualHarness


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "flightlog.db"


@pytest.fixture
def system(db_path: Path, clock: ManualClock) -> Iterator[System]:
    """A System without the scheduler thread (tests fire deadlines with tick()); it closes its controllers."""
    s = System.open(db_path, clock=clock, scheduler=False)
    yield s
    s.close()


@pytest.fixture
def harness() -> ManualHarness:
    return ManualHarness()


@pytest.fixture
def ctrl(system: System, harness: ManualHarness) -> Controller:
    """A started controller over the driven harness."""
    c = system.controller(harness)
    c.start()
    return c
