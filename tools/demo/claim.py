"""What the demo checks before it touches its database: the port, other users of the file, its content.

A second demo in the same folder used to delete the running demo's database and only then
fail on the busy port. Now, before anything is removed or created: the port must be free
(when one was asked for), no other process may have the file open (a demo's lock file, and
SQLite's own lock on the WAL index that every open connection holds), and a file that holds
a log is replaced only when the user says so (`--reset`).
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import socket
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from .._output import UsageFailure

# SQLite's WAL index: every connection holds a shared lock on this byte of `<db>-shm` while
# it is open (the "DMS" lock, after the 8 locks that start at offset 120).
_DMS_BYTE = 128


@contextlib.contextmanager
def claimed(path: Path, port: int, *, reset: bool) -> Iterator[None]:
    """Hold the demo's claim on `path` (a lock file beside it) while the block runs.

    UsageFailure, with nothing touched, if the port is busy, another process has the database
    open, or it holds a log and `reset` is False.
    """
    if port:
        _check_port(port)
    lock_path = Path(f"{path}.demo-lock")
    fd = os.open(lock_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise UsageFailure(
                f"another demo is running on {path}: stop it first, or give this one another --db"
            ) from None
        if _open_elsewhere(path):
            raise UsageFailure(
                f"{path} is open in another process (a server?): stop it first, or give the demo another --db"
            )
        events = _events_in(path)
        if events < 0 and not reset:
            raise UsageFailure(f"{path} is not a flightlog log: give the demo another --db (or --reset)")
        if events > 0 and not reset:
            raise UsageFailure(
                f"{path} holds a log ({events} events): pass --reset to replace it with a new demo, "
                "or give the demo another --db"
            )
        yield
    finally:
        os.close(fd)  # releases the lock
        with contextlib.suppress(OSError):
            lock_path.unlink()


def _check_port(port: int) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            raise UsageFailure(
                f"port {port} on 127.0.0.1 is in use (another demo?): pass --port 0 for any free port, "
                "or another --port"
            ) from None


def _open_elsewhere(path: Path) -> bool:
    """Whether another process holds a connection to the SQLite file `path` (in WAL mode)."""
    shm = Path(f"{path}-shm")
    try:
        fd = os.open(shm, os.O_RDWR | os.O_CLOEXEC)
    except FileNotFoundError:
        return False
    except OSError:
        return True  # there, and not ours to open: not ours to delete either
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, _DMS_BYTE)
    except OSError:
        return True
    else:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, _DMS_BYTE)
        return False
    finally:
        os.close(fd)


def _events_in(path: Path) -> int:
    """How many events the file at `path` holds (0: missing or empty; -1: not a flightlog log)."""
    if not path.exists() or path.stat().st_size == 0:
        return 0
    uri = f"file:{path}?mode=ro"
    try:
        with contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            row = conn.execute("SELECT count(*) FROM events").fetchone()
    except sqlite3.Error:
        return -1
    return int(row[0])
