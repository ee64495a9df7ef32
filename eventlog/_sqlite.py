"""The SQLite backend: WAL, BEGIN IMMEDIATE, FULL durability, group commit."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from ._append import AppendRequest, Row, chain_rows, resolve_retry, rows_to_records
from ._chain import Hasher
from ._clock import Clock, to_micros
from ._errors import (
    ConcurrencyError,
    CorruptDatabaseError,
    DiskFullError,
    IdempotencyConflict,
    ReadOnlyDatabaseError,
    StorageError,
)
from ._import import ImportTarget
from ._log import EventLog
from ._record import GENESIS_HASH, expectation_holds
from ._sqlreads import COLUMNS, SQLReads

_INSERT = f"INSERT INTO events ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)"

migrations = Migrations("flightlog.eventlog")


@migrations(name="0001_create_events")
def _create_events(db: Database) -> None:
    db.execute(
        """
        CREATE TABLE events (
            seq         INTEGER PRIMARY KEY,
            stream      TEXT    NOT NULL,
            version     INTEGER NOT NULL,
            type        TEXT    NOT NULL,
            schema      INTEGER NOT NULL,
            data        BLOB    NOT NULL,
            meta        BLOB    NOT NULL,
            event_id    TEXT    NOT NULL UNIQUE,
            recorded_at INTEGER NOT NULL,
            prev_hash   TEXT    NOT NULL,
            hash        TEXT    NOT NULL,
            UNIQUE (stream, version)
        )
        """
    )


# Reader connections kept open between queries; more are opened under load and closed after.
MAX_IDLE_READERS = 8

SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")


class SQLiteLog(SQLReads, EventLog):
    """The event log in one SQLite file (or in memory), shareable by several processes.

    `synchronous="FULL"` (the default) makes every acknowledged append survive power loss;
    `"NORMAL"` is faster under WAL but may lose the last transactions on power loss (never
    on a process crash). Reads use one connection per thread, so they never wait for the
    writer; an in-memory log uses a single connection for everything.
    """

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        clock: Clock | None = None,
        hmac_key: bytes | None = None,
        synchronous: str = "FULL",
        busy_timeout: float = 10.0,
        readonly: bool = False,
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key)
        self.path = os.fspath(path)
        self.url = self.path
        self.readonly = readonly
        self._memory = self.path == ":memory:" or self.path.startswith("file::memory:")
        sync = synchronous.upper()
        if sync not in SYNCHRONOUS:
            raise ValueError(f"synchronous must be one of {', '.join(SYNCHRONOUS)}, got {synchronous!r}")
        self._sync = sync
        self._busy = busy_timeout
        self._conn_lock = threading.RLock()
        self._idle_readers: list[sqlite3.Connection] = []  # a pool: any thread may borrow one
        self._readers: list[sqlite3.Connection] = []  # every reader opened, to close them all
        self._readers_lock = threading.Lock()
        self._known = KnownVersions()
        if (
            not self._memory
            and not readonly
            and not os.path.isdir(os.path.dirname(os.path.abspath(self.path)))
        ):
            raise StorageError(self.path, "its folder does not exist")
        self._conn = self._connect(write=not readonly)
        try:
            if not readonly:
                self._migrate()
            else:
                self._conn.execute("SELECT count(*) FROM events WHERE seq = 0").fetchone()
        except sqlite3.Error as e:
            self._conn.close()
            raise translate(e, self.path) from e

    # -- connections -----------------------------------------------------------------------

    def _connect(self, *, write: bool) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = None
        try:
            if self.readonly:
                uri = f"file:{os.path.abspath(self.path)}?mode=ro"
                conn = sqlite3.connect(
                    uri, uri=True, isolation_level=None, check_same_thread=False, timeout=self._busy
                )
            else:
                conn = sqlite3.connect(
                    self.path, isolation_level=None, check_same_thread=False, timeout=self._busy
                )
            conn.execute(f"PRAGMA busy_timeout = {int(self._busy * 1000)}")
            if write and not self._memory:
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StorageError(self.path, f"could not switch to WAL (journal_mode={mode})")
            conn.execute(f"PRAGMA synchronous = {self._sync}")
            return conn
        except BaseException as e:
            if conn is not None:  # else the half-set-up connection holds the file until a GC pass
                conn.close()
            if isinstance(e, sqlite3.Error):
                raise translate(e, self.path) from e
            raise

    def _migrate(self) -> None:
        db = Database(self._conn)
        if db["_sqlite_migrations"].exists() and not migrations.pending(db):
            return
        # BEGIN IMMEDIATE serialises migrations across processes opening the file at once.
        self._conn.execute("BEGIN IMMEDIATE")
        try:
            migrations.apply(db)
            self._conn.execute("COMMIT")
        except BaseException:
            self._conn.execute("ROLLBACK")
            raise

    @contextmanager
    def _reader(self) -> Iterator[sqlite3.Connection]:
        if self._memory:
            with self._conn_lock:
                yield self._conn
            return
        # Borrowed per query, not per thread: a server starts and stops actor threads all day,
        # and a connection per thread would pile up until the log closed.
        with self._readers_lock:
            conn = self._idle_readers.pop() if self._idle_readers else None
        if conn is None:
            conn = self._connect(write=False)
            with self._readers_lock:
                self._readers.append(conn)
        try:
            yield conn
        finally:
            with self._readers_lock:
                if len(self._idle_readers) < MAX_IDLE_READERS and not self._closed:
                    self._idle_readers.append(conn)
                else:
                    if conn in self._readers:
                        self._readers.remove(conn)
                    conn.close()

    def _query(self, sql: str, params: tuple[object, ...] = ()) -> list[Row]:
        self._check_open()
        try:
            with self._reader() as conn:
                return conn.execute(sql, params).fetchall()
        except sqlite3.Error as e:
            raise translate(e, self.path) from e

    # -- the EventLog contract -------------------------------------------------------------

    def _write_batch(self, batch: list[AppendRequest]) -> None:
        if self.readonly:
            raise ReadOnlyDatabaseError(self.path, "opened read-only")
        with self._conn_lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise translate(e, self.path) from e
            try:
                write_group(conn, batch, self.clock, self._hasher, self._known)
                conn.execute("COMMIT")
                self._known.committed()
            except BaseException as e:
                self._known.forget()
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                for r in batch:
                    r.result = None
                    r.error = None
                if isinstance(e, sqlite3.Error):
                    raise translate(e, self.path) from e
                raise

    @contextmanager
    def _import_session(self, dry_run: bool) -> Iterator[ImportTarget]:
        """One import batch in a BEGIN IMMEDIATE transaction; a dry run only reads."""
        if dry_run:
            yield ImportTarget(self._query, None)
            return
        if self.readonly:
            raise ReadOnlyDatabaseError(self.path, "opened read-only")
        self._check_open()
        with self._conn_lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                raise translate(e, self.path) from e
            try:
                yield ImportTarget(lambda q, p: conn.execute(q, p).fetchall(), conn.executemany)
                conn.execute("COMMIT")
            except BaseException as e:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
                if isinstance(e, sqlite3.Error):
                    raise translate(e, self.path) from e
                raise
            finally:
                self._known.forget()  # the head moved under the appends' version cache
        self._wake_followers()

    def _close_backend(self) -> None:
        with self._conn_lock:
            self._conn.close()
        with self._readers_lock:
            for conn in self._readers:
                conn.close()
            self._readers.clear()
            self._idle_readers.clear()


class KnownVersions:
    """Stream versions as of a head this writer committed, so appends skip SELECT MAX(version).

    Valid only while the log's head is still that head: another connection or process that
    commits moves the head, and the next group starts from an empty cache. Not thread-safe:
    only the writer, under the connection lock, uses it.
    """

    LIMIT = 10_000  # streams remembered at most; beyond that the cache starts over

    def __init__(self) -> None:
        self.versions: dict[str, int] = {}
        self._head: tuple[int, str] | None = None
        self._written: tuple[int, str] | None = None

    def at(self, head_seq: int, head_hash: str) -> dict[str, int]:
        """The versions to use for a group starting at this head (empty if the head moved)."""
        if self._head != (head_seq, head_hash) or len(self.versions) > self.LIMIT:
            self.versions.clear()
        self._head = self._written = None
        return self.versions

    def written(self, head_seq: int, head_hash: str) -> None:
        self._written = (head_seq, head_hash)

    def committed(self) -> None:
        self._head = self._written

    def forget(self) -> None:
        self.versions.clear()
        self._head = self._written = None


def write_group(
    conn: sqlite3.Connection,
    batch: list[AppendRequest],
    clock: Clock,
    hasher: Hasher,
    known: KnownVersions | None = None,
) -> None:
    """Write every request of `batch` inside the caller's open transaction.

    The rows of the whole group go in with one INSERT. When that hits a UNIQUE constraint
    (a retried event_id), the group is rolled back and written request by request, which
    tells each caller its own outcome.
    """
    last = conn.execute("SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    head_seq, head_hash, head_us = last if last else (0, GENESIS_HASH, 0)
    # recorded_at never goes backwards along seq, so "as of a time" is a prefix of the log.
    now_us = max(to_micros(clock.now()), head_us)
    versions = known.at(head_seq, head_hash) if known is not None else {}
    # One row cannot half-fail; more are undone together if one of them breaks a constraint.
    guard = sum(len(req.events) for req in batch) > 1
    if guard:
        conn.execute("SAVEPOINT grp")
    try:
        seq, prev = _write_together(conn, batch, head_seq, head_hash, now_us, hasher, versions)
    except sqlite3.IntegrityError:
        if guard:
            conn.execute("ROLLBACK TO grp")
            conn.execute("RELEASE grp")
        versions.clear()
        for req in batch:
            req.result = req.error = None
        seq, prev = _write_each(conn, batch, head_seq, head_hash, now_us, hasher, versions)
    else:
        if guard:
            conn.execute("RELEASE grp")
    if known is not None:
        known.written(seq, prev)


def _write_together(
    conn: sqlite3.Connection,
    batch: list[AppendRequest],
    seq: int,
    prev: str,
    now_us: int,
    hasher: Hasher,
    versions: dict[str, int],
) -> tuple[int, str]:
    """Chain the rows of every request and insert them at once; returns the new head."""
    chained: list[tuple[AppendRequest, list[Row]]] = []
    pending: list[Row] = []
    for req in batch:
        version = versions.get(req.stream)
        if version is None:
            version = _stream_version(conn, req.stream)
        if not expectation_holds(req.expect, version):
            if pending:  # a retry may match rows chained earlier in this group: store them first
                conn.executemany(_INSERT, pending)
                pending = []
            _refuse(conn, req, version)
        elif not req.events:
            req.result = []
        else:
            rows = chain_rows(req.stream, version, req.events, seq, prev, now_us, hasher)
            chained.append((req, rows))
            pending.extend(rows)
            seq, prev = rows[-1][0], rows[-1][10]
            versions[req.stream] = rows[-1][2]
    if pending:
        conn.executemany(_INSERT, pending)
    for req, rows in chained:
        req.result = rows_to_records(rows)
    return seq, prev


def _stream_version(conn: sqlite3.Connection, stream: str) -> int:
    row = conn.execute("SELECT MAX(version) FROM events WHERE stream = ?", (stream,)).fetchone()
    return int(row[0] or 0)


def _refuse(conn: sqlite3.Connection, req: AppendRequest, version: int) -> None:
    """Settle a request whose expectation failed: an idempotent retry, or a ConcurrencyError."""
    try:
        req.result = _retry_or_none(conn, req)
        if req.result is None:
            req.error = ConcurrencyError(req.stream, req.expect, version)
    except IdempotencyConflict as e:  # this caller's error, not the group's
        req.error = e


def _write_each(
    conn: sqlite3.Connection,
    batch: list[AppendRequest],
    head_seq: int,
    head_hash: str,
    now_us: int,
    hasher: Hasher,
    versions: dict[str, int],
) -> tuple[int, str]:
    """Write the requests one INSERT each, settling retries; returns the new head."""
    for req in batch:
        version = versions.get(req.stream)
        if version is None:
            version = (
                conn.execute("SELECT MAX(version) FROM events WHERE stream = ?", (req.stream,)).fetchone()[0]
                or 0
            )
        if not expectation_holds(req.expect, version):
            try:
                req.result = _retry_or_none(conn, req)
                if req.result is None:
                    req.error = ConcurrencyError(req.stream, req.expect, version)
            except IdempotencyConflict as e:  # this caller's error, not the group's
                req.error = e
            continue
        if not req.events:
            req.result = []
            continue
        rows = chain_rows(req.stream, version, req.events, head_seq, head_hash, now_us, hasher)
        multi = len(rows) > 1
        if multi:
            conn.execute("SAVEPOINT append")
        try:
            conn.executemany(_INSERT, rows)
        except sqlite3.IntegrityError:
            if multi:
                conn.execute("ROLLBACK TO append")
                conn.execute("RELEASE append")
            try:
                req.result = _retry_or_none(conn, req)
                if req.result is None:  # a (stream, version) race cannot happen under the lock
                    raise
            except IdempotencyConflict as e:
                req.error = e
            continue
        if multi:
            conn.execute("RELEASE append")
        head_seq, head_hash = rows[-1][0], rows[-1][10]
        versions[req.stream] = rows[-1][2]
        req.result = rows_to_records(rows)
    return head_seq, head_hash


def _retry_or_none(conn: sqlite3.Connection, req: AppendRequest) -> list | None:  # type: ignore[type-arg]
    ids = [e.event_id for e in req.events]
    if not ids:
        return None
    marks = ",".join("?" * len(ids))
    stored = {
        row[7]: row for row in conn.execute(f"SELECT {COLUMNS} FROM events WHERE event_id IN ({marks})", ids)
    }
    return resolve_retry(req.stream, req.events, stored)


# SQLite primary result codes (sqlite3.h).
_CORRUPT = {11, 26}  # SQLITE_CORRUPT, SQLITE_NOTADB
_READONLY = {8}  # SQLITE_READONLY
_FULL = {13}  # SQLITE_FULL
_CANTOPEN = {14}  # SQLITE_CANTOPEN


def translate(exc: sqlite3.Error, path: str) -> StorageError:
    """The typed StorageError for a driver error, carrying the path and the cause."""
    code = getattr(exc, "sqlite_errorcode", None)
    primary = code & 0xFF if isinstance(code, int) else None
    message = str(exc)
    if primary in _CORRUPT or "malformed" in message or "not a database" in message:
        return CorruptDatabaseError(path, f"database is corrupt: {message}")
    if primary in _READONLY or "readonly" in message:
        return ReadOnlyDatabaseError(path, f"database is read-only: {message}")
    if primary in _FULL or "disk is full" in message:
        return DiskFullError(path, f"disk is full; nothing was written: {message}")
    if primary in _CANTOPEN:
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(folder) and not os.access(folder, os.W_OK):  # WAL must create -wal and -shm
            return ReadOnlyDatabaseError(path, f"its folder cannot be written: {message}")
        return StorageError(path, f"cannot open the database: {message}")
    return StorageError(path, message)
