"""`flightlog demo` checks before it touches its database: a log it holds (--reset), another
process that has it open, another demo on it, and a busy port; each refusal leaves the file whole."""

from __future__ import annotations

import fcntl
import hashlib
import os
import socket
from pathlib import Path

from eventlog import open_log

from .test_cli_demo_output import flightlog


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def assert_refused_unchanged(proc, db: str, before: str, says: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert says in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr
    assert digest(db) == before


def test_a_demo_over_an_existing_log_asks_for_reset(db: str) -> None:
    # Issue 28 §10: `--db keep.db` on an existing 54-event log left 0 events.
    with open_log(db) as log:
        head = log.head()
    before = digest(db)
    proc = flightlog("demo", "--auto", "--port", "0", "--db", db, cwd=Path(db).parent)
    assert_refused_unchanged(proc, db, before, f"holds a log ({head.seq} events): pass --reset")
    with open_log(db) as log:
        assert log.head() == head


def test_a_demo_never_deletes_a_database_another_process_has_open(db: str) -> None:
    # A server (here: this test's process) holds the log open: not even --reset removes it.
    with open_log(db) as log:
        head = log.head()
        before = digest(db)
        proc = flightlog("demo", "--auto", "--port", "0", "--reset", "--db", db, cwd=Path(db).parent)
        assert_refused_unchanged(proc, db, before, "is open in another process")
        assert log.head() == head


def test_a_second_demo_on_the_same_file_stops_before_touching_it(db: str) -> None:
    # Issue 28 §10: a second demo in the same folder deleted the running demo's database.
    before = digest(db)
    fd = os.open(f"{db}.demo-lock", os.O_RDWR | os.O_CREAT, 0o600)  # the running demo's claim
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        proc = flightlog("demo", "--auto", "--port", "0", "--reset", "--db", db, cwd=Path(db).parent)
    finally:
        os.close(fd)
    assert_refused_unchanged(proc, db, before, "another demo is running on")


def test_a_busy_port_asked_for_is_refused_before_the_database_is_touched(db: str) -> None:
    before = digest(db)
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = flightlog("demo", "--auto", "--reset", "--port", str(port), "--db", db, cwd=Path(db).parent)
    assert_refused_unchanged(proc, db, before, f"port {port} on 127.0.0.1 is in use")
