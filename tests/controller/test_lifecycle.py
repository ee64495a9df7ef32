"""Start, close, status and subscribe (SEED-BEHAVIOUR §2.2 Start, Close, Run/SessionID/Status/Subscribe)."""

from __future__ import annotations

import pytest

from actors import ApprovalCancelledError, ControllerError, HarnessEvent
from eventlog.events import ControllerStarted

from .helpers import WAIT, ManualHarness, ask_permission, in_thread, recorded, wait_pending


def test_before_start_the_controller_is_starting_with_no_session(system, harness):
    ctrl = system.controller(harness)
    assert ctrl.status() == "starting"
    assert ctrl.session_id() == ""
    assert ctrl.run().id == ""
    assert ctrl.run().status == ""


def test_start_sets_the_session_goes_idle_and_notifies(system, harness):
    ctrl = system.controller(harness)
    signal, _ = ctrl.subscribe()
    ctrl.start()
    assert ctrl.session_id() == "session-1"
    assert ctrl.status() == "idle"
    assert signal.pending()


def test_start_failure_stops_the_controller_and_says_why(system, harness):
    harness.start_error = RuntimeError("no binary")
    ctrl = system.controller(harness)
    with pytest.raises(ControllerError, match=r"^starting agent harness: no binary$") as info:
        ctrl.start()
    assert isinstance(info.value.__cause__, RuntimeError)
    assert ctrl.status() == "stopped"
    assert harness.closes == 1


def test_an_empty_session_id_is_a_start_failure(system):
    harness = ManualHarness(session_id="")
    ctrl = system.controller(harness)
    with pytest.raises(ControllerError, match="starting agent harness"):
        ctrl.start()
    assert ctrl.status() == "stopped"
    assert ctrl.session_id() == ""


def test_a_start_failure_reports_a_failing_close_too(system, harness):
    harness.start_error = RuntimeError("no binary")
    harness.close_error = RuntimeError("stuck")
    ctrl = system.controller(harness)
    with pytest.raises(ControllerError) as info:
        ctrl.start()
    message = str(info.value)
    assert "starting agent harness: no binary" in message
    assert "closing rejected agent harness: stuck" in message
    assert ctrl.status() == "stopped"


def test_close_is_safe_on_a_never_started_controller(system, harness):
    ctrl = system.controller(harness)
    ctrl.close()
    assert ctrl.status() == "stopped"
    assert harness.closes == 1


def test_close_stops_and_later_events_are_ignored(ctrl, harness):
    run_id = ctrl.send("hello")
    harness.emit("assistant.message", run_id, content="before")
    before = ctrl.run()
    ctrl.close()
    assert ctrl.status() == "stopped"
    assert harness.closes == 1
    assert harness.emit("assistant.message", run_id, content="late") is None
    assert harness.emit("session.idle", run_id) is None
    assert ctrl.status() == "stopped"
    assert ctrl.run().entries == before.entries
    assert ctrl.run().status == "running"  # the run itself is not ended by close


def test_close_ends_waiting_permission_requests_with_no_pending_approval(system, ctrl, harness):
    run_id = ctrl.send("hello")
    waiting = in_thread(
        harness.emit, "permission.request", run_id, title="Run: ls", risk="high", payload="ls"
    )
    [approval] = wait_pending(ctrl)
    ctrl.close()
    with pytest.raises(ApprovalCancelledError):
        waiting.result(WAIT)
    assert ctrl.approval_queue().pending() == []
    assert system.approvals.pending() == []
    row = system.views.approval(approval.id)
    assert row is not None
    assert (row.decision, row.actor) == ("expired", "runtime")


def test_close_is_recorded_and_a_second_close_records_nothing_more(system, ctrl):
    ctrl.close()
    ctrl.close()
    types = [r.type for r in system.log.read("controller-default")]
    assert types.count("ControllerClosed") == 1


def test_subscribe_coalesces_changes_into_one_payload_free_signal(ctrl, harness):
    signal, unsubscribe = ctrl.subscribe()
    run_id = ctrl.send("hello")
    for i in range(5):
        harness.emit("assistant.delta", run_id, delta=str(i))
    assert signal.wait(0) is True  # many changes, one pending signal ...
    assert signal.wait(0) is False  # ... consumed by the first wait
    unsubscribe()
    unsubscribe()  # twice is harmless
    assert signal.closed
    harness.emit("assistant.delta", run_id, delta="after")
    assert not signal.pending()


def test_every_subscriber_gets_its_own_signal(ctrl, harness):
    first, _ = ctrl.subscribe()
    second, unsubscribe_second = ctrl.subscribe()
    unsubscribe_second()
    ctrl.send("hello")
    assert first.pending()
    assert not second.pending()


def test_close_closes_the_subscriptions(ctrl):
    signal, unsubscribe = ctrl.subscribe()
    ctrl.close()
    assert signal.closed
    unsubscribe()


def test_run_returns_a_copy(ctrl, harness):
    run_id = ctrl.send("hello")
    harness.emit("assistant.message", run_id, content="one")
    seen = ctrl.run()
    harness.emit("assistant.message", run_id, content="two")
    assert [e.text for e in seen.entries] == ["one"]
    assert [e.text for e in ctrl.run().entries] == ["one", "two"]


def test_a_session_started_event_needs_no_run(ctrl, harness):
    assert harness.publish is not None
    assert harness.publish(HarnessEvent("session.started", "", "s")) is None
    assert ctrl.status() == "idle"


def test_restart_records_a_new_session(system, harness):
    ctrl = system.controller(harness)
    ctrl.start()
    harness.session_id = "session-2"
    ctrl.start()
    assert ctrl.session_id() == "session-2"
    started = recorded(system, ControllerStarted)
    assert [e.session_id for e in started] == ["session-1", "session-2"]


def test_a_restart_cancels_the_permission_requests_of_the_previous_lifecycle(ctrl, harness):
    run_id = ctrl.send("hello")
    waiting = ask_permission(harness, run_id)
    wait_pending(ctrl)
    ctrl.start()
    with pytest.raises(ApprovalCancelledError):
        waiting.result(WAIT)
    assert ctrl.approval_queue().pending() == []


@pytest.mark.parametrize("through", ["system", "controller"])
def test_a_decision_notifies_the_controllers_subscribers(system, ctrl, harness, through):
    run_id = ctrl.send("hello")
    waiting = ask_permission(harness, run_id)
    [approval] = wait_pending(ctrl)
    signal, _ = ctrl.subscribe()
    queue = system.approvals if through == "system" else ctrl.approval_queue()
    queue.resolve(approval.id, "approve", "alice")
    assert waiting.result(WAIT).decision == "approve"
    # The waiter has returned, so whatever notification the decision causes has been sent.
    assert signal.pending()
