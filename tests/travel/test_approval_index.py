"""Approvals' records without reading the log: `read_all(types=APPROVAL_TYPES)` and
`EventLog.approval_records`, answered from indexes on every SQL backend."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime, timedelta

from eventlog import NewEvent, encode, events, open_log
from eventlog._record import APPROVAL_TYPES
from eventlog.events import ApprovalDecided, ApprovalPublished, ApprovalRequested, RunReported

from .test_run_index import index_names

AT = datetime(2026, 1, 1, tzinfo=UTC)


def requested(approval_id: str) -> NewEvent:
    return encode(
        ApprovalRequested(
            approval_id, "r1", "t1", "permission", "ls", "ls", "low", "0" * 64, False, 1, AT,
            AT + timedelta(minutes=5), "run:r1",
        )
    )  # fmt: skip


def decided(approval_id: str) -> NewEvent:
    return encode(ApprovalDecided(approval_id, "approve", "operator:alice", "alice", AT))


def fill(log) -> None:
    log.append("run-r1", [encode(RunReported("r1", "working", "not an approval", AT))])
    log.append("approval-a1", [requested("a1"), encode(ApprovalPublished("a1", AT))])
    log.append("approval-a2", [requested("a2")])
    log.append("run-r1", [encode(RunReported("r1", "working", "", AT))], expect=1)
    log.append("approval-a1", [decided("a1")], expect=2)
    # An approval event in another stream (a foreign writer's) belongs to the history too.
    log.append("elsewhere-1", [decided("a2")])


def test_the_approval_types_are_the_catalogues_approval_events():
    names = {
        cls.type_name for cls in vars(events).values() if getattr(cls, "type_name", "").startswith("Approval")
    }
    assert names == set(APPROVAL_TYPES)


def test_approval_records_are_that_approvals_records_in_seq_order_whatever_the_stream(log_factory, clock):
    log = log_factory(clock=clock)
    fill(log)
    assert [(r.seq, r.type) for r in log.approval_records("a1")] == [
        (2, "ApprovalRequested"), (3, "ApprovalPublished"), (6, "ApprovalDecided"),
    ]  # fmt: skip
    assert [(r.seq, r.stream) for r in log.approval_records("a2")] == [(4, "approval-a2"), (7, "elsewhere-1")]
    assert [r.seq for r in log.approval_records("a1", to_seq=5)] == [2, 3]
    assert log.approval_records("no-such-approval") == []
    whole = [r for r in log.read_all() if r.type in APPROVAL_TYPES]
    assert list(log.read_all(types=APPROVAL_TYPES)) == whole
    assert list(log.read_all(after_seq=2, to_seq=6, types=APPROVAL_TYPES)) == whole[1:4]
    assert log.approval_records("a1") == [r for r in whole if r.data["approval_id"] == "a1"]


def test_a_fresh_reader_gets_the_same_records_from_the_database(tmp_path):
    path = tmp_path / "log.db"
    log = open_log(path)
    fill(log)
    whole = [r for r in log.read_all() if r.type in APPROVAL_TYPES]
    log.close()
    reader = open_log(path, readonly=True)  # nothing in a recent-commits window: all from SQL
    try:
        assert list(reader.read_all(types=APPROVAL_TYPES)) == whole
        assert reader.approval_records("a2") == [r for r in whole if r.data["approval_id"] == "a2"]
        assert reader.verify().ok
    finally:
        reader.close()


def test_sqlite_answers_approval_reads_from_their_indexes(tmp_path):
    from eventlog._sqlite_row import APPROVAL_RECORDS_QUERY, APPROVAL_ROWS_QUERY

    path = tmp_path / "log.db"
    open_log(path).close()
    conn = sqlite3.connect(path)
    try:
        rows = conn.execute(f"EXPLAIN QUERY PLAN {APPROVAL_ROWS_QUERY}", (0, 10, 10)).fetchall()
        one = conn.execute(f"EXPLAIN QUERY PLAN {APPROVAL_RECORDS_QUERY}", ("a1", 10)).fetchall()
    finally:
        conn.close()
    assert "USING INDEX events_approval_seqs" in str(rows), rows
    assert "USING INDEX events_approval_ids" in str(one), one


def test_an_old_log_gets_the_indexes_when_opened_for_writing_and_reads_without_them(tmp_path):
    path = tmp_path / "log.db"
    log = open_log(path)
    fill(log)
    log.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX events_approval_seqs")
    conn.execute("DROP INDEX events_approval_ids")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0004_approval_indexes'")
    conn.commit()
    conn.close()
    reader = open_log(path, readonly=True)
    try:  # answered by scans: the same records
        assert [r.seq for r in reader.read_all(types=APPROVAL_TYPES)] == [2, 3, 4, 6, 7]
        assert [r.seq for r in reader.approval_records("a2")] == [4, 7]
    finally:
        reader.close()
    open_log(path).close()
    assert {"events_approval_seqs", "events_approval_ids"} <= index_names(path)
