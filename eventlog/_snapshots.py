"""The snapshot store: named, versioned values as of a seq, kept next to the log they came from.

Projections keep their view states here, so that opening a large log, or travelling in it,
starts from the nearest snapshot instead of seq 0. A snapshot is a cache: it never changes
what the log says, and a store may be emptied at any time. Each one records the chain hash
at its seq, so a snapshot of some other history (a restored or rewritten file) is noticed,
and, on a log with an HMAC key, a MAC over all that (`EventLog.seal`), so that whoever can
write the file cannot forge one. Readers check them before use (projections._snapshots).
"""

from __future__ import annotations

import builtins
import os
import sqlite3
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

from ._errors import ReadOnlyDatabaseError, SnapshotsUnsupported
from ._log import EventLog
from ._snapshot import RunCheckpointRow, Snapshot, SnapshotStore

if TYPE_CHECKING:
    from sqlite_utils import Database
    from sqlite_utils.migrations import Migrations

_COLUMNS = "name, version, seq, hash, digest, size, mac"

_MIGRATIONS: list[Migrations] = []


def migrations() -> Migrations:
    """The named migrations of the `snapshots` table (built on first use: sqlite-utils is slow to import)."""
    if _MIGRATIONS:
        return _MIGRATIONS[0]
    from sqlite_utils.migrations import Migrations

    found = Migrations("flightlog.snapshots")

    @found(name="0001_create_snapshots")
    def _create_snapshots(db: Database) -> None:
        db.execute(
            """
            CREATE TABLE snapshots (
                name    TEXT    NOT NULL,
                version INTEGER NOT NULL,
                seq     INTEGER NOT NULL,
                hash    TEXT    NOT NULL,
                digest  TEXT    NOT NULL,
                size    INTEGER NOT NULL,
                data    BLOB,
                PRIMARY KEY (name, version, seq)
            )
            """
        )

    @found(name="0002_add_snapshot_mac")
    def _add_mac(db: Database) -> None:
        db.execute("ALTER TABLE snapshots ADD COLUMN mac TEXT NOT NULL DEFAULT ''")

    @found(name="0003_create_run_checkpoints")
    def _create_run_checkpoints(db: Database) -> None:
        # A few small fields every so many events of a run: rows about as small as the log's.
        db.execute(
            """
            CREATE TABLE run_checkpoints (
                stream  TEXT    NOT NULL,
                version INTEGER NOT NULL,
                seq     INTEGER NOT NULL,
                hash    TEXT    NOT NULL,
                data    BLOB    NOT NULL,
                mac     TEXT    NOT NULL DEFAULT '',
                PRIMARY KEY (stream, version)
            ) WITHOUT ROWID
            """
        )

    _MIGRATIONS.append(found)
    return found


class SQLiteSnapshotStore(SnapshotStore):
    """Snapshots in the `snapshots` table of the log's own SQLite file (created by a migration).

    A file log's store opens a short-lived connection per call, so it holds nothing open
    between calls; an in-memory log's store shares the log's only connection.
    """

    def __init__(self, log: EventLog) -> None:
        from ._sqlite import translate

        self._translate = translate
        self.path: str = getattr(log, "path", ":memory:")
        self.readonly = bool(getattr(log, "readonly", False))
        self._busy = float(getattr(log, "_busy", 10.0))
        memory = _memory(self.path)
        self._log_conn: sqlite3.Connection | None = getattr(log, "_conn", None) if memory else None
        self._lock: threading.RLock = getattr(log, "_conn_lock", None) or threading.RLock()
        self._ready = False

    @contextmanager
    def _connection(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            try:
                if self._log_conn is not None:
                    conn = self._log_conn
                    self._migrate(conn)
                    yield conn
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
        if self._ready:
            return
        from sqlite_utils import Database

        db = Database(conn)
        steps = migrations()
        if self.readonly or (db["_sqlite_migrations"].exists() and not steps.pending(db)):
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

    def _exists(self, conn: sqlite3.Connection) -> bool:
        sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'snapshots'"
        row = conn.execute(sql).fetchone()
        return row is not None

    def _write(self, sql: str, params: tuple[object, ...]) -> int:
        if self.readonly:
            raise ReadOnlyDatabaseError(self.path, "opened read-only: snapshots cannot be stored")
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                count = conn.execute(sql, params).rowcount
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise
            return int(count)

    def put(self, snapshot: Snapshot) -> None:
        s = snapshot
        self._write(
            f"INSERT OR REPLACE INTO snapshots ({_COLUMNS}, data) VALUES (?,?,?,?,?,?,?,?)",
            (s.name, s.version, s.seq, s.hash, s.digest, s.size, s.mac, s.data),
        )

    def _select(self, where: str, params: tuple[object, ...], *, data: bool) -> list[Snapshot]:
        with self._connection() as conn:
            if not self._exists(conn):
                return []
            # A file opened read-only is not migrated: a table from before the MAC reads as unsealed.
            names = {row[1] for row in conn.execute("PRAGMA table_info(snapshots)")}
            selected = _COLUMNS if "mac" in names else _COLUMNS.replace(", mac", ", '' AS mac")
            columns = f"{selected}, data" if data else f"{selected}, data IS NULL"
            rows = conn.execute(f"SELECT {columns} FROM snapshots {where}", params).fetchall()
        if data:
            return [_snapshot(row, row[7], row[7] is None) for row in rows]
        return [_snapshot(row, None, bool(row[7])) for row in rows]

    def get(self, name: str, version: int, seq: int) -> Snapshot | None:
        found = self._select(
            "WHERE name = ? AND version = ? AND seq = ? AND data IS NOT NULL", (name, version, seq), data=True
        )
        return found[0] if found else None

    def nearest(self, name: str, version: int, at_or_below: int | None = None) -> Snapshot | None:
        found = self._select(
            "WHERE name = ? AND version = ? AND seq <= ? AND data IS NOT NULL ORDER BY seq DESC LIMIT 1",
            (name, version, 2**62 if at_or_below is None else at_or_below),
            data=True,
        )
        return found[0] if found else None

    def list(self, name: str | None = None) -> list[Snapshot]:
        if name is None:
            return self._select("ORDER BY name, version, seq", (), data=False)
        return self._select("WHERE name = ? ORDER BY version, seq", (name,), data=False)

    def prune(self, name: str, version: int, keep: int) -> int:
        return self._write(
            "UPDATE snapshots SET data = NULL WHERE name = ? AND version = ? AND data IS NOT NULL "
            "AND seq NOT IN (SELECT seq FROM snapshots WHERE name = ? AND version = ? "
            "AND data IS NOT NULL ORDER BY seq DESC LIMIT ?)",
            (name, version, name, version, max(keep, 0)),
        )

    def delete(self, name: str | None = None, after_seq: int | None = None) -> int:
        with self._connection() as conn:
            if not self._exists(conn):
                return 0
        after = -1 if after_seq is None else after_seq
        if name is None:
            return self._write("DELETE FROM snapshots WHERE seq > ?", (after,))
        return self._write("DELETE FROM snapshots WHERE name = ? AND seq > ?", (name, after))

    def run_checkpoints(self, stream: str) -> builtins.list[RunCheckpointRow]:
        with self._connection() as conn:
            sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'run_checkpoints'"
            if conn.execute(sql).fetchone() is None:  # a read-only file from before the table
                return []
            rows = conn.execute(
                "SELECT stream, version, seq, hash, data, mac FROM run_checkpoints WHERE stream = ? "
                "ORDER BY version",
                (stream,),
            ).fetchall()
        return [RunCheckpointRow(*row) for row in rows]

    def put_run_checkpoints(self, rows: builtins.list[RunCheckpointRow]) -> None:
        if self.readonly or not rows:
            return
        with self._connection() as conn:
            conn.execute("BEGIN IMMEDIATE")
            try:
                conn.executemany(
                    "INSERT OR REPLACE INTO run_checkpoints (stream, version, seq, hash, data, mac) "
                    "VALUES (?,?,?,?,?,?)",
                    [(r.stream, r.version, r.seq, r.hash, r.data, r.mac) for r in rows],
                )
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                raise


def _snapshot(row: Any, data: bytes | None, pruned: bool) -> Snapshot:
    return Snapshot(row[0], row[1], row[2], row[3], row[4], row[5], data, pruned, row[6] or "")


def _memory(path: str) -> bool:
    return path == ":memory:" or path.startswith("file::memory:")


_STORES: weakref.WeakKeyDictionary[EventLog, SnapshotStore] = weakref.WeakKeyDictionary()
_STORES_LOCK = threading.Lock()


def snapshot_store(log: EventLog) -> SnapshotStore:
    """The snapshot store of `log` (one per log object); raises SnapshotsUnsupported if it has none."""
    with _STORES_LOCK:
        store = _STORES.get(log)
        if store is None:
            from ._sqlite import SQLiteLog

            if isinstance(log, SQLiteLog):
                store = _STORES[log] = SQLiteSnapshotStore(log)
            elif type(log).__module__.endswith("._postgres") and hasattr(log, "_connector"):
                from ._snapshots_pg import PostgresSnapshotStore

                store = _STORES[log] = PostgresSnapshotStore(
                    log._connector, readonly=bool(getattr(log, "readonly", False))
                )
            else:
                raise SnapshotsUnsupported(
                    f"{log.url}: this backend stores no snapshots; views over this log fold from seq 0"
                )
        return store
