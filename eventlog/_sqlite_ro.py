"""Opening a SQLite file read-only: refuse what is not a flightlog log, leave nothing behind.

A read-only open never migrates and never changes the journal mode. The schema is checked
before anything else through an `immutable` connection when the file has no `-wal` (then
the main file holds every commit, and such a connection creates no file); a foreign file is
refused unchanged. Reading a WAL database needs its `-shm` (and SQLite makes an empty
`-wal` with it): those two are removed again on close, if this open made them, nothing was
written to the `-wal` and no other connection holds the database — checked, as SQLite
itself checks before deleting them, by taking its exclusive lock for a moment.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import urllib.parse
from collections import Counter
from collections.abc import Iterator

from ._errors import NotALogError, StorageError
from ._sqlite_file import Schema, schema_of

# SQLite's lock bytes in the database file (os_unix.c): PENDING, RESERVED, then the SHARED range.
_PENDING_BYTE = 0x40000000
_LOCK_SPAN = 2 + 510

# Read-only logs of this process open per file: another one may still use the -shm.
_open_here: Counter[str] = Counter()
_open_lock = threading.Lock()


def uri(path: str, *, immutable: bool = False) -> str:
    """The `mode=ro` URI of a file (with `immutable=1`: no locks, no -shm)."""
    quoted = urllib.parse.quote(os.path.abspath(path))
    return f"file:{quoted}?mode=ro" + ("&immutable=1" if immutable else "")


class ReadOnlyOpen:
    """The bookkeeping of one read-only open of a file: what it found, what it must clear away."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.real = os.path.realpath(path)
        if os.path.isdir(path):
            raise StorageError(path, "is a directory, not a database")
        if not os.path.exists(path):
            raise StorageError(path, "no such file: a read-only open creates nothing")
        self._had = {s: os.path.exists(path + s) for s in ("-wal", "-shm")}
        self._done = False
        with _open_lock:
            _open_here[self.real] += 1

    def check_schema(self) -> None:
        """Raise NotALogError unless the file holds flightlog's events table and migrations."""
        conn = sqlite3.connect(uri(self.path, immutable=not self._had["-wal"]), uri=True)
        try:
            ours = schema_of(conn) is Schema.LOG
        finally:
            conn.close()
        if not ours:
            raise NotALogError(self.path)

    def closed(self) -> None:
        """After every connection of this open is closed: remove the -wal and -shm it made."""
        if self._done:
            return
        self._done = True
        with _open_lock:
            _open_here[self.real] -= 1
            if _open_here[self.real] > 0:
                return
            del _open_here[self.real]
            made = [s for s, had in self._had.items() if not had and os.path.exists(self.path + s)]
            if not made or ("-wal" in made and os.path.getsize(self.path + "-wal") > 0):
                return
            with contextlib.suppress(OSError), _exclusive(self.path):
                for suffix in made:
                    os.unlink(self.path + suffix)


@contextlib.contextmanager
def _exclusive(path: str) -> Iterator[None]:
    """SQLite's EXCLUSIVE lock on the database, without waiting; OSError if anyone holds it."""
    fd = os.open(path, os.O_RDWR)
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, _LOCK_SPAN, _PENDING_BYTE, os.SEEK_SET)
        try:
            yield
        finally:
            fcntl.lockf(fd, fcntl.LOCK_UN, _LOCK_SPAN, _PENDING_BYTE, os.SEEK_SET)
    finally:
        os.close(fd)
