"""PostgreSQL group commit: a group in one round trip when the head is the writer's own, and
when another writer moved it (the server chains the group again; a log with an HMAC key takes
the writer row for two round trips instead), and the contract kept either way (expected
versions refused exactly as before, retries answered with the stored records, the chain whole)
across writers, old and new."""

from __future__ import annotations

import itertools
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from eventlog import ANY, EXISTS, NO_STREAM, ConcurrencyError, NewEvent
from eventlog._append import AppendRequest, encode_events
from eventlog._chain import make_hasher
from eventlog._clock import SystemClock

from .test_postgres import open_pg, opened, schema, url  # noqa: F401 - fixtures

psycopg = pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres


class Trace:
    """libpq's own trace of the protocol on the log's writer connection, read once it ended
    (libpq writes it through a buffer of its own)."""

    text = ""

    def round_trips(self) -> int:
        """Each run of messages to the server (F) followed by the server's answers (B) is one."""
        sides = [line.split("\t", 1)[0] for line in self.text.splitlines() if line]
        return sum(1 for a, b in itertools.pairwise(sides) if (a, b) == ("F", "B"))


@contextmanager
def traced(log) -> Iterator[Trace]:  # type: ignore[no-untyped-def]
    trace = Trace()
    with tempfile.TemporaryFile("w+") as file:
        conn = log._writer
        conn.pgconn.trace(file.fileno())
        conn.pgconn.set_trace_flags(psycopg.pq.Trace.SUPPRESS_TIMESTAMPS | psycopg.pq.Trace.REGRESS_MODE)
        try:
            yield trace
        finally:
            conn.pgconn.untrace()
            file.seek(0)
            trace.text = file.read()


def test_a_group_after_one_of_this_writer_is_one_round_trip(open_pg):  # noqa: F811 - fixtures
    log = open_pg()
    log.append("run-1", [NewEvent("Started")], expect=NO_STREAM)  # learns the head
    with traced(log) as one:
        records = log.append("run-1", [NewEvent("Noted", {"i": i}) for i in range(3)], expect=1)
    assert one.round_trips() == 1
    with traced(log) as group:  # many callers' appends to many streams, one group
        many = log.append_many([(f"run-{i}", [NewEvent("Started")], NO_STREAM) for i in range(2, 6)])
    assert group.round_trips() == 1
    assert [r.version for r in records] == [2, 3, 4]
    assert [r.seq for r in log.read_all()] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert [rs[0].seq for rs in many] == [5, 6, 7, 8]  # type: ignore[index]
    assert log.verify().ok


def test_when_another_writer_moved_the_head_the_server_chains_the_group_again(open_pg):  # noqa: F811
    a, b = open_pg(), open_pg()
    a.append("run-a", [NewEvent("Started")], expect=NO_STREAM)
    [theirs] = b.append("run-b", [NewEvent("Started")], expect=NO_STREAM)
    with traced(a) as moved:
        [mine] = a.append("run-a", [NewEvent("Noted")], expect=1)
    # One statement, refused (the head moved, and a writer that saw no other writes no pieces
    # to chain again with: nothing written), then the row and the head in one round trip and
    # the rows with the COMMIT in another.
    assert moved.round_trips() == 3
    assert (mine.seq, mine.prev_hash, mine.version) == (3, theirs.hash, 2)
    b.append("run-b", [NewEvent("Noted")], expect=1)
    a.append("run-a", [NewEvent("Noted")], expect=2)  # (its first such call prepares it)
    [theirs] = b.append("run-b", [NewEvent("Noted")], expect=2)
    with traced(a) as contended:  # another writer is at work: the server chains it again
        [again] = a.append("run-a", [NewEvent("Noted", {"ünï": 'x"y\\z\x01'})], expect=3)
    assert contended.round_trips() == 1
    assert (again.seq, again.prev_hash, again.version) == (7, theirs.hash, 4)
    with traced(a) as own:  # the head is its own again: written as chained
        a.append("run-a", [NewEvent("Noted")], expect=4)
        a.append("run-a", [NewEvent("Noted")], expect=5)
    assert own.round_trips() == 2
    assert [r.seq for r in a.read_all()] == list(range(1, 10))
    assert a.read_all(after_seq=6).__next__() == again
    assert a.verify().ok


def test_a_keyed_writer_takes_the_row_when_another_writer_moved_the_head(open_pg):  # noqa: F811
    key = b"k" * 32
    a, b = open_pg(hmac_key=key), open_pg(hmac_key=key)
    a.append("run-a", [NewEvent("Started")], expect=NO_STREAM)
    [theirs] = b.append("run-b", [NewEvent("Started")], expect=NO_STREAM)
    with traced(a) as moved:
        [mine] = a.append("run-a", [NewEvent("Noted")], expect=1)
    assert moved.round_trips() == 3  # refused, then the row held across one round trip
    assert (mine.seq, mine.prev_hash, mine.version) == (3, theirs.hash, 2)
    b.append("run-b", [NewEvent("Noted")], expect=1)
    with traced(a) as contended:  # another writer is at work: straight to the row
        a.append("run-a", [NewEvent("Noted")], expect=2)
    assert contended.round_trips() == 2
    calm = a._heads.CALM  # type: ignore[attr-defined]
    with traced(a) as own:  # the head its own again, group after group: back to one statement
        for version in range(3, 3 + calm + 1):
            a.append("run-a", [NewEvent("Noted")], expect=version)
    assert own.round_trips() == 2 * calm + 1
    assert [r.seq for r in a.read_all()] == list(range(1, 6 + calm + 1))
    assert a.verify().ok


def test_an_expected_version_another_writer_passed_is_refused_and_nothing_written(open_pg):  # noqa: F811
    a, b = open_pg(), open_pg()
    a.append("run-1", [NewEvent("Started")], expect=NO_STREAM)  # a holds run-1 at version 1
    b.append("run-1", [NewEvent("Noted")], expect=1)
    for expect in (1, NO_STREAM, 0):
        with pytest.raises(ConcurrencyError) as refused:
            a.append("run-1", [NewEvent("Noted")], expect=expect)
        assert refused.value.actual == 2  # type: ignore[attr-defined]
    with pytest.raises(ConcurrencyError):
        a.append("run-9", [NewEvent("Noted")], expect=EXISTS)
    assert a.head().seq == 2
    [third] = a.append("run-1", [NewEvent("Noted")], expect=ANY)
    assert (third.seq, third.version) == (3, 3)
    [fourth] = a.append("run-1", [NewEvent("Noted")], expect=3)
    assert (fourth.seq, fourth.version) == (4, 4)
    assert a.verify().ok


def test_a_stream_the_writer_never_saw_is_checked_under_the_row(open_pg):  # noqa: F811 - fixtures
    a, b = open_pg(), open_pg()
    a.append("run-a", [NewEvent("Started")], expect=NO_STREAM)
    b.append("run-b", [NewEvent("Started"), NewEvent("Noted")], expect=NO_STREAM)
    a.append("run-a", [NewEvent("Noted")], expect=1)  # a holds the head again, not run-b
    with pytest.raises(ConcurrencyError):  # taken for version 1, found at 2: nothing written
        a.append("run-b", [NewEvent("Noted")], expect=1)
    [ok] = a.append("run-b", [NewEvent("Noted")], expect=2)
    assert (ok.seq, ok.version) == (5, 3)
    [new] = a.append("run-c", [NewEvent("Started")], expect=NO_STREAM)
    assert (new.seq, new.version) == (6, 1)


def test_retries_of_stored_events_answer_the_stored_records_on_every_path(open_pg):  # noqa: F811
    log = open_pg()
    event = NewEvent("Started", {"n": 1})
    first = log.append("run-1", [event], expect=NO_STREAM)
    assert log.append("run-1", [event], expect=ANY) == first  # one statement: the id is taken
    assert log.append("run-1", [event], expect=NO_STREAM) == first  # refused, then found
    log._heads.contended = True  # type: ignore[attr-defined]  # as if another writer were at work
    assert log.append("run-1", [event], expect=ANY) == first  # under the row, then one by one
    twice = NewEvent("Noted")
    both = log.append_many([("run-2", [twice], NO_STREAM), ("run-2", [twice], ANY)])
    assert both[0] == both[1]
    assert [r.seq for r in log.read_all()] == [1, 2]
    assert log.verify().ok


def test_a_writer_of_the_old_path_and_one_of_the_new_keep_one_chain(open_pg, url):  # noqa: F811 - fixtures
    """A process of the version before the functions (every request its own statements under
    the writer row) and one of this version write the same log: the row orders them."""
    from eventlog._pgwrite import write_each
    from eventlog._postgres import channel_for

    new = open_pg()
    with psycopg.connect(url) as old:
        schema_name = old.execute("SELECT current_schema()").fetchone()[0]
        for i in range(4):
            new.append("run-new", [NewEvent("Noted", {"i": i})], expect=i or NO_STREAM)
            req = AppendRequest("run-old", encode_events([NewEvent("Noted", {"i": i})]), i or NO_STREAM)
            write_each(old, [req], SystemClock(), make_hasher(), channel_for(schema_name), "old")
            old.commit()
            assert req.result is not None
    records = list(new.read_all())
    assert [(r.seq, r.stream) for r in records[:2]] == [(1, "run-new"), (2, "run-old")]
    assert [r.seq for r in records] == list(range(1, 9))
    assert new.verify().ok


def test_a_log_made_before_the_functions_is_migrated_and_continues_its_chain(open_pg, url):  # noqa: F811
    log = open_pg()
    log.append("run-1", [NewEvent("Started")], expect=NO_STREAM)
    log.close()
    with psycopg.connect(url, autocommit=True) as conn:  # the log as the version before left it
        conn.execute("DROP FUNCTION flightlog_append")
        conn.execute("DROP FUNCTION flightlog_writer_head")
        conn.execute("DELETE FROM schema_migrations WHERE name = '0005_group_commit'")
    reader = open_pg(readonly=True)  # a read-only open needs no function to read
    assert [r.seq for r in reader.read_all()] == [1]
    log = open_pg()
    [second] = log.append("run-1", [NewEvent("Noted")], expect=1)
    assert second.seq == 2
    assert log.verify().ok


def test_a_keyed_chain_is_hashed_in_the_process_and_its_key_never_sent(open_pg):  # noqa: F811 - fixtures
    key = b"secret-chain-key-" * 2
    log = open_pg(hmac_key=key)
    log.append("run-1", [NewEvent("Started")], expect=NO_STREAM)
    with traced(log) as trace:
        log.append("run-1", [NewEvent("Noted")], expect=1)
        log._heads.contended = True  # type: ignore[attr-defined]  # and under the writer row
        log.append("run-1", [NewEvent("Noted")], expect=2)
    assert trace.round_trips() == 3
    assert "secret-chain-key" not in trace.text
    assert key.hex() not in trace.text
    assert log.verify().ok
    assert not open_pg().verify().ok  # unkeyed, the same rows do not verify


NASTY = ['q"uote', "back\\slash", "ctl\x01\x1f\x7f", "ünïcødé", "emoji 🛫", "/solidus/", "tab\tnew\nline", ""]


def test_the_server_chains_any_names_as_the_process_does(open_pg):  # noqa: F811 - fixtures
    """The server builds each record's canonical header from the process's own JSON of its
    stream, type and event id; whatever characters they hold, the chain verifies."""
    a, b = open_pg(), open_pg()
    a.append("run-a", [NewEvent("Started")], expect=NO_STREAM)
    appends = [  # new streams, known to be: NO_STREAM
        (
            f"run-{text}",
            [NewEvent(f"Noted {text}", {"t": text}, {"by": text}, f"id {text} {n}", schema=n + 1)],
        )
        for n, text in enumerate(NASTY)
    ]
    for group in (appends[:4], appends[4:]):
        b.append("run-b", [NewEvent("Noted")])  # the head moves under a
        a._heads.contended = True  # type: ignore[attr-defined]  # a knows another writer is about
        with traced(a) as trace:
            written = a.append_many([(stream, events, NO_STREAM) for stream, events in group])
        assert trace.round_trips() in (1, 2)  # (2: the first such call prepares it)
        assert "COMMIT" not in trace.text  # no transaction of its own: the server chained it again
        for (stream, [event]), [record] in zip(group, written, strict=True):  # type: ignore[misc]
            assert (record.stream, record.type, record.event_id, record.schema) == (
                stream,
                event.type,
                event.event_id,
                event.schema,
            )
    stored = {r.seq: r for r in a.read_all()}
    assert [stored[rs[0].seq] for rs in written] == [rs[0] for rs in written]  # type: ignore[index]
    assert a.verify().ok
