"""Finding a run's stream without reading the log: `EventLog.run_starts` and the offline timeline."""

from __future__ import annotations

import sqlite3
from datetime import UTC, datetime

from eventlog import EventLog, NewEvent, encode, open_log
from eventlog.events import AgentRunStarted, AgentRunStatusChanged, ForkedFrom, RunReported
from projections import Views
from projections.timeline import render

AT = datetime(2026, 1, 1, tzinfo=UTC)


def started(run_id: str, controller: str = "c1") -> NewEvent:
    return encode(AgentRunStarted(run_id, controller, "s1", "t", "p", AT))


def forked(run_id: str, origin: str) -> NewEvent:
    return encode(ForkedFrom(run_id, origin, "controller-c1", 1, "op", "", AT))


def status(run_id: str, value: str) -> NewEvent:
    return encode(AgentRunStatusChanged(run_id, value, "", AT))


def test_run_starts_are_the_records_that_start_that_run_in_seq_order(log):
    log.append("controller-c1", [started("r1"), status("r1", "running"), started("r2")])
    log.append("run-r1", [encode(RunReported("r1", "working", "same id, another type", AT))])
    log.append("controller-fork-f1", [forked("f1", "r1"), started("f1", "fork-f1")])
    assert [(r.seq, r.type, r.stream) for r in log.run_starts("r1")] == [
        (1, "AgentRunStarted", "controller-c1")
    ]
    assert [(r.seq, r.type) for r in log.run_starts("f1")] == [(5, "ForkedFrom"), (6, "AgentRunStarted")]
    assert log.run_starts("r2")[0].data["run_id"] == "r2"
    assert log.run_starts("no-such-run") == []
    whole = [r for r in log.read_all() if r.type in {"AgentRunStarted", "ForkedFrom"}]
    assert [r for r in whole if r.data["run_id"] == "f1"] == log.run_starts("f1")


def test_sqlite_answers_run_starts_from_an_index(tmp_path):
    path = tmp_path / "log.db"
    open_log(path).close()
    conn = sqlite3.connect(path)
    try:
        from eventlog._sqlite_row import RUN_STARTS_QUERY

        plan = conn.execute(f"EXPLAIN QUERY PLAN {RUN_STARTS_QUERY}", ("r1",)).fetchall()
    finally:
        conn.close()
    assert "USING INDEX events_run_starts" in str(plan), plan


def test_an_old_log_gets_the_index_when_opened_for_writing_and_reads_without_it(tmp_path):
    path = tmp_path / "log.db"
    log = open_log(path)
    log.append("controller-c1", [started("r1")])
    log.close()
    conn = sqlite3.connect(path)
    conn.execute("DROP INDEX events_run_starts")
    conn.execute("DELETE FROM _sqlite_migrations WHERE name = '0003_run_starts_index'")
    conn.commit()
    conn.close()
    reader = open_log(path, readonly=True)
    try:
        assert [r.seq for r in reader.run_starts("r1")] == [1]  # answered by a scan: same records
    finally:
        reader.close()
    open_log(path).close()
    assert "events_run_starts" in index_names(path)


def index_names(path) -> set[str]:
    """The names of the indexes in the SQLite file at `path`."""
    conn = sqlite3.connect(path)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    finally:
        conn.close()


class Counting:
    """Counts the records a log hands out through its whole-log reads."""

    def __init__(self, log: EventLog) -> None:
        self.global_reads = 0
        original = log._records_after  # type: ignore[attr-defined]

        def counted(*args: object, **kwargs: object) -> object:
            self.global_reads += 1
            return original(*args, **kwargs)

        log._records_after = counted  # type: ignore[attr-defined, method-assign]


def test_an_offline_timeline_at_a_seq_reads_the_runs_stream_and_not_the_log(db, open_db):
    live = Views(open_db())
    live.catch_up()
    runs = live.agent_runs()
    assert runs
    for run in runs[::4]:
        seqs = [r.seq for r in live.log.read(run.stream)]
        for seq in (seqs[len(seqs) // 2], seqs[-1], run.first_seq - 1):
            offline = Views(open_db(), snapshots=None)
            counter = Counting(offline.log)
            whole = render(live.state("timeline", at=seq), run.run_id)
            assert offline.timeline(run.run_id, at=seq) == whole, (run.run_id, seq)
            assert counter.global_reads == 0
    offline = Views(open_db(), snapshots=None)
    counter = Counting(offline.log)
    assert offline.timeline("no-such-run", at=5) == []
    assert offline.timeline_at_each_event(runs[0].run_id) == live.timeline_at_each_event(runs[0].run_id)
    assert counter.global_reads == 0
