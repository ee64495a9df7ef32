"""The event log contract: appending, expected versions, idempotency and reading.

Every test here runs on every backend through the public `eventlog` API only.
Following, verifying, time and the catalogue are in test_contract_more.py.
"""

from __future__ import annotations

import pytest

from eventlog import (
    ANY,
    EXISTS,
    GENESIS_HASH,
    NO_STREAM,
    ConcurrencyError,
    Head,
    IdempotencyConflict,
    LogClosedError,
    NewEvent,
    StreamNameError,
)


def ev(n: int, type_: str = "Tested", **meta: object) -> NewEvent:
    return NewEvent(type_, {"n": n}, meta=dict(meta))


def test_append_returns_complete_records(log, clock):
    first = NewEvent("TaskRegistered", {"run_id": "42"}, meta={"actor": "alice", "correlation_id": "c1"})
    second = NewEvent("TaskReported", {"run_id": "42", "text": "hi"})
    recs = log.append("run-42", [first, second], expect=NO_STREAM)

    assert [r.seq for r in recs] == [1, 2]
    assert [r.version for r in recs] == [1, 2]
    assert [r.stream for r in recs] == ["run-42", "run-42"]
    assert [r.type for r in recs] == ["TaskRegistered", "TaskReported"]
    assert [r.data for r in recs] == [first.data, second.data]
    assert [r.meta for r in recs] == [first.meta, {}]
    assert [r.event_id for r in recs] == [first.event_id, second.event_id]
    assert [r.recorded_at for r in recs] == [clock.now(), clock.now()]
    assert recs[0].prev_hash == GENESIS_HASH
    assert recs[1].prev_hash == recs[0].hash
    assert all(len(r.hash) == 64 and int(r.hash, 16) >= 0 for r in recs)
    assert recs[0].hash != recs[1].hash
    # What append returned is exactly what is stored.
    assert list(log.read("run-42")) == recs
    assert list(log.read_all()) == recs


def test_seq_is_one_based_and_gap_free_and_versions_count_per_stream(log):
    plan = ["run-a", "run-b", "run-a", "approval-x", "run-b", "run-a"]
    for i, stream in enumerate(plan):
        log.append(stream, [ev(i), ev(i + 100)])

    records = list(log.read_all())
    assert [r.seq for r in records] == list(range(1, 2 * len(plan) + 1))
    for stream in set(plan):
        versions = [r.version for r in records if r.stream == stream]
        assert versions == list(range(1, len(versions) + 1))
        assert log.stream_version(stream) == len(versions)


# (versions already in the stream, expect, the ConcurrencyError's .actual or None when it holds)
EXPECTATIONS = [
    (0, 0, None),
    (0, NO_STREAM, None),
    (0, ANY, None),
    (0, EXISTS, 0),
    (0, 1, 0),
    (2, 2, None),
    (2, ANY, None),
    (2, EXISTS, None),
    (2, 0, 2),
    (2, NO_STREAM, 2),
    (2, 1, 2),
    (2, 3, 2),
]


@pytest.mark.parametrize(("existing", "expect", "actual"), EXPECTATIONS)
def test_expected_version(log, existing, expect, actual):
    if existing:
        log.append("run-1", [ev(i) for i in range(existing)])
    log.append("run-other", [ev(99)])
    head = log.head()

    if actual is None:
        recs = log.append("run-1", [ev(7)], expect=expect)
        assert recs[0].version == existing + 1
        return
    with pytest.raises(ConcurrencyError) as excinfo:
        log.append("run-1", [ev(7), ev(8)], expect=expect)
    assert excinfo.value.actual == actual
    assert excinfo.value.stream == "run-1"
    # A mismatch writes nothing.
    assert log.head() == head
    assert log.stream_version("run-1") == existing
    assert [r.data["n"] for r in log.read("run-1")] == list(range(existing))


def test_exact_versions_chain_appends(log):
    version = 0
    for i in range(5):
        recs = log.append("session-s", [ev(i)], expect=version)
        version = recs[-1].version
    assert version == 5
    with pytest.raises(ConcurrencyError) as excinfo:
        log.append("session-s", [ev(9)], expect=4)
    assert excinfo.value.actual == 5


def test_batch_is_atomic_when_a_later_event_collides(log):
    stored = ev(1)
    log.append("run-a", [stored])
    head = log.head()
    fresh = [ev(2), ev(3)]
    clash = NewEvent("Tested", {"n": "different"}, event_id=stored.event_id)

    with pytest.raises(IdempotencyConflict):
        log.append("run-b", [*fresh, clash])

    assert log.head() == head
    assert log.stream_version("run-b") == 0
    assert list(log.read("run-b")) == []
    # The fresh events were not stored: they append as new ones afterwards.
    recs = log.append("run-b", fresh, expect=NO_STREAM)
    assert [r.seq for r in recs] == [head.seq + 1, head.seq + 2]


def test_an_event_id_twice_in_one_batch_is_refused(log):
    twice = ev(1)
    with pytest.raises(ValueError, match="twice"):
        log.append("run-a", [twice, ev(2), twice])
    assert log.head().seq == 0
    # The log still works, and a good append right after is unaffected.
    assert log.append("run-a", [twice])[0].seq == 1


def test_reappend_with_same_content_returns_the_original_records(log, clock):
    batch = [ev(1, actor="alice"), ev(2), ev(3)]
    first = log.append("run-r", batch, expect=NO_STREAM)
    clock.advance(5)
    log.append("run-r", [ev(4)], expect=3)
    head = log.head()

    # A retry after a lost reply: the expectation is stale now, yet it is the same append.
    assert log.append("run-r", batch, expect=NO_STREAM) == first
    assert log.append("run-r", batch, expect=0) == first
    assert log.append("run-r", batch, expect=ANY) == first
    assert log.append("run-r", batch[1:2], expect=ANY) == first[1:2]
    assert log.head() == head
    assert log.stream_version("run-r") == 4


@pytest.mark.parametrize(
    "change",
    [
        pytest.param(lambda e: NewEvent(e.type, {"n": -1}, e.meta, e.event_id), id="data"),
        pytest.param(lambda e: NewEvent("Other", e.data, e.meta, e.event_id), id="type"),
        pytest.param(lambda e: NewEvent(e.type, e.data, {"actor": "mallory"}, e.event_id), id="meta"),
        pytest.param(lambda e: NewEvent(e.type, e.data, e.meta, e.event_id, schema=2), id="schema"),
    ],
)
def test_reappend_with_different_content_conflicts(log, change):
    original = ev(1, actor="alice")
    log.append("run-c", [original])
    head = log.head()
    with pytest.raises(IdempotencyConflict) as excinfo:
        log.append("run-c", [change(original)])
    assert excinfo.value.event_id == original.event_id
    assert log.head() == head


def test_reappend_to_another_stream_conflicts(log):
    original = ev(1)
    log.append("run-c", [original])
    with pytest.raises(IdempotencyConflict):
        log.append("run-d", [original])
    assert log.stream_version("run-d") == 0


@pytest.mark.parametrize("order", ["stored-first", "new-first"])
def test_partial_overlap_conflicts_and_writes_nothing(log, order):
    stored = [ev(1), ev(2)]
    log.append("run-p", stored)
    head = log.head()
    new = ev(3)
    batch = [*stored, new] if order == "stored-first" else [new, *stored]
    with pytest.raises(IdempotencyConflict):
        log.append("run-p", batch)
    assert log.head() == head
    with pytest.raises(IdempotencyConflict):
        log.append("run-p", [stored[1], stored[0]])  # the same events, but not the stored batch order
    assert log.head() == head


def test_read_a_stream_between_versions(log):
    for i in range(10):
        log.append("run-x", [ev(i)])
        log.append("run-y", [ev(100 + i)])

    def versions(*args, **kwargs):
        return [r.version for r in log.read("run-x", *args, **kwargs)]

    assert versions() == list(range(1, 11))
    assert versions(3, 7) == [3, 4, 5, 6, 7]
    assert versions(from_version=8) == [8, 9, 10]
    assert versions(to_version=2) == [1, 2]
    assert versions(5, 5) == [5]
    assert versions(11) == []
    assert versions(7, 3) == []
    assert [r.data["n"] for r in log.read("run-x", 3, 4)] == [2, 3]
    assert list(log.read("run-nothing")) == []


def test_read_all_between_seqs(log):
    for i in range(10):
        log.append(f"run-{i % 3}", [ev(i)])

    def seqs(*args, **kwargs):
        return [r.seq for r in log.read_all(*args, **kwargs)]

    assert seqs() == list(range(1, 11))
    assert seqs(after_seq=3, to_seq=6) == [4, 5, 6]
    assert seqs(after_seq=8) == [9, 10]
    assert seqs(to_seq=2) == [1, 2]
    assert seqs(after_seq=10) == []
    assert seqs(after_seq=5, to_seq=5) == []


def test_reads_page_through_large_logs(log):
    # More records than one page of any reasonable reader, so paging must stitch correctly.
    for b in range(5):
        log.append("run-big", [ev(b * 500 + i) for i in range(500)])
        log.append("run-small", [ev(-b)])

    records = list(log.read_all())
    assert [r.seq for r in records] == list(range(1, 2506))
    big = list(log.read("run-big"))
    assert [r.data["n"] for r in big] == list(range(2500))
    assert [r.version for r in log.read("run-big", 990, 2010)] == list(range(990, 2011))
    assert [r.seq for r in log.read_all(after_seq=999, to_seq=2002)] == list(range(1000, 2003))


def test_head_and_stream_version(log):
    assert log.head() == Head(0, GENESIS_HASH)
    assert log.stream_version("run-1") == 0
    log.append("run-1", [ev(1), ev(2)])
    last = log.append("run-2", [ev(3)])[-1]
    assert log.head() == Head(last.seq, last.hash) == (3, last.hash)
    assert log.stream_version("run-1") == 2
    assert log.stream_version("run-2") == 1
    assert log.stream_version("run-3") == 0


@pytest.mark.parametrize(
    "name",
    ["", "run", "Run-1", "-1", "1run-2", "run 1-2", "rün-1", 42, None, b"run-1", "run-" + "x" * 600],
)
def test_bad_stream_names_are_refused(log, name):
    with pytest.raises(StreamNameError):
        log.append(name, [ev(1)])
    with pytest.raises(StreamNameError):
        list(log.read(name))
    assert issubclass(StreamNameError, ValueError)
    assert log.head().seq == 0


@pytest.mark.parametrize("stream", ["run-1", "approval-7f3a-uuid", "session-a:b/c", "tool_overrides-x"])
def test_good_stream_names_are_accepted(log, stream):
    assert log.append(stream, [ev(1)])[0].stream == stream


@pytest.mark.parametrize("expect", [-1, "1", "any", 1.0, None, True, False])
def test_bad_expect_is_a_value_error(log, expect):
    with pytest.raises(ValueError, match="expect") as excinfo:
        log.append("run-1", [ev(1)], expect=expect)
    assert not isinstance(excinfo.value, ConcurrencyError)
    assert log.head().seq == 0


def test_a_closed_log_refuses_everything(log_factory, clock):
    log = log_factory(clock=clock)
    log.append("run-1", [ev(1)])
    log.close()
    assert log.closed
    calls = [
        lambda: log.append("run-1", [ev(2)]),
        lambda: list(log.read("run-1")),
        lambda: list(log.read_all()),
        log.head,
        lambda: log.stream_version("run-1"),
        log.verify,
    ]
    for call in calls:
        with pytest.raises(LogClosedError):
            call()


def test_a_catalogue_type_name_with_the_wrong_fields_is_refused_and_nothing_written(log):
    # Readers decode catalogue types into their dataclasses: a NewEvent that borrows such a
    # name must carry the fields, or every view folding the log would break on it later.
    from eventlog import EventShapeError

    with pytest.raises(EventShapeError, match="RunRegistered"):
        log.append("run-42", [NewEvent("RunRegistered", {"run_id": "42"})])
    assert log.head().seq == 0
