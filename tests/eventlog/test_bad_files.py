"""Damaged, read-only, missing and full databases: typed errors, and the file left as it was."""

from __future__ import annotations

import hashlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Callable, Iterator
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import (
    CorruptDatabaseError,
    DiskFullError,
    EventLog,
    NewEvent,
    ReadOnlyDatabaseError,
    StorageError,
    open_log,
)


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def open_fds(path: Path) -> list[str]:
    fds = "/proc/self/fd"
    return [fd for fd in os.listdir(fds) if os.path.realpath(os.path.join(fds, fd)) == str(path)]


def make_log(path: Path, batches: int = 1, size: int = 3) -> list[str]:
    """A closed log at `path`; returns the event ids it holds."""
    ids = []
    with open_log(path) as log:
        for b in range(batches):
            events = [NewEvent("Padded", {"b": b, "k": k, "pad": "x" * 300}) for k in range(size)]
            log.append(f"run-{b % 4}", events)
            ids.extend(e.event_id for e in events)
    return ids


def stored_ids(path: Path) -> list[str]:
    with open_log(path) as log:
        assert log.verify().ok
        return [r.event_id for r in log.read_all()]


def assert_names_path_and_cause(error: StorageError, path: Path, cause: str) -> None:
    assert str(path) in str(error)
    assert error.path == str(path)
    assert cause in error.cause
    assert cause in str(error)


@pytest.mark.parametrize("readonly", [False, True])
def test_a_file_that_is_not_a_database(tmp_path, readonly):
    path = tmp_path / "notes.db"
    path.write_bytes(b"these are my notes, not a database\n" * 300)
    before = digest(path)
    with pytest.raises(CorruptDatabaseError) as excinfo:
        open_log(path, readonly=readonly)
    assert_names_path_and_cause(excinfo.value, path, "not a database")
    assert open_fds(path) == [], "a failed open left the file open"
    assert digest(path) == before


def test_a_log_with_a_corrupt_header(tmp_path):
    path = tmp_path / "log.db"
    make_log(path)
    with path.open("r+b") as f:
        f.write(b"NOT SQLITE AT ALL")  # the 16-byte magic string and a byte more
    before = digest(path)
    with pytest.raises(CorruptDatabaseError) as excinfo:
        open_log(path)
    assert_names_path_and_cause(excinfo.value, path, "not a database")
    assert digest(path) == before


def corrupt_events_root_page(path: Path) -> None:
    with closing(sqlite3.connect(path)) as conn:
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
        (root,) = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'events'").fetchone()
    with path.open("r+b") as f:
        f.seek((root - 1) * page_size)
        f.write(bytes([0xA5]) * page_size)


def on_fresh_log(path: Path, call: Callable[[EventLog], object]) -> object:
    with open_log(path) as log:
        return call(log)


def test_a_log_with_a_corrupt_page(tmp_path):
    path = tmp_path / "log.db"
    make_log(path, batches=60, size=10)  # a few hundred pages: the events table has interior pages
    corrupt_events_root_page(path)
    before = digest(path)
    calls: list[Callable[[EventLog], object]] = [
        lambda log: list(log.read_all()),
        lambda log: list(log.read("run-1")),
        lambda log: log.verify(),
        lambda log: log.head(),
        lambda log: log.append("run-9", [NewEvent("Lost")]),
    ]
    for call in calls:
        with pytest.raises(CorruptDatabaseError) as excinfo:
            on_fresh_log(path, call)
        assert_names_path_and_cause(excinfo.value, path, "malformed")
        # Every call failed before writing; the failed append among them left no trace.
        assert digest(path) == before


def test_a_log_opened_read_only(tmp_path):
    path = tmp_path / "log.db"
    ids = make_log(path, batches=3)
    before = digest(path)
    with open_log(path, readonly=True) as log:
        head = log.head()
        with pytest.raises(ReadOnlyDatabaseError) as excinfo:
            log.append("run-1", [NewEvent("Refused")])
        assert_names_path_and_cause(excinfo.value, path, "read-only")
        assert log.head() == head
        assert [r.event_id for r in log.read_all()] == ids
        assert log.verify().ok
    assert digest(path) == before
    assert stored_ids(path) == ids  # nothing was acknowledged, nothing appears


@pytest.mark.parametrize("readonly", [False, True])
def test_a_folder_that_does_not_exist(tmp_path, readonly):
    path = tmp_path / "missing" / "log.db"
    with pytest.raises(StorageError) as excinfo:
        open_log(path, readonly=readonly)
    assert str(path) in str(excinfo.value)
    assert excinfo.value.cause
    assert not path.parent.exists()


@pytest.fixture
def tmpfs(tmp_path) -> Iterator[Callable[..., Path]]:
    """Mounts a small tmpfs of its own (needs root), or skips saying why it cannot."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = False

    def mount(*options: str) -> Path:
        nonlocal mounted
        command = ["mount", "-t", "tmpfs", "-o", ",".join(options), "tmpfs", str(mnt)]
        if mounted:
            command = ["mount", "-o", ",".join(("remount", *options)), str(mnt)]
        if shutil.which("mount") is None:
            pytest.skip("no mount command: cannot make a small or read-only filesystem")
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs (needs root): {done.stderr.strip()}")
        mounted = True
        return mnt

    yield mount
    if mounted:
        busy = subprocess.run(["umount", str(mnt)], capture_output=True, text=True, check=False)
        if busy.returncode != 0:  # a file left open on it: detach now, so no mount outlives the test
            subprocess.run(["umount", "--lazy", str(mnt)], check=False)
            pytest.fail(f"the tmpfs was still in use: {busy.stderr.strip()}")


def test_a_read_only_filesystem(tmpfs):
    folder = tmpfs("size=4m")
    path = folder / "log.db"
    ids = make_log(path)
    before = digest(path)
    tmpfs("ro")
    with pytest.raises(ReadOnlyDatabaseError) as excinfo:
        open_log(path)
    assert_names_path_and_cause(excinfo.value, path, "cannot be written")
    assert open_fds(path) == []
    assert digest(path) == before
    tmpfs("rw")
    assert stored_ids(path) == ids


def test_a_log_on_read_only_media_opens_read_only(tmpfs):
    # Closed cleanly, a WAL database has no -shm file, and none can be created here.
    folder = tmpfs("size=4m")
    path = folder / "log.db"
    ids = make_log(path)
    before = digest(path)
    tmpfs("ro")
    with open_log(path, readonly=True) as log:
        assert [r.event_id for r in log.read_all()] == ids
        assert log.verify().ok
        with pytest.raises(ReadOnlyDatabaseError):
            log.append("run-1", [NewEvent("Noted")])
    assert digest(path) == before
    assert sorted(p.name for p in folder.iterdir()) == ["log.db"]


def fill(log: EventLog, path: Path) -> tuple[list[str], DiskFullError, str]:
    """Append batches until the disk is full: (acknowledged ids, the error, main file digest before)."""
    acked: list[str] = []
    for b in range(100_000):
        events = [NewEvent("Padded", {"b": b, "k": k, "pad": "x" * 500}) for k in range(3)]
        before = digest(path)
        try:
            log.append("run-full", events, expect=len(acked))
        except DiskFullError as e:
            return acked, e, before
        acked.extend(e.event_id for e in events)
    raise AssertionError("the disk never filled up")


def check_full(log: EventLog, path: Path, acked: list[str], error: DiskFullError, before: str) -> None:
    assert isinstance(error, StorageError)
    assert_names_path_and_cause(error, path, "disk is full")
    assert len(acked) >= 3, "the disk was full before the test began"
    # WAL mode: the main file is only written by checkpoints, and none ran for the failed batch.
    assert digest(path) == before
    assert log.head().seq == len(acked)
    assert [r.event_id for r in log.read_all()] == acked
    assert log.verify().ok
    with pytest.raises(DiskFullError):
        log.append("run-full", [NewEvent("StillFull", {"pad": "y" * 2000})])


def test_a_full_disk(tmpfs):
    path = tmpfs("size=256k") / "log.db"
    with open_log(path) as log:
        acked, error, before = fill(log, path)
        check_full(log, path, acked, error, before)
        tmpfs("size=16m")
        # With room again, the same log object appends as if nothing had happened.
        acked.extend(r.event_id for r in log.append("run-full", [NewEvent("Roomy")], expect=len(acked)))
    assert stored_ids(path) == acked
    with closing(sqlite3.connect(path)) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]


def test_a_database_at_its_page_limit(tmp_path):
    path = tmp_path / "log.db"
    with open_log(path) as log:
        log.head()
        # A private handle: SQLite's max_page_count is the one way to get SQLITE_FULL without a tiny disk.
        conn = log._conn  # type: ignore[attr-defined]
        (pages,) = conn.execute("PRAGMA page_count").fetchone()
        conn.execute(f"PRAGMA max_page_count = {pages + 12}")
        acked, error, before = fill(log, path)
        check_full(log, path, acked, error, before)
        conn.execute("PRAGMA max_page_count = 1000000")
        acked.extend(r.event_id for r in log.append("run-full", [NewEvent("Roomy")], expect=len(acked)))
    assert stored_ids(path) == acked
