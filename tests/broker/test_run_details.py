"""A broker run's detail a page at a time: a fold kept per run answers what a whole fold answers,
and once the run has been folded a page costs its records, not the run's length. (The tests
taking `log` run on every backend.)"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from actors.broker.details import RunDetails
from actors.broker.view import fold_run_page
from eventlog import ANY, Event, ManualClock, open_log
from eventlog.events import (
    ControlDelivered,
    ControlQueued,
    PermissionDecided,
    PermissionRequested,
    RunDeleted,
    RunFinished,
    RunHeartbeat,
    RunRegistered,
    RunRegistrationRefreshed,
    RunRekeyed,
    RunReplied,
    RunReported,
    RunTokenRevoked,
)

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "long"
STREAM = f"run-{RUN}"

# One step of a run: a pool of a few ids, so that decisions and deliveries find (or miss) what
# they answer, and a request id is filed again now and then.
KINDS = [
    "report", "report", "report", "request", "decide", "control", "deliver", "finish", "reply",
    "heartbeat", "refresh", "revoke", "rekey", "register", "delete",
]  # fmt: skip
STEPS = st.lists(st.tuples(st.sampled_from(KINDS), st.integers(0, 2)), max_size=60)


def _event(kind: str, pick: int, n: int) -> Event:
    at = T0 + timedelta(seconds=n)
    if kind == "report":
        return RunReported(RUN, "working", f'{{"note": "step {n}"}}', at)
    if kind == "request":
        return PermissionRequested(RUN, f"r{pick}", "bash", f"run {n}", "", f"ap-{n}", at)
    if kind == "decide":
        return PermissionDecided(RUN, f"r{pick}", "allow" if n % 2 else "deny", f"ap-{n}", "op", at)
    if kind == "control":
        return ControlQueued(RUN, f"c{pick}", "steer", "", f'{{"n": {n}}}', at, "op")
    if kind == "deliver":
        return ControlDelivered(RUN, (f"c{pick}",), at)
    if kind == "finish":
        return RunFinished(RUN, "done" if pick else "failed", f"finished {n}", ("a.py",), None, at)
    if kind == "reply":
        return RunReplied(RUN, "peer", f'{{"n": {n}}}', at)
    if kind == "heartbeat":
        return RunHeartbeat(RUN, at)
    if kind == "refresh":
        return RunRegistrationRefreshed(RUN, at)
    if kind == "revoke":
        return RunTokenRevoked(RUN, "lost", "op", "cred", at)
    if kind == "rekey":
        return RunRekeyed(RUN, "1" * 64, "op", "cred", at)
    if kind == "delete":
        return RunDeleted(RUN, "deleted", at)
    return RunRegistered(RUN, "0" * 64, at if pick else None, at, "operator", "op", "cred")


@settings(max_examples=120, deadline=None)
@given(
    opening=st.booleans(),
    batches=st.lists(STEPS, min_size=1, max_size=4),
    limits=st.lists(st.integers(1, 8), min_size=1, max_size=3),
    every=st.integers(1, 5),
)
def test_a_kept_fold_answers_as_a_whole_fold(opening, batches, limits, every):
    # Each batch is appended, then every page of the run (each limit, a cursor at every seq,
    # and the pages a client gets following the cursors) is asked of one RunDetails and of a
    # fold of the whole stream: the kept fold catches up and pages backwards between marks
    # `every` versions apart, so a slip in either shows here.
    with open_log(":memory:", clock=ManualClock(T0)) as log:
        details = RunDetails(log, every=every)
        if opening:
            log.append(STREAM, [_event("register", 1, 0)], expect=ANY)
        n = 0
        for batch in batches:
            if batch:
                log.append(
                    STREAM, [_event(kind, pick, n + i) for i, (kind, pick) in enumerate(batch)], expect=ANY
                )
                n += len(batch)
            seqs = [r.seq for r in log.read(STREAM)]
            for limit in limits:
                for before in [None, *seqs, seqs[-1] + 1 if seqs else 1]:
                    assert details.page(RUN, limit, before) == fold_run_page(log.read(STREAM), limit, before)
                before = None
                while True:
                    page = details.page(RUN, limit, before)
                    assert page == fold_run_page(log.read(STREAM), limit, before)
                    if page is None or page.next_before is None:
                        break
                    before = page.next_before


def _long_run(log, stream: str, reports: int) -> None:
    run_id = stream.removeprefix("run-")
    log.append(stream, [RunRegistered(run_id, "0" * 64, T0, T0)], expect=ANY)
    batch: list[Event] = []
    for n in range(reports):
        batch.append(RunReported(run_id, "working", f'{{"note": "step {n}"}}', T0))
        if len(batch) >= 500:
            log.append(stream, batch, expect=ANY)
            batch = []
    if batch:
        log.append(stream, batch, expect=ANY)


def _cost(details: RunDetails, run_id: str, limit: int, before: int | None = None) -> int:
    reads = details.reads
    details.page(run_id, limit, before)
    return details.reads - reads


def test_a_page_costs_the_page_not_the_run(log):
    # Two runs, one ten times the other's length: once each has been folded, its newest page,
    # a page at a cursor deep in it, and a page after new records cost the same few records.
    # (Were a request to fold the stream again, the long run's would cost 10x the short's.)
    details = RunDetails(log)
    costs = {}
    for name, reports in (("short", 1_000), ("long", 10_000)):
        stream = f"run-{name}"
        _long_run(log, stream, reports)
        assert _cost(details, name, 20) >= reports  # the first request folds the run once
        seqs = [r.seq for r in log.read(stream)]
        newest = _cost(details, name, 20)
        deep = _cost(details, name, 20, seqs[len(seqs) // 3])
        log.append(stream, [RunReported(name, "working", None, T0)] * 3, expect=ANY)
        after = _cost(details, name, 20)
        costs[name] = (newest, deep, after)
        assert details.page(name, 20) == fold_run_page(log.read(stream), 20)
    assert costs["long"] == costs["short"]
    newest, deep, after = costs["long"]
    step = 20 + 16  # the first stretch read backwards: the page and a little more
    assert newest <= 1 + step  # the record the fold stopped at, checked, and the page
    assert deep <= 1 + 64 + 3 * step  # and the records from the cursor up to the next mark
    assert after <= 1 + 3 + step


def test_older_records_beyond_a_long_quiet_stretch_are_told_without_reading_it(log):
    # A page reaching back to a stretch of heartbeats only: whether a report lies beyond it is
    # told by a mark, not by reading the stretch.
    stream = "run-quiet"
    log.append(stream, [RunRegistered("quiet", "0" * 64, T0, T0)], expect=ANY)
    log.append(stream, [RunReported("quiet", "working", None, T0)] * 5, expect=ANY)
    log.append(stream, [RunHeartbeat("quiet", T0)] * 5_000, expect=ANY)
    log.append(stream, [RunReported("quiet", "working", None, T0)] * 10, expect=ANY)
    details = RunDetails(log)
    details.page("quiet", 10)
    assert _cost(details, "quiet", 10) <= 2 * (10 + 16) + 64
    page = details.page("quiet", 10)
    assert page is not None
    assert page.next_before is not None
    assert page == fold_run_page(log.read(stream), 10)


def test_a_history_put_back_is_folded_afresh(tmp_path):
    # The kept fold stopped at a record that is no longer there with its hash (the database
    # was put back from another copy): the run is folded again from its first record.
    path = str(tmp_path / "a.db")
    with open_log(path, clock=ManualClock(T0)) as log:
        _long_run(log, STREAM, 10)
        details = RunDetails(log)
        assert details.page(RUN, 5) == fold_run_page(log.read(STREAM), 5)
    other = str(tmp_path / "b.db")
    with open_log(other, clock=ManualClock(T0 + timedelta(days=1))) as log:
        _long_run(log, STREAM, 12)
    with open_log(other) as log:
        details.log = log
        assert details.page(RUN, 5) == fold_run_page(log.read(STREAM), 5)


def test_folds_kept_are_bounded_by_runs_and_bytes(log):
    details = RunDetails(log, runs=3, budget=10_000)
    for n in range(6):
        _long_run(log, f"run-r{n}", 10)
        details.page(f"r{n}", 5)
    assert len(details._runs) == 3
    stream = "run-queued"
    log.append(stream, [RunRegistered("queued", "0" * 64, T0, T0)], expect=ANY)
    big = "x" * 20_000
    log.append(stream, [ControlQueued("queued", "c1", "steer", "", f'"{big}"', T0, "op")], expect=ANY)
    page = details.page("queued", 5)
    assert page is not None
    assert len(page.view.control_queue) == 1
    assert "run-queued" not in details._runs  # heavier than the budget: answered, not kept
    assert details._held <= 10_000


def test_a_bad_limit_is_refused(log):
    with pytest.raises(ValueError, match="limit"):
        RunDetails(log).page(RUN, 0)
