"""The SQLite backend: WAL, BEGIN IMMEDIATE, FULL durability, group commit."""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from sqlite_utils import Database

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
from ._record import APPROVAL_TYPES, GENESIS_HASH, Head, Record, event_key
from ._sqlite_file import create_private, refuse_foreign
from ._sqlite_migrate import migrations
from ._sqlite_ro import ReadOnlyOpen
from ._sqlite_ro import uri as readonly_uri
from ._sqlite_row import (
    APPROVAL_RECORDS_QUERY,
    APPROVAL_ROWS_QUERY,
    APPROVAL_SEQS_INDEX,
    DATA_SEARCH,
    DATA_SEARCH_QUERY,
    DATA_SEARCH_UPTO,
    INSERT,
    RUN_STARTS_QUERY,
    SEARCH_MIN,
    SEARCH_UPTO_QUERY,
    STORED,
    hashes_before_query,
    hashes_by_seq,
    id_text,
    logical_rows,
    records,
    search_phrase,
)
from ._sqlite_search import catch_up, scan
from ._sqlite_write import KnownVersions, write_fast, write_group
from ._sqlreads import NO_UPPER_BOUND, SQLReads

# Reader connections kept open between queries; more are opened under load and closed after.
MAX_IDLE_READERS = 8

SYNCHRONOUS = ("FULL", "NORMAL", "EXTRA")
# The page size of a new file; an existing file keeps its own. WAL writes whole pages, and a
# commit rewrites at least the last page of the table and of each index: at 2 KiB a single
# durable append writes ~7.5 KB instead of ~13 KB, a batch of 100 a fifth less, for the same
# read rate (bench log, and larger payloads measured alike).
PAGE_SIZE = 2048
_APPROVAL_TYPES = frozenset(APPROVAL_TYPES)


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
            elif not self._memory:
                create_private(self.path)
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
            # A read-only open leaves a log of the first row as it is, and reads it as such.
            legacy = "SELECT 1 FROM pragma_table_info('events') WHERE name = 'prev_hash'"
            self._lean = self._conn.execute(legacy).fetchone() is None
            # A read-only open of a log written before the approval indexes reads without them.
            indexed = "SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?"
            self._approval_index = self._conn.execute(indexed, (APPROVAL_SEQS_INDEX,)).fetchone() is not None
            # Nor the data search, or where this SQLite has no FTS5: searches scan instead.
            table = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?"
            self._data_search = self._conn.execute(table, (DATA_SEARCH,)).fetchone() is not None
            self._search_upto = self._conn.execute(table, (DATA_SEARCH_UPTO,)).fetchone() is not None
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
                refuse_foreign(conn, self.path)  # before the first write: a refused file stays as it was
                conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")  # only a new, empty file takes it
                mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                if str(mode).lower() != "wal":
                    raise StorageError(self.path, f"could not switch to WAL (journal_mode={mode})")
            conn.execute(f"PRAGMA synchronous = {self._sync}")
            conn.execute("PRAGMA cache_size = -64")
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

    # -- reading the lean row ------------------------------------------------------------

    def _hashes_before(self, seqs: list[int]) -> dict[int, str]:
        """{seq: the hash of the row before it}, by one indexed query per few hundred seqs."""
        found: dict[int, str] = {}
        for i in range(0, len(seqs), 500):
            chunk = seqs[i : i + 500]
            found.update(hashes_by_seq(chunk, self._query(*hashes_before_query(chunk))))
        return found

    def _stored_after(
        self, after_seq: int, limit: int, to_seq: int | None, types: frozenset[str] | None
    ) -> list[Row]:
        if types is not None:
            if types == _APPROVAL_TYPES and self._approval_index:
                hi = to_seq if to_seq is not None else NO_UPPER_BOUND
                return self._query(APPROVAL_ROWS_QUERY, (after_seq, hi, limit))
            return self._typed_rows_after(types, after_seq, limit, to_seq, STORED)
        hi = to_seq if to_seq is not None else NO_UPPER_BOUND
        query = f"SELECT {STORED} FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
        return self._query(query, (after_seq, hi, limit))

    def _stored_stream(self, stream: str, from_version: int, to_version: int | None, limit: int) -> list[Row]:
        hi = to_version if to_version is not None else NO_UPPER_BOUND
        query = (
            f"SELECT {STORED} FROM events WHERE stream = ? AND version >= ? AND version <= ? "
            "ORDER BY version LIMIT ?"
        )
        return self._query(query, (stream, from_version, hi, limit))

    def _records_after(
        self, after_seq: int, limit: int, to_seq: int | None, types: frozenset[str] | None
    ) -> tuple[list[Record], int | None]:
        if not self._lean:
            return super()._records_after(after_seq, limit, to_seq, types)
        rows = self._stored_after(after_seq, limit, to_seq, types)
        return records(rows, self._hashes_before), rows[-1][0] if len(rows) == limit else None

    def _rows_after(self, after_seq: int, limit: int, to_seq: int | None) -> list[Row]:
        if not self._lean:
            return super()._rows_after(after_seq, limit, to_seq)
        return logical_rows(self._stored_after(after_seq, limit, to_seq, None), self._hashes_before)

    def _stream_records(
        self, stream: str, from_version: int, to_version: int | None, limit: int
    ) -> list[Record]:
        if not self._lean:
            return super()._stream_records(stream, from_version, to_version, limit)
        return records(self._stored_stream(stream, from_version, to_version, limit), self._hashes_before)

    def _stream_rows(self, stream: str, from_version: int, to_version: int | None, limit: int) -> list[Row]:
        if not self._lean:
            return super()._stream_rows(stream, from_version, to_version, limit)
        rows = self._stored_stream(stream, from_version, to_version, limit)
        return logical_rows(rows, self._hashes_before)

    def head(self) -> Head:
        """The last seq and hash (seq 0 and the genesis hash for an empty log)."""
        if not self._lean:
            return super().head()
        rows = self._query("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
        return Head(rows[0][0], _hex(rows[0][1])) if rows else Head(0, GENESIS_HASH)

    def run_starts(self, run_id: str) -> list[Record]:
        if not self._lean:  # the first row keeps data as a BLOB, which json_extract refuses
            return super().run_starts(run_id)
        return records(self._query(RUN_STARTS_QUERY, (run_id,)), self._hashes_before)

    def approval_records(self, approval_id: str, to_seq: int | None = None) -> list[Record]:
        if not self._lean:  # the first row keeps data as a BLOB, which json_extract refuses
            return super().approval_records(approval_id, to_seq)
        hi = to_seq if to_seq is not None else NO_UPPER_BOUND
        return records(self._query(APPROVAL_RECORDS_QUERY, (approval_id, hi)), self._hashes_before)

    def seqs_containing(self, text: str, limit: int = 200) -> list[int]:
        """The seqs of the newest records (at most `limit`) whose data holds `text`, ignoring
        case: the FTS5 trigram index (caught up first, unless opened read-only) and a scan of
        the records after it (see _sqlite_search). A search shorter than three characters, or
        of a log without the index (a read-only open of a log older than it, or a SQLite
        without FTS5), scans the data instead."""
        if not self._data_search or len(text) < SEARCH_MIN:
            return super().seqs_containing(text, limit)
        upto = NO_UPPER_BOUND  # a log of 0005 read-only: its trigger keeps the index whole
        if self._search_upto:
            upto = int(self._query(SEARCH_UPTO_QUERY)[0][0]) if self.readonly else self._catch_up_search()
        indexed = self._query(DATA_SEARCH_QUERY, (search_phrase(text), upto, limit))
        after = scan(self.read_all(after_seq=upto), text) if upto != NO_UPPER_BOUND else []
        return (after + [row[0] for row in indexed])[:limit]

    def _catch_up_search(self) -> int:
        self._check_open()  # the last seq the index holds, once caught up
        with self._conn_lock:
            try:
                return catch_up(self._conn)
            except sqlite3.Error as e:
                raise translate(e, self.path) from e

    # -- the EventLog contract -------------------------------------------------------------

    def checkpoint(self) -> None:
        """Fold the -wal file into the database and truncate it, so a plain copy of the file
        alone holds every commit (until the next append)."""
        if self._memory or self.readonly:
            return
        self._check_open()
        with self._conn_lock:
            try:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error as e:
                raise translate(e, self.path) from e

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
            yield LeanImportTarget(self._query, None) if self._lean else ImportTarget(self._query, None)
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
                yield LeanImportTarget(lambda q, p: conn.execute(q, p).fetchall(), conn.executemany)
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


class LeanImportTarget(ImportTarget):
    """An import session's reads and insert over the lean row."""

    def head(self) -> tuple[int, str, int]:
        rows = self._query("SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1", ())
        return (int(rows[0][0]), _hex(rows[0][1]), int(rows[0][2])) if rows else (0, GENESIS_HASH, 0)

    def stored(self, event_ids: list[str]) -> dict[str, int]:
        marks = ",".join("?" * len(event_ids))
        query = f"SELECT event_id, seq FROM events WHERE event_id IN ({marks})"
        return {id_text(e): int(s) for e, s in self._query(query, tuple(map(event_key, event_ids)))}

    def insert(self, rows: list[Row]) -> None:
        assert self._insert is not None, "a dry run never inserts"
        fromhex = bytes.fromhex
        self._insert(INSERT, [(*r[:7], event_key(r[7]), r[8], fromhex(r[10])) for r in rows])
        self.last_seq = rows[-1][0]


def _hex(value: object) -> str:
    return value.hex() if isinstance(value, bytes) else str(value)
