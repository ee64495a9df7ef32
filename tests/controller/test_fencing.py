"""Fencing, send_to_session and steer (SEED-BEHAVIOUR §2.2 Fencing, SendToSession, Steer)."""

from __future__ import annotations

import pytest

from actors import (
    Controller,
    ControllerError,
    ControllerValidationError,
    RunConflictError,
    RunNotActiveError,
    RunStarted,
    SessionConflictError,
)
from eventlog.events import PromptDelivered

from .helpers import recorded

FENCED = ["send_to_session", "steer", "abort_run"]


def call(ctrl: Controller, name: str, session_id: str, run_id: str) -> object:
    if name == "abort_run":
        ctrl.abort_run(session_id, run_id)
        return None
    result: object = getattr(ctrl, name)(session_id, run_id, "more")
    return result


@pytest.mark.parametrize("name", FENCED)
def test_before_any_run_the_right_session_still_hits_a_run_conflict(ctrl, name):
    with pytest.raises(RunConflictError, match=r"^agent run changed$"):
        call(ctrl, name, "session-1", "")
    with pytest.raises(RunConflictError):
        call(ctrl, name, "session-1", "some-run")


@pytest.mark.parametrize("name", FENCED)
@pytest.mark.parametrize("session_id", ["", "session-0"])
def test_the_session_is_checked_first(ctrl, harness, name, session_id):
    run_id = ctrl.send("hello")
    with pytest.raises(SessionConflictError, match=r"^agent session changed$"):
        call(ctrl, name, session_id, "not-the-run")
    with pytest.raises(SessionConflictError):
        call(ctrl, name, session_id, run_id)
    assert harness.aborts == []
    assert len(harness.sends) == 1


@pytest.mark.parametrize("name", FENCED)
def test_an_old_run_id_cannot_act_on_a_newer_run(ctrl, harness, name):
    old = ctrl.send("first")
    harness.emit("session.idle", old)
    new = ctrl.send("second")
    with pytest.raises(RunConflictError):
        call(ctrl, name, "session-1", old)
    with pytest.raises(RunConflictError):
        call(ctrl, name, "session-1", "")
    assert harness.aborts == []
    assert [s[0] for s in harness.sends] == [old, new]
    assert ctrl.run().status == "running"


@pytest.mark.parametrize("name", ["send_to_session", "steer"])
def test_validation_comes_before_fencing(ctrl, name):
    with pytest.raises(ControllerValidationError, match="prompt is required"):
        getattr(ctrl, name)("wrong", "wrong", "  ")
    with pytest.raises(ControllerValidationError, match="delivery must be immediate or enqueue"):
        getattr(ctrl, name)("wrong", "wrong", "hi", "soon")


def test_send_to_session_steers_the_running_run(ctrl, harness, system):
    started: list[RunStarted] = []
    ctrl.on_run_started = started.append
    run_id = ctrl.send("first")
    assert ctrl.send_to_session("session-1", run_id, "  and more  ", "enqueue") == run_id
    assert harness.sends[-1] == (run_id, "and more", "enqueue")
    assert len(started) == 1
    assert ctrl.run().id == run_id
    assert ctrl.status() == "running"
    delivered = recorded(system, PromptDelivered)
    assert [(d.prompt, d.steer) for d in delivered] == [("first", False), ("and more", True)]


def test_send_to_session_refuses_a_run_that_is_stopping(ctrl, harness):
    run_id = ctrl.send("first")
    ctrl.abort()
    with pytest.raises(RunNotActiveError, match=r"^agent run is not active$"):
        ctrl.send_to_session("session-1", run_id, "more")
    harness.emit("session.idle", run_id)
    assert ctrl.send_to_session("session-1", run_id, "more") != run_id


def test_send_to_session_refuses_while_persisting(ctrl, harness):
    run_id = ctrl.send("first")
    refused = []

    def on_status(rid, status, at):
        with pytest.raises(RunNotActiveError):
            ctrl.send_to_session("session-1", run_id, "more")
        refused.append(status)

    ctrl.on_run_status = on_status
    harness.emit("session.idle", run_id)
    assert refused == ["succeeded"]


def test_send_to_session_after_an_idle_turn_starts_a_new_run_and_keeps_the_timeline(ctrl, harness, clock):
    started: list[RunStarted] = []
    ctrl.on_run_started = started.append
    first = ctrl.send("first")
    harness.emit("assistant.message", first, content="answer one")
    harness.emit("session.idle", first)
    clock.advance(1)
    second = ctrl.send_to_session("session-1", first, "second")
    assert second != first
    assert [s.run_id for s in started] == [first, second]
    assert harness.sends[-1] == (second, "second", "immediate")
    harness.emit("assistant.message", second, content="answer two")
    run = ctrl.run()
    assert (run.id, run.status, run.title) == (second, "running", "second")
    assert [e.text for e in run.entries] == ["answer one", "answer two"]


def test_steer_delivers_to_the_running_run_only(ctrl, harness, system):
    started: list[RunStarted] = []
    ctrl.on_run_started = started.append
    run_id = ctrl.send("first")
    harness.emit("assistant.delta", run_id, message_id="m", delta="Hel")
    assert ctrl.steer("session-1", run_id, " faster ", "immediate") is None
    harness.emit("assistant.delta", run_id, message_id="m", delta="lo")
    assert harness.sends[-1] == (run_id, "faster", "immediate")
    assert len(started) == 1
    assert ctrl.run().id == run_id
    [stream] = ctrl.run().entries  # the transcript was not reset by the steer
    assert (stream.id, stream.text, stream.status) == ("stream-m", "Hello", "streaming")


def test_steer_needs_a_running_run(ctrl, harness):
    run_id = ctrl.send("first")
    harness.emit("session.idle", run_id)
    with pytest.raises(RunNotActiveError):
        ctrl.steer("session-1", run_id, "more")
    other = ctrl.send("second")
    ctrl.abort()
    with pytest.raises(RunNotActiveError):
        ctrl.steer("session-1", other, "more")
    assert len(harness.sends) == 2


def test_a_failing_steer_says_so_and_leaves_the_run_running(ctrl, harness):
    run_id = ctrl.send("first")
    harness.send_error = OSError("pipe closed")
    with pytest.raises(ControllerError, match=r"^steering agent run: pipe closed$"):
        ctrl.steer("session-1", run_id, "more")
    with pytest.raises(ControllerError, match=r"^steering agent run: pipe closed$"):
        ctrl.send_to_session("session-1", run_id, "more")
    assert ctrl.run().status == "running"
    assert ctrl.status() == "running"
