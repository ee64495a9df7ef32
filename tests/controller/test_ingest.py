"""Harness events and run completion, and the persisting gate (SEED-BEHAVIOUR §2.2 Event ingestion)."""

from __future__ import annotations

import pytest

from actors import ControllerBusyError, HarnessEvent, HarnessEventError, RunNotActiveError, System
from eventlog.events import AgentRunStatusChanged, HarnessEventRecorded

from .helpers import recorded

STALE = r"^publishing harness event: run_id is not the active run$"


def harness_events(system: System) -> list[HarnessEventRecorded]:
    return recorded(system, HarnessEventRecorded)


def test_an_event_before_any_run_is_refused(ctrl, harness):
    with pytest.raises(HarnessEventError, match=STALE):
        harness.emit("assistant.message", "no-run", content="hi")


@pytest.mark.parametrize("run_id", ["", "other-run"])
def test_an_event_for_another_run_is_refused_and_not_recorded(ctrl, harness, system, run_id):
    current = ctrl.send("hello")
    with pytest.raises(HarnessEventError, match=STALE):
        harness.emit("session.idle", run_id)
    assert ctrl.run().status == "running"
    assert harness_events(system) == []
    harness.emit("assistant.message", current, content="ok")
    assert [e.type for e in harness_events(system)] == ["assistant.message"]


def test_an_event_for_a_finished_earlier_run_is_refused(ctrl, harness):
    old = ctrl.send("first")
    harness.emit("session.idle", old)
    ctrl.send("second")
    with pytest.raises(HarnessEventError, match=STALE):
        harness.emit("assistant.message", old, content="late")
    assert ctrl.run().entries == ()


def test_event_ids_are_deduplicated_first_wins(ctrl, harness, system):
    run_id = ctrl.send("hello")
    harness.emit("assistant.message", run_id, id="m1", content="first")
    harness.emit("assistant.message", run_id, id="m1", content="second")
    harness.emit("session.idle", run_id, id="i1")
    harness.emit("session.idle", run_id, id="i1")
    assert [e.text for e in ctrl.run().entries] == ["first"]
    assert [e.event_id for e in harness_events(system)] == ["m1", "i1"]


def test_events_without_an_id_are_never_deduplicated(ctrl, harness):
    run_id = ctrl.send("hello")
    for _ in range(2):
        assert harness.publish is not None
        harness.publish(HarnessEvent("warning", run_id, "", {"message": "careful"}))
    assert [e.status for e in ctrl.run().entries] == ["warning", "warning"]


def test_session_idle_succeeds_a_running_run(ctrl, harness):
    seen = []
    ctrl.on_run_status = lambda run_id, status, at: seen.append((run_id, status))
    run_id = ctrl.send("hello")
    harness.emit("session.idle", run_id)
    run = ctrl.run()
    assert (run.status, run.can_abort) == ("succeeded", False)
    assert ctrl.status() == "idle"
    assert seen == [(run_id, "succeeded")]
    harness.emit("session.idle", run_id)  # a second idle changes nothing
    assert ctrl.run().status == "succeeded"
    assert seen == [(run_id, "succeeded")]


@pytest.mark.parametrize("type_", ["assistant.idle", "warning", "compaction", "truncation"])
def test_these_events_never_end_the_run(ctrl, harness, type_):
    run_id = ctrl.send("hello")
    harness.emit(type_, run_id, message="note")
    run = ctrl.run()
    assert (run.status, run.can_abort) == ("running", True)
    assert ctrl.status() == "running"


@pytest.mark.parametrize(
    ("type_", "data"), [("session.error", {"message": "boom"}), ("session.shutdown", {})]
)
def test_an_error_or_a_shutdown_fails_the_run(ctrl, harness, system, type_, data):
    seen = []
    ctrl.on_run_status = lambda run_id, status, at: seen.append((run_id, status, ctrl.status()))
    run_id = ctrl.send("hello")
    harness.emit(type_, run_id, **data)
    run = ctrl.run()
    assert (run.status, run.can_abort) == ("failed", False)
    assert ctrl.status() == "idle"
    assert seen == [(run_id, "failed", "persisting")]
    last = recorded(system, AgentRunStatusChanged)[-1]
    assert (last.status, last.reason) == ("failed", data.get("message", type_))


def test_an_error_after_the_run_ended_changes_nothing(ctrl, harness):
    run_id = ctrl.send("hello")
    harness.emit("session.idle", run_id)
    harness.emit("session.error", run_id, message="late")
    assert ctrl.run().status == "succeeded"
    assert ctrl.status() == "idle"


def test_on_run_status_is_called_while_persisting_and_sends_are_refused(ctrl, harness):
    run_id = ctrl.send("hello")
    during = []

    def on_status(rid, status, at):
        during.append((rid, status, ctrl.status()))
        with pytest.raises(ControllerBusyError):
            ctrl.send("too soon")
        with pytest.raises(RunNotActiveError):
            ctrl.send_to_session("session-1", run_id, "too soon")
        with pytest.raises(RunNotActiveError):
            ctrl.steer("session-1", run_id, "too soon")

    ctrl.on_run_status = on_status
    harness.emit("session.idle", run_id)
    assert during == [(run_id, "succeeded", "persisting")]
    assert ctrl.status() == "idle"
    assert len(harness.sends) == 1


def test_a_failing_on_run_status_still_leaves_persisting(ctrl, harness):
    run_id = ctrl.send("hello")

    def on_status(rid, status, at):
        raise RuntimeError("db down")

    ctrl.on_run_status = on_status
    with pytest.raises(RuntimeError, match="db down"):
        harness.emit("session.idle", run_id)
    assert ctrl.status() == "idle"
    assert ctrl.run().status == "succeeded"


def test_every_ingested_event_is_recorded_as_published(ctrl, harness, system, clock):
    run_id = ctrl.send("hello")
    harness.emit("tool.start", run_id, id="t", tool_call_id="c1", tool_name="ls", arguments={"path": "."})
    [event] = harness_events(system)
    assert (event.run_id, event.type, event.event_id, event.at) == (run_id, "tool.start", "t", clock.now())
    assert event.data == {"tool_call_id": "c1", "tool_name": "ls", "arguments": {"path": "."}}
