"""Migration 0002_lean_row converts a log written with the first row, in place.

The fixture is a SQL dump of a log that the code before the lean row wrote (fixtures/
log_v1.sql): its head, kept in the dump's second line, is the anchor an operator would hold.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import orjson
import pytest

from eventlog import NewEvent, open_log
from eventlog._sqlite_migrate import convert_to_lean

FIXTURE = Path(__file__).parent / "fixtures" / "log_v1.sql"


def _anchor() -> tuple[int, str]:
    line = FIXTURE.read_text().splitlines()[1]  # "-- head: <seq> <hash>"
    _, _, seq, digest = line.split()
    return int(seq), digest


@pytest.fixture
def old_log(tmp_path) -> Path:
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(FIXTURE.read_text())
    return path


def _columns(path: Path) -> list[str]:
    with closing(sqlite3.connect(path)) as conn:
        return [row[1] for row in conn.execute("PRAGMA table_info(events)")]


def test_a_read_only_open_reads_the_old_row_as_it_is(old_log):
    before = old_log.read_bytes()
    with open_log(old_log, readonly=True) as log:
        assert log.verify(_anchor()).ok
        assert log.head() == _anchor()
        assert len(list(log.read_all())) == _anchor()[0]
    assert old_log.read_bytes() == before  # nothing migrated, nothing written
    assert "prev_hash" in _columns(old_log)


def test_the_migration_keeps_every_record_and_the_chain(old_log):
    with open_log(old_log, readonly=True) as log:
        old = list(log.read_all())
        streams = {r.stream: list(log.read(r.stream)) for r in old}
    with open_log(old_log) as log:  # a writable open applies the pending migration
        assert list(log.read_all()) == old
        assert {s: list(log.read(s)) for s in streams} == streams
        some = {"Noted", "Closed"}
        assert list(log.read_all(types=some)) == [r for r in old if r.type in some]
        result = log.verify(_anchor())
        assert result.ok, result.reason
        assert result.checked == len(old)
        # ids the caller chose survive as they were given, UUID or not
        ids = {r.event_id for r in old}
        assert {"caller-chosen-id", "0192F3A4-0000-7000-8000-00000000ABCD"} <= ids
        # the chain goes on from the old head
        more = log.append("session-x", [NewEvent("Noted", {"again": True})], expect=3)
        assert more[0].prev_hash == _anchor()[1]
        assert log.verify(_anchor()).ok
    assert "prev_hash" not in _columns(old_log)
    with closing(sqlite3.connect(old_log)) as conn:
        applied = [r[0] for r in conn.execute("SELECT name FROM _sqlite_migrations ORDER BY id")]
        assert applied == [
            "0001_create_events",
            "0002_lean_row",
            "0003_run_starts_index",
            "0004_approval_indexes",
            "0005_data_search",
            "0006_data_search_off_the_write_path",
        ]
        query = "SELECT DISTINCT typeof(hash), typeof(data), typeof(meta) FROM events"
        types = conn.execute(query).fetchall()
        assert types == [("blob", "text", "text")]
        blob_ids = conn.execute("SELECT count(*) FROM events WHERE typeof(event_id) = 'blob'").fetchone()
        assert blob_ids[0] == len(old) + 1 - 2  # all but the two ids that are not canonical UUIDs


def test_events_view_shows_what_a_record_holds(old_log):
    with open_log(old_log) as log:
        records = list(log.read_all())
    with closing(sqlite3.connect(old_log)) as conn:
        conn.row_factory = sqlite3.Row
        rows = conn.execute("SELECT * FROM events_view ORDER BY seq").fetchall()
    assert [(r["event_id"], r["hash"], r["prev_hash"], r["recorded_us"]) for r in rows] == [
        (r.event_id, r.hash, r.prev_hash, r.recorded_us) for r in records
    ]
    assert rows[0]["recorded_at"] == records[0].recorded_at.strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
    assert [orjson.loads(r["data"]) for r in rows] == [r.data for r in records]  # JSON TEXT
    assert [orjson.loads(r["meta"]) for r in rows] == [r.meta for r in records]


def test_the_conversion_reports_its_progress(old_log):
    seen: list[int] = []
    with closing(sqlite3.connect(old_log, isolation_level=None)) as conn:
        conn.execute("BEGIN IMMEDIATE")
        assert convert_to_lean(conn, seen.append) == _anchor()[0]
        conn.execute("COMMIT")
    assert seen == [_anchor()[0]]


def _page_size(path: Path) -> int:
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("PRAGMA page_size").fetchone()[0])


def test_a_new_log_takes_small_pages_and_an_old_one_keeps_its_own(tmp_path, old_log):
    with open_log(tmp_path / "new.db") as log:
        log.append("run-1", [NewEvent("Started")])
    assert _page_size(tmp_path / "new.db") == 2048
    assert _page_size(old_log) == 4096  # the fixture's, as SQLite makes a file by default
    with open_log(old_log) as log:  # migrated to the lean row, pages as they were
        log.append("run-new", [NewEvent("Started")])
        assert log.verify().ok
    assert _page_size(old_log) == 4096
