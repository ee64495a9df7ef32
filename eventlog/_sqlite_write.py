"""The SQLite write path: one group-commit transaction, every caller's append inside it.

A group goes in as one INSERT statement when it can (`write_fast`), else in an explicit
BEGIN IMMEDIATE transaction (`write_group`) that reads the head and settles every case.
"""

from __future__ import annotations

import functools
import itertools
import sqlite3

from ._append import AppendRequest, Row, chain_rows, resolve_retry, rows_to_records, settle_refused
from ._chain import Hasher
from ._clock import Clock, to_micros
from ._errors import (
    IdempotencyConflict,
)
from ._record import GENESIS_HASH, NO_STREAM, expectation_holds
from ._sqlite_row import (
    INSERT,
    STORED,
    VALUES,
    hashes_before_query,
    hashes_by_seq,
    logical_rows,
    stored_rows,
)
from ._versions import remember

_HEAD = "SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1"


class KnownVersions:
    """Stream versions as of a head this writer committed, so appends skip SELECT MAX(version).

    Valid only while the log's head is still that head: another connection or process that
    commits moves the head, and the next group starts from an empty cache. At most LIMIT
    streams are remembered: beyond that, the half written least recently is forgotten (their
    next append reads its version again). Not thread-safe: only the writer, under the
    connection lock, uses it.
    """

    LIMIT = 2_048  # streams remembered at most (each stream name is kept: ~150 bytes a stream)

    def __init__(self) -> None:
        self.versions: dict[str, int] = {}  # least recently written first
        self.head: tuple[int, str, int] | None = None  # seq, hash, recorded_us this writer committed
        self._written: tuple[int, str, int] | None = None

    def at(self, head_seq: int, head_hash: str) -> dict[str, int]:
        """The versions to use for a group starting at this head (empty if the head moved)."""
        if self.head is None or self.head[:2] != (head_seq, head_hash):
            self.versions.clear()
        elif len(self.versions) > self.LIMIT:
            self._trim()
        self.head = self._written = None
        return self.versions

    def note(self, versions: dict[str, int]) -> None:
        """Remember `versions` as the streams written last."""
        remember(self.versions, versions, self.LIMIT)

    def _trim(self) -> None:
        remember(self.versions, {}, self.LIMIT)

    def written(self, head_seq: int, head_hash: str, head_us: int) -> None:
        self._written = (head_seq, head_hash, head_us)

    def committed(self) -> None:
        self.head = self._written

    def forget(self) -> None:
        self.versions.clear()
        self.head = self._written = None


# Rows one optimistic INSERT takes at most: 10 parameters a row, far under SQLite's limit.
FAST_ROWS = 256
_INSERTS: dict[int, str] = {}


def write_fast(
    conn: sqlite3.Connection, batch: list[AppendRequest], clock: Clock, hasher: Hasher, known: KnownVersions
) -> bool:
    """Write `batch` with one INSERT statement outside any explicit transaction, or not at all.

    In autocommit mode one statement is its own transaction: all its rows or none, durable
    when it returns. The rows are chained onto the head this writer committed last, with
    the stream versions it knows, so the group needs no BEGIN, no read of the head and no
    COMMIT: one call into SQLite instead of five or more, which matters most when many
    threads wait for the GIL between those calls. If anyone else committed since, the first
    row's seq is taken (every commit takes the next seq) and the INSERT fails whole on the
    primary key; a reused event id or a stream version taken fails it the same way. Then,
    and whenever the group cannot be written this way (no known head, a stream version not
    known, an expectation that does not hold, too many rows), nothing is written and False
    is returned: the caller writes the group in a transaction, which settles every case.
    A stream not known is taken to be new only when the caller expects NO_STREAM or version
    0: if it exists, its version 1 is taken and the INSERT fails.
    """
    head = known.head
    if head is None:
        return False
    seq, prev, head_us = head
    now_us = max(to_micros(clock.now()), head_us)
    versions: dict[str, int] = {}
    chained: list[tuple[AppendRequest, list[Row]]] = []
    pending: list[tuple[object, ...]] = []
    for req in batch:
        version = versions.get(req.stream)
        if version is None:
            version = known.versions.get(req.stream)
        if version is None:
            if req.expect is not NO_STREAM and req.expect != 0:
                return False
            version = 0
        if not expectation_holds(req.expect, version) or not req.events:
            return False
        rows = chain_rows(req.stream, version, req.events, seq, prev, now_us, hasher)
        chained.append((req, rows))
        pending.extend(stored_rows(rows, req.events))
        if len(pending) > FAST_ROWS:
            return False
        seq, prev = rows[-1][0], rows[-1][10]
        versions[req.stream] = rows[-1][2]
    statement = _INSERTS.get(len(pending))
    if statement is None:
        statement = _INSERTS[len(pending)] = INSERT + ("," + VALUES) * (len(pending) - 1)
    try:
        conn.execute(statement, list(itertools.chain.from_iterable(pending)))
    except sqlite3.IntegrityError:
        known.forget()  # someone else moved the head, or a retry: the transaction sorts it out
        return False
    known.note(versions)
    known.head = (seq, prev, now_us)
    for req, rows in chained:
        req.result = rows_to_records(rows)
    return True


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
    last = conn.execute(_HEAD).fetchone()
    head_seq, head_hash, head_us = (last[0], last[1].hex(), last[2]) if last else (0, GENESIS_HASH, 0)
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
        known.written(seq, prev, now_us if seq != head_seq else head_us)


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
    pending: list[tuple[object, ...]] = []
    for req in batch:
        version = versions.get(req.stream)
        if version is None:
            version = _stream_version(conn, req.stream)
        if not expectation_holds(req.expect, version):
            if pending:  # a retry may match rows chained earlier in this group: store them first
                conn.executemany(INSERT, pending)
                pending = []
            _refuse(conn, req, version)
        elif not req.events:
            req.result = []
        else:
            rows = chain_rows(req.stream, version, req.events, seq, prev, now_us, hasher)
            chained.append((req, rows))
            pending.extend(stored_rows(rows, req.events))
            seq, prev = rows[-1][0], rows[-1][10]
            versions[req.stream] = rows[-1][2]
    if pending:
        conn.executemany(INSERT, pending)
    for req, rows in chained:
        req.result = rows_to_records(rows)
    return seq, prev


def _stream_version(conn: sqlite3.Connection, stream: str) -> int:
    row = conn.execute("SELECT MAX(version) FROM events WHERE stream = ?", (stream,)).fetchone()
    return int(row[0] or 0)


def _refuse(conn: sqlite3.Connection, req: AppendRequest, version: int) -> None:
    """Settle a request whose expectation failed: an idempotent retry, or a ConcurrencyError."""
    settle_refused(req, version, functools.partial(_retry_or_none, conn, req))


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
            _refuse(conn, req, version)
            continue
        if not req.events:
            req.result = []
            continue
        rows = chain_rows(req.stream, version, req.events, head_seq, head_hash, now_us, hasher)
        multi = len(rows) > 1
        if multi:
            conn.execute("SAVEPOINT append")
        try:
            conn.executemany(INSERT, stored_rows(rows, req.events))
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
    keys = [e.event_key for e in req.events]
    if not keys:
        return None
    marks = ",".join("?" * len(keys))
    found = conn.execute(
        f"SELECT {STORED} FROM events WHERE event_id IN ({marks}) ORDER BY seq", keys
    ).fetchall()

    def hashes_before(seqs: list[int]) -> dict[int, str]:
        return hashes_by_seq(seqs, conn.execute(*hashes_before_query(seqs)).fetchall())

    stored = {row[7]: row for row in logical_rows(found, hashes_before)}
    return resolve_retry(req.stream, req.events, stored)
