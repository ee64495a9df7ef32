"""A controller run's timeline a page at a time: per-run checkpoints give what the plain fold gives.

A controller stream holds its session's runs one after another (each run's harness events
while it is the newest). Following the cursor from the newest page back to the first gives
the run's whole timeline as of k, entry for entry; a page costs the page and the distance
from a checkpoint, not the stream.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from eventlog import ANY, ManualClock, NewEvent, RunCheckpointRow, open_log, snapshot_store
from eventlog.events import AgentRunStarted, AgentRunStatusChanged, HarnessEventRecorded
from projections import RunMoment, TimelineView, Views
from projections.agent_pages import AgentPages
from projections.timeline import render

T0 = datetime(2026, 1, 1, tzinfo=UTC)
STREAM = "controller-c1"
SESSION = "s1"

# What a harness publishes; ids name a small pool so that completions, messages and deltas
# find (or miss) what they finish.
KINDS = ["delta", "delta", "message", "user", "start", "complete", "error", "warning", "status", "run"]
STEPS = st.tuples(st.sampled_from(KINDS), st.integers(0, 2))


def _data(kind: str, pick: int, n: int) -> tuple[str, dict]:
    if kind == "delta":
        return "assistant.delta", {"message_id": f"m{pick}", "delta": f"d{n} "}
    if kind == "message":
        return "assistant.message", {"message_id": f"m{pick}", "content": f"said {n}"}
    if kind == "user":
        return "user.message", {"content": f"asked {n}", "delivery": "queued" if pick else ""}
    if kind == "start":
        return "tool.start", {"tool_call_id": f"t{pick}", "tool_name": "bash", "arguments": {"n": n}}
    if kind == "complete":
        return "tool.complete", {"tool_call_id": f"t{pick}", "result": n}
    if kind == "error":
        return "session.error", {"message": f"failed {n}"}
    return "warning", {"message": f"careful {n}"}


def _fill(path: str, steps: list[tuple[str, int]], key: bytes | None = None) -> dict[str, list[int]]:
    """A controller stream of runs (each `run` step starts the next), between other records;
    each run's seqs."""
    clock = ManualClock(T0)
    log = open_log(path, clock=clock, hmac_key=key) if key else open_log(path, clock=clock)
    runs: dict[str, list[int]] = {}
    run = ""

    def start(n: int) -> None:
        nonlocal run
        run = f"run-{len(runs)}"
        runs[run] = []
        record(AgentRunStarted(run, "c1", SESSION, f"turn {n}", "go", clock.now()))

    def record(event: object) -> None:
        runs[run].append(log.append(STREAM, [event], expect=ANY)[0].seq)

    start(0)
    for n, (kind, pick) in enumerate(steps):
        clock.set(T0 + timedelta(seconds=n + 1))
        if kind == "run":
            record(AgentRunStatusChanged(run, "succeeded", "", clock.now()))
            start(n)
        elif kind == "status":
            record(AgentRunStatusChanged(run, ["running", "aborting"][pick % 2], "", clock.now()))
        else:
            type_, data = _data(kind, pick, n)
            record(HarnessEventRecorded(run, type_, f"e{n}", data, clock.now()))
        if n % 5 == 0:  # the log holds other streams' records between the run's
            log.append("note-x", [NewEvent("Noted", {"n": n})], expect=ANY)
    log.close()
    return runs


def _all_pages(views: Views, run_id: str, k: int, limit: int) -> tuple[list[dict], object]:
    """Every entry of the run as of k, following the cursor from the newest page back."""
    page = views.run_page(run_id, k, None, limit)
    assert page is not None
    pages = [page]
    while pages[-1].before is not None:
        pages.append(views.run_page(run_id, k, pages[-1].before, limit))
    entries = [e.to_dict() for p in reversed(pages) for e in p.entries]
    return entries, page


def _plain_status(log, run_id: str, k: int) -> str:
    status = ""
    for r in log.read(STREAM):
        if r.seq > k:
            break
        if r.type == "AgentRunStatusChanged" and r.data["run_id"] == run_id:
            status = r.data["status"]
    return status


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEPS, min_size=1, max_size=150), picks=st.lists(st.integers(0, 10**6), min_size=1,
       max_size=4), limit=st.integers(1, 9))  # fmt: skip
# a message streamed across checkpoints: the deltas after one go on in the slot made before it
@example(steps=[("delta", 0)] * 3 + [("user", 0)] * 10 + [("delta", 0)] * 3, picks=[0], limit=3)
# a tool call, and a streamed message, on an early page: one ended long after the page was made
@example(steps=[("start", 1)] + [("user", 0)] * 20 + [("complete", 1)], picks=[0], limit=3)
@example(steps=[("start", 1), ("delta", 2), ("complete", 1), *[("user", 0)] * 20, ("message", 2)], picks=[0],
         limit=3)  # fmt: skip
# a tool call completed in a later run of the session, after the run that started it
@example(steps=[("start", 1)] + [("user", 0)] * 9 + [("run", 0)] + [("complete", 1)] * 9, picks=[0], limit=2)
def test_pages_from_checkpoints_are_the_plain_fold(tmp_path_factory, steps, picks, limit):
    path = str(tmp_path_factory.mktemp("agent") / "log.db")
    runs = _fill(path, steps)
    log = open_log(path)
    try:
        views = Views(log)
        views.agent_pages.every = 8  # checkpoints every 8 versions: many of them in a short stream
        for run_id in runs:  # the first reads make the checkpoints; the pages below start from them
            views.run_page(run_id)
        plain = Views(log, snapshots=None)
        for pick in picks:
            run_id = sorted(runs)[pick % len(runs)]
            seqs = runs[run_id]
            for k in (seqs[pick % len(seqs)], seqs[-1], log.head().seq):
                entries, first = _all_pages(views, run_id, k, limit)
                assert entries == [e.to_dict() for e in plain.timeline(run_id, at=k)], (run_id, k)
                assert first.status == _plain_status(log, run_id, k)
    finally:
        log.close()


def test_a_page_costs_the_page_and_the_distance_from_a_checkpoint_not_the_stream(tmp_path):
    path = str(tmp_path / "long.db")
    # One long run: a message streamed in deltas, then tool calls, messages and prompts.
    steps = [("delta", 0)] * 10 + [("message", 0), ("start", 1), ("complete", 1), ("user", 0)] * 740
    runs = _fill(path, steps)
    log = open_log(path)
    try:
        views = Views(log)
        pages = AgentPages(log, snapshot_store(log), views.unreadable, every=64)
        row = views.agent_run("run-0")
        assert row is not None
        pages.page(row)  # the first read makes the checkpoints
        seqs = runs["run-0"]
        # The newest page live and as of the middle: a fold from the checkpoint below the page
        # (40 entries are made by about 53 records here; the checkpoint may be 64 before them).
        for at in (None, seqs[1_500]):
            pages.reads = 0
            page = pages.page(row, at, None, 40)
            assert page is not None
            assert len(page.entries) == 40
            assert pages.reads <= 64 + 60 + 64, (at, pages.reads)
        # An early page as of a later seq folds from the checkpoint below the page on to that
        # seq (a later record may still complete a tool call shown there): the distance between
        # them, and the first fold's checkpoint interval, not the stream.
        pages.reads = 0
        page = pages.page(row, seqs[300], 150, 40)
        assert page is not None
        assert len(page.entries) == 40
        assert pages.reads <= 300 + 64, pages.reads
        assert len(seqs) > 2_900  # what a plain fold of the run reads
    finally:
        log.close()


def test_stale_and_forged_checkpoints_are_ignored(tmp_path):
    key = b"k" * 32
    path = str(tmp_path / "keyed.db")
    _fill(path, [("user", 0), ("start", 0), ("complete", 0)] * 100, key)
    log = open_log(path, hmac_key=key)
    try:
        store = snapshot_store(log)
        views = Views(log)
        row = views.agent_run("run-0")
        assert row is not None
        AgentPages(log, store, views.unreadable, every=64).page(row)
        rows = store.run_checkpoints(STREAM)
        assert len(rows) == 301 // 64
        forged = rows[-1]  # another count of slots, the chain position kept: its MAC no longer seals it
        data = b'[["s1", 1, 0, [], "run-0", "forged"]]'
        store.put_run_checkpoints([RunCheckpointRow(STREAM, forged.version, forged.seq, forged.hash, data,
                                                    forged.mac)])  # fmt: skip
        stale = rows[-2]  # taken of another history: its chain hash is not the log's
        store.put_run_checkpoints([RunCheckpointRow(stale.stream, stale.version, stale.seq, "0" * 64,
                                                    stale.data, stale.mac)])  # fmt: skip
        page = AgentPages(log, store, views.unreadable, every=64).page(row, None, None, 10)
        assert page is not None
        assert page.status == ""
        plain = [e.to_dict() for e in Views(log).timeline("run-0")]
        assert [e.to_dict() for e in page.entries] == plain[-10:]
    finally:
        log.close()


def test_a_bad_cursor_is_refused(tmp_path):
    path = str(tmp_path / "short.db")
    _fill(path, [("user", 0)] * 5)
    log = open_log(path)
    try:
        views = Views(log)
        for bad in (-1, 7):
            with pytest.raises(ValueError, match="cursor"):
                views.run_page("run-0", None, bad, 3)
        with pytest.raises(ValueError, match="limit"):
            views.run_page("run-0", None, None, 0)
    finally:
        log.close()


def _moments_by_rendering(log, run_id: str) -> list[dict]:
    """The run after each of its events, the timeline rendered anew at each (the plain way)."""
    view = TimelineView()
    state = view.initial()
    status, out = "", []
    for r in log.read(STREAM):
        if r.type in view.types:
            view.apply(state, r)
        if r.data.get("run_id") != run_id:
            continue
        status = r.data["status"] if r.type == "AgentRunStatusChanged" else status
        out.append(RunMoment(r.seq, r.recorded_at, r.type, status, tuple(render(state, run_id))).to_dict())
    return out


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(steps=st.lists(STEPS, min_size=1, max_size=120))
@example(steps=[("delta", 0)] * 3 + [("message", 0), ("start", 1), ("run", 0), ("complete", 1), ("delta", 0)])
def test_each_moment_is_the_timeline_rendered_anew(tmp_path_factory, steps):
    path = str(tmp_path_factory.mktemp("moments") / "log.db")
    runs = _fill(path, steps)
    log = open_log(path)
    try:
        views = Views(log)
        for run_id in runs:
            got = [m.to_dict() for m in views.timeline_at_each_event(run_id)]
            assert got == _moments_by_rendering(log, run_id), run_id
    finally:
        log.close()
