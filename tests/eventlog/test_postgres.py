"""PostgreSQL-only behaviour: followers never skip a late commit, NOTIFY wake-ups, migrations, errors."""

from __future__ import annotations

import queue
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from eventlog import (
    ANY,
    NO_STREAM,
    ConcurrencyError,
    ManualClock,
    NewEvent,
    ReadOnlyDatabaseError,
    Record,
    StorageError,
    open_log,
)
from eventlog._append import AppendRequest, encode_events
from eventlog._chain import make_hasher
from tests.conftest import drop_pg_schema, pg_unavailable, pg_url, require_or_skip

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres

TIMEOUT = 10.0


@pytest.fixture
def schema() -> Iterator[str]:
    if reason := pg_unavailable():
        require_or_skip(reason)
    name = f"t_{uuid.uuid4().hex[:12]}"
    yield name
    drop_pg_schema(name)


@pytest.fixture
def url(schema: str) -> str:
    base = pg_url() or ""
    return f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"


@pytest.fixture
def opened() -> Iterator[list]:
    logs: list = []
    yield logs
    for log in logs:
        log.close()


@pytest.fixture
def open_pg(url: str, opened: list) -> Callable[..., object]:
    def factory(**kwargs):
        log = open_log(url, **kwargs)
        opened.append(log)
        return log

    return factory


class Follower:
    """A thread that follows a log into a queue until stopped."""

    def __init__(self, log, poll_interval: float = 0.05) -> None:
        self.records: queue.Queue[Record] = queue.Queue()
        self.stop = threading.Event()
        self._iter = log.follow(0, stop=self.stop, poll_interval=poll_interval)
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for record in self._iter:
            self.records.put(record)

    def take(self, n: int) -> list[Record]:
        return [self.records.get(timeout=TIMEOUT) for _ in range(n)]

    def close(self) -> None:
        self.stop.set()


def wait_until(condition: Callable[[], bool]) -> None:
    """Re-check a condition on the server until it holds (each check is a round trip)."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "condition never held"


def raw_append(conn, schema: str, stream: str, *events: NewEvent) -> AppendRequest:
    """Run the log's own write path on a raw connection, inside its open transaction."""
    from eventlog._postgres import channel_for, write_group

    req = AppendRequest(stream, encode_events(events), ANY)
    write_group(conn, [req], ManualClock(), make_hasher(), channel_for(schema))
    return req


def test_a_late_commit_of_an_earlier_position_is_never_skipped(open_pg, url, schema):
    log = open_pg()
    log.append("run-first", [NewEvent("TaskRegistered")])
    follower = Follower(log)
    try:
        assert [r.seq for r in follower.take(1)] == [1]
        with psycopg.connect(url) as a, psycopg.connect(url) as b:
            a_pid = a.info.backend_pid
            # A takes the next position (seq 2) and keeps its transaction open.
            a_req = raw_append(a, schema, "run-a", NewEvent("RunStarted"))
            assert a_req.result is not None
            assert [r.seq for r in a_req.result] == [2]

            # B starts later and tries to commit first: it must wait for A, because with a
            # position of its own (seq 3) committed first, a follower at seq 1 would read 3,
            # move past 2, and never see A's event.
            def b_append() -> list[Record]:
                req = raw_append(b, schema, "run-b", NewEvent("RunStarted"))
                b.commit()
                assert req.result is not None
                return req.result

            with ThreadPoolExecutor(1) as pool:
                b_done = pool.submit(b_append)
                with psycopg.connect(url, autocommit=True) as watch:
                    wait_until(
                        lambda: (
                            watch.execute(
                                "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                                (a_pid,),
                            ).fetchone()[0]
                            == 1
                        )
                    )
                assert not b_done.done()
                assert log.head().seq == 1
                a.commit()
                b_records = b_done.result(timeout=TIMEOUT)
        assert [r.seq for r in b_records] == [3]
        seen = follower.take(2)
        assert [(r.seq, r.stream) for r in seen] == [(2, "run-a"), (3, "run-b")]
        assert log.verify().ok
    finally:
        follower.close()


@pytest.mark.parametrize("isolation", ["repeatable read", "serializable"])
def test_writers_take_the_head_whatever_the_default_isolation(open_pg, url, schema, isolation):
    open_pg()
    log = open_log(url + "%20-cdefault_transaction_isolation%3D" + isolation.replace(" ", "%5C%20"))
    try:
        with psycopg.connect(url) as a, ThreadPoolExecutor(1) as pool:
            raw_append(a, schema, "run-a", NewEvent("RunStarted"))
            # The log's transaction begins, then waits for A: a snapshot taken before A
            # commits would not see seq 1 and would try to write seq 1 again.
            appended = pool.submit(log.append, "run-b", [NewEvent("RunStarted")])
            with psycopg.connect(url, autocommit=True) as watch:
                wait_until(
                    lambda: (
                        watch.execute(
                            "SELECT count(*) FROM pg_stat_activity WHERE %s = ANY(pg_blocking_pids(pid))",
                            (a.info.backend_pid,),
                        ).fetchone()[0]
                        == 1
                    )
                )
            a.commit()
            assert [r.seq for r in appended.result(timeout=TIMEOUT)] == [2]
        assert log.verify().ok
    finally:
        log.close()


def test_transactions_committing_in_reverse_start_order_are_all_followed(open_pg, url, schema):
    log = open_pg()
    follower = Follower(log)
    try:
        with psycopg.connect(url) as a, psycopg.connect(url) as b:
            a.execute("SELECT count(*) FROM events").fetchone()  # A began first
            b_req = raw_append(b, schema, "run-b", NewEvent("RunStarted"))
            b.commit()
            a_req = raw_append(a, schema, "run-a", NewEvent("RunStarted"), NewEvent("TaskFinished"))
            a.commit()
        assert b_req.result is not None
        assert a_req.result is not None
        assert [r.seq for r in b_req.result + a_req.result] == [1, 2, 3]
        assert [(r.seq, r.stream) for r in follower.take(3)] == [(1, "run-b"), (2, "run-a"), (3, "run-a")]
        assert log.verify().ok
    finally:
        follower.close()


def test_follow_is_woken_by_another_process_commit(open_pg):
    reader, writer = open_pg(), open_pg()
    # An hour-long poll: the record can only arrive through LISTEN/NOTIFY (or the listener's
    # wake-up when it starts listening), never through the poll.
    follower = Follower(reader, poll_interval=3600)
    try:
        for i in range(3):
            writer.append("run-x", [NewEvent("TaskReported", {"i": i})])
            assert follower.take(1)[0].data == {"i": i}
    finally:
        follower.close()


def test_follow_survives_a_dropped_listener_connection(open_pg, url, schema):
    reader, writer = open_pg(), open_pg()
    follower = Follower(reader, poll_interval=3600)
    try:
        writer.append("run-x", [NewEvent("TaskReported", {"i": 0})])
        assert follower.take(1)[0].data == {"i": 0}
        with psycopg.connect(url, autocommit=True) as admin:
            listening = "SELECT pid FROM pg_stat_activity WHERE query LIKE %s"
            pattern = f'LISTEN "flightlog_events_{schema}"'
            wait_until(lambda: bool(admin.execute(listening, (pattern,)).fetchall()))
            for (pid,) in admin.execute(listening, (pattern,)).fetchall():
                admin.execute("SELECT pg_terminate_backend(%s)", (pid,))
            writer.append("run-x", [NewEvent("TaskReported", {"i": 1})])
        assert follower.take(1)[0].data == {"i": 1}
    finally:
        follower.close()


UUID_1, UUID_2 = str(uuid.UUID(int=1)), str(uuid.UUID(int=2))


def test_hashes_match_sqlite_byte_for_byte(open_pg):
    events = [
        NewEvent("TaskRegistered", {"run_id": "7", "ünï": [1, 2.5, None]}, {"actor": "op"}, UUID_1),
        NewEvent("RunStarted", {}, {}, UUID_2, schema=2),
    ]
    pg, lite = open_pg(clock=ManualClock()), open_log(":memory:", clock=ManualClock())
    try:
        for log in (pg, lite):
            log.append("run-7", events[:1], expect=NO_STREAM)
            log.append("run-7", events[1:], expect=1)
        assert list(pg.read_all()) == list(lite.read_all())
        assert pg.head() == lite.head()
    finally:
        lite.close()


def test_logs_opening_at_once_migrate_once(open_pg, url):
    with ThreadPoolExecutor(6) as pool:
        logs = list(pool.map(lambda _: open_pg(), range(6)))
    logs[0].append("run-1", [NewEvent("TaskRegistered")])
    assert all(log.head().seq == 1 for log in logs)
    with psycopg.connect(url) as conn:
        names = conn.execute("SELECT name FROM schema_migrations ORDER BY name").fetchall()
        assert names == [
            ("0001_create_events",),
            ("0002_run_starts_index",),
            ("0003_approval_indexes",),
            ("0004_data_search",),
            ("0005_group_commit",),
            ("0006_data_search_off_the_write_path",),
        ]


def test_a_read_only_connection_refuses_appends_with_a_typed_error(open_pg, url):
    open_pg().append("run-1", [NewEvent("TaskRegistered")])
    log = open_log(url + "%20-cdefault_transaction_read_only%3Don")
    try:
        with pytest.raises(ReadOnlyDatabaseError):
            log.append("run-1", [NewEvent("RunStarted")])
        assert log.head().seq == 1
    finally:
        log.close()


def test_readonly_reads_follows_and_verifies_but_writes_nothing(open_pg, url, schema):
    writer = open_pg()
    writer.append("run-1", [NewEvent("TaskRegistered"), NewEvent("RunStarted")])
    log = open_pg(readonly=True)
    assert [r.type for r in log.read("run-1")] == ["TaskRegistered", "RunStarted"]
    assert log.verify().ok
    with pytest.raises(ReadOnlyDatabaseError, match="read-only"):
        log.append("run-1", [NewEvent("Noted")])
    # It still sees what writers commit, and follows it.
    writer.append("run-2", [NewEvent("TaskRegistered")])
    follower = Follower(log)
    try:
        assert [r.seq for r in follower.take(3)] == [1, 2, 3]
    finally:
        follower.close()
    assert log.head() == writer.head()


def test_readonly_views_fold_from_zero_without_creating_the_snapshots_table(open_pg, url, schema):
    from projections import Views

    open_pg().append("run-1", [NewEvent("TaskRegistered")])
    log = open_pg(readonly=True)
    Views(log).runs()  # the broker's run registry, folded from seq 0
    with psycopg.connect(url) as conn:
        assert conn.execute("SELECT to_regclass('snapshots')").fetchone() == (None,)
    from eventlog._snapshots import snapshot_store

    with pytest.raises(ReadOnlyDatabaseError):
        snapshot_store(log).delete()


def test_readonly_open_of_a_schema_without_a_log_creates_nothing(url, schema):
    with pytest.raises(StorageError, match="read-only, and there is no log") as caught:
        open_log(url, readonly=True)
    assert caught.value.path.startswith("postgresql://")
    with psycopg.connect(pg_url() or "") as conn:
        found = conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (schema,)).fetchall()
    assert found == []  # not even the schema was created


def test_connection_errors_never_show_the_password():
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"postgresql://flight:hunter2secret@127.0.0.1:{port}/nowhere?password=hunter3secret"
    with pytest.raises(StorageError) as caught:
        open_log(url)
    message = str(caught.value)
    assert "cannot connect" in message
    assert f"postgresql://flight@127.0.0.1:{port}/nowhere" in message
    assert "hunter2secret" not in message
    assert "hunter3secret" not in message
    assert "hunter" not in repr(caught.value.__cause__ or "")


def test_the_url_kept_by_the_log_has_no_password(url):
    base = pg_url() or ""
    if "@" not in base or ":" in base.split("//", 1)[1].split("@", 1)[0]:
        pytest.skip("needs a URL with a user and no password to add one")
    try:
        log = open_log(url.replace("@", ":not-the-real-one@", 1))
    except StorageError as e:  # the server checks passwords: its refusal must not show it either
        shown = str(e)
    else:
        shown = f"{log.url} {log!r}"
        log.close()
    assert "not-the-real-one" not in shown


def test_two_log_objects_and_many_threads_keep_seq_gap_free(open_pg):
    logs = [open_pg(), open_pg()]  # two writer connections: to the server, two processes

    def work(n: int) -> list[str]:
        log, acked = logs[n % 2], []
        for i in range(40):
            stream = f"shared-{i % 3}" if i % 2 else f"own-{n}"
            while True:  # expected-version retries, as an actor reloading after a conflict
                try:
                    event = NewEvent("Contended", {"n": n, "i": i})
                    log.append(stream, [event], expect=log.stream_version(stream))
                    break
                except ConcurrencyError:
                    continue
            acked.append(event.event_id)
        return acked

    with ThreadPoolExecutor(8) as pool:
        acked = [eid for ids in pool.map(work, range(8)) for eid in ids]
    records = list(logs[0].read_all())
    assert [r.seq for r in records] == list(range(1, 8 * 40 + 1))
    assert sorted(r.event_id for r in records) == sorted(acked)
    for stream in {r.stream for r in records}:
        assert [r.version for r in logs[1].read(stream)] == list(range(1, logs[1].stream_version(stream) + 1))
    assert logs[1].verify().ok


def test_verify_reports_rows_changed_or_removed_behind_the_log(open_pg, url):
    log = open_pg()
    for i in range(5):
        log.append("run-1", [NewEvent("TaskReported", {"i": i})])
    anchor = log.head()
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("UPDATE events SET data = %s WHERE seq = 3", (b'{"i":33}',))
        result = log.verify()
        assert (result.ok, result.first_bad_seq) == (False, 3)
        conn.execute("UPDATE events SET data = %s WHERE seq = 3", (b'{"i":2}',))
        assert log.verify(anchor).ok
        conn.execute("DELETE FROM events WHERE seq = 5")
    assert log.verify().ok  # a shorter chain is still a chain: only the anchor knows
    result = log.verify(anchor)
    assert (result.ok, result.first_bad_seq) == (False, 5)


def test_a_log_outlives_connections_the_server_dropped(open_pg, url):
    # The server drops every connection of this log (as a restart would, or an administrator):
    # the next read and append must use fresh connections, not fail on the dead ones.
    name = f"flightlog_{uuid.uuid4().hex[:12]}"
    log = open_log(f"{url}&application_name={name}")
    follower = None
    try:
        log.append("run-1", [NewEvent("TaskRegistered")])
        # An hour-long poll: only the listener (NOTIFY, or its restart) can wake the follower.
        follower = Follower(log, poll_interval=3600)
        assert [r.seq for r in follower.take(1)] == [1]
        with psycopg.connect(url, autocommit=True) as admin:
            ours = "SELECT pid, query LIKE 'LISTEN%%' FROM pg_stat_activity WHERE application_name = %s"
            wait_until(lambda: any(listens for _, listens in admin.execute(ours, (name,)).fetchall()))
            backends = admin.execute(ours, (name,)).fetchall()
            assert len(backends) >= 3  # the writer, a reader, the listener
            # The listener last: its reconnection wakes the follower, whose read must then find
            # every other connection gone. Each call returns once that backend has exited.
            for pid, _ in sorted(backends, key=lambda b: b[1]):
                assert admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone() == (True,)
        assert log.head().seq == 1
        assert [r.seq for r in log.append("run-1", [NewEvent("RunStarted")])] == [2]
        assert [r.seq for r in follower.take(1)] == [2]
        assert log.verify().ok
    finally:
        if follower is not None:
            follower.close()
        log.close()
