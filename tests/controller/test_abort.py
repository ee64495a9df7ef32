"""Abort and abort_run (SEED-BEHAVIOUR §2.2 Abort/AbortRun)."""

from __future__ import annotations

import threading

import pytest

from actors import ApprovalExpireRunError, ApprovalRequest, Controller, ControllerError, RunConflictError
from eventlog.events import AgentRunStatusChanged

from .helpers import WAIT, ask_permission, in_thread, recorded, wait_pending


def statuses_of(ctrl: Controller) -> list[tuple[str, str, str]]:
    seen: list[tuple[str, str, str]] = []
    ctrl.on_run_status = lambda run_id, status, at: seen.append((run_id, status, ctrl.status()))
    return seen


@pytest.mark.parametrize("name", ["abort", "abort_run"])
def test_without_a_running_run_there_is_nothing_to_abort(ctrl, harness, name):
    def do_abort() -> None:
        if name == "abort":
            ctrl.abort()
        else:
            ctrl.abort_run("session-1", ctrl.run().id)

    if name == "abort":
        with pytest.raises(ControllerError, match=r"^no active agent run$"):
            do_abort()
    run_id = ctrl.send("hello")
    harness.emit("session.idle", run_id)
    with pytest.raises(ControllerError, match=r"^no active agent run$"):
        do_abort()
    assert harness.aborts == []


def test_abort_stays_aborting_until_the_idle_arrives(ctrl, harness, system):
    seen = statuses_of(ctrl)
    signal, _ = ctrl.subscribe()
    run_id = ctrl.send("hello")
    signal.wait(0)
    ctrl.abort()
    assert signal.pending()
    assert harness.aborts == [run_id]
    run = ctrl.run()
    assert (run.status, run.can_abort) == ("aborted", False)
    assert ctrl.status() == "aborting"
    assert seen == [(run_id, "aborted", "aborting")]
    harness.emit("session.idle", run_id)
    assert ctrl.status() == "idle"
    assert ctrl.run().status == "aborted"
    changes = [e.status for e in recorded(system, AgentRunStatusChanged)]
    assert changes == ["running", "aborting", "aborted"]


def test_the_status_is_aborting_while_the_harness_aborts(ctrl, harness):
    during = []
    harness.on_abort = lambda run_id: during.append((ctrl.status(), ctrl.run().status, ctrl.run().can_abort))
    ctrl.send("hello")
    ctrl.abort()
    assert during == [("aborting", "aborting", False)]


def test_an_idle_during_the_harness_abort_ends_in_idle(ctrl, harness):
    ctrl.send("hello")
    harness.on_abort = lambda rid: harness.emit("session.idle", rid)
    ctrl.abort()
    assert ctrl.status() == "idle"
    assert ctrl.run().status == "aborted"


def test_abort_run_aborts_exactly_the_run_it_names(ctrl, harness):
    old = ctrl.send("first")
    harness.emit("session.idle", old)
    new = ctrl.send("second")
    with pytest.raises(RunConflictError):
        ctrl.abort_run("session-1", old)
    assert harness.aborts == []
    ctrl.abort_run("session-1", new)
    assert harness.aborts == [new]
    assert ctrl.run().status == "aborted"


def test_abort_expires_the_runs_approvals_with_actor_abort(ctrl, harness, system):
    run_id = ctrl.send("hello")
    waiting = in_thread(
        harness.emit, "permission.request", run_id, title="Run: ls", risk="high", payload="ls"
    )
    [approval] = wait_pending(ctrl)
    ctrl.abort()
    resolution = waiting.result(WAIT)
    assert (resolution.approval.id, resolution.decision, resolution.actor) == (
        approval.id,
        "expired",
        "abort",
    )
    assert ctrl.approval_queue().pending() == []
    row = system.views.approval(approval.id)
    assert (row.decision, row.actor) == ("expired", "abort")


def test_abort_leaves_other_runs_approvals_alone(ctrl, harness, system):
    published = threading.Event()
    unsubscribe = system.approvals.subscribe(published.set)  # called once the request is pending
    other = in_thread(
        system.approvals.request,
        ApprovalRequest("shell", "Run: ls", "ls", "low", run_id="another-run", tool_call_id="c"),
    )
    assert published.wait(WAIT)
    unsubscribe()
    ctrl.send("hello")
    ctrl.abort()
    [pending] = system.approvals.pending()
    assert pending.run_id == "another-run"
    system.approvals.resolve(pending.id, "reject", "alice")
    assert other.result(WAIT).decision == "reject"


def test_a_failing_harness_abort_restores_the_running_run(ctrl, harness):
    seen = statuses_of(ctrl)
    run_id = ctrl.send("hello")
    harness.abort_error = RuntimeError("no signal")
    with pytest.raises(ControllerError, match=r"^aborting agent run: no signal$"):
        ctrl.abort()
    run = ctrl.run()
    assert (run.id, run.status, run.can_abort) == (run_id, "running", True)
    assert ctrl.status() == "running"
    assert seen == []
    harness.abort_error = None
    ctrl.abort()  # it can be aborted again
    assert ctrl.run().status == "aborted"


def test_a_failing_abort_after_the_idle_arrived_succeeds_the_run(ctrl, harness):
    seen = statuses_of(ctrl)
    run_id = ctrl.send("hello")
    harness.on_abort = lambda rid: harness.emit("session.idle", rid)
    harness.abort_error = RuntimeError("already gone")
    with pytest.raises(ControllerError, match="aborting agent run: already gone"):
        ctrl.abort()
    assert ctrl.run().status == "succeeded"
    assert ctrl.status() == "idle"
    assert [(r, s) for r, s, _ in seen] == [(run_id, "succeeded")]


def test_a_failing_abort_preserves_a_failure_that_arrived_meanwhile(ctrl, harness):
    seen = statuses_of(ctrl)
    run_id = ctrl.send("hello")
    harness.on_abort = lambda rid: harness.emit("session.error", rid, message="crashed")
    harness.abort_error = RuntimeError("no signal")
    with pytest.raises(ControllerError, match="aborting agent run: no signal"):
        ctrl.abort()
    assert ctrl.run().status == "failed"
    assert ctrl.status() == "idle"
    assert [(r, s) for r, s, _ in seen] == [(run_id, "failed")]


def test_a_successful_abort_does_not_overwrite_a_failure_that_arrived_meanwhile(ctrl, harness):
    seen = statuses_of(ctrl)
    run_id = ctrl.send("hello")
    harness.on_abort = lambda rid: harness.emit("session.shutdown", rid, reason="killed")
    ctrl.abort()
    assert ctrl.run().status == "failed"
    assert [(r, s) for r, s, _ in seen] == [(run_id, "failed")]
    assert ctrl.status() == "idle"  # the failure went through persisting to idle
    harness.emit("session.idle", run_id)
    assert ctrl.status() == "idle"
    assert ctrl.run().status == "failed"


def test_a_session_error_during_an_abort_fails_the_run_and_the_late_acknowledgement_changes_nothing(
    ctrl, harness, system
):
    # Given a run being aborted, whose harness reports a session.error before the abort returns,
    seen = statuses_of(ctrl)
    run_id = ctrl.send("hello")
    phases: list[str] = []

    def error_then_look(rid):
        harness.emit("session.error", rid, message="crashed")
        phases.append(ctrl.status())
        phases.append(ctrl.run().status)

    harness.on_abort = error_then_look
    # when the abort's acknowledgement arrives after it,
    ctrl.abort()
    # then the run is failed, the controller went through persisting to idle before the
    # acknowledgement, and the acknowledgement changed nothing: no `aborted`, still idle.
    assert phases == ["idle", "failed"]
    assert ctrl.run().status == "failed"
    assert ctrl.status() == "idle"
    assert [(r, s) for r, s, _ in seen] == [(run_id, "failed")]
    statuses = [e.status for e in recorded(system, AgentRunStatusChanged) if e.run_id == run_id]
    assert statuses == ["running", "aborting", "failed"]
    # New work is admitted at once.
    assert ctrl.send("again") != run_id


def test_a_failing_abort_after_close_changes_nothing(ctrl, harness):
    ctrl.send("hello")
    harness.on_abort = lambda rid: ctrl.close()
    harness.abort_error = RuntimeError("closed under us")
    with pytest.raises(ControllerError, match="aborting agent run: closed under us"):
        ctrl.abort()
    assert ctrl.status() == "stopped"
    assert ctrl.run().status == "aborting"


def test_abort_reports_problems_expiring_approvals_but_still_aborts(ctrl, harness):
    run_id = ctrl.send("hello")
    waiting = in_thread(
        harness.emit, "permission.request", run_id, title="Run: ls", risk="high", payload="ls"
    )
    [approval] = wait_pending(ctrl)

    def failing_hook(resolution):
        raise RuntimeError("audit store down")

    ctrl.approval_queue().on_resolved = failing_hook
    with pytest.raises(ApprovalExpireRunError) as info:
        ctrl.abort()
    assert approval.id in str(info.value)
    assert "audit store down" in str(info.value)
    assert ctrl.run().status == "aborted"
    with pytest.raises(Exception, match="audit store down"):
        waiting.result(WAIT)
    assert ctrl.approval_queue().pending() == []


def test_an_approval_still_being_recorded_expires_with_abort_and_is_never_published(ctrl, harness, system):
    run_id = ctrl.send("hello")
    recording, release = threading.Event(), threading.Event()

    def on_requested(approval):
        recording.set()
        assert release.wait(WAIT)

    ctrl.approval_queue().on_requested = on_requested
    waiting = ask_permission(harness, run_id)
    assert recording.wait(WAIT)
    ctrl.abort()
    assert ctrl.approval_queue().pending() == []
    release.set()
    resolution = waiting.result(WAIT)
    assert (resolution.decision, resolution.actor) == ("expired", "abort")
    assert ctrl.approval_queue().pending() == []
    history = system.views.approval_history()
    assert [(r.id, r.decision, r.actor) for r in history] == [(resolution.approval.id, "expired", "abort")]
