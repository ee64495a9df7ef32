"""A SQLite log's files are its owner's alone, and a writable open makes no other database a log.

A new log, its -wal and its -shm are 0600 whatever the process umask; a file the user made
keeps its mode. A writable open of a SQLite file that holds another application's tables
refuses it before writing anything: same bytes, same journal mode, no file left beside it.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import NewEvent, NotALogError, StorageError, open_log


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def modes(folder: Path) -> dict[str, int]:
    return {p.name: mode(p) for p in sorted(folder.iterdir())}


@pytest.fixture(params=[0o000, 0o022, 0o002], ids=lambda m: f"umask {m:03o}")
def umask(request: pytest.FixtureRequest) -> Iterator[int]:
    old = os.umask(request.param)
    yield request.param
    os.umask(old)


def test_a_new_log_and_its_wal_and_shm_are_0600_whatever_the_umask(tmp_path, umask):
    path = tmp_path / "new.db"
    with open_log(path) as log:
        log.append("run-1", [NewEvent("Noted", {"n": 1})])
        assert modes(tmp_path) == {"new.db": 0o600, "new.db-shm": 0o600, "new.db-wal": 0o600}
    assert mode(path) == 0o600


def test_a_file_the_user_made_keeps_its_mode(tmp_path, umask):
    path = tmp_path / "mine.db"
    path.touch()
    path.chmod(0o640)
    with open_log(path) as log:
        log.append("run-1", [NewEvent("Noted", {"n": 1})])
        # SQLite gives the -wal and -shm the database's own mode.
        assert modes(tmp_path) == {"mine.db": 0o640, "mine.db-shm": 0o640, "mine.db-wal": 0o640}
    assert mode(path) == 0o640


def test_a_log_reopened_keeps_its_mode(tmp_path):
    path = tmp_path / "log.db"
    with open_log(path) as log:
        log.append("run-1", [NewEvent("Noted", {"n": 1})])
    path.chmod(0o644)
    with open_log(path) as log:
        assert log.head().seq == 1
    assert mode(path) == 0o644


def test_a_read_only_open_creates_nothing(tmp_path):
    path = tmp_path / "none.db"
    with pytest.raises(StorageError, match="no such file"):
        open_log(path, readonly=True)
    assert not path.exists()


# -- another application's database -----------------------------------------------------------


def state_of(path: Path) -> tuple[str, str, list[tuple[str, str]], list[str]]:
    """What must not change: the bytes, the journal mode, the schema, the files beside it."""
    data = path.read_bytes()
    # The header's read and write versions: 2 in WAL mode, 1 in rollback-journal mode.
    journal = {b"\x02\x02": "wal", b"\x01\x01": "delete"}[data[18:20]]
    uri = f"file:{path}?mode=ro&immutable=1"
    with closing(sqlite3.connect(uri, uri=True)) as conn:
        tables = conn.execute("SELECT name, sql FROM sqlite_master ORDER BY name").fetchall()
    return hashlib.sha256(data).hexdigest(), journal, tables, sorted(p.name for p in path.parent.iterdir())


def make_foreign(path: Path, journal: str, table: str = "notes") -> Path:
    """A SQLite file of someone else's, closed, with a table and a row, in `journal` mode."""
    with closing(sqlite3.connect(path)) as conn:
        conn.execute(f"PRAGMA journal_mode = {journal}")
        conn.execute(f"CREATE TABLE {table} (id INTEGER PRIMARY KEY, body TEXT)")
        conn.execute(f"INSERT INTO {table} (body) VALUES ('keep me')")
        conn.commit()
    return path


@pytest.mark.parametrize("journal", ["delete", "wal"])
@pytest.mark.parametrize("table", ["notes", "events"], ids=["its own table", "a table named events"])
def test_a_writable_open_refuses_another_applications_database_unchanged(tmp_path, journal, table):
    path = make_foreign(tmp_path / "other.db", journal, table)
    before = state_of(path)
    assert before[1] == journal
    with pytest.raises(NotALogError, match="not a flightlog log"):
        open_log(path)
    assert state_of(path) == before


def test_a_writable_open_refuses_a_log_of_another_migration_set(tmp_path):
    # sqlite-utils' migration table is shared by every application that uses it.
    path = tmp_path / "other.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.execute("CREATE TABLE events (seq INTEGER PRIMARY KEY)")
        conn.execute("CREATE TABLE _sqlite_migrations (migration_set TEXT, name TEXT, applied_at TEXT)")
        conn.execute("INSERT INTO _sqlite_migrations VALUES ('someone.else', '0001', '2026-01-01')")
        conn.commit()
    before = state_of(path)
    with pytest.raises(NotALogError):
        open_log(path)
    assert state_of(path) == before


def test_an_empty_file_and_a_database_without_tables_become_logs(tmp_path):
    empty = tmp_path / "empty.db"
    empty.touch()
    bare = tmp_path / "bare.db"
    with closing(sqlite3.connect(bare)) as conn:
        conn.execute("PRAGMA user_version = 0")
        conn.execute("VACUUM")  # a database header and no schema
    for path in (empty, bare):
        with open_log(path) as log:
            log.append("run-1", [NewEvent("Noted", {"n": 1})])
        with open_log(path, readonly=True) as log:
            assert log.verify().ok


def test_two_opens_of_one_new_file_both_make_it_a_log(tmp_path):
    # The second open finds the first one's schema (or none yet): never "another application's".
    path = tmp_path / "shared.db"
    with open_log(path) as first, open_log(path) as second:
        first.append("run-1", [NewEvent("Noted", {"n": 1})])
        second.append("run-2", [NewEvent("Noted", {"n": 2})])
        assert second.head().seq == 2


def test_a_read_only_open_of_another_applications_database_is_refused_unchanged(tmp_path):
    path = make_foreign(tmp_path / "other.db", "wal")
    before = state_of(path)
    with pytest.raises(NotALogError):
        open_log(path, readonly=True)
    assert state_of(path) == before
