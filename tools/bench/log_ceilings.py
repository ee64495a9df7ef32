"""Raw sqlite3 upper bounds for `flightlog bench log`: what SQLite itself does on this machine.

Some targets compare flightlog with a workload that raw SQLite cannot reach either. These
workloads measure, in the same run, the best case of each such workload with no library in
the way, so the report can say which targets are beyond raw sqlite3 here:

- the 16-thread workload's rows written by one appender, 16 to a transaction: a perfect group
  commit with no threads and no hash chain (each transaction touches one index page per
  stream, which is what a group of 16 streams costs);
- the same rows group-committed by raw sqlite3 on 16 threads: what CPython's threads reach
  with the fewest Python steps between them (no hash chain, no records back);
- batches of 100 into eventsourcing's own table (4 columns, one index), by `executemany`;
- loading one stream by its index, each data value loaded into the same dataclass;
- batches of 100 rows of the first row format, for the bytes that format writes.
"""

from __future__ import annotations

import itertools
import sqlite3
import threading
import time
import uuid
from typing import Any

from . import log_workloads as w

# The row before the lean one (migration 0001): hex TEXT hashes and id, BLOB JSON, prev_hash.
V1_TABLE = """
    CREATE TABLE events (
        seq INTEGER PRIMARY KEY, stream TEXT NOT NULL, version INTEGER NOT NULL, type TEXT NOT NULL,
        schema INTEGER NOT NULL, data BLOB NOT NULL, meta BLOB NOT NULL, event_id TEXT NOT NULL UNIQUE,
        recorded_at INTEGER NOT NULL, prev_hash TEXT NOT NULL, hash TEXT NOT NULL, UNIQUE (stream, version)
    )
"""
_V1_INSERT = "INSERT INTO events VALUES (?,?,?,?,?,?,?,?,?,?,?)"


def raw_interleaved(path: str, total: int, seconds: float) -> w.Measured:
    """One appender writes THREADS streams' single events, THREADS rows to a transaction."""
    conn = w._raw_connect(path)
    now_us = time.time_ns() // 1000
    versions = [0] * w.THREADS

    def rows_for(done: int) -> list[tuple[Any, ...]]:
        rows = []
        keys = w.new_keys(w.THREADS)
        for t in range(w.THREADS):
            versions[t] += 1
            rows.append(w.raw_row(done + t + 1, f"bench-t{t}", versions[t], now_us, keys[t]))
        return rows

    return w.raw_transactions(conn, w._INSERT, rows_for, total, seconds)


class _Caller:
    """One caller's row in `raw_threads`' queue, and the lock it sleeps on until it is written."""

    __slots__ = ("done", "row", "then", "wake")

    def __init__(self, row: tuple[Any, ...]) -> None:
        self.row = row
        self.wake = threading.Lock()
        self.wake.acquire()
        self.done = False
        self.then: threading.Lock | None = None  # the next caller of its group to wake


def raw_threads(path: str, total: int, seconds: float) -> w.Measured:
    """w.THREADS threads append single rows to their own streams through the least group commit
    Python allows: raw rows, no hash chain, no records back, one transaction per gathered group.

    The first caller to find no writer leads: it waits (at most a millisecond) until every
    thread has queued, writes the queue in one transaction, then wakes its group's callers one
    after another, each waking the next (waking them all at once makes them fight for the GIL),
    and hands the lead to the oldest caller queued since.
    """
    conn = w._raw_connect(path)
    now_us = time.time_ns() // 1000
    cond = threading.Condition(threading.Lock())
    queue: list[_Caller] = []
    state = {"seq": 0, "leading": False}

    def write(me: _Caller) -> None:
        with cond:
            cond.wait_for(lambda: len(queue) >= w.THREADS, 0.001)
            group = queue[:]
            del queue[:]
        conn.execute("BEGIN IMMEDIATE")
        conn.executemany(w._INSERT, [c.row for c in group])
        conn.execute("COMMIT")
        with cond:
            waiting = [c for c in group if c is not me]
            for c in group:
                c.done = True
            for c, after in itertools.pairwise(waiting):
                c.then = after.wake
            successor = queue[0].wake if queue else None
            state["leading"] = successor is not None
        if waiting:
            waiting[0].wake.release()
        if successor is not None:
            successor.release()

    def work(t: int, n: int) -> None:
        key = w.new_keys(1)[0]
        with cond:
            state["seq"] += 1
            me = _Caller(w.raw_row(state["seq"], f"bench-t{t}", n + 1, now_us, key))
            queue.append(me)
            lead = not state["leading"]
            state["leading"] = True
            if len(queue) >= w.THREADS:
                cond.notify()
        if not lead:
            me.wake.acquire()  # written (then wake the next), or the lead is this caller's
            if me.done:
                if me.then is not None:
                    me.then.release()
                return
        write(me)

    try:
        return w.threaded(total, seconds, work)
    finally:
        conn.close()


def raw_peer_table(path: str, total: int, seconds: float) -> w.Measured:
    """`executemany` batches of BATCH rows into eventsourcing's table, as the library creates it."""
    w.Peer(path).close()
    insert = "INSERT INTO stored_events (originator_id, originator_version, topic, state) VALUES (?,?,?,?)"
    originators: dict[int, str] = {}

    def rows_for(done: int) -> list[tuple[Any, ...]]:
        originator = originators.setdefault(done // w.STREAM_LEN, uuid.uuid4().hex)
        return [
            (originator, (done + i) % w.STREAM_LEN + 1, w.TOPIC, w.raw_data(done + i)) for i in range(w.BATCH)
        ]

    return w.raw_transactions(w._raw_connect(path), insert, rows_for, total, seconds)


def raw_load(path: str, stream: str) -> int:
    """One SELECT of every column of one stream by its index, each data value loaded into the
    dataclass."""
    conn = sqlite3.connect(path)
    try:
        n = 0
        query = f"SELECT {w.COLUMNS} FROM events WHERE stream = ? ORDER BY version"
        for row in conn.execute(query, (stream,)):
            w.raw_decode(row[5])
            n += 1
        return n
    finally:
        conn.close()


def _v1_row(seq: int, now_us: int) -> tuple[Any, ...]:
    """A row of the first row format, as flightlog wrote it before the lean row."""
    stream, version = w.stream_name(seq), (seq - 1) % w.STREAM_LEN + 1
    no_hash = "0" * 64
    data = w.raw_data(seq - 1)
    event_id = w._event_id()
    return (seq, stream, version, "BenchEventRecorded", 1, data, b"{}", event_id, now_us, no_hash, no_hash)


def raw_append_v1(path: str, total: int, seconds: float) -> w.Measured:
    """Batches of w.BATCH rows of the first row format, by executemany (for the bytes it writes)."""
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute(f"PRAGMA synchronous = {w.SYNC}")
    conn.execute(V1_TABLE)
    now_us = time.time_ns() // 1000

    def rows_for(done: int) -> list[tuple[Any, ...]]:
        return [_v1_row(seq, now_us) for seq in range(done + 1, done + 1 + w.BATCH)]

    return w.raw_transactions(conn, _V1_INSERT, rows_for, total, seconds)


def io_written() -> int | None:
    """Bytes this process has passed to write(2) so far (Linux's /proc/self/io), or None."""
    try:
        with open("/proc/self/io") as f:
            for line in f:
                if line.startswith("wchar:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None
