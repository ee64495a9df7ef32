"""Controller: the seed's operator controller for one agent session, over an event-sourced actor.

Harness calls and hooks run in the caller's thread, never inside the actor, so a harness
may publish synchronously from inside `send`. The public methods keep the seed's names and
errors; everything they change is recorded in `controller-<id>` before they return.

A controller opened on a fork (`fork-<run id>`) is re-driven once with `redrive()` instead of
`start()`; from then on it is an ordinary controller of the fork's session.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NoReturn, cast

from eventlog import Clock, EventLog
from projections import TimelineEntry, Views

from .._errors import ControllerError, ControllerValidationError, ForkError
from .._signal import Signal
from ..approvals import ApprovalQueue, ApprovalRequest, ApprovalResolution
from ..harnesses import DELIVERIES, PERMISSION_REQUEST, Harness, HarnessEvent
from .actor import ControllerActor, Snapshot
from .decider import (
    ABORTING,
    IDLE,
    RUNNING,
    STOPPED,
    AbortDone,
    AbortFailed,
    Admit,
    BeginAbort,
    CheckSteer,
    Close,
    ControllerState,
    FailRun,
    Ingest,
    PersistDone,
    Recover,
    Started,
    Steered,
    Step,
    check_redrive,
)
from .reconcile import ReconcileGate, Reconciler

TITLE_LIMIT = 72


@dataclass(frozen=True, slots=True)
class RunStarted:
    """The durability hook's view of a newly admitted run, before it produces output."""

    run_id: str
    session_id: str
    title: str
    prompt: str
    at: datetime


@dataclass(frozen=True, slots=True)
class RunState:
    """The operator-visible current run, with its timeline (a copy)."""

    id: str = ""
    session_id: str = ""
    title: str = ""
    prompt: str = ""
    status: str = ""
    started_at: datetime | None = None
    can_abort: bool = False
    entries: tuple[TimelineEntry, ...] = field(default_factory=tuple)


def make_title(prompt: str) -> str:
    """First line, trimmed, at most 72 bytes (longer: the first 71 bytes and an ellipsis)."""
    line = prompt.strip().split("\n", 1)[0].strip()
    raw = line.encode("utf-8")
    if len(raw) <= TITLE_LIMIT:
        return line
    return raw[: TITLE_LIMIT - 1].decode("utf-8", "ignore") + "…"


class Controller:
    """One harness session: admission and fencing, steer and abort, approvals, the timeline."""

    def __init__(
        self,
        log: EventLog,
        clock: Clock,
        views: Views,
        approvals: ApprovalQueue,
        harness: Harness,
        *,
        reconciler: Reconciler | None = None,
        controller_id: str = "default",
        recover: bool = True,
    ) -> None:
        self.id = controller_id
        self._log = log
        self._clock = clock
        self._views = views
        self._approvals = approvals
        self._harness = harness
        self.on_run_started: Callable[[RunStarted], object] | None = None
        self.on_run_status: Callable[[str, str, datetime], object] | None = None
        self._admission = threading.Lock()
        self._subs: list[Signal] = []
        self._subs_lock = threading.Lock()
        self._lifecycle = threading.Event()  # set = the current lifecycle is cancelled
        self._released = False  # a re-drive that lost: the actor is gone, the controller stopped
        # Opened without recovery (a fork's controller), it records its close only once it has
        # started or re-driven here: until then the stream may be another process's to write.
        self._records_close = recover
        self._actor = ControllerActor.start(log, clock, controller_id)
        self._gate = ReconcileGate(controller_id, self._actor, clock, approvals, self._state, reconciler)
        approvals.subscribe(self._notify)
        # Without recovery (a fork about to be re-driven), a run that another controller on the
        # same stream is driving right now is never mistaken for one a dead process left behind.
        if recover and cast(Step, self._ask(Recover())).events:
            self._notify()

    # -- plumbing --------------------------------------------------------------------------

    def _ask(self, command: object) -> Any:
        return self._actor.ask(command)

    def _state(self) -> ControllerState:
        if self._released:
            return ControllerState(self.id, phase=STOPPED)
        return cast(ControllerState, self._actor.ask(Snapshot()))

    def _after(self, result: Step) -> Step:
        """Run the on_run_status hook a step asked for, then leave `persisting`."""
        if result.status_hook is not None:
            run_id, status, at = result.status_hook
            try:
                if self.on_run_status is not None:
                    self.on_run_status(run_id, status, at)
            finally:
                self._ask(PersistDone(run_id))
        if result.events or result.status_hook is not None:
            self._notify()
        return result

    def approval_queue(self) -> ApprovalQueue:
        """The queue this controller's permission requests wait in."""
        return self._approvals

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Open the harness session; on any failure the controller closes itself and raises."""
        if self._state().awaiting_redrive:
            raise ForkError(f"controller {self.id!r} holds a fork awaiting its re-drive: use redrive()")
        self._lifecycle.set()
        self._lifecycle = threading.Event()
        try:
            session_id = self._harness.start(self.publish)
        except Exception as e:  # noqa: BLE001 - any start failure closes the controller and is raised
            self._fail_start(f"starting agent harness: {e}", e)
        if not session_id:
            self._fail_start("starting agent harness: the harness returned no session id", None)
        self._after(self._ask(Started(session_id)))
        self._records_close = True

    def _fail_start(self, message: str, cause: Exception | None) -> NoReturn:
        try:
            self.close()
        except Exception as close_error:  # noqa: BLE001 - reported together with the cause
            message = f"{message}; closing rejected agent harness: {close_error}"
        raise ControllerError(message) from cause

    def close(self) -> None:
        """Stop: late harness events are ignored, waiting approvals expire, the harness closes."""
        if self._released:
            return  # a re-drive that never resumed has already let go of everything
        self._lifecycle.set()
        self._after(self._ask(Close(self._records_close)))
        try:
            self._harness.close()
        finally:
            self._close_subscriptions()

    def _close_subscriptions(self) -> None:
        with self._subs_lock:
            subs, self._subs = self._subs, []
        for s in subs:
            s.close()
        # The actor outlives close (System.close stops it): status() still answers `stopped`,
        # and late harness events are ignored rather than failing on a dead actor.

    def close_quietly(self) -> None:
        """Close if still open, for System.close(); a harness that fails to close is still released."""
        if self._actor.is_alive() and self.status() != "stopped":
            with contextlib.suppress(Exception):
                self.close()
        if self._actor.is_alive():
            self._actor.stop()

    def redrive(self, prompt: str | None = None, delivery: str = "immediate", *, actor: str = "") -> str:
        """Re-drive the fork this controller holds from its fork point; return the run it drives.

        The harness starts, and the copied run resumes in the status it had at the fork point:
        - `running`: it is running again, and the harness is handed `prompt` (default: the
          run's own prompt) for that run id, to play the rest of the turn;
        - `aborting`: the abort the origin began is finished: the harness is asked to abort,
          the run's approvals expire, and the run ends `aborted` (a `prompt` is refused);
        - ended (`succeeded`, `failed`, `aborted`): the controller is idle; a `prompt` is then
          admitted as the fork's next run, exactly as `send` would (its id is returned).
        `actor`, who re-drives, is the `actor` in the meta of the events that resume the fork
        (ControllerStarted first; default `controller`, as for every controller event).
        Raises NotAForkError if this controller holds no fork, ForkRedrivenError if the fork
        was re-driven before or a concurrent re-drive won; the loser records nothing and is
        closed (its harness too).
        """
        if prompt is not None:
            prompt = _validate(prompt, delivery)
        elif delivery not in DELIVERIES:
            raise ControllerValidationError("delivery must be immediate or enqueue")
        with self._admission:
            state = self._state()
            check_redrive(state)
            if prompt is not None and state.run is not None and state.run.status == ABORTING:
                raise ControllerValidationError("the fork's run was aborting at the fork point: no prompt")
            self._lifecycle.set()
            self._lifecycle = threading.Event()
            try:
                session_id = self._harness.start(self.publish)
                if not session_id:
                    raise ControllerError("starting agent harness: the harness returned no session id")
                running = state.run is not None and state.run.status == RUNNING
                command = Started(session_id, True, (prompt or "") if running else "", delivery, actor)
                resumed: Step = self._ask(command)
                self._records_close = True
            except Exception as e:
                self._release(e)
                if isinstance(e, ForkError | ControllerError):
                    raise
                raise ControllerError(f"starting agent harness: {e}") from e
            self._notify()
            run = resumed.state.run
            assert run is not None  # a fork copies at least its run's AgentRunStarted
            if run.status == RUNNING:
                self._deliver(run.id, prompt or run.prompt, delivery)
            elif run.status == ABORTING:
                self._finish_abort(run.id)
            elif prompt is not None:
                return self._start_run(prompt, delivery, None)
            return run.id

    def _release(self, cause: Exception) -> None:
        """Let go of a re-drive that never resumed: close the harness, record nothing."""
        self._lifecycle.set()
        try:
            self._harness.close()
        except Exception as close_error:  # noqa: BLE001 - reported with the cause
            cause.add_note(f"closing rejected agent harness: {close_error}")
        self._released = True
        self._actor.stop()  # close and close_quietly then find nothing to close: nothing is appended
        self._close_subscriptions()

    # -- admission -------------------------------------------------------------------------

    def send(self, prompt: str, delivery: str = "immediate") -> str:
        """Admit a prompt as a new run; return its id."""
        prompt = _validate(prompt, delivery)
        with self._admission:
            return self._start_run(prompt, delivery, None)

    def send_to_session(self, session_id: str, run_id: str, prompt: str, delivery: str = "immediate") -> str:
        """Steer the caller's run if it is running, or start a new run after an idle turn."""
        prompt = _validate(prompt, delivery)
        with self._admission:
            return self._start_run(prompt, delivery, (session_id, run_id))

    def _start_run(self, prompt: str, delivery: str, fence: tuple[str, str] | None) -> str:
        run_id = str(uuid.uuid4())
        result: Step = self._ask(Admit(run_id, make_title(prompt), prompt, delivery, fence))
        if result.steer:
            assert fence is not None
            self._deliver_steer(fence[1], prompt, delivery)
            return fence[1]
        self._notify()
        state = result.state
        assert state.run is not None
        if self.on_run_started is not None:
            try:
                self.on_run_started(
                    RunStarted(run_id, state.session_id, state.run.title, prompt, state.run.started_at)
                )
            except Exception as e:
                self._after(self._ask(FailRun(run_id, f"recording agent run: {e}")))
                raise ControllerError(f"recording agent run: {e}") from e
        self._deliver(run_id, prompt, delivery)
        return run_id

    def _deliver(self, run_id: str, prompt: str, delivery: str) -> None:
        try:
            self._harness.send(run_id, prompt, delivery)
        except Exception as e:
            failed: Step = self._ask(FailRun(run_id, f"sending agent prompt: {e}"))
            if failed.events and self.on_run_status is not None:
                self.on_run_status(run_id, "failed", self._clock.now())
            self._notify()
            raise ControllerError(f"sending agent prompt: {e}") from e

    def steer(self, session_id: str, run_id: str, prompt: str, delivery: str = "immediate") -> None:
        """Deliver another prompt to exactly the running run the caller saw."""
        prompt = _validate(prompt, delivery)
        with self._admission:
            self._ask(CheckSteer((session_id, run_id)))
            self._deliver_steer(run_id, prompt, delivery)

    def _deliver_steer(self, run_id: str, prompt: str, delivery: str) -> None:
        try:
            self._harness.send(run_id, prompt, delivery)
        except Exception as e:
            raise ControllerError(f"steering agent run: {e}") from e
        self._after(self._ask(Steered(run_id, prompt, delivery)))

    # -- abort -----------------------------------------------------------------------------

    def abort(self) -> None:
        """Stop the active run, whichever it is."""
        self._abort(None)

    def abort_run(self, session_id: str, run_id: str) -> None:
        """Stop only the exact run the caller saw."""
        self._abort((session_id, run_id))

    def _abort(self, fence: tuple[str, str] | None) -> None:
        began: Step = self._ask(BeginAbort(fence))
        self._notify()
        run = began.state.run
        assert run is not None
        self._finish_abort(run.id)

    def _finish_abort(self, run_id: str) -> None:
        try:
            self._harness.abort(run_id)
        except Exception as e:
            self._after(self._ask(AbortFailed(run_id)))
            raise ControllerError(f"aborting agent run: {e}") from e
        try:
            self._approvals.expire_run(run_id, "abort")
        finally:
            self._after(self._ask(AbortDone(run_id)))

    # -- harness events --------------------------------------------------------------------

    def publish(self, event: HarnessEvent) -> ApprovalResolution | None:
        """Record a harness event; a permission request blocks until it is decided."""
        result: Step = self._ask(Ingest(event))
        self._after(result)
        if event.type == PERMISSION_REQUEST and result.events:
            try:
                return self._permission(event)
            finally:
                # Its approval left the pending list, whichever queue (or process) decided it.
                self._notify()
        return None

    def _permission(self, event: HarnessEvent) -> ApprovalResolution:
        data = event.data
        if data.get("requires_fleet_quorum"):
            return self._gate.request(event, self._lifecycle)
        request = ApprovalRequest(
            kind=str(data.get("kind") or "permission"),
            title=str(data.get("title") or f"Use {data.get('tool_name', 'a tool')}"),
            detail=str(data.get("detail") or data.get("tool_name") or "permission request"),
            risk=str(data.get("risk") or "high"),
            run_id=event.run_id,
            tool_call_id=str(data.get("tool_call_id") or ""),
            payload=data.get("payload", data.get("arguments")),
        )
        return self._approvals.request(request, cancel=self._lifecycle, requested_by=f"controller:{self.id}")

    def reconcile_approved(self, intent: dict[str, Any], tool_call_id: str) -> dict[str, Any]:
        """Dispatch an approved reconcile: once, only for exactly the approved input."""
        return self._gate.dispatch(intent, tool_call_id)

    # -- reading ---------------------------------------------------------------------------

    def session_id(self) -> str:
        return self._state().session_id

    def status(self) -> str:
        return self._state().phase

    def run(self) -> RunState:
        """A copy of the current run and its timeline."""
        run = self._state().run
        if run is None:
            return RunState()
        entries = tuple(self._views.timeline(run.id))
        return RunState(
            run.id, run.session_id, run.title, run.prompt, run.status, run.started_at, run.can_abort, entries
        )

    def subscribe(self) -> tuple[Signal, Callable[[], None]]:
        """A coalescing change signal and the function that unsubscribes (twice is harmless)."""
        signal = Signal()
        with self._subs_lock:
            self._subs.append(signal)

        def unsubscribe() -> None:
            with self._subs_lock:
                if signal in self._subs:
                    self._subs.remove(signal)
            signal.close()

        return signal, unsubscribe

    def _notify(self) -> None:
        with self._subs_lock:
            subs = list(self._subs)
        for s in subs:
            s.notify()

    @property
    def idle(self) -> bool:
        return self.status() == IDLE


def _validate(prompt: str, delivery: str) -> str:
    prompt = prompt.strip()
    if not prompt:
        raise ControllerValidationError("prompt is required")
    if delivery not in DELIVERIES:
        raise ControllerValidationError("delivery must be immediate or enqueue")
    return prompt
