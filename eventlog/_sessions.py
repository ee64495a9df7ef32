"""Console sessions beside the log: kept in its database but off its chain, as cursors are.

Every process serving one log (the workers of `flightlog serve --workers N`, or several
servers on one PostgreSQL database) must know the same console sessions: a browser's
requests reach whichever process the kernel or a proxy picks. So a session lives in a
`console_sessions` table of the log's own database: the SHA-256 of its cookie, the operator
credential it holds, the SHA-256 of its CSRF secret, and when it started and was last used
(seconds since the epoch). Only digests: the table holds nothing that authenticates by itself.
It is bookkeeping, never hashed into the chain, and `export` does not carry it.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ._cursors import PostgresSide, SQLiteSide
from ._errors import ReadOnlyDatabaseError, SnapshotsUnsupported
from ._log import EventLog

if TYPE_CHECKING:
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One console session as kept: digests and times only."""

    key: str  # SHA-256 of the cookie value
    credential_id: str
    csrf_sha256: str
    started: float
    last_used: float


_COLUMNS = "key, credential_id, csrf_sha256, started, last_used"
_MIGRATIONS: list[Migrations] = []


def _migrations() -> Migrations:
    if _MIGRATIONS:
        return _MIGRATIONS[0]
    from sqlite_utils.migrations import Migrations

    found = Migrations("flightlog.console_sessions")

    @found(name="0001_create_console_sessions")
    def _create(db: Database) -> None:
        db.execute(
            "CREATE TABLE console_sessions (key TEXT PRIMARY KEY, credential_id TEXT NOT NULL, "
            "csrf_sha256 TEXT NOT NULL, started REAL NOT NULL, last_used REAL NOT NULL)"
        )

    _MIGRATIONS.append(found)
    return found


class SessionStore:
    """The console sessions of one log. Thread-safe; each call is one short transaction."""

    def get(self, key: str) -> SessionRow | None:
        raise NotImplementedError

    def put(self, row: SessionRow, *, keep: int, keep_each: int) -> None:
        """Save `row`; then drop the least recently used sessions of its credential beyond
        `keep_each`, and of all beyond `keep` (one transaction)."""
        raise NotImplementedError

    def touch(self, key: str, last_used: float) -> None:
        raise NotImplementedError

    def delete(self, key: str) -> None:
        raise NotImplementedError

    def delete_credential(self, credential_id: str) -> int:
        """Drop every session of `credential_id`; how many there were."""
        raise NotImplementedError

    def count(self) -> int:
        raise NotImplementedError


class SQLiteSessionStore(SQLiteSide, SessionStore):
    """Console sessions in the log's SQLite file (created by a named migration on first use)."""

    def _steps(self) -> Migrations:
        return _migrations()

    def _write(self, sql: str, args: tuple[object, ...], *more: tuple[str, tuple[object, ...]]) -> int:
        """Run `sql` (then each of `more`) in one transaction; the rows the first changed."""
        if self.readonly:
            raise ReadOnlyDatabaseError(self.path, "opened read-only: console sessions cannot be kept")
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                changed = conn.execute(sql, args).rowcount
                for statement, values in more:
                    conn.execute(statement, values)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
        return int(changed)

    def get(self, key: str) -> SessionRow | None:
        with self._connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM console_sessions WHERE key = ?", (key,)).fetchone()
        return None if row is None else SessionRow(*row)

    def put(self, row: SessionRow, *, keep: int, keep_each: int) -> None:
        self._write(
            f"INSERT OR REPLACE INTO console_sessions ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
            (row.key, row.credential_id, row.csrf_sha256, row.started, row.last_used),
            (
                "DELETE FROM console_sessions WHERE key IN (SELECT key FROM console_sessions "
                "WHERE credential_id = ? ORDER BY last_used DESC LIMIT -1 OFFSET ?)",
                (row.credential_id, keep_each),
            ),
            (
                "DELETE FROM console_sessions WHERE key IN "
                "(SELECT key FROM console_sessions ORDER BY last_used DESC LIMIT -1 OFFSET ?)",
                (keep,),
            ),
        )

    def touch(self, key: str, last_used: float) -> None:
        self._write("UPDATE console_sessions SET last_used = ? WHERE key = ?", (last_used, key))

    def delete(self, key: str) -> None:
        self._write("DELETE FROM console_sessions WHERE key = ?", (key,))

    def delete_credential(self, credential_id: str) -> int:
        return self._write("DELETE FROM console_sessions WHERE credential_id = ?", (credential_id,))

    def count(self) -> int:
        with self._connection() as conn:
            return int(conn.execute("SELECT count(*) FROM console_sessions").fetchone()[0])


_PG_CREATE = (
    "CREATE TABLE IF NOT EXISTS console_sessions (key TEXT PRIMARY KEY, credential_id TEXT NOT NULL, "
    "csrf_sha256 TEXT NOT NULL, started DOUBLE PRECISION NOT NULL, last_used DOUBLE PRECISION NOT NULL)"
)


class PostgresSessionStore(PostgresSide, SessionStore):
    """Console sessions in a `console_sessions` table of the PostgreSQL log's schema."""

    _create = _PG_CREATE

    def _write(self, sql: str, args: tuple[object, ...], *more: tuple[str, tuple[object, ...]]) -> int:
        """Run `sql` (then each of `more`) in one transaction; the rows the first changed."""
        if self.readonly:
            raise ReadOnlyDatabaseError(self._connector.safe_url, "opened read-only: no console sessions")
        with self._connection() as conn, conn.transaction():
            changed = int(conn.execute(sql, args).rowcount)
            for statement, values in more:
                conn.execute(statement, values)
            return changed

    def get(self, key: str) -> SessionRow | None:
        with self._connection() as conn:
            row = conn.execute(f"SELECT {_COLUMNS} FROM console_sessions WHERE key = %s", (key,)).fetchone()
        return None if row is None else SessionRow(*row)

    def put(self, row: SessionRow, *, keep: int, keep_each: int) -> None:
        self._write(
            f"INSERT INTO console_sessions ({_COLUMNS}) VALUES (%s, %s, %s, %s, %s) ON CONFLICT (key) DO "
            "UPDATE SET last_used = EXCLUDED.last_used",
            (row.key, row.credential_id, row.csrf_sha256, row.started, row.last_used),
            (
                "DELETE FROM console_sessions WHERE key IN (SELECT key FROM console_sessions "
                "WHERE credential_id = %s ORDER BY last_used DESC OFFSET %s)",
                (row.credential_id, keep_each),
            ),
            (
                "DELETE FROM console_sessions WHERE key IN "
                "(SELECT key FROM console_sessions ORDER BY last_used DESC OFFSET %s)",
                (keep,),
            ),
        )

    def touch(self, key: str, last_used: float) -> None:
        self._write("UPDATE console_sessions SET last_used = %s WHERE key = %s", (last_used, key))

    def delete(self, key: str) -> None:
        self._write("DELETE FROM console_sessions WHERE key = %s", (key,))

    def delete_credential(self, credential_id: str) -> int:
        return self._write("DELETE FROM console_sessions WHERE credential_id = %s", (credential_id,))

    def count(self) -> int:
        with self._connection() as conn:
            return int(conn.execute("SELECT count(*) FROM console_sessions").fetchone()[0])


_STORES: weakref.WeakKeyDictionary[EventLog, SessionStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def session_store(log: EventLog) -> SessionStore:
    """The console-session store of `log` (one per log object); SnapshotsUnsupported for a
    backend without one."""
    with _STORES_LOCK:
        store = _STORES.get(log)
        if store is None:
            from ._sqlite import SQLiteLog

            if isinstance(log, SQLiteLog):
                store = _STORES[log] = SQLiteSessionStore(log)
            elif type(log).__module__.endswith("._postgres") and hasattr(log, "_connector"):
                store = _STORES[log] = PostgresSessionStore(
                    log._connector, readonly=bool(getattr(log, "readonly", False))
                )
            else:
                raise SnapshotsUnsupported(f"{log.url}: this backend keeps no console sessions")
        return store
