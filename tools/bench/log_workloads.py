"""The workloads of `flightlog bench log`, each against raw sqlite3, flightlog and eventsourcing.

Every function runs one workload on one side and returns `(events, seconds)`. Write workloads
stop after `total` events or `seconds`, whichever comes first, but always do at least one
append. All sides produce the same event from the same numbers and run at the same
durability: WAL and `synchronous=FULL`. The flightlog workloads also take a PostgreSQL URL
(see `fresh_schema`), where a commit is durable when the server's `synchronous_commit` is on.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, fields
from typing import Any, cast

import click
import orjson

from eventlog import EventLog, EventLogError, NewEvent, decode, open_log
from eventlog.events import Event, event

SYNC = "FULL"
THREADS = 16
BATCH = 100
STREAM_LEN = 1000  # events per stream in every workload; also the size of the stream load
PAGE = 1000  # rows per query when reading eventsourcing's notifications, as flightlog pages
TOPIC = "tools.bench.log_workloads:BenchEventRecorded"
# The lean row flightlog's SQLite log stores (see docs/internals.md, "The row on disk"): JSON
# TEXT data and meta, the event id's 16 bytes, the hash's 32 bytes.
COLUMNS = "seq, stream, version, type, schema, data, meta, event_id, recorded_at, hash"
_INSERT = f"INSERT INTO events ({COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?)"
_NO_HASH = bytes(32)  # raw sqlite3 stores a placeholder: it is the floor, not a hash chain
# The ids flightlog assigns by default: raw inserts use the same, since the cost of the unique
# index on event_id depends on their order.
_event_id = cast(Callable[[], str], next(f.default_factory for f in fields(NewEvent) if f.name == "event_id"))
_RUN_ID = "7f3a9c2e5b1d4f60a8e2c4b6d8f0a1c3"
_FIELDS = ("run_id", "n", "tool", "detail")

Measured = tuple[int, float]


@event("BenchEventRecorded")
@dataclass(frozen=True, slots=True)
class BenchEventRecorded(Event):
    """A tool call recorded by the benchmark: a small, typical payload."""

    run_id: str
    n: int
    tool: str
    detail: str


def bench_event(n: int) -> BenchEventRecorded:
    return BenchEventRecorded(_RUN_ID, n, "shell", "ls -la /tmp/workspace")


def stream_name(seq: int) -> str:
    """The stream of the `seq`-th event (1-based): streams of STREAM_LEN events each."""
    return f"bench-{(seq - 1) // STREAM_LEN}"


@contextlib.contextmanager
def fresh_path(parent: str | None, name: str) -> Iterator[str]:
    """A database path in a new temporary folder, removed afterwards."""
    with tempfile.TemporaryDirectory(prefix="flightlog-bench-", dir=parent) as folder:
        yield os.path.join(folder, name)


@contextlib.contextmanager
def fresh_schema(url: str) -> Iterator[str]:
    """`url` with a new schema first on its search_path (the log creates it); dropped afterwards."""
    import psycopg
    from psycopg import sql

    schema = f"flightlog_bench_{uuid.uuid4().hex[:12]}"

    def drop() -> None:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))

    try:
        yield f"{url}{'&' if '?' in url else '?'}options=-csearch_path%3D{schema}"
    except BaseException:
        with contextlib.suppress(psycopg.Error):
            drop()  # best effort: the error on its way out is the one to report
        raise
    drop()


def check_pg(url: str) -> str:
    """Fail early, without showing a password, unless `url` opens a log; return it fit to show."""
    if not url.startswith(("postgresql://", "postgres://")):
        raise click.UsageError(
            "--db takes a postgresql:// URL (the SQLite workloads always run in temporary files; "
            "--dir says where)"
        )
    try:
        with fresh_schema(url) as probe, open_log(probe) as log:
            shown: str = log.url  # the driver's URL without its password
    except EventLogError as e:
        raise click.ClickException(str(e)) from None
    return shown.rsplit("options=-csearch_path", 1)[0].rstrip("?&")


def pg_settings(url: str) -> dict[str, str]:
    """The server settings a commit's durability and cost depend on."""
    import psycopg

    settings = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for name in ("server_version", "fsync", "synchronous_commit", "wal_sync_method"):
            row = conn.execute(f"SHOW {name}").fetchone()
            settings[name] = str(row[0]) if row else "?"
    return settings


def _timed(total: int, seconds: float, step: Callable[[int], int]) -> Measured:
    """Call `step(done)` (which returns how many events it wrote) until `total` or time is up."""
    # The first step is not timed, on every side alike: it creates the WAL file and warms
    # the statement cache.
    done = step(0)
    first, start = done, time.perf_counter()
    deadline = start + seconds
    while True:
        done += step(done)
        if done - first >= total or time.perf_counter() >= deadline:
            return done - first, time.perf_counter() - start


# -- raw sqlite3 -------------------------------------------------------------------------------


def _raw_connect(path: str) -> sqlite3.Connection:
    if not os.path.exists(path):
        open_log(path, synchronous=SYNC).close()  # the very same schema, by the same migration
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {SYNC}")
    return conn


def raw_data(n: int) -> bytes:
    """The `n`-th benchmark event's data as every side stores it: the event's fields as
    sorted-key orjson bytes, taken from the event as flightlog and eventsourcing take them."""
    ev = bench_event(n)
    return orjson.dumps({f: getattr(ev, f) for f in _FIELDS}, option=orjson.OPT_SORT_KEYS)


def raw_decode(data: str | bytes) -> BenchEventRecorded:
    """An event read back, as every side ends a read: its data loaded into the dataclass."""
    return BenchEventRecorded(**orjson.loads(data))


def raw_row(seq: int, stream: str, version: int, now_us: int, key: bytes) -> tuple[Any, ...]:
    """A row of the events table for raw sqlite3: the event of `seq`, placeholder hashes."""
    data = raw_data(seq - 1).decode()
    return (seq, stream, version, "BenchEventRecorded", 1, data, "{}", key, now_us, _NO_HASH)


def new_keys(n: int) -> list[bytes]:
    """`n` UUIDv7s' 16 bytes, made as flightlog makes a batch's ids (time-ordered, as the
    index likes, with one clock read and one draw of random bits for them all)."""
    ms = (time.time_ns() // 1_000_000) << 80
    rand = os.urandom(10 * n)
    return [
        ((ms | int.from_bytes(rand[i : i + 10], "big")) & _V7_CLEAR | _V7_SET).to_bytes(16, "big")
        for i in range(0, 10 * n, 10)
    ]


_V7_CLEAR = ~(0xF << 76 | 0x3 << 62)
_V7_SET = 0x7 << 76 | 0x2 << 62


def _raw_rows(first: int, n: int, now_us: int) -> list[tuple[Any, ...]]:
    keys = new_keys(n)
    return [
        raw_row(seq, stream_name(seq), (seq - 1) % STREAM_LEN + 1, now_us, keys[seq - first])
        for seq in range(first, first + n)
    ]


def raw_transactions(
    conn: sqlite3.Connection,
    insert: str,
    rows_for: Callable[[int], list[tuple[Any, ...]]],
    total: int,
    seconds: float,
) -> Measured:
    """Insert `rows_for(done)` one BEGIN IMMEDIATE transaction at a time (one `execute` for a
    single row, else one `executemany`) until `total` rows or time is up; closes `conn`."""

    def step(done: int) -> int:
        rows = rows_for(done)
        conn.execute("BEGIN IMMEDIATE")
        if len(rows) == 1:
            conn.execute(insert, rows[0])
        else:
            conn.executemany(insert, rows)
        conn.execute("COMMIT")
        return len(rows)

    try:
        return _timed(total, seconds, step)
    finally:
        conn.close()


def raw_append(path: str, total: int, per_txn: int, seconds: float) -> Measured:
    """Insert rows `per_txn` to a transaction: one `execute`, or one `executemany`."""
    now_us = time.time_ns() // 1000

    def rows_for(done: int) -> list[tuple[Any, ...]]:
        return _raw_rows(done + 1, per_txn, now_us)

    return raw_transactions(_raw_connect(path), _INSERT, rows_for, total, seconds)


def raw_read_all(path: str, decode: Callable[[str | bytes], object] = raw_decode) -> int:
    """One SELECT of every column in seq order, each data value decoded (by default loaded into
    the dataclass; `orjson.loads` alone for the issue's original baseline)."""
    conn = sqlite3.connect(path)
    try:
        n = 0
        for row in conn.execute(f"SELECT {COLUMNS} FROM events ORDER BY seq"):
            decode(row[5])
            n += 1
        return n
    finally:
        conn.close()


# -- flightlog ---------------------------------------------------------------------------------


def log_append(path: str, total: int, per_append: int, seconds: float) -> Measured:
    """One thread appends catalogue events, `per_append` to a call, with an exact `expect`."""
    log = open_log(path, synchronous=SYNC)

    def step(done: int) -> int:
        events = [bench_event(done + i) for i in range(per_append)]
        log.append(stream_name(done + 1), events, expect=done % STREAM_LEN)
        return per_append

    try:
        return _timed(total, seconds, step)
    finally:
        log.close()


def threaded(total: int, seconds: float, work: Callable[[int, int], None]) -> Measured:
    """Run `work(thread, n)` for n = 0, 1, … on THREADS threads until `total` or time is up."""
    stop = threading.Event()
    finished = threading.Event()
    counts = [0] * THREADS
    running = [THREADS]
    lock = threading.Lock()
    errors: list[BaseException] = []
    gate = threading.Barrier(THREADS + 1)
    quota = max(total // THREADS, 1)

    def run(t: int) -> None:
        gate.wait()
        try:
            while counts[t] < quota and not stop.is_set():
                work(t, counts[t])
                counts[t] += 1
        except BaseException as e:  # noqa: BLE001 - re-raised in the calling thread below
            errors.append(e)
            stop.set()
        finally:
            with lock:
                running[0] -= 1
                if not running[0]:
                    finished.set()

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(THREADS)]
    for th in threads:
        th.start()
    gate.wait()
    start = time.perf_counter()
    finished.wait(seconds)
    stop.set()
    for th in threads:
        th.join()
    elapsed = time.perf_counter() - start
    if errors:
        raise errors[0]
    return sum(counts), elapsed


def log_threads(path: str, total: int, seconds: float) -> Measured:
    """THREADS threads, each appending single events to its own stream."""
    log = open_log(path, synchronous=SYNC)

    def work(t: int, n: int) -> None:
        log.append(f"bench-t{t}", [bench_event(n)], expect=n)

    try:
        return threaded(total, seconds, work)
    finally:
        log.close()


def fill_log(log: EventLog, n: int, advance: Callable[[int], object]) -> None:
    """Append `n` events in streams of STREAM_LEN, one append per stream."""
    for first in range(0, n, STREAM_LEN):
        size = min(STREAM_LEN, n - first)
        log.append(stream_name(first + 1), [bench_event(first + i) for i in range(size)], expect=0)
        advance(size)


def log_read_all(log: EventLog) -> int:
    """`read_all`, each record decoded to its catalogue event."""
    n = 0
    for record in log.read_all():
        decode(record)
        n += 1
    return n


def log_load(log: EventLog, stream: str) -> int:
    return len([decode(r) for r in log.read(stream)])


# -- eventsourcing -----------------------------------------------------------------------------


class Peer:
    """eventsourcing's SQLite application recorder in one file: its global order is our seq.

    Events go in and come out as the library stores them (`StoredEvent`, `Notification`); the
    state is the same orjson bytes flightlog stores, decoded back to the same dataclass.
    """

    def __init__(self, path: str) -> None:
        from eventsourcing.persistence import StoredEvent
        from eventsourcing.sqlite import SQLiteApplicationRecorder, SQLiteDatastore

        self.stored_event = StoredEvent
        # The library serialises writers with its own lock; a pool as large as the thread
        # count and a long pool timeout keep 16 waiting writers from timing out.
        self.datastore = SQLiteDatastore(path, pool_size=THREADS + 1, pool_timeout=120.0)
        self.recorder = SQLiteApplicationRecorder(self.datastore)
        self.recorder.create_table()

    def synchronous(self) -> str:
        """The PRAGMA synchronous its connections run with (it leaves SQLite's default)."""
        with self.datastore.transaction(commit=False) as c:
            c.execute("PRAGMA synchronous")
            value = c.fetchone()[0]
        return {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(value, str(value))

    def stored(self, originator: uuid.UUID, version: int, n: int) -> Any:
        return self.stored_event(originator, version, TOPIC, raw_data(n))

    def close(self) -> None:
        self.datastore.close()


def peer_append(path: str, total: int, per_append: int, seconds: float) -> Measured:
    """One thread inserts stored events, `per_append` to an `insert_events` call."""
    peer = Peer(path)
    originators: dict[int, uuid.UUID] = {}

    def step(done: int) -> int:
        originator = originators.setdefault(done // STREAM_LEN, uuid.uuid4())
        base = done % STREAM_LEN
        peer.recorder.insert_events(
            [peer.stored(originator, base + i + 1, done + i) for i in range(per_append)]
        )
        return per_append

    try:
        return _timed(total, seconds, step)
    finally:
        peer.close()


def peer_threads(path: str, total: int, seconds: float) -> Measured:
    """THREADS threads, each inserting single stored events for its own aggregate."""
    peer = Peer(path)
    originators = [uuid.uuid4() for _ in range(THREADS)]

    def work(t: int, n: int) -> None:
        peer.recorder.insert_events([peer.stored(originators[t], n + 1, n)])

    try:
        return threaded(total, seconds, work)
    finally:
        peer.close()


def fill_peer(peer: Peer, n: int, advance: Callable[[int], object]) -> list[uuid.UUID]:
    """Insert `n` stored events, STREAM_LEN per aggregate; returns the aggregates' ids."""
    originators = []
    for first in range(0, n, STREAM_LEN):
        size = min(STREAM_LEN, n - first)
        originator = uuid.uuid4()
        originators.append(originator)
        peer.recorder.insert_events([peer.stored(originator, i + 1, first + i) for i in range(size)])
        advance(size)
    return originators


def peer_read_all(peer: Peer) -> int:
    """Every notification in pages of PAGE, each state decoded to the dataclass."""
    n = 0
    after = 0
    while True:
        page = peer.recorder.select_notifications(after + 1, PAGE)
        for notification in page:
            raw_decode(notification.state)
        n += len(page)
        if len(page) < PAGE:
            break
        after = page[-1].id
    return n


def peer_load(peer: Peer, originator: uuid.UUID) -> int:
    return len([raw_decode(e.state) for e in peer.recorder.select_events(originator)])


def repeat(load: Callable[[], int], times: int, seconds: float, *, warm: bool = True) -> Measured:
    """Run `load` (which returns how many events it read) `times` times or until time is up.

    At least once; with `warm`, after one untimed call, as for writes (statement caches).
    """
    if warm:
        load()
    n = 0
    start = time.perf_counter()
    deadline = start + seconds
    for _ in range(times):
        n += load()
        if time.perf_counter() > deadline:
            break
    return n, time.perf_counter() - start
