"""Tampering with the SQLite file behind the log's back: verify() finds the first bad seq."""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner

from eventlog import ManualClock, NewEvent, open_log
from eventlog._chain import canonical_bytes, make_hasher
from tools.cli import cli

EVENTS = 10
BODY = "seq, stream, version, type, schema, data, meta, event_id, recorded_at"


@pytest.fixture(scope="module")
def pristine(tmp_path_factory) -> Path:
    """A closed log of ten events in three streams; tests tamper with copies of it."""
    path = tmp_path_factory.mktemp("tamper") / "pristine.db"
    clock = ManualClock()
    with open_log(path, clock=clock) as log:
        for i in range(EVENTS):
            clock.advance(1)
            log.append(f"run-{i % 3}", [NewEvent("Tested", {"n": i}, meta={"actor": "alice"})])
    return path


@pytest.fixture
def copy(pristine, tmp_path) -> Path:
    target = tmp_path / "copy.db"
    shutil.copyfile(pristine, target)
    return target


@contextmanager
def raw(path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(path)) as conn, conn:
        yield conn


def row_hash(conn: sqlite3.Connection, seq: int, prev_hash: str) -> str:
    body = conn.execute(f"SELECT {BODY} FROM events WHERE seq = ?", (seq,)).fetchone()
    # A hand edit stores TEXT; the chain hashes the bytes of the JSON either way.
    body = [v.encode() if isinstance(v, str) and i in (5, 6) else v for i, v in enumerate(body)]
    return make_hasher()(prev_hash, canonical_bytes(*body))


def rehash_from(conn: sqlite3.Connection, first: int) -> None:
    """Recompute prev_hash and hash from `first` to the end, as a careful forger would."""
    (prev,) = conn.execute("SELECT hash FROM events WHERE seq = ?", (first - 1,)).fetchone()
    for (seq,) in conn.execute("SELECT seq FROM events WHERE seq >= ? ORDER BY seq", (first,)).fetchall():
        h = row_hash(conn, seq, prev)
        conn.execute("UPDATE events SET prev_hash = ?, hash = ? WHERE seq = ?", (prev, h, seq))
        prev = h


def verify(path: Path, anchor=None):
    with open_log(path) as log:
        return log.verify(anchor)


def head_of(path: Path):
    with open_log(path) as log:
        return log.head()


def edit_payload(conn):
    # A TEXT value, as the sqlite3 shell would store it: verify must report it, not crash.
    conn.execute("""UPDATE events SET data = '{"n":999}' WHERE seq = 4""")


def edit_payload_as_blob(conn):
    conn.execute("UPDATE events SET data = ? WHERE seq = 4", (b'{"n":999}',))


def edit_payload_and_its_hash(conn):
    edit_payload(conn)
    (prev,) = conn.execute("SELECT prev_hash FROM events WHERE seq = 4").fetchone()
    conn.execute("UPDATE events SET hash = ? WHERE seq = 4", (row_hash(conn, 4, prev),))


def edit_meta(conn):
    conn.execute("""UPDATE events SET meta = '{"actor":"mallory"}' WHERE seq = 6""")


def edit_recorded_at(conn):
    conn.execute("UPDATE events SET recorded_at = recorded_at - 1 WHERE seq = 7")


def delete_row(conn):
    conn.execute("DELETE FROM events WHERE seq = 5")


def swap_rows(conn):
    # Rows 3 and 4 trade everything but their seq: same set of records, another order.
    cols = "stream, version, type, schema, data, meta, event_id, recorded_at, prev_hash, hash"
    three = conn.execute(f"SELECT {cols} FROM events WHERE seq = 3").fetchone()
    four = conn.execute(f"SELECT {cols} FROM events WHERE seq = 4").fetchone()
    conn.execute("DELETE FROM events WHERE seq IN (3, 4)")
    marks = ",".join("?" * 11)
    conn.execute(f"INSERT INTO events (seq, {cols}) VALUES ({marks})", (3, *four))
    conn.execute(f"INSERT INTO events (seq, {cols}) VALUES ({marks})", (4, *three))


def insert_row(conn):
    # Make room at seq 6, then forge a well-formed row there, chained onto seq 5.
    conn.execute("UPDATE events SET seq = -seq WHERE seq >= 6")
    conn.execute("UPDATE events SET seq = 1 - seq WHERE seq < 0")
    (prev,) = conn.execute("SELECT hash FROM events WHERE seq = 5").fetchone()
    conn.execute(
        "INSERT INTO events (seq, stream, version, type, schema, data, meta, event_id, recorded_at, "
        "prev_hash, hash) VALUES (6, 'run-forged', 1, 'Tested', 1, '{}', '{}', 'forged-id', 0, ?, '')",
        (prev,),
    )
    conn.execute("UPDATE events SET hash = ? WHERE seq = 6", (row_hash(conn, 6, prev),))


def insert_garbage_row(conn):
    conn.execute(
        "INSERT INTO events (seq, stream, version, type, schema, data, meta, event_id, recorded_at, "
        "prev_hash, hash) VALUES (11, 'run-forged', 1, 'Tested', 1, '{}', '{}', 'forged-id', 0, ?, ?)",
        ("0" * 64, "0" * 64),
    )


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
    assert copy.read_bytes() == pristine.read_bytes()
    result = verify(copy, anchor)
    assert result.ok
    assert result.checked == EVENTS
    assert result.head == anchor


def test_cli_anchor_then_verify(pristine, copy, tmp_path):
    clean = tmp_path / "clean.db"
    shutil.copyfile(pristine, clean)
    runner = CliRunner()
    anchored = runner.invoke(cli, ["anchor", str(pristine)])
    assert anchored.exit_code == 0, anchored.output
    anchor_file = tmp_path / "anchor.txt"
    anchor_file.write_text(anchored.output)
    assert anchored.output.split() == [str(EVENTS), head_of(pristine).hash]

    with raw(copy) as conn:
        rewrite_chain(conn)
    broken = runner.invoke(cli, ["verify", str(copy), "--anchor", str(anchor_file)])
    assert broken.exit_code == 1, broken.output
    assert f"seq {EVENTS}" in broken.output
    unanchored = runner.invoke(cli, ["verify", str(copy)])
    assert unanchored.exit_code == 0, unanchored.output

    ok = runner.invoke(cli, ["verify", str(clean), "--anchor", str(anchor_file)])
    assert ok.exit_code == 0, ok.output
    assert "ok" in ok.output
    assert clean.read_bytes() == pristine.read_bytes()  # verifying never writes


def test_cli_verify_finds_an_edited_payload_without_anchor(copy):
    with raw(copy) as conn:
        edit_payload(conn)
    result = CliRunner().invoke(cli, ["verify", str(copy), "--json"])
    assert result.exit_code == 1, result.output
    assert '"first_bad_seq": 4' in result.output


def test_hand_edited_rows_still_read(copy):
    with raw(copy) as conn:
        edit_payload(conn)
        edit_meta(conn)
    with open_log(copy) as log:
        records = {r.seq: r for r in log.read_all()}
    assert records[4].data == {"n": 999}
    assert records[6].meta == {"actor": "mallory"}
    assert len(records) == EVENTS
