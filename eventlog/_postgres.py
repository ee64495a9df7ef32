"""The PostgreSQL backend: one writer at a time holds the head, so seq is gap-free in commit order."""

from __future__ import annotations

import functools
import hashlib
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

import psycopg
from psycopg import sql

from ._append import AppendRequest, Row, chain_rows, resolve_retry, rows_to_records, settle_refused
from ._chain import Hasher, record_from_row
from ._clock import Clock, to_micros
from ._errors import IdempotencyConflict, ReadOnlyDatabaseError, StorageError
from ._import import ImportTarget
from ._log import EventLog
from ._pgconn import Conn, Connector, Listener, ReaderPool, usable
from ._record import APPROVAL_FILTER, GENESIS_HASH, RUN_START_FILTER, Record, expectation_holds
from ._sqlreads import COLUMNS, NO_UPPER_BOUND, SQLReads

_STREAM_VERSION = "SELECT MAX(version) FROM events WHERE stream = %s"
_INSERT = f"INSERT INTO events ({COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"
# Every writer locks this one row first and keeps it until COMMIT: see write_group.
_TAKE_HEAD = "SELECT id FROM events_writer WHERE id = 1 FOR UPDATE"

MIGRATIONS: list[tuple[str, tuple[str, ...]]] = [
    (
        "0001_create_events",
        (
            """
            CREATE TABLE events (
                seq         BIGINT  PRIMARY KEY,
                stream      TEXT    NOT NULL,
                version     BIGINT  NOT NULL,
                type        TEXT    NOT NULL,
                schema      INTEGER NOT NULL,
                data        BYTEA   NOT NULL,
                meta        BYTEA   NOT NULL,
                event_id    TEXT    NOT NULL UNIQUE,
                recorded_at BIGINT  NOT NULL,
                prev_hash   TEXT    NOT NULL,
                hash        TEXT    NOT NULL,
                UNIQUE (stream, version)
            )
            """,
            "CREATE TABLE events_writer (id SMALLINT PRIMARY KEY CHECK (id = 1))",
            "INSERT INTO events_writer (id) VALUES (1)",
        ),
    ),
    (
        "0002_run_starts_index",
        (
            # An index expression must be IMMUTABLE; convert_from is only STABLE because of its
            # encoding name, which is fixed here.
            "CREATE FUNCTION flightlog_run_id(data BYTEA) RETURNS TEXT LANGUAGE sql IMMUTABLE "
            "PARALLEL SAFE AS $$ SELECT convert_from(data, 'UTF8')::jsonb ->> 'run_id' $$",
            f"CREATE INDEX events_run_starts ON events (flightlog_run_id(data)) WHERE {RUN_START_FILTER}",
        ),
    ),
    (
        "0003_approval_indexes",
        (
            "CREATE FUNCTION flightlog_approval_id(data BYTEA) RETURNS TEXT LANGUAGE sql IMMUTABLE "
            "PARALLEL SAFE AS $$ SELECT convert_from(data, 'UTF8')::jsonb ->> 'approval_id' $$",
            f"CREATE INDEX events_approval_seqs ON events (seq) WHERE {APPROVAL_FILTER}",
            "CREATE INDEX events_approval_ids ON events (flightlog_approval_id(data), seq) "
            f"WHERE {APPROVAL_FILTER}",
        ),
    ),
    (
        "0004_data_search",
        (
            "CREATE FUNCTION flightlog_data_text(data BYTEA) RETURNS TEXT LANGUAGE sql IMMUTABLE "
            "PARALLEL SAFE AS $$ SELECT convert_from(data, 'UTF8') $$",
            # A trigram index answers ILIKE '%text%' as the scan did, any substring, and is
            # kept by PostgreSQL in the inserting transaction. pg_trgm ships with PostgreSQL
            # but creating it may need a privilege this role lacks: then searches scan.
            """
            DO $$
            DECLARE
                home TEXT;
            BEGIN
                BEGIN
                    CREATE EXTENSION IF NOT EXISTS pg_trgm;
                EXCEPTION WHEN OTHERS THEN
                    NULL;
                END;
                SELECT n.nspname INTO home FROM pg_extension e
                    JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_trgm';
                IF home IS NOT NULL THEN
                    EXECUTE format('CREATE INDEX events_data_search ON events '
                                   'USING gin (flightlog_data_text(data) %I.gin_trgm_ops)', home);
                END IF;
            END
            $$
            """,
        ),
    ),
]
# Migrations a read-only open may do without: they only add an index, and reads are answered
# without it (more slowly).
_READ_OPTIONAL = frozenset({"0002_run_starts_index", "0003_approval_indexes", "0004_data_search"})
DATA_SEARCH_QUERY = (
    "SELECT seq FROM events WHERE flightlog_data_text(data) ILIKE %s ORDER BY seq DESC LIMIT %s"
)
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

# pg_advisory_xact_lock key: serialises migrations of processes that open a log at once.
_MIGRATION_LOCK = int.from_bytes(hashlib.sha256(b"flightlog migrations").digest()[:8], "big", signed=True)


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
        self._listener_lock = threading.Lock()
        self._listener: Listener | None = None
        self._run_index = True  # a read-only open of a log not yet migrated reads without it
        self._approval_index = True  # ... and without this one
        self._data_search = True  # ... or the data search's function
        self._writer: Conn | None = None if readonly else self._connect_writer()
        conn = self._writer or self._connector.connect()
        try:
            schema = self._existing_schema(conn) if readonly else migrate(conn)
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
        schema = _scalar(conn, "SELECT current_schema()")
        if schema is None or _scalar(conn, "SELECT to_regclass('events')") is None:
            raise StorageError(self.url, "opened read-only, and there is no log on its search_path")
        pending = _pending(conn)
        self._run_index = "0002_run_starts_index" not in pending
        self._approval_index = "0003_approval_indexes" not in pending
        self._data_search = "0004_data_search" not in pending
        if pending := [name for name in pending if name not in _READ_OPTIONAL]:
            raise StorageError(
                self.url,
                f"opened read-only, and the log needs migrations {', '.join(pending)}: open it writable once",
            )
        return str(schema)

    # -- the EventLog contract -------------------------------------------------------------

    def run_starts(self, run_id: str) -> list[Record]:
        if not self._run_index:
            return super().run_starts(run_id)
        return list(map(record_from_row, self._query(RUN_STARTS_QUERY, (run_id,))))

    def seqs_containing(self, text: str, limit: int = 200) -> list[int]:
        """The seqs of the newest records (at most `limit`) whose data holds `text`, ignoring
        case: a trigram index answers where pg_trgm could be created, else a scan; a read-only
        open of a log not yet migrated scans as before."""
        if not self._data_search:
            return super().seqs_containing(text, limit)
        pattern = "%" + re.sub(r"([\\%_])", r"\\\1", text) + "%"
        return [row[0] for row in self._query(DATA_SEARCH_QUERY, (pattern, limit))]

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
                    conn = self._live_writer()
                    with conn.transaction():
                        write_group(conn, batch, self.clock, self._hasher, self._channel, self.url)
                    return
                except BaseException as e:
                    for r in batch:
                        r.result = None
                        r.error = None
                    if not isinstance(e, psycopg.Error):
                        raise
                    if not _worth_retrying(e, self._writer) or time.monotonic() >= deadline:
                        raise self._connector.translate(e) from e
                    self._drop_writer()

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
    """Set the writer session's own bounds on stalls, whatever the server's defaults (see above)."""
    bound = f"{int(WRITER_STALL_BOUND * 1000)}ms"
    for setting in ("idle_in_transaction_session_timeout", "lock_timeout"):
        conn.execute("SELECT set_config(%s, %s, false)", (setting, bound))


def _worth_retrying(exc: psycopg.Error, conn: Conn | None) -> bool:
    """Whether a failed write may be tried again: the session ended or the lock timed out."""
    if exc.sqlstate in _TRY_AGAIN:
        return True
    # No SQLSTATE and a dead connection: the server ended the session (or went away).
    return exc.sqlstate is None and (conn is None or conn.closed or conn.broken)


def write_group(
    conn: Conn, batch: list[AppendRequest], clock: Clock, hasher: Hasher, channel: str, url: str
) -> None:
    """Write every request of `batch` inside the caller's open transaction.

    The transaction first locks the writer row and holds it until COMMIT, so writers take
    the head one at a time: seq N+1 is chosen only after the transaction holding seq N has
    committed (PostgreSQL releases row locks after a commit becomes visible). Every snapshot
    therefore sees a prefix 1..N of the log, and a follower reading `seq > last` never skips
    a seq that commits late. A sequence would not give this: its numbers are handed out
    outside the transaction and commit in any order.
    """
    conn.execute(_TAKE_HEAD)
    last = conn.execute("SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1").fetchone()
    head_seq, head_hash, head_us = last if last else (0, GENESIS_HASH, 0)
    start_seq = head_seq
    # recorded_at never goes backwards along seq, so "as of a time" is a prefix of the log.
    now_us = max(to_micros(clock.now()), head_us)
    versions: dict[str, int] = {}
    for req in batch:
        version = versions.get(req.stream)
        if version is None:
            found = conn.execute(_STREAM_VERSION, (req.stream,)).fetchone()
            version = int(found[0] or 0) if found else 0
        if not expectation_holds(req.expect, version):
            settle_refused(req, version, functools.partial(_retry_or_none, conn, req))
            continue
        if not req.events:
            req.result = []
            continue
        rows = chain_rows(req.stream, version, req.events, head_seq, head_hash, now_us, hasher)
        if not _insert(conn, rows):
            try:
                req.result = _retry_or_none(conn, req)
            except IdempotencyConflict as e:
                req.error = e
                continue
            if req.result is None:  # cannot happen while every writer takes the head first
                raise StorageError(url, f"seq {rows[0][0]} or {req.stream!r} v{rows[0][2]} already taken")
            continue
        head_seq, head_hash = rows[-1][0], rows[-1][10]
        versions[req.stream] = rows[-1][2]
        req.result = rows_to_records(rows)
    if head_seq != start_seq:
        conn.execute("SELECT pg_notify(%s, %s)", (channel, str(head_seq)))


def _insert(conn: Conn, rows: list[Row]) -> bool:
    """Insert one request's rows; False, with nothing inserted, if a unique key is taken."""
    if len(rows) == 1:
        cur = conn.execute(f"{_INSERT} ON CONFLICT DO NOTHING", rows[0])
        return cur.rowcount == 1
    try:
        with conn.transaction():  # a savepoint: a conflict undoes this request only
            conn.cursor().executemany(_INSERT, rows)
    except psycopg.errors.UniqueViolation:
        return False
    return True


def _retry_or_none(conn: Conn, req: AppendRequest) -> list[Record] | None:
    ids = [e.event_id for e in req.events]
    if not ids:
        return None
    found = conn.execute(f"SELECT {COLUMNS} FROM events WHERE event_id = ANY(%s)", (ids,)).fetchall()
    return resolve_retry(req.stream, req.events, {row[7]: cast(Row, row) for row in found})


def migrate(conn: Conn) -> str:
    """Create the schema if missing, apply pending named migrations, and return the schema."""
    if not _pending(conn):
        return str(_scalar(conn, "SELECT current_schema()"))
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        schema = _scalar(conn, "SELECT current_schema()")
        if schema is None:
            schema = _first_on_search_path(conn)
            conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema)))
        if _scalar(conn, "SELECT to_regclass('schema_migrations')") is None:
            conn.execute(
                "CREATE TABLE schema_migrations "
                "(name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now())"
            )
        for name in _pending(conn):
            for statement in dict(MIGRATIONS)[name]:
                conn.execute(statement)
            conn.execute("INSERT INTO schema_migrations (name) VALUES (%s)", (name,))
    return str(schema)


def _pending(conn: Conn) -> list[str]:
    if _scalar(conn, "SELECT current_schema()") is None:
        return [name for name, _ in MIGRATIONS]
    if _scalar(conn, "SELECT to_regclass('schema_migrations')") is None:
        return [name for name, _ in MIGRATIONS]
    applied = {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}
    return [name for name, _ in MIGRATIONS if name not in applied]


def _scalar(conn: Conn, query: str) -> Any:
    row = conn.execute(query).fetchone()
    return row[0] if row else None


_PATH_ITEM = re.compile(r'\s*("(?:[^"]|"")*"|[^,]*?)\s*(?:,|$)')


def _first_on_search_path(conn: Conn) -> str:
    path = str(_scalar(conn, "SELECT current_setting('search_path')"))
    first = _PATH_ITEM.match(path)
    name = first.group(1) if first else ""
    if name.startswith('"'):
        name = name[1:-1].replace('""', '"')
    if name == "$user":
        name = str(_scalar(conn, "SELECT current_user"))
    if not name:
        raise psycopg.ProgrammingError("the search_path names no schema to create the log in")
    return name


def channel_for(schema: str) -> str:
    """The NOTIFY channel of the log in `schema` (a channel name is at most 63 bytes)."""
    name = f"flightlog_events_{schema}"
    if len(name.encode()) <= 63:
        return name
    return "flightlog_events_" + hashlib.sha256(schema.encode()).hexdigest()[:32]
