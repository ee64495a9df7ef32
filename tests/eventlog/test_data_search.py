"""The log's search over payload text (`seqs_containing`) answered by the index the log keeps:
found after an append and after an import, on every backend, and on an old SQLite log once
migrated. The plain scan of `EventLog` is the oracle: the index must answer as it does.

The SQLite index is kept off the write path: appends leave it behind, a writable log's
search catches it up, and a read-only open answers from it and scans what it does not hold.
"""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest

from eventlog import NO_STREAM, EventLog, NewEvent, open_log

FIXTURE = Path(__file__).parent / "fixtures" / "log_v1.sql"
SEARCHES = ("kubectl", "KUBECTL", "ubect", "50%_off", 'say "hi"', "héllo", "ok", "nothing like it")


def scanned(log: EventLog, text: str, limit: int = 200) -> list[int]:
    """What the scan over every decoded record answers."""
    return EventLog.seqs_containing(log, text, limit)


def fill(log: EventLog) -> None:
    log.append("deploy-1", [NewEvent("DeployRequested", {"cmd": "kubectl apply -f web.yaml"})])
    log.append_many(  # one group: one write for several records
        [
            ("deploy-2", [NewEvent("DeployRequested", {"note": "50%_off", "quote": 'say "hi"'})], NO_STREAM),
            ("deploy-3", [NewEvent("DeployRequested", {"cmd": "KUBECTL get pods", "ok": True})], NO_STREAM),
        ]
    )
    log.append("task-1", [NewEvent("Noted", {"text": "héllo"}), NewEvent("Noted", {"cmd": "kubectl"})])


def test_the_index_finds_what_was_appended_newest_first(log_factory):
    log = log_factory()
    fill(log)
    for text in SEARCHES:
        assert log.seqs_containing(text) == scanned(log, text), text
    assert log.seqs_containing("kubectl")[:1] == [log.head().seq]
    assert log.seqs_containing("kubectl", limit=2) == scanned(log, "kubectl")[:2]
    assert log.verify().ok  # the index is no part of the chain


def test_the_index_finds_what_was_imported(log_factory, clock):
    with open_log(":memory:", clock=clock) as source:
        fill(source)
        log = log_factory()
        log.import_records(source.read_all(), batch=2)
        assert log.verify().head == source.verify().head  # the same chain, the index aside
        for text in SEARCHES:
            assert log.seqs_containing(text) == source.seqs_containing(text), text
        assert log.seqs_containing("kubectl") != []


def _search_rows(path: Path) -> int:
    """How many records the SQLite index holds (a contentless FTS5 table keeps one size row each)."""
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT count(*) FROM events_data_search_docsize").fetchone()[0])


def _tables(path: Path) -> set[str]:
    with closing(sqlite3.connect(path)) as conn:
        return {row[0] for row in conn.execute("SELECT name FROM sqlite_master")}


def test_a_refused_append_leaves_nothing_in_the_index(tmp_path):
    path = tmp_path / "log.db"
    with open_log(path) as log:
        fill(log)
        with pytest.raises(Exception, match="version"):
            log.append("deploy-1", [NewEvent("DeployRequested", {"cmd": "kubectl delete"})], expect=0)
        assert log.seqs_containing("delete") == []
        count = log.head().seq
    assert _search_rows(path) == count  # one indexed row per record, in the same transactions


def test_an_old_log_is_indexed_when_migrated(tmp_path):
    path = tmp_path / "old.db"
    with closing(sqlite3.connect(path)) as conn:
        conn.executescript(FIXTURE.read_text())
    with open_log(path, readonly=True) as log:
        old = log.seqs_containing("héllo")
        assert old == scanned(log, "héllo")
        assert old != []
    assert "events_data_search" not in _tables(path)  # a read-only open creates nothing
    with open_log(path) as log:
        assert _search_rows(path) == log.head().seq
        assert log.seqs_containing("héllo") == old
        log.append("run-9", [NewEvent("Noted", {"text": "héllo again"})])
        assert log.seqs_containing("héllo") == [log.head().seq, *old]


def test_a_read_only_open_of_a_log_without_the_index_scans(tmp_path):
    path = tmp_path / "log.db"
    with open_log(path) as log:
        fill(log)
        expected = log.seqs_containing("kubectl")
    with closing(sqlite3.connect(path)) as conn:  # the log as it was before the index
        conn.execute("DROP TABLE events_data_search_upto")
        conn.execute("DROP TABLE events_data_search")
        conn.execute(
            "DELETE FROM _sqlite_migrations WHERE name IN (?, ?)",
            ("0005_data_search", "0006_data_search_off_the_write_path"),
        )
        conn.commit()
    with open_log(path, readonly=True) as log:
        assert log.seqs_containing("kubectl") == expected
    assert "events_data_search" not in _tables(path)
    with open_log(path) as log:  # a writable open builds it from the rows there
        assert _search_rows(path) == log.head().seq
        assert log.seqs_containing("kubectl") == expected


def test_without_fts5_the_migration_adds_nothing_and_searches_scan(tmp_path, monkeypatch):
    from eventlog import _sqlite_migrate

    monkeypatch.setattr(_sqlite_migrate, "fts5_available", lambda conn: False)
    path = tmp_path / "log.db"
    with open_log(path) as log:
        fill(log)
        assert log.seqs_containing("kubectl") == scanned(log, "kubectl") != []
    assert "events_data_search" not in _tables(path)


def _upto(path: Path) -> int:
    """The last seq the SQLite index holds."""
    with closing(sqlite3.connect(path)) as conn:
        return int(conn.execute("SELECT seq FROM events_data_search_upto").fetchone()[0])


def test_appends_leave_the_index_behind_and_a_search_catches_it_up(tmp_path, monkeypatch):
    from eventlog import _sqlite_search

    monkeypatch.setattr(_sqlite_search, "CHUNK", 3)  # several catch-up transactions
    path = tmp_path / "log.db"
    with open_log(path) as log:
        fill(log)
        log.append_many(
            [(f"bulk-{i}", [NewEvent("Noted", {"cmd": f"kubectl {i}"})], NO_STREAM) for i in range(7)]
        )
        # Nothing indexed by the appends themselves: their transactions only wrote the records.
        assert (_search_rows(path), _upto(path)) == (0, 0)
        assert log.seqs_containing("kubectl") == scanned(log, "kubectl")
        assert _search_rows(path) == _upto(path) == log.head().seq == 12
        log.append("task-2", [NewEvent("Noted", {"cmd": "kubectl again"})])
        assert _upto(path) == 12
        assert log.seqs_containing("kubectl")[0] == 13
        assert _search_rows(path) == _upto(path) == 13


def test_a_read_only_open_answers_past_the_index_and_writes_nothing(tmp_path):
    path = tmp_path / "log.db"
    with open_log(path) as log:
        fill(log)
        log.seqs_containing("kubectl")  # indexed up to seq 5
        log.append("task-2", [NewEvent("Noted", {"cmd": "kubectl again"})])
        log.append("task-3", [NewEvent("Noted", {"cmd": "KubeCtl once more"})])
        expected = scanned(log, "kubectl")
        log.checkpoint()
    before = path.read_bytes()
    with open_log(path, readonly=True) as log:
        # Seqs 7 and 6 come from the scan past the index, 5, 3 and 1 from the index.
        assert log.seqs_containing("kubectl") == expected == [7, 6, 5, 3, 1]
        assert log.seqs_containing("kubectl", limit=3) == [7, 6, 5]
        assert log.seqs_containing("ubectl a") == scanned(log, "ubectl a") == [6, 1]
    assert path.read_bytes() == before
    assert _upto(path) == 5


def test_a_search_sees_what_another_writer_appended_since_it_caught_up(tmp_path):
    path = tmp_path / "log.db"
    with open_log(path) as a, open_log(path) as b:
        fill(a)
        assert a.seqs_containing("kubectl") == [5, 3, 1]
        b.append("task-2", [NewEvent("Noted", {"cmd": "kubectl from b"})])
        assert a.seqs_containing("kubectl") == [6, 5, 3, 1] == b.seqs_containing("kubectl")


def test_a_log_indexed_by_its_trigger_is_caught_up_from_where_it_stood(tmp_path):
    path = tmp_path / "log.db"
    with open_log(path) as log:
        fill(log)
    with closing(sqlite3.connect(path)) as conn:  # the log as 0005 left it: a trigger, no mark
        conn.execute("DROP TABLE events_data_search_upto")
        conn.execute(
            "CREATE TRIGGER events_data_search_insert AFTER INSERT ON events BEGIN "
            "INSERT INTO events_data_search (rowid, data) VALUES (new.seq, new.data); END"
        )
        conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0006_data_search_off_the_write_path'")
        conn.execute("DELETE FROM events_data_search")  # empty it, then let the trigger index one
        conn.commit()
    with open_log(path) as log:
        assert "events_data_search_insert" not in _tables(path)
        assert _upto(path) == 5  # what the trigger indexed, as the migration found it
        log.append("task-2", [NewEvent("Noted", {"cmd": "kubectl again"})])
        assert log.seqs_containing("kubectl") == [6]  # the index was emptied by hand above
