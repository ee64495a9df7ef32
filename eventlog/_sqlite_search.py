"""The payload search of a SQLite log: an FTS5 trigram index kept off the write path.

Appends do not index what they write (since 0006: the trigger of 0005 made each batched
append twice as slow). The index holds the records up to the seq in `events_data_search_upto`;
a writable log catches it up before it answers (`catch_up`), in short transactions of its
own, and every search answers from the index up to that seq and scans the records after it
(`scan`), so a read-only open, which writes nothing, answers as a writable one does.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable

import orjson

from ._record import Record
from ._sqlite_row import CATCH_UP, SEARCH_UPTO_QUERY, SET_UPTO

CHUNK = 2_000  # records indexed per transaction: the writer waits for one chunk at most
_HEAD = "SELECT coalesce(max(seq), 0) FROM events"


def catch_up(conn: sqlite3.Connection) -> int:
    """Index the records the index does not hold yet, a chunk per BEGIN IMMEDIATE transaction on
    the writer connection `conn` (autocommit); returns the last seq the index holds."""
    upto, head = int(conn.execute(SEARCH_UPTO_QUERY).fetchone()[0]), int(conn.execute(_HEAD).fetchone()[0])
    while upto < head:
        conn.execute("BEGIN IMMEDIATE")
        try:
            # Read again under the write lock: another process may have caught it up meanwhile.
            upto = int(conn.execute(SEARCH_UPTO_QUERY).fetchone()[0])
            head = int(conn.execute(_HEAD).fetchone()[0])
            if upto < head:
                hi = min(head, upto + CHUNK)
                conn.execute(CATCH_UP, (upto, hi))
                conn.execute(SET_UPTO, (hi,))
                upto = hi
            conn.execute("COMMIT")
        except BaseException:
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
    return upto


def scan(records: Iterable[Record], text: str) -> list[int]:
    """The seqs of `records` whose data holds `text`, ignoring case, newest first: the rule of
    the log's plain scan (`EventLog.seqs_containing`), for the records the index does not hold."""
    needle = text.lower()
    return [r.seq for r in records if needle in orjson.dumps(r.data).decode().lower()][::-1]
