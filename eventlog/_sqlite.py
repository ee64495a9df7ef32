"""The SQLite backend: WAL, BEGIN IMMEDIATE, FULL durability, group commit."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from ._append import AppendRequest, Row
from ._clock import Clock
from ._errors import (
    CorruptDatabaseError,
    DiskFullError,
    ReadOnlyDatabaseError,
    StorageError,
)
from ._import import ImportTarget
from ._log import EventLog
from ._sqlite_ro import ReadOnlyOpen
from ._sqlite_ro import uri as readonly_uri
from ._sqlite_write import KnownVersions, write_fast, write_group
from ._sqlreads import SQLReads

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
        # A read-only open refuses a file that is not a log before it opens a connection to it.
        self._ro = ReadOnlyOpen(self.path) if readonly and not self._memory else None
        try:
            if self._ro is not None:
                self._ro.check_schema()
            self._conn = self._connect(write=not readonly)
        except BaseException as e:
            if self._ro is not None:
                self._ro.closed()
            if isinstance(e, sqlite3.Error):
                raise translate(e, self.path) from e
            raise
        try:
            if not readonly:
                self._migrate()
            else:
                self._conn.execute("SELECT count(*) FROM events WHERE seq = 0").fetchone()
        except sqlite3.Error as e:
            self._close_backend()
            raise translate(e, self.path) from e

    # -- connections -----------------------------------------------------------------------

    def _connect(self, *, write: bool) -> sqlite3.Connection:
        conn: sqlite3.Connection | None = None
        try:
            if self.readonly:
                # A WAL database needs its -shm file, which cannot be created on read-only
                # media; nothing can change the file there, so SQLite may skip locking it.
                uri = readonly_uri(self.path, immutable=_on_readonly_media(self.path))
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
                if write_fast(conn, batch, self.clock, self._hasher, self._known):
                    return
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as e:
                # Nothing was written: a failed autocommit statement is rolled back whole.
                self._known.forget()
                for r in batch:
                    r.result = None
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
        if self._ro is not None:
            self._ro.closed()


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


def _on_readonly_media(path: str) -> bool:
    """Whether `path`'s folder is on a file system mounted read-only."""
    try:
        return bool(os.statvfs(os.path.dirname(os.path.abspath(path))).f_flag & os.ST_RDONLY)
    except OSError:
        return False
