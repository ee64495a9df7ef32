"""Events of the approval aggregate (stream `approval-<id>`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ._catalogue import Event, event


@event("ApprovalRequested")
@dataclass(frozen=True, slots=True)
class ApprovalRequested(Event):
    """A request for a human decision was recorded; the payload is kept only as its digest."""

    approval_id: str
    run_id: str
    tool_call_id: str
    kind: str
    title: str
    detail: str
    risk: str
    payload_sha256: str
    requires_fleet_quorum: bool
    quorum: int
    requested_at: datetime
    expires_at: datetime
    requested_by: str = ""


@event("ApprovalPublished")
@dataclass(frozen=True, slots=True)
class ApprovalPublished(Event):
    """The request's durability hook succeeded: the approval is pending and decidable."""

    approval_id: str
    at: datetime


@event("ApprovalDiscarded")
@dataclass(frozen=True, slots=True)
class ApprovalDiscarded(Event):
    """The request's durability hook failed: the approval was never published."""

    approval_id: str
    reason: str
    at: datetime


@event("ApprovalVoted")
@dataclass(frozen=True, slots=True)
class ApprovalVoted(Event):
    """One actor approved a quorum approval; the outcome waits for enough distinct votes."""

    approval_id: str
    actor: str
    identity: str
    at: datetime


@event("ApprovalDecided")
@dataclass(frozen=True, slots=True)
class ApprovalDecided(Event):
    """The approval's one terminal outcome and who caused it: approve, reject, expired, or
    withdrawn (its requester gave it up; the reason, if any, is in the record's meta)."""

    approval_id: str
    decision: str
    actor: str
    identity: str
    at: datetime


@event("ApprovalDecisionRefused")
@dataclass(frozen=True, slots=True)
class ApprovalDecisionRefused(Event):
    """A decision arrived that could not count (late, second, or a repeated vote); kept for audit."""

    approval_id: str
    decision: str
    actor: str
    identity: str
    reason: str
    at: datetime


@event("ApprovalAttemptRefused")
@dataclass(frozen=True, slots=True)
class ApprovalAttemptRefused(Event):
    """Someone who may not decide this approval answered it (a run, on one that needs an operator).

    The approval is unchanged and still waits for an operator; the attempt is kept for audit:
    who answered, when, and what they asked for.
    """

    approval_id: str
    decision: str
    actor: str
    reason: str
    at: datetime
