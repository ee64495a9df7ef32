"""Events of agent-to-agent asks, recorded in the asking run's stream (`run-<asker>`).

An ask is an edge keyed by (asker, message id): opened by `AskSent`, answered at most once
by `AskAnswered`, and closed by exactly one of `AskReplyTaken` (the asker collected the
answer), `AskCancelled`, `AskTimedOut` or `AskWithdrawn` (refused after it was recorded).
Payloads are the raw JSON text the agents sent, as for control messages.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ._catalogue import Event, event


@event("AskSent")
@dataclass(frozen=True, slots=True)
class AskSent(Event):
    """The run asked `to_run_id` a question and expects one reply before `deadline`."""

    run_id: str
    message_id: str
    to_run_id: str
    payload: str | None
    deadline: datetime
    at: datetime


@event("AskAnswered")
@dataclass(frozen=True, slots=True)
class AskAnswered(Event):
    """The ask's target replied; the answer waits for the asker to collect it."""

    run_id: str
    message_id: str
    from_run_id: str
    payload: str | None
    at: datetime


@event("AskReplyTaken")
@dataclass(frozen=True, slots=True)
class AskReplyTaken(Event):
    """The asker collected the answer (`/wait_reply`); the ask is closed."""

    run_id: str
    message_id: str
    at: datetime


@event("AskCancelled")
@dataclass(frozen=True, slots=True)
class AskCancelled(Event):
    """The asker cancelled the ask; an answer not yet collected is dropped with it."""

    run_id: str
    message_id: str
    at: datetime


@event("AskTimedOut")
@dataclass(frozen=True, slots=True)
class AskTimedOut(Event):
    """The ask reached its deadline before its answer was collected."""

    run_id: str
    message_id: str
    at: datetime


@event("AskWithdrawn")
@dataclass(frozen=True, slots=True)
class AskWithdrawn(Event):
    """The ask was refused after it was recorded (a mutual ask raced it, or its target vanished)."""

    run_id: str
    message_id: str
    reason: str
    at: datetime


@event("RunInfoUpdated")
@dataclass(frozen=True, slots=True)
class RunInfoUpdated(Event):
    """What the run says about itself for peer discovery (`/sessions`); empty fields are unknown."""

    run_id: str
    label: str
    backend: str
    model: str
    dir: str
    status: str
    at: datetime
