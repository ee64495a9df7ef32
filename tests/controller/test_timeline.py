"""The run timeline (SEED-BEHAVIOUR §2.2 Timeline entries), live and rebuilt from the log."""

from __future__ import annotations

import pytest

from actors import Controller, System
from eventlog import open_log
from projections import TimelineEntry, Views

COMPACTED = "Compacted the conversation to stay inside the model context window."
TRUNCATED = "Dropped earlier conversation to stay inside the model context window."


def only(ctrl: Controller) -> TimelineEntry:
    entries = ctrl.run().entries
    assert len(entries) == 1
    return entries[0]


@pytest.mark.parametrize(
    ("data", "status"),
    [
        ({"delivery": "steering"}, "steering"),
        ({"delivery": "queued"}, "queued"),
        ({"status": "queued"}, "queued"),
        ({"delivery": "idle"}, ""),
        ({}, ""),
    ],
)
def test_a_user_message(ctrl, harness, clock, data, status):
    run_id = ctrl.send("hello")
    harness.emit("user.message", run_id, id="u1", content="do it", **data)
    assert only(ctrl) == TimelineEntry("u1", "message", clock.now(), "user", "You", "do it", status=status)


def test_an_assistant_message(ctrl, harness, clock):
    run_id = ctrl.send("hello")
    harness.emit("assistant.message", run_id, id="a1", content="Sure.")
    assert only(ctrl) == TimelineEntry("a1", "message", clock.now(), "assistant", "Claw", "Sure.")


def test_deltas_accumulate_per_message_and_the_final_message_replaces_them(ctrl, harness, clock):
    run_id = ctrl.send("hello")
    at = clock.now()
    harness.emit("assistant.delta", run_id, message_id="m1", delta="Hel")
    harness.emit("assistant.delta", run_id, delta="Other ")
    harness.emit("assistant.delta", run_id, message_id="m1", delta="lo")
    harness.emit("assistant.delta", run_id, delta="stream")
    assert ctrl.run().entries == (
        TimelineEntry("stream-m1", "message", at, "assistant", "Claw", "Hello", status="streaming"),
        TimelineEntry(
            "stream-active", "message", at, "assistant", "Claw", "Other stream", status="streaming"
        ),
    )
    harness.emit("assistant.message", run_id, message_id="m1", content="Hello!")
    assert [(e.id, e.text, e.status) for e in ctrl.run().entries] == [
        ("stream-active", "Other stream", "streaming"),
        ("m1", "Hello!", ""),
    ]
    harness.emit("assistant.message", run_id, id="a2", content="Other stream, done.")
    assert [(e.id, e.text) for e in ctrl.run().entries] == [("m1", "Hello!"), ("a2", "Other stream, done.")]


def test_unfinished_streams_reset_at_the_next_run_but_messages_stay(ctrl, harness):
    first = ctrl.send("first")
    harness.emit("assistant.message", first, id="a1", content="kept")
    harness.emit("assistant.delta", first, message_id="m1", delta="half a thought")
    harness.emit("session.idle", first)
    second = ctrl.send("second")
    assert [e.text for e in ctrl.run().entries] == ["kept"]
    harness.emit("assistant.delta", second, message_id="m1", delta="new")
    assert [(e.id, e.text) for e in ctrl.run().entries] == [("a1", "kept"), ("stream-m1", "new")]


def test_a_tool_call_starts_running_and_completes(ctrl, harness, clock):
    run_id = ctrl.send("hello")
    start_at = clock.now()
    harness.emit(
        "tool.start", run_id, tool_call_id="c1", tool_name="grep", arguments={"pattern": "x", "args": [1, 2]}
    )
    assert only(ctrl) == TimelineEntry(
        "c1", "tool", start_at, name="grep", detail='{"args":[1,2],"pattern":"x"}', status="running"
    )
    clock.advance(1)
    harness.emit("tool.complete", run_id, tool_call_id="c1", output="3 matches")
    assert only(ctrl) == TimelineEntry(
        "c1",
        "tool",
        start_at,
        name="grep",
        detail='{"output":"3 matches","tool_call_id":"c1"}',
        status="complete",
    )


def test_a_tool_completion_with_an_error_fails_the_entry(ctrl, harness):
    run_id = ctrl.send("hello")
    harness.emit("tool.start", run_id, tool_call_id="c1", tool_name="rm", arguments={})
    harness.emit("tool.complete", run_id, tool_call_id="c1", error="permission denied")
    entry = only(ctrl)
    assert (entry.status, entry.detail) == ("failed", '{"error":"permission denied","tool_call_id":"c1"}')


def test_a_tool_start_without_arguments_shows_an_empty_object(ctrl, harness):
    run_id = ctrl.send("hello")
    harness.emit("tool.start", run_id, tool_call_id="c1", tool_name="date")
    assert only(ctrl).detail == "{}"


def test_a_completion_without_a_start_adds_nothing(ctrl, harness):
    run_id = ctrl.send("hello")
    harness.emit("tool.complete", run_id, tool_call_id="nowhere", output="x")
    harness.emit("tool.complete", run_id, output="no id at all")
    assert ctrl.run().entries == ()


def test_a_session_error(ctrl, harness, clock):
    run_id = ctrl.send("hello")
    harness.emit("session.error", run_id, id="e1", message="model overloaded")
    assert only(ctrl) == TimelineEntry(
        "e1", "error", clock.now(), name="Claw", text="model overloaded", status="failed"
    )


@pytest.mark.parametrize(
    ("data", "text"),
    [
        ({"reason": "out of memory"}, "The agent runtime stopped: out of memory"),
        ({}, "The agent runtime stopped."),
    ],
)
def test_a_runtime_shutdown(ctrl, harness, clock, data, text):
    run_id = ctrl.send("hello")
    harness.emit("session.shutdown", run_id, id="s1", **data)
    assert only(ctrl) == TimelineEntry("s1", "notice", clock.now(), text=text, status="stopped")


@pytest.mark.parametrize(
    ("type_", "text", "status"),
    [
        ("warning", "rate limited, retrying", "warning"),
        ("compaction", COMPACTED, "compacted"),
        ("truncation", TRUNCATED, "truncated"),
    ],
)
def test_notices(ctrl, harness, clock, type_, text, status):
    run_id = ctrl.send("hello")
    harness.emit(type_, run_id, id="n1", message="rate limited, retrying")
    assert only(ctrl) == TimelineEntry("n1", "notice", clock.now(), text=text, status=status)


def test_entries_are_ordered_by_time_and_stable(ctrl, harness, clock):
    run_id = ctrl.send("hello")
    harness.emit("tool.start", run_id, tool_call_id="c1", tool_name="ls")
    harness.emit("assistant.message", run_id, id="a1", content="same moment")
    clock.advance(2)
    harness.emit("assistant.message", run_id, id="a2", content="later")
    harness.emit("tool.complete", run_id, tool_call_id="c1")  # updates in place: keeps its start time
    assert [e.id for e in ctrl.run().entries] == ["c1", "a1", "a2"]


def test_events_that_render_nothing_add_no_entry(ctrl, harness):
    run_id = ctrl.send("hello")
    for type_ in ("assistant.idle", "session.started"):
        harness.emit(type_, run_id)
    assert ctrl.run().entries == ()


def test_the_timeline_rebuilt_from_the_log_equals_the_live_one(system, harness, db_path, clock):
    ctrl = system.controller(harness)
    ctrl.start()
    first = ctrl.send("first")
    harness.emit("user.message", first, content="first", delivery="idle")
    harness.emit("assistant.delta", first, message_id="m1", delta="Thin")
    harness.emit("assistant.delta", first, message_id="m1", delta="king")
    harness.emit("assistant.message", first, message_id="m1", content="Thinking done")
    clock.advance(1)
    harness.emit("tool.start", first, tool_call_id="c1", tool_name="ls", arguments={"path": "/tmp"})
    harness.emit("tool.complete", first, tool_call_id="c1", output="a b")
    harness.emit("warning", first, message="slow")
    harness.emit("assistant.delta", first, message_id="m2", delta="dangling")
    harness.emit("session.idle", first)
    clock.advance(1)
    second = ctrl.send("second")
    harness.emit("user.message", second, content="faster", delivery="steering")
    harness.emit("compaction", second)
    harness.emit("tool.start", second, tool_call_id="c2", tool_name="rm")
    harness.emit("tool.complete", second, tool_call_id="c2", error="denied")
    harness.emit("assistant.delta", second, delta="still typing")
    harness.emit("session.error", second, message="boom")
    live = {first: system.views.timeline(first), second: ctrl.run().entries}
    assert len(live[second]) == 9
    system.close()

    log = open_log(db_path)
    try:
        views = Views(log)
        for run_id, entries in live.items():
            assert tuple(views.timeline(run_id)) == tuple(entries)
    finally:
        log.close()
    with System.open(db_path, clock=clock, scheduler=False) as reopened:
        again = reopened.controller(harness)
        assert again.run().id == second
        assert again.run().entries == live[second]
