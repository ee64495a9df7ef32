"""A broker run's timeline a page at a time: per-run checkpoints give what a plain fold gives."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eventlog import ANY, ManualClock, RunCheckpointRow, open_log, snapshot_store
from eventlog.events import (
    AskAnswered,
    AskReplyTaken,
    AskSent,
    ControlQueued,
    PermissionDecided,
    PermissionRequested,
    RunFinished,
    RunRegistered,
    RunReported,
)
from projections import Views
from projections.broker_timeline import broker_timeline
from projections.run_pages import RunPages

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "long"
STREAM = f"run-{RUN}"

# One step of a run: what the agent or the operator did. Requests and asks name a small
# pool of ids, so that decisions and endings find (or miss) what they answer, and a request
# id is filed again now and then.
KINDS = ["report", "report", "request", "decide", "control", "ask", "answer", "take", "finish", "register"]
STEPS = st.tuples(st.sampled_from(KINDS), st.integers(0, 2))


def _event(kind: str, pick: int, n: int, at: datetime) -> object:
    rid = f"r{pick}"
    mid = f"m{pick}"
    if kind == "report":
        return RunReported(RUN, "working", f'{{"note": "step {n}"}}', at)
    if kind == "request":
        return PermissionRequested(RUN, rid, "bash", f"run {n}", "", f"ap-{n}", at)
    if kind == "decide":
        return PermissionDecided(RUN, rid, "allow" if n % 2 else "deny", f"ap-{n}", "op", at)
    if kind == "control":
        return ControlQueued(RUN, f"c{n}", "steer", "", '{"message": "go"}', at)
    if kind == "ask":
        return AskSent(RUN, mid, "peer", '{"text": "?"}', at + timedelta(hours=1), at)
    if kind == "answer":
        return AskAnswered(RUN, mid, "peer", '{"text": "!"}', at)
    if kind == "take":
        return AskReplyTaken(RUN, mid, at)
    if kind == "finish":
        return RunFinished(RUN, "done", f"finished {n}", (), None, at)
    return RunRegistered(RUN, "0" * 64, at, at)


def _fill(path: str, steps: list[tuple[str, int]], key: bytes | None = None) -> list[int]:
    """A log with the run (its steps, between other streams' records); the run's seqs."""
    clock = ManualClock(T0)
    log = open_log(path, clock=clock, hmac_key=key) if key else open_log(path, clock=clock)
    seqs = []
    seqs.append(log.append(STREAM, [RunRegistered(RUN, "0" * 64, T0, T0)], expect=ANY)[0].seq)
    for n, (kind, pick) in enumerate(steps):
        clock.set(T0 + timedelta(seconds=n + 1))
        seqs.append(log.append(STREAM, [_event(kind, pick, n, clock.now())], expect=ANY)[0].seq)
        if n % 7 == 0:
            log.append("other-x", [RunReported("x", "working", None, clock.now())], expect=ANY)
    log.close()
    return seqs


def _plain(log, seq: int) -> list[dict]:
    records = itertools.takewhile(lambda r: r.seq <= seq, log.read(STREAM))
    return [e.to_dict() for e in broker_timeline(records)]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEPS, min_size=1, max_size=120), picks=st.lists(st.integers(0, 10**6), max_size=6),
       limit=st.integers(1, 12))  # fmt: skip
# a permission decided pages after it was asked for: its page must show the decision
@example(steps=[("request", 0)] + [("report", 0)] * 9 + [("decide", 0)] * 5, picks=[], limit=3)
def test_a_page_from_checkpoints_is_the_plain_fold_cut_to_the_page(tmp_path_factory, steps, picks, limit):
    path = str(tmp_path_factory.mktemp("pages") / "run.db")
    seqs = _fill(path, steps)
    log = open_log(path)
    try:
        pages = RunPages(log, snapshot_store(log), Views(log).unreadable, every=4)
        head = log.head().seq
        for pick in [head, *picks]:
            at = pick % (head + 1)
            whole = _plain(log, at)
            page = pages.page(RUN, at, None, limit)
            if at < seqs[0]:
                assert page is None
                continue
            assert page is not None
            assert page.total == len(whole)
            # every page back to the first, as the console pages through it
            got: list[dict] = []
            before = None
            while True:
                page = pages.page(RUN, at, before, limit)
                got = [e.to_dict() for e in page.entries] + got
                if page.before is None:
                    break
                before = page.before
            assert got == whole
        # a fresh reader trusts nothing it has not checked, and finds the same from stored checkpoints
        fresh = RunPages(log, snapshot_store(log), Views(log).unreadable, every=4)
        assert [e.to_dict() for e in fresh.page(RUN, head, None, 10**3).entries] == _plain(log, head)[-1000:]
    finally:
        log.close()


def _long_log(tmp_path, n: int, key: bytes | None = None) -> str:
    path = str(tmp_path / "long.db")
    _fill(path, [("report", 0)] * n, key)
    return path


def test_a_page_costs_the_page_and_the_distance_from_a_checkpoint_not_the_run(tmp_path):
    path = _long_log(tmp_path, 5_000)
    log = open_log(path)
    try:
        pages = RunPages(log, snapshot_store(log), Views(log).unreadable, every=64)
        pages.page(RUN)  # the first read makes the checkpoints
        for at, before in ((None, None), (log.head().seq // 2, None), (None, 100), (None, 2_500)):
            pages.reads = 0
            page = pages.page(RUN, at, before, 50)
            assert page is not None
            assert len(page.entries) == 50
            # the run has 5,000 records: a page reads at most two checkpoint intervals besides itself
            assert pages.reads <= 50 + 2 * 64, (at, before, pages.reads)
    finally:
        log.close()


def test_stale_and_forged_checkpoints_are_ignored(tmp_path):
    key = b"k" * 32
    path = _long_log(tmp_path, 600, key)
    log = open_log(path, hmac_key=key)
    try:
        store = snapshot_store(log)
        RunPages(log, store, Views(log).unreadable, every=64).page(RUN)
        rows = store.run_checkpoints(STREAM)
        assert len(rows) == 600 // 64
        # forged: the status and counts changed, the chain position kept (its MAC no longer seals it)
        forged = rows[-1]
        store.put_run_checkpoints([RunCheckpointRow(forged.stream, forged.version, forged.seq, forged.hash,
                                                    b'["forged", 0, 0, []]', forged.mac)])  # fmt: skip
        # stale: taken of another history (its chain hash is not the log's)
        stale = rows[-2]
        store.put_run_checkpoints([RunCheckpointRow(stale.stream, stale.version, stale.seq, "0" * 64,
                                                    stale.data, stale.mac)])  # fmt: skip
        fresh = RunPages(log, store, Views(log).unreadable, every=64)
        page = fresh.page(RUN, None, None, 10)
        assert page is not None
        assert page.status == "working"
        assert page.total == 601
        assert [e.to_dict() for e in page.entries] == _plain(log, log.head().seq)[-10:]
    finally:
        log.close()


def test_a_bad_cursor_is_refused(tmp_path):
    path = _long_log(tmp_path, 10)
    log = open_log(path)
    try:
        pages = RunPages(log, snapshot_store(log), Views(log).unreadable)
        for bad in (-1, 12):
            with pytest.raises(ValueError, match="cursor"):
                pages.page(RUN, None, bad, 5)
        last = pages.page(RUN, None, 3, 5)
        assert last is not None
        assert last.start == 0
        assert last.before is None
        assert len(last.entries) == 3
    finally:
        log.close()
