"""The file of a SQLite log: made for its owner alone, and told apart from other databases.

A writable open creates a missing file 0600 before SQLite opens it, whatever the process
umask: SQLite gives the -wal and -shm it makes the database's own mode, so they are 0600
too. A file that already exists keeps the mode its owner gave it. Before anything is written,
the schema decides: an empty one (a new or 0-byte file, or a database with no tables yet)
becomes a log, a log stays one, and anything else is another application's and is refused.
"""

from __future__ import annotations

import os
import sqlite3
from enum import Enum

from ._errors import NotALogError

MIGRATION_SET = "flightlog.eventlog"
PRIVATE_MODE = 0o600
# The tables every flightlog log has from its first migration on.
LOG_TABLES = frozenset({"events", "_sqlite_migrations"})


class Schema(Enum):
    """What a database's schema says it is."""

    EMPTY = "empty"  # no table, view, index or trigger: a new file, or nobody's yet
    LOG = "log"  # flightlog's tables, put there by flightlog's migrations
    FOREIGN = "foreign"  # anything else: another application's database


def create_private(path: str) -> bool:
    """Create `path` as an empty 0600 file unless something is there already; True if it made it.

    A failure to create it (a read-only folder, say) is left for SQLite to report in its own
    words, as it did before this step existed.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        fd = os.open(path, flags, PRIVATE_MODE)
    except OSError:
        return False
    try:
        os.fchmod(fd, PRIVATE_MODE)  # the umask may have taken bits off; it never adds any
    finally:
        os.close(fd)
    return True


def schema_of(conn: sqlite3.Connection) -> Schema:
    """The schema of the database `conn` reads (it only reads: nothing is written)."""
    objects = conn.execute("SELECT type, name FROM sqlite_master").fetchall()
    if not objects:
        return Schema.EMPTY
    tables = {name for kind, name in objects if kind == "table"}
    if not LOG_TABLES.issubset(tables):
        return Schema.FOREIGN
    try:
        ours = conn.execute(
            "SELECT 1 FROM _sqlite_migrations WHERE migration_set = ? LIMIT 1", (MIGRATION_SET,)
        ).fetchone()
    except sqlite3.OperationalError:  # a table of that name, but not sqlite-utils' own
        return Schema.FOREIGN
    return Schema.LOG if ours else Schema.FOREIGN


def refuse_foreign(conn: sqlite3.Connection, path: str) -> None:
    """Raise NotALogError when the database at `path` is another application's.

    Called on the writable connection before its first write (page size, journal mode,
    migrations), so a refused file keeps its bytes and its journal mode. The read ends at
    once (the connection is in autocommit mode): it holds no lock afterwards.
    """
    if schema_of(conn) is Schema.FOREIGN:
        raise NotALogError(path)
