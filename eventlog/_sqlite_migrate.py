"""The named migrations of a SQLite log, and the conversion of a log to the lean row.

`0001_create_events` made the first row: hashes as hex TEXT, the event id as TEXT, data and
meta as BLOBs, and a `prev_hash` column. `0002_lean_row` converts such a log in place, in
the migration's one transaction, to the row `_sqlite_row` describes: every record keeps its
seq, version, event id, time, data, meta and hash, so the chain and any anchor kept
elsewhere still verify. A long conversion shows a progress bar on a terminal.
`0003_run_starts_index` indexes the records that start a run by its id.
`0004_approval_indexes` indexes approvals' records by seq and by approval id.
`0005_data_search` indexes every record's data for `seqs_containing` (an FTS5 table filled
from the rows already there and kept by a trigger); where this SQLite has no FTS5 it adds
nothing, and searches scan the data.
`0006_data_search_off_the_write_path` drops that trigger, so appends no longer index what
they write; the index notes the last seq it holds, and searches catch it up.
"""

from __future__ import annotations

import sqlite3
import sys
from collections.abc import Callable
from typing import Any

from sqlite_utils import Database
from sqlite_utils.migrations import Migrations

from ._record import event_key
from ._sqlite_row import (
    CREATE_APPROVAL_INDEXES,
    CREATE_DATA_SEARCH,
    CREATE_RUN_STARTS_INDEX,
    CREATE_TABLE,
    CREATE_VIEW,
    DATA_SEARCH,
    INSERT,
    SEARCH_OFF_THE_WRITE_PATH,
)

migrations = Migrations("flightlog.eventlog")

CHUNK = 10_000  # rows converted per statement
_BAR_FROM = 50_000  # a conversion of fewer rows shows no progress bar


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


@migrations(name="0002_lean_row")
def _lean_row(db: Database) -> None:
    total = int(db.execute("SELECT count(*) FROM events").fetchone()[0])
    if total < _BAR_FROM or not sys.stderr.isatty():
        convert_to_lean(db.conn)
        return
    from rich.progress import Progress

    with Progress(transient=True) as bar:
        task = bar.add_task("converting the log to the lean row", total=total)
        convert_to_lean(db.conn, lambda done: bar.update(task, completed=done))


@migrations(name="0003_run_starts_index")
def _run_starts_index(db: Database) -> None:
    db.execute(CREATE_RUN_STARTS_INDEX)


@migrations(name="0004_approval_indexes")
def _approval_indexes(db: Database) -> None:
    for statement in CREATE_APPROVAL_INDEXES:
        db.execute(statement)


@migrations(name="0005_data_search")
def _data_search(db: Database) -> None:
    if not fts5_available(db.conn):
        return
    for statement in CREATE_DATA_SEARCH:
        db.execute(statement)


@migrations(name="0006_data_search_off_the_write_path")
def _data_search_off_the_write_path(db: Database) -> None:
    if not db[DATA_SEARCH].exists():  # no FTS5 here: searches scan
        return
    for statement in SEARCH_OFF_THE_WRITE_PATH:
        db.execute(statement)


def fts5_available(conn: sqlite3.Connection) -> bool:
    """Whether this SQLite build has FTS5 with the trigram tokenizer (3.34 and later)."""
    try:
        conn.execute("CREATE VIRTUAL TABLE temp.fts5_probe USING fts5(x, tokenize='trigram')")
    except sqlite3.OperationalError:
        return False
    conn.execute("DROP TABLE temp.fts5_probe")
    return True


def convert_to_lean(conn: Any, progress: Callable[[int], object] | None = None) -> int:
    """Rewrite the `events` table of the first row as the lean row, inside the caller's
    transaction; returns how many rows were converted."""
    conn.execute("ALTER TABLE events RENAME TO events_0001")
    conn.execute(CREATE_TABLE)
    select = (
        "SELECT seq, stream, version, type, schema, data, meta, event_id, recorded_at, hash "
        "FROM events_0001 WHERE seq > ? ORDER BY seq LIMIT ?"
    )
    done = after = 0
    while rows := conn.execute(select, (after, CHUNK)).fetchall():
        conn.executemany(INSERT, [(*r[:7], event_key(str(r[7])), r[8], _hash_key(r[9])) for r in rows])
        done += len(rows)
        after = rows[-1][0]
        if progress is not None:
            progress(done)
    conn.execute("DROP TABLE events_0001")
    conn.execute(CREATE_VIEW)
    return done


def _hash_key(value: Any) -> bytes | str:
    """A hex hash as its 32 bytes; anything else (a hand edit) as it was, for verify to report."""
    try:
        raw = bytes.fromhex(value)
    except (TypeError, ValueError):
        return value  # type: ignore[no-any-return]
    return raw if len(raw) == 32 else value
