"""PostgreSQL's indexes for reads that must not scan the log: run starts and approvals' records,
and a read-only open of a log made before them, which reads without them."""

from __future__ import annotations

import pytest

from eventlog import NewEvent

from .test_postgres import open_pg, opened, schema, url  # noqa: F401 - fixtures

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres


def test_run_starts_come_from_an_index_and_a_read_only_open_reads_without_it(open_pg, url):  # noqa: F811 - fixtures
    from datetime import UTC, datetime

    from eventlog import encode
    from eventlog._postgres import RUN_STARTS_QUERY
    from eventlog.events import AgentRunStarted

    at = datetime(2026, 1, 1, tzinfo=UTC)
    log = open_pg()
    log.append(
        "controller-c1", [encode(AgentRunStarted(f"r{i}", "c1", "s1", "t", "p", at)) for i in range(50)]
    )
    with log._readers.connection() as conn:
        conn.execute("SET enable_seqscan = off")
        plan = conn.execute(f"EXPLAIN {RUN_STARTS_QUERY}", ("r7",)).fetchall()
        conn.execute("RESET enable_seqscan")
    assert "events_run_starts" in str(plan), plan
    assert [r.data["run_id"] for r in log.run_starts("r7")] == ["r7"]
    with log._readers.connection() as conn:  # as a log made before the index was
        conn.execute("DROP INDEX events_run_starts")
        conn.execute("DROP FUNCTION flightlog_run_id(bytea)")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0002_run_starts_index'")
    reader = open_pg(readonly=True)
    assert [r.seq for r in reader.run_starts("r7")] == [8]
    open_pg().close()  # a writable open adds the index
    assert [r.seq for r in open_pg(readonly=True).run_starts("r7")] == [8]


def test_approval_reads_come_from_indexes_and_a_read_only_open_reads_without_them(open_pg, url):  # noqa: F811 - fixtures
    from datetime import UTC, datetime, timedelta

    from eventlog import encode
    from eventlog._postgres import APPROVAL_RECORDS_QUERY
    from eventlog._record import APPROVAL_FILTER, APPROVAL_TYPES
    from eventlog.events import ApprovalRequested

    at = datetime(2026, 1, 1, tzinfo=UTC)
    log = open_pg()
    for i in range(50):
        ask = ApprovalRequested(
            f"a{i}", "r1", "t", "permission", "ls", "ls", "low", "0" * 64, False, 1, at, at + timedelta(1)
        )
        log.append(f"approval-a{i}", [encode(ask)])
        log.append("run-r1", [NewEvent("RunNoted", {"i": i})])
    with log._readers.connection() as conn:
        conn.execute("SET enable_seqscan = off")
        one = conn.execute(f"EXPLAIN {APPROVAL_RECORDS_QUERY}", ("a7", 1000)).fetchall()
        history = f"SELECT seq FROM events WHERE seq > %s AND seq <= %s AND {APPROVAL_FILTER} ORDER BY seq"
        whole = conn.execute(f"EXPLAIN {history}", (0, 1000)).fetchall()
        conn.execute("RESET enable_seqscan")
    assert "events_approval_ids" in str(one), one
    assert "events_approval_seqs" in str(whole), whole
    assert [r.seq for r in log.approval_records("a7")] == [15]
    assert [r.seq for r in log.read_all(types=APPROVAL_TYPES)][:3] == [1, 3, 5]
    with log._readers.connection() as conn:  # as a log made before the indexes were
        conn.execute("DROP INDEX events_approval_seqs")
        conn.execute("DROP INDEX events_approval_ids")
        conn.execute("DROP FUNCTION flightlog_approval_id(bytea)")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0003_approval_indexes'")
    reader = open_pg(readonly=True)
    assert [r.seq for r in reader.approval_records("a7")] == [15]
    assert len(list(reader.read_all(types=APPROVAL_TYPES))) == 50
    open_pg().close()  # a writable open adds them
    assert [r.seq for r in open_pg(readonly=True).approval_records("a7")] == [15]


def test_payload_searches_come_from_a_trigram_index_and_a_read_only_open_scans_without_it(open_pg, url):  # noqa: F811 - fixtures
    from eventlog._postgres import DATA_SEARCH_QUERY

    log = open_pg()
    log.append("task-1", [NewEvent("Noted", {"cmd": f"echo {i}"}) for i in range(50)])
    log.append("task-1", [NewEvent("Noted", {"cmd": "kubectl apply"})])
    assert log.seqs_containing("kubectl") == [51]  # catches the search table up
    has_trgm = _has_trgm(log)
    with log._readers.connection() as conn:
        conn.execute("SET enable_seqscan = off")
        conn.execute("SET enable_indexscan = off")  # else the seq order of the primary key may win
        plan = conn.execute(f"EXPLAIN {DATA_SEARCH_QUERY}", ("%kubectl%", 10, "%kubectl%", 10, 10)).fetchall()
        conn.execute("RESET enable_seqscan")
        conn.execute("RESET enable_indexscan")
    if has_trgm:  # this role could create pg_trgm; without it the same query scans
        assert "events_data_search_trgm" in str(plan), plan
    assert log.seqs_containing("ECHO 4", limit=2) == [50, 49]  # echo 49 and 48: substrings count
    assert log.seqs_containing("100%") == []  # % and _ are matched as themselves
    with log._readers.connection() as conn:  # as a log made before the index was
        conn.execute("DROP TABLE IF EXISTS events_data_search")
        conn.execute("DROP FUNCTION flightlog_data_text(bytea)")
        conn.execute(
            "DELETE FROM schema_migrations WHERE name IN (%s, %s)",
            ("0004_data_search", "0006_data_search_off_the_write_path"),
        )
    assert open_pg(readonly=True).seqs_containing("kubectl") == [51]
    open_pg().close()  # a writable open adds the index
    assert open_pg(readonly=True).seqs_containing("kubectl") == [51]


def _has_trgm(log) -> bool:
    with log._readers.connection() as conn:
        return conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'pg_trgm'").fetchone() is not None


def _searchable(target: str) -> tuple[int, int] | None:
    """How many records the search table holds, and the last seq (None: there is no table)."""
    with psycopg.connect(target) as conn:
        if conn.execute("SELECT to_regclass('events_data_search')").fetchone() == (None,):
            return None
        return conn.execute("SELECT count(*), coalesce(max(seq), 0) FROM events_data_search").fetchone()


def test_appends_leave_the_search_table_behind_and_a_search_catches_it_up(open_pg, url, monkeypatch):  # noqa: F811 - fixtures
    from eventlog import _postgres

    monkeypatch.setattr(_postgres, "SEARCH_CHUNK", 3)  # several catch-up statements
    log = open_pg()
    if not _has_trgm(log):
        pytest.skip("pg_trgm cannot be created here: searches scan, there is no table to keep")
    log.append("task-1", [NewEvent("Noted", {"cmd": f"kubectl {i}"}) for i in range(10)])
    assert _searchable(url) == (0, 0)  # the appends wrote the records, nothing else
    assert log.seqs_containing("KUBECTL") == list(range(10, 0, -1))
    assert _searchable(url) == (10, 10)
    log.append("task-1", [NewEvent("Noted", {"cmd": "kubectl again"})], expect=10)
    other = open_pg()  # another process's search: from where the table stands
    assert other.seqs_containing("kubectl", limit=2) == [11, 10]
    assert _searchable(url) == (11, 11)


def test_a_read_only_open_answers_past_the_search_table_and_writes_nothing(open_pg, url):  # noqa: F811 - fixtures
    log = open_pg()
    log.append("task-1", [NewEvent("Noted", {"cmd": f"kubectl {i}"}) for i in range(3)])
    log.seqs_containing("kubectl")
    log.append("task-1", [NewEvent("Noted", {"cmd": "KubeCtl again"})], expect=3)
    held = _searchable(url)
    reader = open_pg(readonly=True)
    assert reader.seqs_containing("kubectl") == [4, 3, 2, 1]
    assert reader.seqs_containing("ctl ag") == [4]
    assert _searchable(url) == held  # (3, 3) where pg_trgm is; no table where it is not


def test_a_log_indexed_in_place_moves_its_index_to_the_search_table(open_pg, url):  # noqa: F811 - fixtures
    log = open_pg()
    if not _has_trgm(log):
        pytest.skip("pg_trgm cannot be created here: there was no index to move")
    log.append("task-1", [NewEvent("Noted", {"cmd": f"kubectl {i}"}) for i in range(3)])
    with psycopg.connect(url, autocommit=True) as conn:  # the log as 0004 left it
        conn.execute("DROP TABLE events_data_search")
        home = conn.execute(
            "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace "
            "WHERE e.extname = 'pg_trgm'"
        ).fetchone()[0]
        conn.execute(
            psycopg.sql.SQL(
                "CREATE INDEX events_data_search ON events "
                "USING gin (flightlog_data_text(data) {}.gin_trgm_ops)"
            ).format(psycopg.sql.Identifier(home))
        )
        conn.execute("DELETE FROM schema_migrations WHERE name = '0006_data_search_off_the_write_path'")
    assert open_pg(readonly=True).seqs_containing("kubectl 1") == [2]  # the old index answers
    log = open_pg()
    assert _searchable(url) == (3, 3)  # filled by the migration
    with psycopg.connect(url) as conn:
        query = (
            "SELECT indexname FROM pg_indexes WHERE schemaname = current_schema() AND tablename = 'events'"
        )
        indexes = {row[0] for row in conn.execute(query)}
    assert "events_data_search" not in indexes
    assert log.seqs_containing("kubectl") == [3, 2, 1]
