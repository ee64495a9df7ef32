"""Durable cursors: where each follower of the log stopped, kept beside the log but off its chain.

A follower that feeds something outside (an OpenTelemetry collector, a webhook) saves, under
its own name, the seq it has handled and a small state of its own (bytes it alone reads), so a
restart resumes there instead of at seq 0 or at the head. A cursor is bookkeeping, not
history: it lives in a `cursors` table of the log's own database (SQLite file or PostgreSQL
schema; an in-memory log keeps it in its one connection), is never hashed into the chain,
and `export` does not carry it.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import ReadOnlyDatabaseError, SnapshotsUnsupported
from ._log import EventLog

if TYPE_CHECKING:
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations


@dataclass(frozen=True, slots=True)
class Cursor:
    """A follower's place: the last seq it handled and its own saved state."""

    name: str
    seq: int
    state: bytes = b""


_MIGRATIONS: list[Migrations] = []


def _migrations() -> Migrations:
    """The named migrations of the `cursors` table (sqlite-utils is imported on first use)."""
    if _MIGRATIONS:
        return _MIGRATIONS[0]
    from sqlite_utils.migrations import Migrations

    found = Migrations("flightlog.cursors")

    @found(name="0001_create_cursors")
    def _create(db: Database) -> None:
        db.execute("CREATE TABLE cursors (name TEXT PRIMARY KEY, seq INTEGER NOT NULL, state BLOB NOT NULL)")

    _MIGRATIONS.append(found)
    return found


class CursorStore:
    """The cursors of one log. Thread-safe; a short-lived connection per call (as snapshots)."""

    def get(self, name: str) -> Cursor | None:
        """The cursor saved under `name`, or None when that follower never saved one."""
        raise NotImplementedError

    def put(self, cursor: Cursor) -> None:
        """Save `cursor`, replacing the one of the same name (one transaction)."""
        raise NotImplementedError


class SQLiteSide:
    """A table beside the log in its SQLite file: a short-lived connection per call (the log's
    own for an in-memory log), and the table's named migrations applied on first use."""

    def __init__(self, log: EventLog) -> None:
        from ._sqlite import translate

        self._translate = translate
        self.path: str = getattr(log, "path", ":memory:")
        self.readonly = bool(getattr(log, "readonly", False))
        self._busy = float(getattr(log, "_busy", 10.0))
        memory = self.path == ":memory:" or self.path.startswith("file::memory:")
        self._log_conn: sqlite3.Connection | None = getattr(log, "_conn", None) if memory else None
        self._lock: threading.RLock = getattr(log, "_conn_lock", None) or threading.RLock()
        self._ready = False

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                if self._log_conn is not None:
                    self._migrate(self._log_conn)
                    yield self._log_conn
                    return
                if self.readonly:
                    uri = f"file:{os.path.abspath(self.path)}?mode=ro"
                    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=self._busy)
                else:
                    conn = sqlite3.connect(self.path, isolation_level=None, timeout=self._busy)
                try:
                    self._migrate(conn)
                    yield conn
                finally:
                    conn.close()
            except sqlite3.Error as e:
                raise self._translate(e, self.path) from e

    def _migrate(self, conn: sqlite3.Connection) -> None:
        if self._ready or self.readonly:
            return
        from sqlite_utils import Database

        db = Database(conn)
        steps = self._steps()
        if not steps.pending(db):
            self._ready = True
            return
        conn.execute("BEGIN IMMEDIATE")  # serialises the migration across processes
        try:
            steps.apply(db)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        self._ready = True

    def _steps(self) -> Migrations:
        """The migrations of this store's table."""
        raise NotImplementedError


class SQLiteCursorStore(SQLiteSide, CursorStore):
    """Cursors in the `cursors` table of the log's SQLite file (created by a named migration)."""

    def _steps(self) -> Migrations:
        return _migrations()

    def get(self, name: str) -> Cursor | None:
        with self._connection() as conn:
            table = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'cursors'")
            if table.fetchone() is None:
                return None
            row = conn.execute("SELECT seq, state FROM cursors WHERE name = ?", (name,)).fetchone()
        return None if row is None else Cursor(name, int(row[0]), bytes(row[1]))

    def put(self, cursor: Cursor) -> None:
        if self.readonly:
            raise ReadOnlyDatabaseError(self.path, "opened read-only: cursors cannot be saved")
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.execute(
                    "INSERT OR REPLACE INTO cursors (name, seq, state) VALUES (?, ?, ?)",
                    (cursor.name, cursor.seq, cursor.state),
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise


_PG_CREATE = (
    "CREATE TABLE IF NOT EXISTS cursors (name TEXT PRIMARY KEY, seq BIGINT NOT NULL, state BYTEA NOT NULL)"
)


class PostgresSide:
    """A table beside the log in its PostgreSQL schema (`_create` makes it); a short-lived
    connection per call."""

    _create = ""

    def __init__(self, connector: Any, *, readonly: bool = False) -> None:
        self._connector = connector
        self.readonly = readonly
        self._ready = False

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        import psycopg

        conn = self._connector.connect()
        try:
            if not self._ready and not self.readonly:
                with conn.transaction():
                    conn.execute(self._create)
                self._ready = True
            yield conn
        except psycopg.Error as e:
            raise self._connector.translate(e) from e
        finally:
            conn.close()


class PostgresCursorStore(PostgresSide, CursorStore):
    """Cursors in a `cursors` table of the PostgreSQL log's schema."""

    _create = _PG_CREATE

    def get(self, name: str) -> Cursor | None:
        with self._connection() as conn:
            if conn.execute("SELECT to_regclass('cursors')").fetchone() == (None,):
                return None
            row = conn.execute("SELECT seq, state FROM cursors WHERE name = %s", (name,)).fetchone()
        return None if row is None else Cursor(name, int(row[0]), bytes(row[1]))

    def put(self, cursor: Cursor) -> None:
        if self.readonly:
            raise ReadOnlyDatabaseError(self._connector.safe_url, "opened read-only: cursors are not saved")
        with self._connection() as conn, conn.transaction():
            conn.execute(
                "INSERT INTO cursors (name, seq, state) VALUES (%s, %s, %s) "
                "ON CONFLICT (name) DO UPDATE SET seq = EXCLUDED.seq, state = EXCLUDED.state",
                (cursor.name, cursor.seq, cursor.state),
            )


_STORES: weakref.WeakKeyDictionary[EventLog, CursorStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def cursor_store(log: EventLog) -> CursorStore:
    """The cursor store of `log` (one per log object); SnapshotsUnsupported for a backend without one."""
    with _STORES_LOCK:
        store = _STORES.get(log)
        if store is None:
            from ._sqlite import SQLiteLog

            if isinstance(log, SQLiteLog):
                store = _STORES[log] = SQLiteCursorStore(log)
            elif type(log).__module__.endswith("._postgres") and hasattr(log, "_connector"):
                store = _STORES[log] = PostgresCursorStore(
                    log._connector, readonly=bool(getattr(log, "readonly", False))
                )
            else:
                raise SnapshotsUnsupported(f"{log.url}: this backend keeps no follower cursors")
        return store
