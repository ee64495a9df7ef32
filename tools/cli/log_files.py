"""Who else may use a SQLite log's files, as `flightlog serve` checks before it opens them.

Whoever can write the log (or its -wal or -shm) can rewrite the history the server vouches
for and forge the operators it trusts: serve refuses such a file. Whoever can read it can
read every run's data: serve says so, once, and serves. Nothing is chmod-ed: the files
are the user's. A PostgreSQL URL or an in-memory log has no file to check.
"""

from __future__ import annotations

import os
import stat

from .._output import StorageFailure

SIDE_FILES = ("-wal", "-shm")


class UnsafeLogFileError(StorageFailure):
    """Raised when group or others can write a log's file: one line on stderr, exit 8."""


def check_log_files(db: str) -> str | None:
    """Raise UnsafeLogFileError if group or others can write DB or its -wal/-shm; else the one
    line of warning (without the `flightlog:` prefix) if they can read any of them."""
    if db.startswith(("postgresql://", "postgres://", "file::memory:")) or db == ":memory:":
        return None
    readable: list[str] = []
    for path in (db, *(db + suffix for suffix in SIDE_FILES)):
        try:
            info = os.stat(path)
        except OSError:  # missing (a new log, no -wal yet), or for the open to report
            continue
        if not stat.S_ISREG(info.st_mode):
            continue
        mode = stat.S_IMODE(info.st_mode)
        if mode & (stat.S_IWGRP | stat.S_IWOTH):
            raise UnsafeLogFileError(
                f"refusing to serve {db}: group or others can write {path} (mode {mode:04o}); "
                f"chmod 600 {path}"
            )
        if mode & (stat.S_IRGRP | stat.S_IROTH):
            readable.append(f"{path} (mode {mode:04o})")
    if not readable:
        return None
    return f"warning: group or others can read {', '.join(readable)}: chmod 600 the log's files"
