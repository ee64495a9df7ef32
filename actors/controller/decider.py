"""The operator controller as a pure state machine: `step(state, command, now) -> Step`.

The log holds the run lifecycle (started, status changes, every harness event); the phases
`persisting` and "an abort is in flight" are transient and live only in this state. A step
returns the events to record (by stream), the new state, and what the shell must do next
(call a hook), so every harness call and hook runs outside the actor.

A fork's stream (`controller-fork-<id>`) opens with ForkedFrom and a copy of the origin run's
events. Until it is re-driven (`Started(redrive=...)`) it is `starting` whatever its copied
run's status, and recovery leaves it alone: a run copied mid-flight did not crash. The
re-drive records ControllerStarted and, for a run copied `running` or `aborting`, the same
status again with the reason REDRIVEN (and, when running, the prompt handed to the harness).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from eventlog import Event
from eventlog.events import (
    AgentRunStarted,
    AgentRunStatusChanged,
    ControllerClosed,
    ControllerStarted,
    ForkedFrom,
    HarnessEventRecorded,
    PromptDelivered,
    ReconcileApprovalDropped,
)

from .._errors import (
    ControllerBusyError,
    ControllerError,
    ForkRedrivenError,
    HarnessEventError,
    NotAForkError,
    RunConflictError,
    RunNotActiveError,
    SessionConflictError,
)
from ..harnesses import SESSION_ERROR, SESSION_IDLE, SESSION_SHUTDOWN, SESSION_STARTED, HarnessEvent

# Controller phases (Status()) and run statuses (Run().Status), as the seed spells them.
STARTING: Final = "starting"
IDLE: Final = "idle"
RUNNING: Final = "running"
ABORTING: Final = "aborting"
PERSISTING: Final = "persisting"
STOPPED: Final = "stopped"
SUCCEEDED: Final = "succeeded"
FAILED: Final = "failed"
ABORTED: Final = "aborted"

REDRIVEN: Final = "re-driven from the fork point"  # the reason of a resumed fork's status


@dataclass(frozen=True, slots=True)
class RunInfo:
    """The current run (the seed's RunState without its timeline)."""

    id: str
    session_id: str
    title: str
    prompt: str
    status: str
    started_at: datetime
    can_abort: bool


@dataclass(frozen=True, slots=True)
class OneTime:
    """A one-time reconcile approval: exactly this input, once, before it expires."""

    approval_id: str
    input_sha256: str
    revision: dict[str, Any]
    expires_at: datetime


@dataclass(frozen=True, slots=True)
class ControllerState:
    id: str
    session_id: str = ""
    phase: str = STARTING
    run: RunInfo | None = None
    seen: frozenset[str] = frozenset()
    idle_during_abort: bool = False
    one_time: tuple[tuple[str, OneTime], ...] = ()
    forked_from: str = ""  # the origin run, when this controller's stream is a fork
    redriven: bool = False  # a fork's ControllerStarted: it is an ordinary controller from then on

    @property
    def awaiting_redrive(self) -> bool:
        """A fork not re-driven yet: its copied run waits at the fork point."""
        return bool(self.forked_from) and not self.redriven


@dataclass(frozen=True, slots=True)
class Step:
    """A transition's outcome: the new state, events by stream, and a hook call for the shell."""

    state: ControllerState
    events: tuple[Event, ...] = ()
    status_hook: tuple[str, str, datetime] | None = None  # (run_id, status, at) → on_run_status
    steer: bool = False  # send_to_session found the run running: steer it instead


# -- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Started:
    session_id: str
    redrive: bool = False  # resume the fork this controller holds (refused if it is not awaiting one)
    prompt: str = ""  # a re-driven running run: the prompt its harness is handed
    delivery: str = "immediate"
    by: str = ""  # who re-drives: the actor in the meta of the events the re-drive records


@dataclass(frozen=True, slots=True)
class Admit:
    run_id: str
    title: str
    prompt: str
    delivery: str
    fence: tuple[str, str] | None = None  # send_to_session: (session, run) the caller saw


@dataclass(frozen=True, slots=True)
class FailRun:
    run_id: str
    reason: str


@dataclass(frozen=True, slots=True)
class CheckSteer:
    fence: tuple[str, str] | None


@dataclass(frozen=True, slots=True)
class Steered:
    run_id: str
    prompt: str
    delivery: str


@dataclass(frozen=True, slots=True)
class Ingest:
    event: HarnessEvent


@dataclass(frozen=True, slots=True)
class PersistDone:
    run_id: str


@dataclass(frozen=True, slots=True)
class BeginAbort:
    fence: tuple[str, str] | None


@dataclass(frozen=True, slots=True)
class AbortFailed:
    run_id: str


@dataclass(frozen=True, slots=True)
class AbortDone:
    run_id: str


@dataclass(frozen=True, slots=True)
class Close:
    """`record=False`: stop without recording (the controller never started in this process)."""

    record: bool = True


@dataclass(frozen=True, slots=True)
class Recover:
    """On opening: a run the log says was running when the process died is failed, visibly."""


def fence_check(state: ControllerState, fence: tuple[str, str] | None) -> None:
    """The seed's requireTargets: the session first, then the run."""
    if fence is None:
        return
    session_id, run_id = fence
    if not session_id or session_id != state.session_id:
        raise SessionConflictError()
    if not run_id or state.run is None or run_id != state.run.id:
        raise RunConflictError()


def step(state: ControllerState, c: object, now: datetime) -> Step:
    cid = state.id
    if isinstance(c, Started):
        if c.redrive or state.awaiting_redrive:
            return _resume(state, c, now)
        events: list[Event] = [ControllerStarted(cid, c.session_id, now)]
        events += _drop_one_time(state, "start", now)
        return Step(
            dataclasses.replace(state, session_id=c.session_id, phase=IDLE, one_time=()), tuple(events)
        )
    if isinstance(c, Admit):
        fence_check(state, c.fence)
        busy = state.run is not None and state.run.status in (RUNNING, ABORTING)
        if (
            c.fence is not None
            and state.phase == RUNNING
            and state.run is not None
            and state.run.status == RUNNING
        ):
            return Step(state, steer=True)
        if state.phase != IDLE or busy:
            raise RunNotActiveError() if c.fence is not None else ControllerBusyError()
        run: RunInfo | None = RunInfo(c.run_id, state.session_id, c.title, c.prompt, RUNNING, now, True)
        evs: tuple[Event, ...] = (
            AgentRunStarted(c.run_id, cid, state.session_id, c.title, c.prompt, now),
            PromptDelivered(c.run_id, c.prompt, c.delivery, False, now),
            AgentRunStatusChanged(c.run_id, RUNNING, "", now),
        )
        return Step(
            dataclasses.replace(state, phase=RUNNING, run=run, seen=frozenset(), idle_during_abort=False), evs
        )
    if isinstance(c, FailRun):
        run = state.run
        if run is None or run.id != c.run_id or run.status not in (RUNNING, ABORTING):
            return Step(state)
        failed = dataclasses.replace(run, status=FAILED, can_abort=False)
        phase = state.phase if state.phase == STOPPED else IDLE
        ev: Event = AgentRunStatusChanged(run.id, FAILED, c.reason, now)
        return Step(dataclasses.replace(state, run=failed, phase=phase), (ev,))
    if isinstance(c, CheckSteer):
        fence_check(state, c.fence)
        if state.phase != RUNNING or state.run is None or state.run.status != RUNNING:
            raise RunNotActiveError()
        return Step(state)
    if isinstance(c, Steered):
        if state.run is None or state.run.id != c.run_id:
            return Step(state)
        ev = PromptDelivered(c.run_id, c.prompt, c.delivery, True, now)
        return Step(state, (ev,))
    if isinstance(c, Ingest):
        return _ingest(state, c.event, now)
    if isinstance(c, PersistDone):
        if state.phase == PERSISTING and state.run is not None and state.run.id == c.run_id:
            return Step(dataclasses.replace(state, phase=IDLE))
        return Step(state)
    if isinstance(c, BeginAbort):
        fence_check(state, c.fence)
        run = state.run
        if run is None or run.status != RUNNING or state.awaiting_redrive:
            raise ControllerError("no active agent run")
        aborting = dataclasses.replace(run, status=ABORTING, can_abort=False)
        evs = (AgentRunStatusChanged(run.id, ABORTING, "", now), *_drop_one_time(state, "abort", now))
        new = dataclasses.replace(state, run=aborting, phase=ABORTING, idle_during_abort=False, one_time=())
        return Step(new, evs)
    if isinstance(c, AbortFailed):
        return _abort_failed(state, c.run_id, now)
    if isinstance(c, AbortDone):
        run = state.run
        if run is None or run.id != c.run_id or run.status != ABORTING:
            return Step(state)  # a terminal failure that arrived meanwhile is preserved
        aborted = dataclasses.replace(run, status=ABORTED)
        phase = IDLE if state.idle_during_abort and state.phase == ABORTING else state.phase
        ev = AgentRunStatusChanged(run.id, ABORTED, "", now)
        return Step(dataclasses.replace(state, run=aborted, phase=phase), (ev,), (run.id, ABORTED, now))
    if isinstance(c, Close):
        if state.phase == STOPPED:
            return Step(state)
        if state.awaiting_redrive or not c.record:
            # Nothing started here: nothing to record (another process may be driving the stream).
            return Step(dataclasses.replace(state, phase=STOPPED, one_time=()))
        evs = (ControllerClosed(cid, now), *_drop_one_time(state, "close", now))
        return Step(dataclasses.replace(state, phase=STOPPED, one_time=()), evs)
    if isinstance(c, Recover):
        run = state.run
        if run is None or run.status not in (RUNNING, ABORTING) or state.awaiting_redrive:
            return Step(state)
        notice = HarnessEventRecorded(
            run.id,
            SESSION_SHUTDOWN,
            f"recovered-{run.id}",
            {"reason": "flightlog restarted while the run was in progress"},
            now,
        )
        evs = (notice, AgentRunStatusChanged(run.id, FAILED, "process stopped during the run", now))
        # The phase a fold of these events gives: idle (a failed run), unless it was stopped.
        phase = STOPPED if state.phase == STOPPED else IDLE
        failed = dataclasses.replace(run, status=FAILED, can_abort=False)
        return Step(dataclasses.replace(state, run=failed, phase=phase), evs)
    raise TypeError(f"unknown controller command {type(c).__name__}")


def check_redrive(state: ControllerState) -> None:
    """Refuse to re-drive a controller that holds no fork, or a fork already re-driven."""
    if not state.forked_from:
        raise NotAForkError(f"controller {state.id!r} does not hold a fork")
    if state.redriven:
        raise ForkRedrivenError(f"the fork in controller {state.id!r} was already re-driven")


def _resume(state: ControllerState, c: Started, now: datetime) -> Step:
    """Re-drive a fork: its copied run resumes as it was at the fork point."""
    if not c.redrive:
        raise ControllerError(f"controller {state.id!r} holds a fork awaiting its re-drive: use redrive()")
    check_redrive(state)
    events: list[Event] = [ControllerStarted(state.id, c.session_id, now)]
    run = state.run
    phase = IDLE
    if run is not None and run.status in (RUNNING, ABORTING):
        events.append(AgentRunStatusChanged(run.id, run.status, REDRIVEN, now))
        phase = run.status  # the phase a running or aborting run gives, as fold() says
        if run.status == RUNNING:
            events.append(PromptDelivered(run.id, c.prompt or run.prompt, c.delivery, False, now))
    resumed = dataclasses.replace(
        state, session_id=c.session_id, phase=phase, redriven=True, seen=frozenset(), one_time=()
    )
    return Step(resumed, tuple(events))


def _ingest(state: ControllerState, ev: HarnessEvent, now: datetime) -> Step:
    if state.phase == STOPPED:
        return Step(state)  # late events after close are ignored
    if ev.type == SESSION_STARTED:
        return Step(state)
    run = state.run
    if run is None or ev.run_id != run.id or state.awaiting_redrive:
        raise HarnessEventError("publishing harness event: run_id is not the active run")
    if ev.id and ev.id in state.seen:
        return Step(state)
    seen = state.seen | {ev.id} if ev.id else state.seen
    recorded = HarnessEventRecorded(run.id, ev.type, ev.id, dict(ev.data), now)
    state = dataclasses.replace(state, seen=seen)
    if ev.type == SESSION_IDLE:
        if run.status == RUNNING:
            done = dataclasses.replace(run, status=SUCCEEDED, can_abort=False)
            evs = (recorded, AgentRunStatusChanged(run.id, SUCCEEDED, "", now))
            return Step(dataclasses.replace(state, run=done, phase=PERSISTING), evs, (run.id, SUCCEEDED, now))
        if run.status == ABORTING:
            return Step(dataclasses.replace(state, idle_during_abort=True), (recorded,))
        phase = IDLE if state.phase in (ABORTING, RUNNING) else state.phase
        return Step(dataclasses.replace(state, phase=phase), (recorded,))
    if ev.type in (SESSION_ERROR, SESSION_SHUTDOWN) and run.status in (RUNNING, ABORTING):
        failed = dataclasses.replace(run, status=FAILED, can_abort=False)
        reason = str(ev.data.get("message") or ev.data.get("reason") or ev.type)
        evs = (recorded, AgentRunStatusChanged(run.id, FAILED, reason, now))
        # During an abort too (seed §2.2): the failure ends the run, persisting then idle; the
        # abort's late acknowledgement finds the run no longer aborting and changes nothing.
        return Step(dataclasses.replace(state, run=failed, phase=PERSISTING), evs, (run.id, FAILED, now))
    return Step(state, (recorded,))


def _abort_failed(state: ControllerState, run_id: str, now: datetime) -> Step:
    run = state.run
    if state.phase == STOPPED or run is None or run.id != run_id:
        return Step(state)
    if run.status != ABORTING:
        phase = IDLE if state.phase == ABORTING else state.phase
        return Step(dataclasses.replace(state, phase=phase))  # failed meanwhile: preserved
    if state.idle_during_abort:
        done = dataclasses.replace(run, status=SUCCEEDED, can_abort=False)
        ev = AgentRunStatusChanged(run.id, SUCCEEDED, "", now)
        return Step(dataclasses.replace(state, run=done, phase=IDLE), (ev,), (run.id, SUCCEEDED, now))
    back = dataclasses.replace(run, status=RUNNING, can_abort=True)
    ev = AgentRunStatusChanged(run.id, RUNNING, "abort failed", now)
    return Step(dataclasses.replace(state, run=back, phase=RUNNING), (ev,))


def _drop_one_time(state: ControllerState, reason: str, now: datetime) -> list[Event]:
    if not state.one_time:
        return []
    run_id = state.run.id if state.run else ""
    return [ReconcileApprovalDropped(run_id, tuple(k for k, _ in state.one_time), reason, now)]


def fold(state: ControllerState, event: Event) -> ControllerState:
    """Rebuild the durable part of the state from the controller's and its runs' events."""
    if isinstance(event, ForkedFrom):
        return dataclasses.replace(state, forked_from=event.origin_run_id, phase=STARTING)
    if isinstance(event, ControllerStarted):
        redriven = state.redriven or bool(state.forked_from)
        return dataclasses.replace(
            state, session_id=event.session_id, phase=IDLE, one_time=(), redriven=redriven
        )
    if isinstance(event, ControllerClosed):
        return dataclasses.replace(state, phase=STOPPED, one_time=())
    if isinstance(event, AgentRunStarted):
        run = RunInfo(event.run_id, event.session_id, event.title, event.prompt, RUNNING, event.at, True)
        return dataclasses.replace(state, run=run, phase=STARTING if state.awaiting_redrive else RUNNING)
    if isinstance(event, AgentRunStatusChanged) and state.run is not None and state.run.id == event.run_id:
        can_abort = event.status == RUNNING
        run = dataclasses.replace(state.run, status=event.status, can_abort=can_abort)
        phase = RUNNING if event.status == RUNNING else ABORTING if event.status == ABORTING else IDLE
        if state.phase == STOPPED or state.awaiting_redrive:
            phase = state.phase  # closed stays closed; a fork waits at its fork point
        return dataclasses.replace(state, run=run, phase=phase)
    return state
