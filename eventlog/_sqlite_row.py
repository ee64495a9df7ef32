"""The lean SQLite row: how a record is stored, and how stored rows become records again.

A record's row holds what cannot be derived: `hash` as 32 bytes, `event_id` as the 16 bytes
of its UUID, `data` and `meta` as JSON TEXT (sqlite-utils, Datasette and the sqlite3 shell
show them as they are). `prev_hash` is not stored: it is the hash of the row before, which
a reader of consecutive rows already has, and one indexed lookup otherwise. An event id
that is not a UUID in its canonical (lower-case, hyphenated) form is kept as TEXT, so every
id reads back exactly as it was given. `events_view` shows a row the way a person reads it:
hex hashes, the UUID, prev_hash and an ISO 8601 time.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from ._append import EncodedEvent, Row
from ._record import APPROVAL_FILTER, GENESIS_HASH, RUN_START_FILTER, Record, lenient_loads, uuid_text

# What a reader selects, in the order the row-to-record code below unpacks it.
STORED = "seq, stream, version, type, schema, data, CAST(meta AS BLOB), event_id, recorded_at, hash"
_INSERT_COLUMNS = "seq, stream, version, type, schema, data, meta, event_id, recorded_at, hash"
# data and meta arrive as the JSON the hash covers (bytes, or the str the write path binds);
# SQLite stores them as TEXT.
VALUES = "(?,?,?,?,?,CAST(? AS TEXT),CAST(? AS TEXT),?,?,?)"
INSERT = f"INSERT INTO events ({_INSERT_COLUMNS}) VALUES {VALUES}"
PARAMS = 10  # per row

CREATE_TABLE = """
    CREATE TABLE events (
        seq         INTEGER PRIMARY KEY,
        stream      TEXT    NOT NULL,
        version     INTEGER NOT NULL,
        type        TEXT    NOT NULL,
        schema      INTEGER NOT NULL,
        data        TEXT    NOT NULL,
        meta        TEXT    NOT NULL,
        event_id    BLOB    NOT NULL UNIQUE,
        recorded_at INTEGER NOT NULL,
        hash        BLOB    NOT NULL,
        UNIQUE (stream, version)
    )
"""

# The records that start a run, by run id (`EventLog.run_starts`). A query uses this partial
# index only when it repeats the index's expression and filter word for word.
RUN_ID = "json_extract(data, '$.run_id')"
CREATE_RUN_STARTS_INDEX = f"CREATE INDEX events_run_starts ON events ({RUN_ID}) WHERE {RUN_START_FILTER}"
RUN_STARTS_QUERY = f"SELECT {STORED} FROM events WHERE {RUN_START_FILTER} AND {RUN_ID} = ? ORDER BY seq"

# Approvals' records by seq (the approval history, read whole) and by approval id (one
# approval's). Left to itself, SQLite answers a read of the history by scanning the seq range
# of the whole log; told to use the first index (INDEXED BY), it reads only those records.
APPROVAL_ID = "json_extract(data, '$.approval_id')"
APPROVAL_SEQS_INDEX = "events_approval_seqs"
CREATE_APPROVAL_INDEXES = (
    f"CREATE INDEX {APPROVAL_SEQS_INDEX} ON events (seq) WHERE {APPROVAL_FILTER}",
    f"CREATE INDEX events_approval_ids ON events ({APPROVAL_ID}, seq) WHERE {APPROVAL_FILTER}",
)
APPROVAL_ROWS_QUERY = (
    f"SELECT {STORED} FROM events INDEXED BY {APPROVAL_SEQS_INDEX} "
    f"WHERE {APPROVAL_FILTER} AND seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
)
APPROVAL_RECORDS_QUERY = (
    f"SELECT {STORED} FROM events WHERE {APPROVAL_FILTER} AND {APPROVAL_ID} = ? AND seq <= ? ORDER BY seq"
)

# The words of each record's data, for `seqs_containing`: an FTS5 table of trigrams, so a
# search finds any substring (of three characters or more) as the scan did, ignoring case.
# Contentless: it keeps the index, not a second copy of the data, and answers with seqs. It
# is no part of the chain. 0005 filled it with a trigger, inside every append's transaction;
# 0006 dropped the trigger (it made batched appends twice as slow): the index holds the
# records up to the seq in DATA_SEARCH_UPTO, and a search catches it up first (CATCH_UP) or,
# opened read-only, scans the records after that seq.
DATA_SEARCH = "events_data_search"
CREATE_DATA_SEARCH = (
    f"CREATE VIRTUAL TABLE {DATA_SEARCH} USING fts5(data, content='', tokenize='trigram')",
    f"INSERT INTO {DATA_SEARCH} (rowid, data) SELECT seq, data FROM events",
    f"CREATE TRIGGER events_data_search_insert AFTER INSERT ON events BEGIN "
    f"INSERT INTO {DATA_SEARCH} (rowid, data) VALUES (new.seq, new.data); END",
)
DATA_SEARCH_UPTO = "events_data_search_upto"
SEARCH_OFF_THE_WRITE_PATH = (
    "DROP TRIGGER events_data_search_insert",
    f"CREATE TABLE {DATA_SEARCH_UPTO} (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL)",
    f"INSERT INTO {DATA_SEARCH_UPTO} (id, seq) SELECT 1, coalesce(max(seq), 0) FROM events",
)
SEARCH_UPTO_QUERY = f"SELECT seq FROM {DATA_SEARCH_UPTO}"
CATCH_UP = f"INSERT INTO {DATA_SEARCH} (rowid, data) SELECT seq, data FROM events WHERE seq > ? AND seq <= ?"
SET_UPTO = f"UPDATE {DATA_SEARCH_UPTO} SET seq = ?"
DATA_SEARCH_QUERY = (
    f"SELECT rowid FROM {DATA_SEARCH} WHERE {DATA_SEARCH} MATCH ? AND rowid <= ? ORDER BY rowid DESC LIMIT ?"
)
SEARCH_MIN = 3  # a trigram index answers searches of at least this many characters


def search_phrase(text: str) -> str:
    """`text` as an FTS5 string: matched as it is, whatever characters it holds."""
    return '"' + text.replace('"', '""') + '"'


_HEX_ID = "lower(hex(event_id))"
CREATE_VIEW = f"""
    CREATE VIEW events_view AS SELECT
        seq, stream, version, type, schema, data, meta,
        CASE typeof(event_id) WHEN 'blob' THEN
            substr({_HEX_ID}, 1, 8) || '-' || substr({_HEX_ID}, 9, 4) || '-' || substr({_HEX_ID}, 13, 4)
            || '-' || substr({_HEX_ID}, 17, 4) || '-' || substr({_HEX_ID}, 21)
        ELSE event_id END AS event_id,
        strftime('%Y-%m-%dT%H:%M:%f', recorded_at / 1000000.0, 'unixepoch') || 'Z' AS recorded_at,
        recorded_at AS recorded_us,
        lower(hex(coalesce(
            (SELECT p.hash FROM events AS p WHERE p.seq = events.seq - 1), zeroblob(32)
        ))) AS prev_hash,
        lower(hex(hash)) AS hash
    FROM events
"""


def id_text(value: bytes | str) -> str:
    """An event id as the record carries it."""
    return uuid_text(value) if type(value) is bytes else str(value)


def stored_rows(rows: Sequence[Row], events: Sequence[EncodedEvent]) -> list[tuple[Any, ...]]:
    """The rows to insert for chained `rows` of `events` (in the same order).

    data and meta go in as str: SQLite stores them as the TEXT `CAST(? AS TEXT)` makes of
    their bytes, but binding the bytes and casting them cost ~1.8 us a row more (bench log).
    """
    fromhex = bytes.fromhex
    return [
        (r[0], r[1], r[2], r[3], r[4], r[5].decode(), r[6].decode(), e.event_key, r[8], fromhex(r[10]))
        for r, e in zip(rows, events, strict=True)
    ]


Lookup = Callable[[list[int]], dict[int, str]]
_HASH = operator.itemgetter(9)
_new_tuple = tuple.__new__


def _hexes(rows: list[Any]) -> list[str]:
    try:
        return list(map(bytes.hex, map(_HASH, rows)))
    except TypeError:  # a hash edited by hand into TEXT: it reads, and fails verification
        return [h.hex() if type(h) is bytes else str(h) for h in map(_HASH, rows)]


def _prev_hashes(rows: list[Any], hexes: list[str], hashes_before: Lookup) -> list[str]:
    """Each row's prev_hash: the hash of the row before it in seq."""
    first = rows[0][0]
    if rows[-1][0] - first == len(rows) - 1:  # consecutive seqs, as every page of read_all is
        return [hashes_before([first])[first], *hexes[:-1]]
    prevs: list[str | None] = [None] * len(rows)
    missing = []
    last = None
    for i, row in enumerate(rows):
        if last is not None and row[0] == last + 1:
            prevs[i] = hexes[i - 1]
        else:
            missing.append(row[0])
        last = row[0]
    found = hashes_before(missing)
    return [p if p is not None else found[row[0]] for p, row in zip(prevs, rows, strict=True)]


def records(rows: list[Any], hashes_before: Lookup) -> list[Record]:
    """Records from stored rows (selected as STORED), each data decoded."""
    if not rows:
        return []
    hexes = _hexes(rows)
    prevs = _prev_hashes(rows, hexes, hashes_before)
    try:
        return _records(rows, prevs, hexes, orjson.loads)
    except orjson.JSONDecodeError:  # a hand edit: the record reads, and every reader skips it
        return _records(rows, prevs, hexes, lenient_loads)


def _records(
    rows: list[Any], prevs: list[str], hexes: list[str], loads: Callable[[Any], Any]
) -> list[Record]:
    # One comprehension, no call per row but orjson's and the UUID's formatting: this is the
    # cost of every full read. tuple.__new__ builds the Record without NamedTuple.__new__.
    return [
        _new_tuple(
            Record,
            (
                s,
                st,
                v,
                t,
                sc,
                loads(d),
                m,  # CAST(meta AS BLOB): bytes, whatever a hand edit stored
                f"{e[:4].hex()}-{e[4:10].hex('-', 2)}-{e[10:].hex()}" if type(e) is bytes else e,
                r,
                p,
                h,
            ),
        )
        for (s, st, v, t, sc, d, m, e, r, _), p, h in zip(rows, prevs, hexes, strict=True)
    ]


def logical_rows(rows: list[Any], hashes_before: Lookup) -> list[Row]:
    """The backend-independent rows (data and meta as bytes, ids and hashes as text)."""
    if not rows:
        return []
    hexes = _hexes(rows)
    prevs = _prev_hashes(rows, hexes, hashes_before)
    # Inline, as in `records`: verify walks every row through here.
    return [
        (
            s,
            st,
            v,
            t,
            sc,
            d.encode() if type(d) is str else bytes(d),
            m,
            f"{e[:4].hex()}-{e[4:10].hex('-', 2)}-{e[10:].hex()}" if type(e) is bytes else e,
            r,
            p,
            h,
        )
        for (s, st, v, t, sc, d, m, e, r, _), p, h in zip(rows, prevs, hexes, strict=True)
    ]


def hashes_before_query(seqs: list[int]) -> tuple[str, tuple[int, ...]]:
    """The query for the hashes of the rows just before `seqs`, and its parameters."""
    marks = ",".join("?" * len(seqs))
    return f"SELECT seq + 1, hash FROM events WHERE seq IN ({marks})", tuple(s - 1 for s in seqs)


def hashes_by_seq(seqs: list[int], found: list[Any]) -> dict[int, str]:
    """{seq: hash of seq - 1}, the genesis hash where there is no row before."""
    got = {s: h.hex() if type(h) is bytes else str(h) for s, h in found}
    return {s: got.get(s, GENESIS_HASH) for s in seqs}
