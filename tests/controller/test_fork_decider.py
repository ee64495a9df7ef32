"""The controller decider on a fork's stream: pure steps and folds, no log, no actor."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actors import ControllerError, ForkRedrivenError, HarnessEvent, HarnessEventError, NotAForkError
from actors.controller.decider import (
    REDRIVEN,
    BeginAbort,
    Close,
    ControllerState,
    Ingest,
    Recover,
    Started,
    fold,
    step,
)
from eventlog import Event
from eventlog.events import AgentRunStarted, AgentRunStatusChanged, ForkedFrom, PromptDelivered

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def given(*events: Event) -> ControllerState:
    state = ControllerState("fork-f")
    for e in events:
        state = fold(state, e)
    return state


def fork_of(status: str) -> ControllerState:
    """A fork whose copied run had `status` at the fork point."""
    events: list[Event] = [
        ForkedFrom("f", "origin", "controller-default", 9, "alice", "", NOW),
        AgentRunStarted("f", "fork-f", "origin-session", "list files", "list files", NOW),
        PromptDelivered("f", "list files", "immediate", False, NOW),
        AgentRunStatusChanged("f", "running", "", NOW),
    ]
    if status != "running":
        events.append(AgentRunStatusChanged("f", status, "", NOW))
    return given(*events)


def comparable(state: ControllerState) -> tuple[object, ...]:
    """What a fold must rebuild of a step's state (the durable part)."""
    run = state.run
    assert run is not None
    return (state.session_id, state.phase, state.forked_from, state.redriven, run.status, run.can_abort)


@pytest.mark.parametrize("status", ["running", "aborting", "succeeded", "failed", "aborted"])
def test_a_fork_waits_at_its_fork_point_and_is_no_crash(status):
    state = fork_of(status)
    assert state.awaiting_redrive
    assert state.phase == "starting"
    assert state.run is not None
    assert state.run.status == status
    assert step(state, Recover(), NOW).events == ()
    assert step(state, Close(), NOW).events == ()  # nothing was started: nothing to record
    with pytest.raises(ControllerError, match="use redrive"):
        step(state, Started("s"), NOW)


@pytest.mark.parametrize(
    ("status", "phase", "types"),
    [
        ("running", "running", ["ControllerStarted", "AgentRunStatusChanged", "PromptDelivered"]),
        ("aborting", "aborting", ["ControllerStarted", "AgentRunStatusChanged"]),
        ("succeeded", "idle", ["ControllerStarted"]),
        ("aborted", "idle", ["ControllerStarted"]),
    ],
)
def test_a_re_drive_resumes_the_copied_run_and_a_fold_of_its_events_agrees(status, phase, types):
    state = fork_of(status)
    result = step(state, Started("live", redrive=True, prompt="again"), NOW)
    assert [type(e).__name__ for e in result.events] == types
    assert result.state.phase == phase
    assert not result.state.awaiting_redrive
    changed = [e for e in result.events if isinstance(e, AgentRunStatusChanged)]
    assert all((e.status, e.reason) == (status, REDRIVEN) for e in changed)
    delivered = [e for e in result.events if isinstance(e, PromptDelivered)]
    assert [(e.prompt, e.steer) for e in delivered] == ([("again", False)] if status == "running" else [])
    folded = state
    for e in result.events:
        folded = fold(folded, e)
    assert comparable(folded) == comparable(result.state)
    with pytest.raises(ForkRedrivenError):
        step(folded, Started("again", redrive=True), NOW)
    # Re-driven, it is an ordinary controller: a later crash is recovered like any other.
    recovered = step(folded, Recover(), NOW)
    assert bool(recovered.events) == (status in ("running", "aborting"))


def test_only_a_fork_is_re_driven():
    plain = given(AgentRunStarted("r", "default", "s", "t", "p", NOW))
    with pytest.raises(NotAForkError):
        step(plain, Started("s", redrive=True), NOW)


def test_a_waiting_fork_takes_no_harness_event_and_no_abort():
    state = fork_of("running")
    with pytest.raises(HarnessEventError):
        step(state, Ingest(HarnessEvent("assistant.message", "f", "a1", {"content": "hi"})), NOW)
    with pytest.raises(ControllerError, match="no active agent run"):
        step(state, BeginAbort(None), NOW)


def test_a_close_that_is_not_recorded_stops_a_re_driven_fork_and_records_nothing():
    resumed = step(fork_of("running"), Started("s", redrive=True), NOW).state
    assert [type(e).__name__ for e in step(resumed, Close(), NOW).events] == ["ControllerClosed"]
    quiet = step(resumed, Close(record=False), NOW)
    assert (quiet.events, quiet.state.phase) == ((), "stopped")
