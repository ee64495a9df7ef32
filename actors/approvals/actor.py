"""The approval actor: the decider's shell plus what only this process knows.

The log says whether an approval is recording, pending or decided. What it cannot say lives
here: whether *this* process is still running the on_requested hook (and whether an
`expire_run` invalidated the request meanwhile), whether it is running the on_resolved hook
(the seed's "resolution in progress"), and who is blocked waiting for the outcome.
"""

from __future__ import annotations

from concurrent.futures import Future
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Clock, Event, EventLog, Record

from .._aggregate import AggregateActor, Decision
from .._errors import ApprovalError, ApprovalResolvingError, quoted
from .decider import (
    DECIDED,
    DISCARDED,
    RECORDING,
    ApprovalCommand,
    ApprovalState,
    RecordApproval,
    decide,
    evolve,
)
from .model import ApprovalResolution

# What a waiter receives: the outcome (None when the request was discarded) and the error
# of the hook that recorded it (None when it succeeded or ran in another process).
Outcome = tuple[ApprovalResolution | None, BaseException | None]


class ApprovalAggregate:
    category = "approval"

    def initial(self, id: str) -> ApprovalState:
        return ApprovalState(id)

    def decide(self, state: ApprovalState, command: ApprovalCommand, now: datetime) -> Decision:
        return decide(state, command, now)

    def evolve(self, state: ApprovalState, event: Event) -> ApprovalState:
        return evolve(state, event)


APPROVALS = ApprovalAggregate()


@dataclass(frozen=True, slots=True)
class Act:
    """Message: run an approval command unless its outcome's hook is still running here."""

    command: ApprovalCommand
    meta: dict[str, Any]
    claim: bool  # a terminal outcome from this command starts "resolving" until HookDone
    waiter: Future[Outcome] | None = None  # once the command succeeded, registered as by Wait


@dataclass(frozen=True, slots=True)
class HookDone:
    """Message: the on_resolved hook of this process's outcome finished (with an error, or not)."""

    error: BaseException | None


@dataclass(frozen=True, slots=True)
class Wait:
    """Message: reply with a future completed with the Outcome."""


@dataclass(frozen=True, slots=True)
class Invalidate:
    """Message: expire_run reached a request still recording; remember the first actor."""

    actor: str


@dataclass(frozen=True, slots=True)
class Flags:
    """Message: reply with (state, recording_here, resolving, invalidated_by)."""


@dataclass(frozen=True, slots=True)
class SetRecording:
    value: bool


class ApprovalActor(AggregateActor[ApprovalState]):
    # Most actors start for a request's fresh id: recording it needs no read of an empty stream.
    lazy_start = True

    def __init__(self, log: EventLog, clock: Clock, id: str) -> None:
        super().__init__(log, clock, APPROVALS, id)
        self.recording_here = False
        self.resolving = False
        self.hook_error: BaseException | None = None
        self.invalidated_by: str | None = None
        self.waiters: list[Future[Outcome]] = []

    def handle(self, message: Any) -> Any:
        if isinstance(message, Act):
            if self.resolving:
                raise ApprovalResolvingError(self.id)
            # Held while the command runs too: otherwise the append's own on_changed would
            # hand the waiters the outcome before this process's on_resolved hook ran.
            self.resolving = message.claim
            try:
                state = self.execute(message.command, message.meta)[0]
                if message.waiter is not None:
                    self.waiters.append(message.waiter)
                return state
            finally:
                # An outcome this command recorded (even one that raised, like a late decision
                # turned into an expiry) is "resolving" until this process's hook has run.
                decided = any(r.type == "ApprovalDecided" for r in self.last_appended)
                self.resolving = message.claim and decided
                self._settle()
        if isinstance(message, HookDone):
            self.resolving = False
            self.hook_error = message.error
            self._settle()
            return None
        if isinstance(message, Wait):
            future: Future[Outcome] = Future()
            self.waiters.append(future)
            self._settle()
            return future
        if isinstance(message, Invalidate):
            if self.state.status == RECORDING and self.invalidated_by is None:
                self.invalidated_by = message.actor
            return self.invalidated_by
        if isinstance(message, Flags):
            return self.state, self.recording_here, self.resolving, self.invalidated_by
        if isinstance(message, SetRecording):
            self.recording_here = message.value
            return None
        return super().handle(message)

    def creates(self, message: Any) -> bool:
        return isinstance(message, Act) and isinstance(message.command, RecordApproval)

    def is_idle(self) -> bool:
        return not (self.waiters or self.resolving or self.recording_here)

    def on_receive(self, message: Any) -> Any:
        reply = super().on_receive(message)
        if not self.stopping and self.state.status in (DECIDED, DISCARDED) and self.is_idle():
            # The outcome is final and nothing here waits on it: rather than keep a thread for
            # the idle period, stop now (the directory starts a fresh actor for a late caller).
            self.stopping = True
            self.stop()
        return reply

    def on_stop(self) -> None:
        # Only System.close() stops an actor with waiters (passivation spares it): the requests
        # hear so rather than block forever. The approval stays open in the log for a restart.
        waiters, self.waiters = self.waiters, []
        closed = f"approval {quoted(self.id)}: the system closed while waiting"
        for future in waiters:
            future.set_exception(ApprovalError(closed))

    def on_changed(self, records: list[Record]) -> None:
        self._settle()

    def _settle(self) -> None:
        """Complete the waiters once the outcome is recorded and its hook (if ours) has run."""
        if self.resolving or not self.waiters:
            return
        if self.state.status == DECIDED:
            outcome: Outcome = (self.state.resolution, self.hook_error)
        elif self.state.status == DISCARDED:
            outcome = (None, None)
        else:
            return
        waiters, self.waiters = self.waiters, []
        for future in waiters:
            future.set_result(outcome)
