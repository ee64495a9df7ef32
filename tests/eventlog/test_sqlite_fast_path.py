"""SQLite appends in one statement: chained onto the head this writer committed last, and
falling back to a transaction whenever that head or a stream version may be stale."""

from __future__ import annotations

import pytest

from eventlog import NO_STREAM, ConcurrencyError, NewEvent, open_log


@pytest.fixture
def two_logs(tmp_path):
    """Two log objects (two connections) on one file: each is the other's foreign writer."""
    path = str(tmp_path / "log.db")
    a, b = open_log(path), open_log(path)
    yield a, b
    a.close()
    b.close()


def statements(log) -> list[str]:
    """Start recording the statements the log's writer connection runs (their first word).

    Every statement counts: nothing runs inside an append's INSERT (no trigger), so a second
    statement here is a second call into SQLite."""
    seen: list[str] = []
    log._conn.set_trace_callback(lambda sql: seen.append(sql.split()[0].upper()))
    return seen


def test_an_append_after_one_of_this_writer_is_one_statement(tmp_path):
    with open_log(str(tmp_path / "log.db")) as log:
        log.append("run-1", [NewEvent("Started")], expect=NO_STREAM)  # learns the head
        seen = statements(log)
        records = log.append("run-1", [NewEvent("Noted", {"i": i}) for i in range(3)], expect=1)
        assert seen == ["INSERT"]
        assert [r.version for r in records] == [2, 3, 4]
        assert [r.seq for r in log.read_all()] == [1, 2, 3, 4]
        assert log.verify().ok


def test_a_foreign_commit_is_caught_and_the_append_chains_onto_it(two_logs):
    a, b = two_logs
    a.append("run-a", [NewEvent("Started")], expect=NO_STREAM)
    [theirs] = b.append("run-b", [NewEvent("Started")], expect=NO_STREAM)
    seen = statements(a)
    [mine] = a.append("run-a", [NewEvent("Noted")], expect=1)
    assert seen[0] == "INSERT"  # tried in one statement; seq 2 was taken, so:
    assert "BEGIN" in seen
    assert "COMMIT" in seen
    assert (mine.seq, mine.prev_hash, mine.version) == (3, theirs.hash, 2)
    assert a.verify().ok


@pytest.mark.parametrize("new", [NO_STREAM, 0], ids=["NO_STREAM", "version 0"])
def test_a_stream_another_writer_created_is_not_taken_for_new(two_logs, new):
    a, b = two_logs
    a.append("run-a", [NewEvent("Started")], expect=NO_STREAM)
    b.append("run-x", [NewEvent("Started")], expect=NO_STREAM)
    a.append("run-a", [NewEvent("Noted")], expect=1)  # a learns the head, not run-x's version
    with pytest.raises(ConcurrencyError):
        a.append("run-x", [NewEvent("Again")], expect=new)
    assert [r.type for r in a.read("run-x")] == ["Started"]
    assert a.verify().ok


def test_an_exact_version_of_a_stream_not_known_is_read_first(two_logs):
    a, b = two_logs
    a.append("run-a", [NewEvent("Started")], expect=NO_STREAM)
    b.append("run-x", [NewEvent("One"), NewEvent("Two")], expect=NO_STREAM)
    a.append("run-a", [NewEvent("Noted")], expect=1)
    with pytest.raises(ConcurrencyError):
        a.append("run-x", [NewEvent("Three")], expect=5)  # would leave a gap in its versions
    [third] = a.append("run-x", [NewEvent("Three")], expect=2)
    assert third.version == 3
    assert [r.version for r in a.read("run-x")] == [1, 2, 3]


def test_a_retried_append_returns_the_original_records(tmp_path):
    with open_log(str(tmp_path / "log.db")) as log:
        event = NewEvent("Started", {"n": 1})
        first = log.append("run-1", [event], expect=NO_STREAM)
        log.append("run-2", [NewEvent("Other")], expect=NO_STREAM)
        seen = statements(log)
        again = log.append("run-1", [event])  # one statement refused on event_id, then settled
        assert again == first
        assert seen[0] == "INSERT"
        assert log.head().seq == 2
        assert log.verify().ok


def test_a_refused_statement_leaves_nothing_and_the_log_goes_on(two_logs):
    a, b = two_logs
    a.append("run-a", [NewEvent("Started")], expect=NO_STREAM)
    b.append("run-b", [NewEvent("Started")], expect=NO_STREAM)
    batch = [NewEvent("Noted", {"i": i}) for i in range(50)]
    records = a.append("run-a", batch, expect=1)
    assert [r.seq for r in records] == list(range(3, 53))
    assert a.head().seq == 52
    assert a.verify().ok
    assert b.verify().ok


def test_a_new_stream_expected_at_version_0_is_one_statement(tmp_path):
    with open_log(str(tmp_path / "log.db")) as log:
        log.append("run-1", [NewEvent("Started")], expect=NO_STREAM)  # learns the head
        seen = statements(log)
        [record] = log.append("run-2", [NewEvent("Started")], expect=0)
        assert seen == ["INSERT"]
        assert (record.seq, record.version) == (2, 1)
        assert log.verify().ok


def test_the_version_cache_is_bounded_and_keeps_the_streams_written_last(tmp_path, monkeypatch):
    from eventlog._sqlite_write import KnownVersions

    monkeypatch.setattr(KnownVersions, "LIMIT", 8)
    with open_log(str(tmp_path / "log.db")) as log:
        log.append("run-hot", [NewEvent("Started")], expect=NO_STREAM)
        for i in range(40):  # a stream a time, as approvals come; the hot run is written between
            log.append(f"approval-{i}", [NewEvent("Asked")], expect=NO_STREAM)
            log.append("run-hot", [NewEvent("Noted", {"i": i})], expect=i + 1)
            assert len(log._known.versions) <= 8
        assert "run-hot" in log._known.versions
        assert "approval-0" not in log._known.versions
        seen = statements(log)
        log.append("run-hot", [NewEvent("Noted")], expect=41)
        assert seen == ["INSERT"]  # still known: one statement
        seen.clear()
        log.append("approval-0", [NewEvent("Decided")], expect=1)  # forgotten: read in a transaction
        assert seen[0] != "INSERT"
        assert "INSERT" in seen
        assert log.verify().ok
