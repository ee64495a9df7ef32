"""Asks between runs as pure decisions over the asking run's state (its stream `run-<asker>`).

An ask is an edge keyed by (asker, message id). It opens with `AskSent`, takes at most one
answer (`AskAnswered`; a second one is dropped, as the seed's one-slot channel drops it), and
closes once: the asker collects the answer, cancels, times out, or the ask is withdrawn.
The last closures are remembered (bounded) so that a waiter learns how its ask ended.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from eventlog import Event
from eventlog.events import AskAnswered, AskCancelled, AskReplyTaken, AskSent, AskTimedOut, AskWithdrawn

from .._aggregate import Decision
from .._broker_errors import (
    AskConflictError,
    AskInvalidError,
    AskNotFoundError,
    NotAskPartyError,
    TooManyError,
)

# Closures a run's state remembers for waiters (message id, sent at, how it ended).
REMEMBERED_CLOSURES = 64
REPLIED, CANCELLED, TIMEOUT, TAKEN, WITHDRAWN = "replied", "cancelled", "timeout", "taken", "withdrawn"


@dataclass(frozen=True, slots=True)
class AskEdge:
    """An open ask of this run: its target, times, and the answer once it is in."""

    message_id: str
    to_run_id: str
    sent_at: datetime
    deadline: datetime
    answered: bool = False
    reply_from: str = ""
    reply_payload: str | None = None


@dataclass(frozen=True, slots=True)
class AskOutcome:
    """How a wait for a reply ended: `replied` (with the reply), `cancelled` or `timeout`."""

    status: str
    message_id: str
    from_run_id: str = ""
    payload: str | None = None


Closure = tuple[str, datetime, str]


# -- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OpenAsk:
    message_id: str
    to_run_id: str
    payload: str | None
    deadline: datetime
    limit: int = 0  # asks the run may have open at once (0: no bound)


@dataclass(frozen=True, slots=True)
class AnswerAsk:
    message_id: str
    from_run_id: str
    payload: str | None


@dataclass(frozen=True, slots=True)
class TakeReply:
    message_id: str
    sent_at: datetime


@dataclass(frozen=True, slots=True)
class CancelAsk:
    message_id: str


@dataclass(frozen=True, slots=True)
class ExpireAsk:
    message_id: str
    sent_at: datetime


@dataclass(frozen=True, slots=True)
class WithdrawAsk:
    message_id: str
    sent_at: datetime
    reason: str


ASK_COMMANDS = (OpenAsk, AnswerAsk, TakeReply, CancelAsk, ExpireAsk, WithdrawAsk)
ASK_EVENTS = (AskSent, AskAnswered, AskReplyTaken, AskCancelled, AskTimedOut, AskWithdrawn)


def find(asks: tuple[AskEdge, ...], message_id: str) -> AskEdge | None:
    return next((a for a in asks if a.message_id == message_id), None)


def decide_ask(asks: tuple[AskEdge, ...], run_id: str, c: object, now: datetime) -> Decision:
    """The events an ask command records on the asking run (which exists)."""
    if isinstance(c, OpenAsk):
        if not c.message_id:
            return Decision(error=AskInvalidError("expects_reply requires a message id"))
        if find(asks, c.message_id) is not None:
            return Decision(error=AskConflictError("message id already in use"))
        if c.limit and len(asks) >= c.limit:
            return Decision(
                error=TooManyError(
                    f"run {run_id} has {c.limit} asks waiting for replies, as many as it may: "
                    "collect, cancel or wait out one"
                )
            )
        return Decision([AskSent(run_id, c.message_id, c.to_run_id, c.payload, c.deadline, now)])
    edge = find(asks, getattr(c, "message_id", ""))
    if isinstance(c, AnswerAsk):
        if edge is None:
            return Decision(error=AskNotFoundError(c.message_id))
        if edge.to_run_id != c.from_run_id:
            return Decision(error=NotAskPartyError("not the target of this ask"))
        if edge.answered:
            return Decision()  # one answer per ask: a later one is dropped
        return Decision([AskAnswered(run_id, c.message_id, c.from_run_id, c.payload, now)])
    if isinstance(c, CancelAsk):
        if edge is None:
            return Decision(error=AskNotFoundError(c.message_id))
        return Decision([AskCancelled(run_id, c.message_id, now)])
    if edge is None or edge.sent_at != getattr(c, "sent_at", None):
        if isinstance(c, TakeReply):
            return Decision(error=AskNotFoundError(c.message_id))
        return Decision()  # expiring or withdrawing an ask that is gone: nothing to do
    if isinstance(c, TakeReply):
        if not edge.answered:
            return Decision(error=AskNotFoundError(c.message_id))
        return Decision([AskReplyTaken(run_id, c.message_id, now)])
    if isinstance(c, ExpireAsk):
        return Decision([AskTimedOut(run_id, c.message_id, now)] if now >= edge.deadline else [])
    assert isinstance(c, WithdrawAsk)
    return Decision([AskWithdrawn(run_id, c.message_id, c.reason, now)])


def evolve_ask(
    asks: tuple[AskEdge, ...], closed: tuple[Closure, ...], e: Event
) -> tuple[tuple[AskEdge, ...], tuple[Closure, ...]]:
    """The run's open asks and remembered closures after an ask event."""
    if isinstance(e, AskSent):
        return (*asks, AskEdge(e.message_id, e.to_run_id, e.at, e.deadline)), closed
    assert isinstance(e, ASK_EVENTS)
    edge = find(asks, e.message_id)
    if edge is None:
        return asks, closed
    if isinstance(e, AskAnswered):
        answered = AskEdge(
            edge.message_id, edge.to_run_id, edge.sent_at, edge.deadline, True, e.from_run_id, e.payload
        )
        return tuple(answered if a is edge else a for a in asks), closed
    how = {AskReplyTaken: TAKEN, AskCancelled: CANCELLED, AskTimedOut: TIMEOUT}.get(type(e), WITHDRAWN)
    remembered = (*closed, (edge.message_id, edge.sent_at, how))[-REMEMBERED_CLOSURES:]
    return tuple(a for a in asks if a is not edge), remembered


def closure(closed: tuple[Closure, ...], message_id: str, sent_at: datetime) -> str:
    """How the ask (message id, sent at) ended, or "" if it is not remembered."""
    return next((how for m, s, how in reversed(closed) if m == message_id and s == sent_at), "")
