"""The PostgreSQL backend: one writer at a time holds the head, so seq is gap-free in commit order."""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import cast

import psycopg

from ._append import AppendRequest, Row
from ._chain import record_from_row
from ._clock import Clock
from ._errors import ReadOnlyDatabaseError, StorageError
from ._import import ImportTarget
from ._log import EventLog
from ._pgconn import READ_ONLY_STATES, Conn, Connector, Listener, ReaderPool, usable
from ._pgmigrate import READ_OPTIONAL, migrate, pending, scalar
from ._pgwrite import (
    TAKE_HEAD,
    Outcome,
    WriterHeads,
    pipelined_transaction,
    write_each,
    write_fast,
    write_group,
)
from ._record import APPROVAL_FILTER, RUN_START_FILTER, Record
from ._sqlreads import COLUMNS, NO_UPPER_BOUND, SQLReads

# Every writer locks this one row first and keeps it until COMMIT: see _pgwrite.
_TAKE_HEAD = TAKE_HEAD

# Searches of a log without the table of 0006 (pg_trgm missing, or a read-only open of a log
# not yet migrated): a scan of the data.
DATA_SCAN_QUERY = "SELECT seq FROM events WHERE flightlog_data_text(data) ILIKE %s ORDER BY seq DESC LIMIT %s"
# The table's trigram index answers for the records it holds (1..N), a scan for the rest:
# one statement, one snapshot.
DATA_SEARCH_QUERY = (
    "SELECT seq FROM ("
    "(SELECT seq FROM events_data_search WHERE data ILIKE %s ORDER BY seq DESC LIMIT %s) UNION ALL "
    "(SELECT seq FROM events WHERE seq > (SELECT coalesce(max(seq), 0) FROM events_data_search) "
    "AND flightlog_data_text(data) ILIKE %s ORDER BY seq DESC LIMIT %s)"
    ") AS found ORDER BY seq DESC LIMIT %s"
)
# The records after the last one the table holds, a chunk a statement (a transaction each).
SEARCH_CATCH_UP = (
    "INSERT INTO events_data_search (seq, data) SELECT seq, flightlog_data_text(data) FROM events "
    "WHERE seq > (SELECT coalesce(max(seq), 0) FROM events_data_search) ORDER BY seq LIMIT %s "
    "ON CONFLICT (seq) DO NOTHING"
)
SEARCH_CHUNK = 5_000
_SEARCH_TABLE = "SELECT relkind = 'r' FROM pg_class WHERE oid = to_regclass('events_data_search')"
RUN_STARTS_QUERY = (
    f"SELECT {COLUMNS} FROM events WHERE {RUN_START_FILTER} AND flightlog_run_id(data) = %s ORDER BY seq"
)
APPROVAL_RECORDS_QUERY = (
    f"SELECT {COLUMNS} FROM events WHERE {APPROVAL_FILTER} AND flightlog_approval_id(data) = %s "
    "AND seq <= %s ORDER BY seq"
)
# A writer that stops inside its transaction (a GC stall, a frozen VM, SIGSTOP) would hold the
# writer row until it resumed: its session is ended by the server once it has sat idle in the
# transaction this long, and a writer waiting for the row gives up after as long and tries
# again. So no stalled writer holds the others for much longer than this (seconds).
WRITER_STALL_BOUND = 2.0
# How long one group of appends keeps trying again after an aborted or lock-timed-out write.
WRITE_RETRY_FOR = 30.0
# SQLSTATEs after which the whole write is tried again on a fresh connection: nothing of it
# was committed, or, if COMMIT's answer was lost, its event ids find the stored records.
_TRY_AGAIN = {
    "25P03",  # idle_in_transaction_session_timeout: this writer stalled and its session ended
    "55P03",  # lock_not_available: another writer stalled holding the row
    "57P01",  # admin_shutdown
    "40001",  # serialization_failure
    "40P01",  # deadlock_detected
}


class PostgresLog(SQLReads, EventLog):
    """The event log in a PostgreSQL schema, shareable by processes on many machines.

    The schema is the first one on the URL's search_path (created if missing), so one
    database can hold several logs. Appends go through one writer connection; reads use a
    small pool, each query its own snapshot. `follow` is woken by LISTEN/NOTIFY, so it sees
    other processes' commits at once.
    """

    PLACEHOLDER = "%s"
    DATA_TEXT = "convert_from(data, 'UTF8')"
    FIND = "strpos"

    def __init__(
        self, url: str, *, clock: Clock | None = None, hmac_key: bytes | None = None, readonly: bool = False
    ) -> None:
        super().__init__(clock=clock, hmac_key=hmac_key)
        self._connector = Connector(url)
        self.url = self._connector.safe_url
        self.readonly = readonly
        self._write_lock = threading.Lock()
        self._heads = WriterHeads(rechain=not self.keyed)  # guarded by _write_lock
        self._listener_lock = threading.Lock()
        self._listener: Listener | None = None
        self._run_index = True  # a read-only open of a log not yet migrated reads without it
        self._approval_index = True  # ... and without this one
        self._data_search = True  # ... or the data search's function
        self._search_table = False  # the data search's own table (0006, where pg_trgm is)
        self._writer: Conn | None = None if readonly else self._connect_writer()
        conn = self._writer or self._connector.connect()
        try:
            schema = self._existing_schema(conn) if readonly else migrate(conn)
            self._search_table = bool(scalar(conn, _SEARCH_TABLE))
            if self._writer is not None:
                bound_stalls(self._writer)
        except BaseException as e:
            conn.close()
            if isinstance(e, psycopg.Error):
                raise self._connector.translate(e) from e
            raise
        if readonly:
            conn.close()  # reads go through the pool; a read-only log has no writer
        self._channel = channel_for(schema)
        self._readers = ReaderPool(self._connector)

    def _existing_schema(self, conn: Conn) -> str:
        """The schema of a log that is there and up to date; a read-only open creates nothing."""
        schema = scalar(conn, "SELECT current_schema()")
        if schema is None or scalar(conn, "SELECT to_regclass('events')") is None:
            raise StorageError(self.url, "opened read-only, and there is no log on its search_path")
        missing = pending(conn)
        self._run_index = "0002_run_starts_index" not in missing
        self._approval_index = "0003_approval_indexes" not in missing
        self._data_search = "0004_data_search" not in missing
        if needed := [name for name in missing if name not in READ_OPTIONAL]:
            raise StorageError(
                self.url,
                f"opened read-only, and the log needs migrations {', '.join(needed)}: open it writable once",
            )
        return str(schema)

    # -- the EventLog contract -------------------------------------------------------------

    def run_starts(self, run_id: str) -> list[Record]:
        if not self._run_index:
            return super().run_starts(run_id)
        return list(map(record_from_row, self._query(RUN_STARTS_QUERY, (run_id,))))

    def seqs_containing(self, text: str, limit: int = 200) -> list[int]:
        """The seqs of the newest records (at most `limit`) whose data holds `text`, ignoring
        case. Where pg_trgm could be created, a trigram index on the search table answers for
        the records it holds, caught up first (unless opened read-only), and a scan for those
        after them; else a scan. A read-only open of a log not yet migrated scans as before."""
        if not self._data_search:
            return super().seqs_containing(text, limit)
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"
        if not self._search_table:
            return [row[0] for row in self._query(DATA_SCAN_QUERY, (pattern, limit))]
        if not self.readonly:
            self._catch_up_search()
        found = self._query(DATA_SEARCH_QUERY, (pattern, limit, pattern, limit, limit))
        return [row[0] for row in found]

    def _catch_up_search(self) -> None:
        """Copy the data text of the records the search table does not hold yet into it.

        Off the write path: the writer row is not taken. Two processes catching up at once
        copy the same records, and the second one's are dropped (ON CONFLICT), so the table
        always holds a prefix 1..N of the log.
        """
        self._check_open()
        try:
            with self._readers.connection() as conn:
                while conn.execute(SEARCH_CATCH_UP, (SEARCH_CHUNK,)).rowcount == SEARCH_CHUNK:
                    pass
        except psycopg.Error as e:
            if e.sqlstate not in READ_ONLY_STATES:  # a role that may not write: the scan answers
                raise self._connector.translate(e) from e

    def approval_records(self, approval_id: str, to_seq: int | None = None) -> list[Record]:
        if not self._approval_index:
            return super().approval_records(approval_id, to_seq)
        hi = to_seq if to_seq is not None else NO_UPPER_BOUND
        return list(map(record_from_row, self._query(APPROVAL_RECORDS_QUERY, (approval_id, hi))))

    def follow(
        self,
        after_seq: int = 0,
        *,
        stop: threading.Event | None = None,
        poll_interval: float = 0.05,
    ) -> Iterator[Record]:
        """Yield records after `after_seq` as they are committed, by this process or another.

        Other processes' commits wake it through LISTEN/NOTIFY; the poll only covers the
        moments the listening connection is lost.
        """
        with self._listener_lock:
            if self._listener is None and not self._closed:
                self._listener = Listener(self._connector, self._channel, self._wake_followers)
        return super().follow(after_seq, stop=stop, poll_interval=poll_interval)

    def _write_batch(self, batch: list[AppendRequest]) -> None:
        if self.readonly:
            raise ReadOnlyDatabaseError(self.url, "opened read-only")
        deadline = time.monotonic() + WRITE_RETRY_FOR
        with self._write_lock:
            while True:
                try:
                    self._write_once(self._live_writer(), batch)
                    return
                except BaseException as e:
                    self._heads.forget()
                    _unsettle(batch)
                    if not isinstance(e, psycopg.Error):
                        raise
                    if not _worth_retrying(e, self._writer) or time.monotonic() >= deadline:
                        raise self._connector.translate(e) from e
                    self._drop_writer()

    def _write_once(self, conn: Conn, batch: list[AppendRequest]) -> None:
        """Write the group in one statement if the head this writer holds is still the head;
        else under the writer row; and request by request if an event id is stored already."""
        outcome = write_fast(conn, batch, self.clock, self._hasher, self._heads, self._channel, self.url)
        if outcome is Outcome.WRITTEN:
            return
        if outcome is Outcome.NOT_WRITTEN:
            try:
                with pipelined_transaction(conn):
                    plan = write_group(conn, batch, self.clock, self._hasher, self._channel, self._heads)
            except psycopg.errors.UniqueViolation:
                _unsettle(batch)
            else:
                self._heads.wrote(plan)
                return
        self._heads.forget()
        with conn.transaction():
            write_each(conn, batch, self.clock, self._hasher, self._channel, self.url)

    @contextmanager
    def _import_session(self, dry_run: bool) -> Iterator[ImportTarget]:
        """One import batch in a transaction holding the head (as appends do); a dry run only reads."""
        if dry_run:
            yield ImportTarget(self._query, None, self.PLACEHOLDER)
            return
        if self.readonly:
            raise ReadOnlyDatabaseError(self.url, "opened read-only")
        self._check_open()
        with self._write_lock:
            self._heads.forget()  # the head moves under the writer's notes
            try:
                conn = self._live_writer()
                with conn.transaction():
                    conn.execute(_TAKE_HEAD)
                    target = ImportTarget(
                        lambda q, p: conn.execute(q, p).fetchall(),
                        lambda q, rows: conn.cursor().executemany(q, rows),
                        self.PLACEHOLDER,
                    )
                    yield target
                    if target.last_seq:
                        conn.execute("SELECT pg_notify(%s, %s)", (self._channel, str(target.last_seq)))
            except psycopg.Error as e:
                raise self._connector.translate(e) from e
        self._wake_followers()

    def _close_backend(self) -> None:
        with self._listener_lock:
            if self._listener is not None:
                self._listener.stop()
                self._listener = None
        with self._write_lock:
            if self._writer is not None:
                self._writer.close()
        self._readers.close()

    # -- helpers ---------------------------------------------------------------------------

    def _live_writer(self) -> Conn:
        """The writer connection, replaced if the server dropped it while idle; hold _write_lock."""
        if self._writer is None or not usable(self._writer):
            self._drop_writer()
            self._writer = self._connect_writer()
            bound_stalls(self._writer)
        return self._writer

    def _drop_writer(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None

    def _connect_writer(self) -> Conn:
        conn = self._connector.connect()
        # Whatever the server's default: each statement must see the commit of the writer
        # it waited for, which a snapshot taken at the transaction's first statement would not.
        conn.isolation_level = psycopg.IsolationLevel.READ_COMMITTED
        return conn

    def _query(self, query: str, params: tuple[object, ...] = ()) -> list[Row]:
        self._check_open()
        try:
            with self._readers.connection() as conn:
                return cast(list[Row], conn.execute(query, params).fetchall())
        except psycopg.Error as e:
            raise self._connector.translate(e) from e


def bound_stalls(conn: Conn) -> None:
    """Set the writer session's own bounds on stalls, whatever the server's defaults (see above).

    And its isolation: a statement outside a transaction (`write_fast`) takes the session's
    default, and it too must see the commit of the writer it waited for.
    """
    bound = f"{int(WRITER_STALL_BOUND * 1000)}ms"
    for setting in ("idle_in_transaction_session_timeout", "lock_timeout"):
        conn.execute("SELECT set_config(%s, %s, false)", (setting, bound))
    conn.execute("SELECT set_config('default_transaction_isolation', 'read committed', false)")


def _unsettle(batch: list[AppendRequest]) -> None:
    for r in batch:
        r.result = None
        r.error = None


def _worth_retrying(exc: psycopg.Error, conn: Conn | None) -> bool:
    """Whether a failed write may be tried again: the session ended or the lock timed out."""
    if exc.sqlstate in _TRY_AGAIN:
        return True
    # No SQLSTATE and a dead connection: the server ended the session (or went away).
    return exc.sqlstate is None and (conn is None or conn.closed or conn.broken)


def channel_for(schema: str) -> str:
    """The NOTIFY channel of the log in `schema` (a channel name is at most 63 bytes)."""
    name = f"flightlog_events_{schema}"
    if len(name.encode()) <= 63:
        return name
    return "flightlog_events_" + hashlib.sha256(schema.encode()).hexdigest()[:32]
