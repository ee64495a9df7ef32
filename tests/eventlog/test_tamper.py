"""Tampering with the database behind the log's back: verify() finds the first bad seq.

The same edits on a SQLite file (with sqlite3) and in a PostgreSQL schema (with psycopg),
each on a copy of one pristine log.
"""

from __future__ import annotations

import shutil
import sqlite3
import uuid
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any

import pytest
from click.testing import CliRunner

from eventlog import ManualClock, NewEvent, open_log
from eventlog._chain import canonical_bytes, make_hasher
from tests.conftest import (
    SHARED_BACKENDS,
    drop_pg_schema,
    new_pg_schema,
    pg_schema_url,
    pg_unavailable,
    require_or_skip,
)
from tools.cli import cli

EVENTS = 10
BODY = "seq, stream, version, type, schema, data, meta, event_id, recorded_at"
ALL = f"{BODY}, prev_hash, hash"  # PostgreSQL's row; SQLite's lean row has no prev_hash


@dataclass(frozen=True)
class Db:
    """A log to tamper with: a SQLite file, or a schema on the PostgreSQL test server."""

    backend: str
    target: str  # what open_log and the CLI take: a path, or a URL naming the schema
    schema: str = ""


class PgRaw:
    """A psycopg connection that takes the sqlite3 shape of the edits: `?` placeholders."""

    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, query: str, params: tuple[Any, ...] | None = None) -> Any:
        return self._conn.execute(query.replace("?", "%s"), params)


def _fill(target: str) -> None:
    # A user's own events in a user's stream: flightlog's own streams (run-, approval-, …) take
    # catalogue events only, which `flightlog verify` checks besides the chain.
    clock = ManualClock()
    with open_log(target, clock=clock) as log:
        for i in range(EVENTS):
            clock.advance(1)
            log.append(f"task-{i % 3}", [NewEvent("Tested", {"n": i}, meta={"actor": "alice"})])


@pytest.fixture(scope="module", params=SHARED_BACKENDS)
def pristine(request, tmp_path_factory) -> Iterator[Db]:
    """A closed log of ten events in three streams; tests tamper with copies of it."""
    if request.param == "sqlite-file":
        path = tmp_path_factory.mktemp("tamper") / "pristine.db"
        _fill(str(path))
        yield Db("sqlite-file", str(path))
        return
    if reason := pg_unavailable():
        require_or_skip(reason)
    schema = new_pg_schema()
    _fill(pg_schema_url(schema))
    yield Db("postgres", pg_schema_url(schema), schema)
    drop_pg_schema(schema)


@pytest.fixture
def make_copy(pristine: Db, tmp_path) -> Iterator[Callable[[], Db]]:
    """Copies of the pristine log: the file copied, or its rows copied into a fresh schema."""
    schemas: list[str] = []
    made = 0

    def make() -> Db:
        nonlocal made
        made += 1
        if pristine.backend == "sqlite-file":
            target = tmp_path / f"copy{made}.db"
            shutil.copyfile(pristine.target, target)
            return Db(pristine.backend, str(target))
        schema = new_pg_schema()
        schemas.append(schema)
        url = pg_schema_url(schema)
        open_log(url).close()  # the same tables, by the same migration
        with raw(Db("postgres", url, schema)) as conn:
            conn.execute(f'INSERT INTO events ({ALL}) SELECT {ALL} FROM "{pristine.schema}".events')
        return Db("postgres", url, schema)

    yield make
    for schema in schemas:
        drop_pg_schema(schema)


@pytest.fixture
def copy(make_copy: Callable[[], Db]) -> Db:
    return make_copy()


@contextmanager
def raw(db: Db) -> Iterator[Any]:
    """A connection straight to the database, committing when the block ends."""
    if db.backend == "sqlite-file":
        with closing(sqlite3.connect(db.target)) as conn, conn:
            yield conn
        return
    import psycopg

    with psycopg.connect(db.target) as pg:  # commits on a clean exit
        yield PgRaw(pg)


def fingerprint(db: Db) -> object:
    """Everything stored: the file's bytes, or every row of the schema's tables."""
    if db.backend == "sqlite-file":
        with open(db.target, "rb") as f:
            return f.read()
    with raw(db) as conn:
        events = conn.execute(f"SELECT {ALL} FROM events ORDER BY seq").fetchall()
        names = conn.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
        return events, names


def lean(conn: Any) -> bool:
    """Whether `conn` is on SQLite's lean row: binary hashes and ids, no prev_hash column."""
    return isinstance(conn, sqlite3.Connection)


def hash_of(conn: Any, seq: int) -> str:
    (value,) = conn.execute("SELECT hash FROM events WHERE seq = ?", (seq,)).fetchone()
    return value.hex() if isinstance(value, bytes) else value


def set_hashes(conn: Any, seq: int, prev_hash: str, digest: str) -> None:
    if lean(conn):
        conn.execute("UPDATE events SET hash = ? WHERE seq = ?", (bytes.fromhex(digest), seq))
    else:
        conn.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE seq = ?", (prev_hash, digest, seq))


def row_hash(conn: Any, seq: int, prev_hash: str) -> str:
    body = list(conn.execute(f"SELECT {BODY} FROM events WHERE seq = ?", (seq,)).fetchone())
    # A hand edit stores TEXT on SQLite; the chain hashes the bytes of the JSON either way.
    body = [v.encode() if isinstance(v, str) and i in (5, 6) else v for i, v in enumerate(body)]
    if isinstance(body[7], bytes):  # the lean row's 16-byte event id
        body[7] = str(uuid.UUID(bytes=body[7]))
    return make_hasher()(prev_hash, canonical_bytes(*body))


def rehash_from(conn: Any, first: int) -> None:
    """Recompute prev_hash and hash from `first` to the end, as a careful forger would."""
    prev = hash_of(conn, first - 1)
    for (seq,) in conn.execute("SELECT seq FROM events WHERE seq >= ? ORDER BY seq", (first,)).fetchall():
        h = row_hash(conn, seq, prev)
        set_hashes(conn, seq, prev, h)
        prev = h


def verify(db: Db, anchor=None):
    with open_log(db.target) as log:
        return log.verify(anchor)


def head_of(db: Db):
    with open_log(db.target) as log:
        return log.head()


def edit_payload(conn):
    # A TEXT value, as the sqlite3 shell would store it: verify must report it, not crash.
    # (PostgreSQL reads the literal as bytea: the same bytes.)
    conn.execute("""UPDATE events SET data = '{"n":999}' WHERE seq = 4""")


def edit_payload_as_blob(conn):
    conn.execute("UPDATE events SET data = ? WHERE seq = 4", (b'{"n":999}',))


def edit_payload_and_its_hash(conn):
    edit_payload(conn)
    prev = hash_of(conn, 3)
    set_hashes(conn, 4, prev, row_hash(conn, 4, prev))


def edit_meta(conn):
    conn.execute("""UPDATE events SET meta = '{"actor":"mallory"}' WHERE seq = 6""")


def edit_recorded_at(conn):
    conn.execute("UPDATE events SET recorded_at = recorded_at - 1 WHERE seq = 7")


def delete_row(conn):
    conn.execute("DELETE FROM events WHERE seq = 5")


def swap_rows(conn):
    # Rows 3 and 4 trade everything but their seq: same set of records, another order.
    cols = "stream, version, type, schema, data, meta, event_id, recorded_at, hash"
    cols += "" if lean(conn) else ", prev_hash"
    three = conn.execute(f"SELECT {cols} FROM events WHERE seq = 3").fetchone()
    four = conn.execute(f"SELECT {cols} FROM events WHERE seq = 4").fetchone()
    conn.execute("DELETE FROM events WHERE seq IN (3, 4)")
    marks = ",".join("?" * (len(three) + 1))
    conn.execute(f"INSERT INTO events (seq, {cols}) VALUES ({marks})", (3, *four))
    conn.execute(f"INSERT INTO events (seq, {cols}) VALUES ({marks})", (4, *three))


def insert_row(conn):
    # Make room at seq 6, then forge a well-formed row there, chained onto seq 5.
    conn.execute("UPDATE events SET seq = -seq WHERE seq >= 6")
    conn.execute("UPDATE events SET seq = 1 - seq WHERE seq < 0")
    prev = hash_of(conn, 5)
    forge_row(conn, 6, prev, "")
    set_hashes(conn, 6, prev, row_hash(conn, 6, prev))


def forge_row(conn: Any, seq: int, prev_hash: str, digest: str) -> None:
    columns = "seq, stream, version, type, schema, data, meta, event_id, recorded_at, hash"
    values = [seq, "run-forged", 1, "Tested", 1, "{}", "{}", "forged-id", 0, digest]
    if lean(conn):
        values[-1] = bytes.fromhex(digest) if digest else b""
    else:
        columns += ", prev_hash"
        values.append(prev_hash)
    marks = ",".join("?" * len(values))
    conn.execute(f"INSERT INTO events ({columns}) VALUES ({marks})", tuple(values))


def insert_garbage_row(conn):
    forge_row(conn, 11, "0" * 64, "0" * 64)


@pytest.mark.parametrize(
    ("tamper", "first_bad_seq", "reason"),
    [
        (edit_payload, 4, "hash does not match"),
        (edit_payload_as_blob, 4, "hash does not match"),
        (edit_payload_and_its_hash, 5, "prev_hash"),  # row 4 is self-consistent; row 5 no longer links
        (edit_meta, 6, "hash does not match"),
        (edit_recorded_at, 7, "hash does not match"),
        (delete_row, 5, "missing"),
        (swap_rows, 3, "prev_hash"),
        (insert_row, 7, "prev_hash"),  # the forged row 6 is well formed; the next one exposes it
        (insert_garbage_row, 11, "prev_hash"),
    ],
)
def test_verify_reports_the_first_bad_seq(copy, tamper: Callable, first_bad_seq, reason):
    with raw(copy) as conn:
        tamper(conn)
    if copy.backend == "sqlite-file" and reason == "prev_hash":
        # The lean row stores no prev_hash: a broken link is a hash that does not recompute
        # from the previous row's hash, found at the same seq.
        reason = "hash does not match"
    result = verify(copy)
    assert not result.ok
    assert result.first_bad_seq == first_bad_seq, result.reason
    assert reason in result.reason
    assert result.checked == first_bad_seq - 1


def truncate_tail(conn):
    conn.execute("DELETE FROM events WHERE seq > 7")


def rewrite_chain(conn):
    edit_payload(conn)
    rehash_from(conn, 4)


@pytest.mark.parametrize(("tamper", "first_bad_seq"), [(truncate_tail, 8), (rewrite_chain, EVENTS)])
def test_only_an_anchor_catches_truncation_and_rewrites(pristine, copy, tamper, first_bad_seq):
    anchor = head_of(pristine)
    with raw(copy) as conn:
        tamper(conn)
    # Without an anchor the chain is self-consistent: this is what the anchor is for.
    assert verify(copy).ok
    result = verify(copy, anchor)
    assert not result.ok
    assert result.first_bad_seq == first_bad_seq
    assert "anchor" in result.reason


def test_an_untouched_copy_verifies_clean(pristine, copy):
    anchor = head_of(pristine)
    assert fingerprint(copy) == fingerprint(pristine)
    result = verify(copy, anchor)
    assert result.ok
    assert result.checked == EVENTS
    assert result.head == anchor


def test_cli_anchor_then_verify(pristine, copy, make_copy, tmp_path):
    clean = make_copy()
    before = fingerprint(clean)
    runner = CliRunner()
    anchored = runner.invoke(cli, ["anchor", pristine.target])
    assert anchored.exit_code == 0, anchored.output
    anchor_file = tmp_path / "anchor.txt"
    anchor_file.write_text(anchored.output)
    assert anchored.output.split() == [str(EVENTS), head_of(pristine).hash]

    with raw(copy) as conn:
        rewrite_chain(conn)
    broken = runner.invoke(cli, ["verify", copy.target, "--anchor", str(anchor_file)])
    assert broken.exit_code == 1, broken.output
    assert f"seq {EVENTS}" in broken.output
    unanchored = runner.invoke(cli, ["verify", copy.target])
    assert unanchored.exit_code == 0, unanchored.output

    ok = runner.invoke(cli, ["verify", clean.target, "--anchor", str(anchor_file)])
    assert ok.exit_code == 0, ok.output
    assert "ok" in ok.output
    assert fingerprint(clean) == before  # verifying never writes


def test_cli_verify_finds_an_edited_payload_without_anchor(copy):
    with raw(copy) as conn:
        edit_payload(conn)
    result = CliRunner().invoke(cli, ["verify", copy.target, "--json"])
    assert result.exit_code == 1, result.output
    assert '"first_bad_seq": 4' in result.output


def test_hand_edited_rows_still_read(copy):
    with raw(copy) as conn:
        edit_payload(conn)
        edit_meta(conn)
    with open_log(copy.target) as log:
        records = {r.seq: r for r in log.read_all()}
    assert records[4].data == {"n": 999}
    assert records[6].meta == {"actor": "mallory"}
    assert len(records) == EVENTS
