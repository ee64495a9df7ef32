"""The PostgreSQL write path: a group of appends in one statement, chained onto the head the writer holds.

Every writer locks the writer row and keeps it until COMMIT, so writers take the head one at
a time: seq N+1 is chosen only after the transaction holding seq N committed (PostgreSQL
releases row locks after a commit becomes visible). Every snapshot therefore sees a prefix
1..N of the log, and a follower reading `seq > last` never skips a seq that commits late. A
sequence would not give this: its numbers are handed out outside the transaction and commit
in any order.

The chain's hashes are computed here, by the writer (an HMAC key never leaves the process),
so they need the head before the group is written. A group goes in one of three ways:

- `write_fast`: chained onto the head this writer committed last, with the stream versions
  it knows, then one statement, `flightlog_append`, locks the row, checks that head and
  every stream's version, and inserts. One round trip; the row is held only inside the
  server. When the head moved (another server writes too), the statement chains the group
  again itself, under the row, from the pieces of each record's canonical header the writer
  sends along while other writers are about — so a second server does not queue behind a
  round trip — and the writer checks the last hash against its own chaining. A log with an
  HMAC key sends no such pieces: its key never leaves the process.
- `write_group`: when the head moved and the statement could not chain the group again (an
  HMAC key, an expectation that fails there), or a version is not known: one statement
  locks the row and reads the head and every stream's version (`flightlog_writer_head`),
  the group is chained onto them and goes in with one statement, and COMMIT; pipelined, two
  round trips, the row held across one.
- `write_each`: request by request, settling every case (an event id already stored: a
  retry), the way the log wrote before the functions existed.

The two calls are prepared statements from their first use on a connection (which costs that
use one more round trip), so the server parses them once.
"""

from __future__ import annotations

import contextlib
import enum
import functools
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import NamedTuple, cast

import orjson
import psycopg

from ._append import AppendRequest, Row, chain_rows, resolve_retry, rows_to_records, settle_refused
from ._chain import Hasher
from ._clock import Clock, to_micros
from ._errors import IdempotencyConflict, StorageError
from ._pgconn import Conn
from ._record import GENESIS_HASH, Expect, Record, expectation_holds
from ._sqlreads import COLUMNS
from ._versions import remember

TAKE_HEAD = "SELECT id FROM events_writer WHERE id = 1 FOR UPDATE"
_WRITER_HEAD = "SELECT * FROM flightlog_writer_head(%s::json)"
# Lists go as JSON text, parsed once by the server (psycopg writes a text array element by
# element, in Python, at several times the CPU), data and meta as binary bytea arrays (%b).
_APPEND = (
    "SELECT * FROM flightlog_append(%s::bigint, %s::text, %s::json, %s::json, %s::json, "
    "%b::bytea[], %b::bytea[], %s::bigint, %s::text, %s::boolean, %s::json, %b::bytea[], %b::bytea[])"
)
_STREAM_VERSION = "SELECT MAX(version) FROM events WHERE stream = %s"
_INSERT = f"INSERT INTO events ({COLUMNS}) VALUES (%s,%s,%s,%s,%s,%s,%s,%s,%s,%s,%s)"


class Found(NamedTuple):
    """The head and the stream versions found under the writer row."""

    seq: int
    hash: str
    recorded_us: int
    versions: list[int]


class Answer(NamedTuple):
    """What `flightlog_append` answers when the group was not written as chained: the head and
    stream versions found, and the last hash when it chained the group again and wrote it."""

    seq: int
    hash: str
    recorded_us: int
    versions: list[int]
    last_hash: str | None


class WriterHeads:
    """The head this writer committed last and the stream versions it knows, to chain the next
    group onto.

    The versions may be out of date (another process writes too): `flightlog_append` checks
    them, and the head, under the writer row before it writes anything. At most LIMIT streams
    are remembered; beyond that, the half written least recently is forgotten. Used by the
    writer alone, under the log's write lock.
    """

    LIMIT = 2_048  # streams remembered at most (each stream name is kept)
    # Groups in a row that find the head this writer's own before another writer is taken to
    # have stopped: two servers writing at once often leave each other a gap of a group or two.
    CALM = 16

    def __init__(self, *, rechain: bool) -> None:
        self.head: tuple[int, str, int] | None = None  # seq, hash, recorded_us
        self.versions: dict[str, int] = {}  # least recently written first
        # Whether the server may chain a group again (no HMAC key: see write_fast).
        self.rechain = rechain
        # Another writer committed lately, so the next group will most likely find the head
        # moved: it carries what the server needs to chain it again, or, where the server may
        # not, locks the row first.
        self.contended = False
        self._calm = 0

    def saw(self, *, moved: bool) -> None:
        """Note whether the head had moved from the one this writer committed last."""
        if moved:
            self.contended, self._calm = True, 0
        elif self.contended:
            self._calm += 1
            self.contended = self._calm < self.CALM

    def found(self, streams: list[str], found: Found) -> None:
        """Note what a statement found under the writer row."""
        self.saw(moved=self.head is not None and self.head[:2] != (found.seq, found.hash))
        self.note(dict(zip(streams, found.versions, strict=True)))

    def wrote(self, plan: Plan) -> None:
        """Note a group committed as planned."""
        self.head = plan.end
        self.note(plan.versions)

    def note(self, versions: dict[str, int]) -> None:
        remember(self.versions, versions, self.LIMIT)

    def forget(self) -> None:
        self.head = None
        self.versions.clear()
        self.contended, self._calm = False, 0


Refuse = Callable[[AppendRequest, int, list[Row]], None]


@dataclass
class Plan:
    """A group chained onto a head: the rows to insert, and what each stream's version must be first."""

    after: tuple[int, str, int]  # the head the rows follow: seq, hash, recorded_us
    now_us: int
    starts: dict[str, int] = field(default_factory=dict)  # each stream's version before the group
    versions: dict[str, int] = field(default_factory=dict)  # ... and after it
    chained: list[tuple[AppendRequest, list[Row]]] = field(default_factory=list)
    rows: list[Row] = field(default_factory=list)
    requests: list[AppendRequest] = field(default_factory=list)  # those the plan writes, in order

    @classmethod
    def chain(
        cls,
        batch: list[AppendRequest],
        head: tuple[int, str, int],
        version_of: Callable[[AppendRequest], int | None],
        now_us: int,
        hasher: Hasher,
        refuse: Refuse | None,
    ) -> Plan | None:
        """Chain every request of `batch` onto `head`, each stream from `version_of` (or the
        group's own rows). A request whose expectation fails is settled by `refuse`; without
        `refuse`, or when a stream's version is not known, there is no plan (None)."""
        plan = cls(head, max(now_us, head[2]))
        seq, prev, _ = head
        versions, starts = plan.versions, plan.starts
        for req in batch:
            version = versions.get(req.stream)
            if version is None:
                version = version_of(req)
                if version is None:
                    return None
                starts[req.stream] = versions[req.stream] = version
            if not expectation_holds(req.expect, version):
                if refuse is None:
                    return None
                refuse(req, version, plan.rows)
                continue
            plan.requests.append(req)
            if not req.events:
                req.result = []
                continue
            rows = chain_rows(req.stream, version, req.events, seq, prev, plan.now_us, hasher)
            plan.chained.append((req, rows))
            plan.rows.extend(rows)
            seq, prev = rows[-1][0], rows[-1][10]
            versions[req.stream] = rows[-1][2]
        return plan

    @property
    def end(self) -> tuple[int, str, int]:
        """The head once the plan is written."""
        last = self.rows[-1] if self.rows else None
        return (last[0], last[10], self.now_us) if last else self.after

    def params(self, channel: str, *, strict: bool, rechain: bool = False) -> tuple[object, ...]:
        """The arguments of `flightlog_append` for this plan (`strict`: the row is held already;
        `rechain`: with what the server needs to chain the group again)."""
        rows = self.rows
        fields = [
            {"stream": r[1], "version": r[2], "type": r[3], "schema": r[4], "event_id": r[7], "hash": r[10]}
            for r in rows
        ]
        again = self._header_pieces() if rechain else (None, None, None)
        return (
            self.after[0],
            self.after[1],
            _json(list(self.starts)),
            _json(list(self.starts.values())),
            _json(fields),
            [r[5] for r in rows],
            [r[6] for r in rows],
            self.now_us,
            channel,
            strict,
            *again,
        )

    def _header_pieces(self) -> tuple[str, list[bytes], list[bytes]]:
        """Each request's stream (by its place in `starts`), expectation and event count, and
        each record's canonical header but its seq, version and time: `[seq` + mid + `version`
        + tail + `time]` is `orjson.dumps([seq, stream, version, type, schema, event_id, time])`
        (see _chain.canonical_bytes)."""
        place = {stream: n for n, stream in enumerate(self.starts, 1)}
        requests, mids, tails = [], [], []
        dumps = orjson.dumps
        for req in self.requests:
            expect = req.expect.value if isinstance(req.expect, Expect) else req.expect
            requests.append((place[req.stream], expect, len(req.events)))
            mid = b"," + dumps(req.stream) + b","
            for ev in req.events:
                mids.append(mid)
                tails.append(
                    b"," + dumps(ev.type) + b"," + b"%d" % ev.schema + b"," + dumps(ev.event_id) + b","
                )
        return _json(requests), mids, tails

    def settle(self) -> None:
        for req, rows in self.chained:
            req.result = rows_to_records(rows)


class Outcome(enum.Enum):
    """What `write_fast` did."""

    WRITTEN = "written"
    NOT_WRITTEN = "not written"  # nothing was written: write the group under the writer row
    TAKEN = "taken"  # an event id is stored already (a retry): write the group request by request


def write_fast(
    conn: Conn,
    batch: list[AppendRequest],
    clock: Clock,
    hasher: Hasher,
    heads: WriterHeads,
    channel: str,
    url: str,
) -> Outcome:
    """Write `batch` with one statement on an autocommit connection, or nothing.

    The rows are chained onto the head and stream versions `heads` holds; a stream it does not
    hold is taken to be at the version its append expects exactly (0 for NO_STREAM). When the
    head moved or a version differs, the statement chains the group again onto what it found
    (if `heads` says so: see WriterHeads), or writes nothing and answers what it found.
    """
    if heads.head is None or (heads.contended and not heads.rechain):
        return Outcome.NOT_WRITTEN
    plan = Plan.chain(
        batch, heads.head, functools.partial(_assumed, heads.versions), to_micros(clock.now()), hasher, None
    )
    if plan is None:
        return Outcome.NOT_WRITTEN
    params = plan.params(channel, strict=False, rechain=heads.contended)
    try:
        found = conn.execute(_APPEND, params, prepare=True).fetchone()
    except psycopg.errors.UniqueViolation:
        return Outcome.TAKEN
    if found is None:  # written as chained: the head was this writer's
        heads.saw(moved=False)
        heads.wrote(plan)
        plan.settle()
        return Outcome.WRITTEN
    answer = Answer(*found)
    streams = list(plan.starts)
    if answer.last_hash is None:
        heads.found(streams, Found(answer.seq, answer.hash, answer.recorded_us, answer.versions))
        return Outcome.NOT_WRITTEN
    # Written, chained again by the server: the same chaining here must end on its last hash.
    truth = dict(zip(streams, answer.versions, strict=True))
    after = (answer.seq, answer.hash, answer.recorded_us)
    again = Plan.chain(batch, after, lambda req: truth[req.stream], answer.recorded_us, hasher, None)
    if again is None or again.end[1] != answer.last_hash:
        raise StorageError(url, f"the records after seq {answer.seq} were chained differently by the server")
    heads.saw(moved=True)
    heads.wrote(again)
    again.settle()
    return Outcome.WRITTEN


def _json(value: object) -> str:
    return orjson.dumps(value).decode()


def _assumed(known: dict[str, int], req: AppendRequest) -> int | None:
    version = known.get(req.stream)
    if version is not None:
        return version
    if req.expect is Expect.NO_STREAM:
        return 0
    if isinstance(req.expect, int):
        return req.expect
    return None


def write_group(
    conn: Conn,
    batch: list[AppendRequest],
    clock: Clock,
    hasher: Hasher,
    channel: str,
    heads: WriterHeads | None = None,
) -> Plan:
    """Write every request of `batch` inside the caller's open transaction, holding the writer row.

    Raises psycopg's UniqueViolation when an event id is stored already (a retry): the caller
    rolls back and writes the group with `write_each`. Pipelined, the lock and the reads go in
    one round trip and the rows with the COMMIT in another. Returns the plan written, for the
    caller to note in `heads` once committed.
    """
    streams = list(dict.fromkeys(req.stream for req in batch))
    row = conn.execute(_WRITER_HEAD, (_json(streams),), prepare=True).fetchone()
    assert row is not None, "flightlog_writer_head answers one row"
    found = Found(*row)
    if heads is not None:
        heads.found(streams, found)
    truth = dict(zip(streams, found.versions, strict=True))
    head = (found.seq, found.hash, found.recorded_us)
    plan = Plan.chain(
        batch,
        head,
        lambda req: truth[req.stream],
        to_micros(clock.now()),
        hasher,
        functools.partial(_refuse, conn),
    )
    assert plan is not None, "every stream's version is known"
    if plan.rows:
        # Strict: what it finds cannot differ while every writer takes the row first, and if
        # it did the statement fails (no answer to wait for: it is pipelined with the COMMIT).
        conn.execute(_APPEND, plan.params(channel, strict=True), prepare=True)
    plan.settle()
    return plan


@contextlib.contextmanager
def pipelined_transaction(conn: Conn) -> Iterator[None]:
    """A transaction on an autocommit connection in pipeline mode: BEGIN goes with the first
    statement, COMMIT with the last, so `write_group` costs two round trips. Rolled back if
    anything fails (the connection is left idle, never inside a failed transaction)."""
    try:
        with conn.pipeline():
            conn.execute("BEGIN")
            yield
            conn.execute("COMMIT")
    except BaseException:
        if not conn.closed and conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            with contextlib.suppress(psycopg.Error):
                conn.rollback()
        raise


def _refuse(conn: Conn, req: AppendRequest, version: int, chained: list[Row]) -> None:
    """Settle a refused request: a retry of rows stored, or chained earlier in this group, or a
    ConcurrencyError."""
    settle_refused(req, version, functools.partial(_retry_or_none, conn, req, chained))


def write_each(
    conn: Conn, batch: list[AppendRequest], clock: Clock, hasher: Hasher, channel: str, url: str
) -> None:
    """Write the requests of `batch` one by one inside the caller's open transaction, settling
    every case (a retry of a stored event id finds the stored records)."""
    conn.execute(TAKE_HEAD)
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
            settle_refused(req, version, functools.partial(_retry_or_none, conn, req, []))
            continue
        if not req.events:
            req.result = []
            continue
        rows = chain_rows(req.stream, version, req.events, head_seq, head_hash, now_us, hasher)
        if not _insert(conn, rows):
            try:
                req.result = _retry_or_none(conn, req, [])
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


def _retry_or_none(conn: Conn, req: AppendRequest, chained: list[Row]) -> list[Record] | None:
    ids = [e.event_id for e in req.events]
    if not ids:
        return None
    found = conn.execute(f"SELECT {COLUMNS} FROM events WHERE event_id = ANY(%s)", (ids,)).fetchall()
    stored = {row[7]: cast(Row, row) for row in found}
    wanted = set(ids)
    stored.update((row[7], row) for row in chained if row[7] in wanted)
    return resolve_retry(req.stream, req.events, stored)
