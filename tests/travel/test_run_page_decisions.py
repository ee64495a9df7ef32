"""A page showing a permission shows its decision as of k, however far after the page it came,
and finds it without folding the run between: checkpoints name the permission requests their
stretch records or decides, and the fold reads only the stretches naming one the page shows."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime, timedelta
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventlog import ANY, Event, ManualClock, RunCheckpointRow, open_log, snapshot_store
from eventlog.events import PermissionDecided, PermissionRequested, RunRegistered, RunReported
from projections import Views
from projections.broker_timeline import broker_timeline
from projections.run_pages import RunCheckpoint, RunPages

T0 = datetime(2026, 1, 1, tzinfo=UTC)
RUN = "gated"
STREAM = f"run-{RUN}"
KEY = b"k" * 32

# A run mostly reporting, now and then asking for a permission or being answered: each step is
# a kind, a request id from a small pool (so requests are filed again and decided twice), and
# how many reports follow it.
KINDS = st.sampled_from(["request", "decide", "report", "register"])
STEPS = st.lists(st.tuples(KINDS, st.integers(0, 3), st.integers(0, 20)), min_size=1, max_size=25)


def _events(steps: list[tuple[str, int, int]]) -> list[Event]:
    events: list[Event] = [RunRegistered(RUN, "0" * 64, T0, T0)]
    for n, (kind, pick, reports) in enumerate(steps):
        at = T0 + timedelta(seconds=n)
        if kind == "request":
            events.append(PermissionRequested(RUN, f"r{pick}", "bash", f"ask {n}", "", f"ap-{n}", at))
        elif kind == "decide":
            events.append(
                PermissionDecided(RUN, f"r{pick}", "allow" if n % 2 else "deny", f"ap-{n}", "op", at)
            )
        elif kind == "register":
            events.append(RunRegistered(RUN, "0" * 64, at, at))
        events += [RunReported(RUN, "working", f'{{"n": {n}}}', at)] * reports
    return events


def _plain(log, seq: int) -> list[dict[str, Any]]:
    return [
        e.to_dict() for e in broker_timeline(itertools.takewhile(lambda r: r.seq <= seq, log.read(STREAM)))
    ]


def _every_page(pages: RunPages, at: int, limit: int) -> list[dict[str, Any]]:
    """The run's whole timeline as of `at`, a page at a time from the newest back."""
    got: list[dict[str, Any]] = []
    before = None
    while True:
        page = pages.page(RUN, at, before, limit)
        assert page is not None
        got = [e.to_dict() for e in page.entries] + got
        if page.before is None:
            return got
        before = page.before


def _as_stored_before(store, stream: str) -> None:
    """Rewrite the stream's checkpoints as a version without stretch sums stored them."""
    rows = []
    for row in store.run_checkpoints(stream):
        point = RunCheckpoint.of(row)
        assert point is not None
        old = RunCheckpoint(
            point.version, point.seq, point.hash, point.status, point.made, point.base, point.asks
        )
        rows.append(RunCheckpointRow(stream, row.version, row.seq, row.hash, old.data(), ""))
    store.put_run_checkpoints(rows)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    steps=STEPS,
    limit=st.integers(1, 6),
    keyed=st.booleans(),
    picks=st.lists(st.integers(0, 10**6), max_size=3),
)
def test_every_page_shows_each_decision_as_a_plain_fold_does(tmp_path_factory, steps, limit, keyed, picks):
    path = str(tmp_path_factory.mktemp("decisions") / "run.db")
    key = KEY if keyed else None
    with open_log(path, clock=ManualClock(T0), hmac_key=key) as log:
        log.append(STREAM, _events(steps), expect=ANY)
        head = log.head().seq
        store = snapshot_store(log)
        warm = RunPages(log, store, Views(log).unreadable, every=4)
        warm.page(RUN)  # folds the run once: every checkpoint made, and trusted, here
        cold = RunPages(log, store, Views(log).unreadable, every=4)  # trusts none it has not checked
        for pick in [head, *picks]:
            at = 1 + pick % head
            whole = _plain(log, at)
            assert _every_page(warm, at, limit) == whole
            assert _every_page(cold, at, limit) == whole
        _as_stored_before(store, STREAM)  # checkpoints without sums: never skipped, still right
        older = RunPages(log, store, Views(log).unreadable, every=4)
        assert _every_page(older, head, limit) == _plain(log, head)


def _gated_run(log, reports: int) -> None:
    """A permission asked and decided at once, then `reports` reports."""
    log.append(STREAM, [RunRegistered(RUN, "0" * 64, T0, T0)], expect=ANY)
    log.append(STREAM, [RunReported(RUN, "working", None, T0)] * 10, expect=ANY)
    log.append(STREAM, [PermissionRequested(RUN, "r1", "bash", "deploy", "", "ap-1", T0),
                        PermissionDecided(RUN, "r1", "allow", "ap-1", "op", T0)], expect=ANY)  # fmt: skip
    for lo in range(0, reports, 5_000):
        log.append(STREAM, [RunReported(RUN, "working", None, T0)] * min(5_000, reports - lo), expect=ANY)


def _cost(pages: RunPages, at: int | None, before: int | None, limit: int) -> tuple[int, list[Any]]:
    reads = pages.reads
    page = pages.page(RUN, at, before, limit)
    assert page is not None
    return pages.reads - reads, [e.to_dict() for e in page.entries]


def test_a_page_showing_a_permission_costs_the_page_not_the_run(tmp_path):
    # The page holding the permission (the oldest one, as of now or of a moment after it) used
    # to be folded on to k whatever came between: 10x the reports, 10x the records read.
    costs = {}
    for reports in (1_000, 10_000):
        path = str(tmp_path / f"run-{reports}.db")
        with open_log(path, clock=ManualClock(T0)) as log:
            _gated_run(log, reports)
            pages = RunPages(log, snapshot_store(log), Views(log).unreadable)
            pages.page(RUN)  # the first read makes the checkpoints
            total = reports + 13
            oldest = _cost(pages, None, 20, 20)
            assert oldest[1][11]["status"] == "allow"
            assert oldest[1] == _plain(log, log.head().seq)[:20]
            costs[reports] = oldest[0]
    assert costs[10_000] <= costs[1_000] + 2 * 64
    assert costs[10_000] <= 3 * 64 + 20, costs
    assert total > 10_000


def test_a_new_reader_checks_the_stretches_it_skips_once(tmp_path):
    # A reader of checkpoints another process stored checks each one it skips past (one
    # record each) the first time, then trusts it.
    path = str(tmp_path / "run.db")
    with open_log(path, clock=ManualClock(T0), hmac_key=KEY) as log:
        _gated_run(log, 5_000)
        RunPages(log, snapshot_store(log), Views(log).unreadable).page(RUN)
        fresh = RunPages(log, snapshot_store(log), Views(log).unreadable)
        first, entries = _cost(fresh, None, 20, 20)
        assert entries[11]["status"] == "allow"
        assert first <= 3 * 64 + 20 + 5_000 // 64 + 1
        again, _ = _cost(fresh, None, 20, 20)
        assert again <= 3 * 64 + 20


def test_a_forged_stretch_sum_is_not_skipped(tmp_path):
    # On a keyed log a checkpoint whose sum was edited to hide a decision no longer carries its
    # MAC: the stretch is read, and the decision shown.
    path = str(tmp_path / "run.db")
    with open_log(path, clock=ManualClock(T0), hmac_key=KEY) as log:
        log.append(STREAM, [RunRegistered(RUN, "0" * 64, T0, T0)], expect=ANY)
        log.append(STREAM, [PermissionRequested(RUN, "r1", "bash", "deploy", "", "ap-1", T0)], expect=ANY)
        log.append(STREAM, [RunReported(RUN, "working", None, T0)] * 200, expect=ANY)
        log.append(STREAM, [PermissionDecided(RUN, "r1", "deny", "ap-1", "op", T0)], expect=ANY)
        log.append(STREAM, [RunReported(RUN, "working", None, T0)] * 200, expect=ANY)
        store = snapshot_store(log)
        RunPages(log, store, Views(log).unreadable).page(RUN)
        rows = []
        for row in store.run_checkpoints(STREAM):
            point = RunCheckpoint.of(row)
            assert point is not None
            hidden = RunCheckpoint(point.version, point.seq, point.hash, point.status, point.made, point.base,
                                   point.asks, point.since, ())  # fmt: skip
            rows.append(RunCheckpointRow(STREAM, row.version, row.seq, row.hash, hidden.data(), row.mac))
        store.put_run_checkpoints(rows)
        fresh = RunPages(log, store, Views(log).unreadable)
        page = fresh.page(RUN, None, 5, 5)
        assert page is not None
        assert page.entries[1].status == "deny"
