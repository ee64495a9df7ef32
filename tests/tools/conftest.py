"""Fixtures for the CLI tests: a private copy of a small seeded log, and the ids in it."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest

from eventlog import open_log
from projections import Views

from .helpers import make_workload


@dataclass(frozen=True)
class Seeded:
    """What the seeded log holds: its head, an agent run and a broker run."""

    head: int
    run: str
    broker_run: str


@pytest.fixture(scope="session")
def workload(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Seeded]:
    path = tmp_path_factory.mktemp("cli") / "workload.db"
    head = make_workload(path)
    with open_log(path, readonly=True) as log:
        views = Views(log, snapshots=None)
        seeded = Seeded(head, views.agent_runs()[0].run_id, views.runs()[-1].run_id)
    return path, seeded


@pytest.fixture
def db(workload: tuple[Path, Seeded], tmp_path: Path) -> str:
    """A private copy of the seeded log (whatever a test writes stays in it)."""
    target = tmp_path / "flightlog.db"
    src, dst = sqlite3.connect(workload[0]), sqlite3.connect(target)
    try:
        src.backup(dst)
    finally:
        src.close()
        dst.close()
    return str(target)


@pytest.fixture
def seeded(workload: tuple[Path, Seeded]) -> Seeded:
    return workload[1]
