"""The approval aggregate as a pure decider: `decide(state, command, now)` and `evolve(state, event)`."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from eventlog import Event
from eventlog.events import (
    ApprovalAttemptRefused,
    ApprovalDecided,
    ApprovalDecisionRefused,
    ApprovalDiscarded,
    ApprovalPublished,
    ApprovalRequested,
    ApprovalVoted,
)

from .._aggregate import Decision
from .._errors import (
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ApprovalRecordingError,
    ApprovalValidationError,
    DuplicateVoteError,
)
from .model import APPROVE, EXPIRED, REJECT, WITHDRAWN, Approval, ApprovalResolution, approval_actor_state

NONE: Final = "none"
RECORDING: Final = "recording"
PENDING: Final = "pending"
DECIDED: Final = "decided"
DISCARDED: Final = "discarded"


@dataclass(frozen=True, slots=True)
class ApprovalState:
    """What the log says about one approval."""

    id: str
    approval: Approval | None = None
    status: str = NONE
    quorum: int = 1
    votes: tuple[str, ...] = ()
    voters: tuple[str, ...] = ()  # the credential ids of the votes ("" where none was recorded)
    resolution: ApprovalResolution | None = None

    @property
    def open(self) -> bool:
        """Recording or pending: no outcome yet."""
        return self.status in (RECORDING, PENDING)


# -- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RecordApproval:
    approval: Approval
    quorum: int
    requested_by: str
    publish: bool  # no on_requested hook to wait for: publish in the same commit


@dataclass(frozen=True, slots=True)
class PublishApproval:
    pass


@dataclass(frozen=True, slots=True)
class DiscardApproval:
    reason: str


@dataclass(frozen=True, slots=True)
class DecideApproval:
    decision: str
    actor: str
    identity: str = ""


@dataclass(frozen=True, slots=True)
class ExpireApproval:
    actor: str


@dataclass(frozen=True, slots=True)
class WithdrawApproval:
    """The requester gives its open request up: its one outcome is `withdrawn`, by `actor`."""

    actor: str


@dataclass(frozen=True, slots=True)
class RefuseAttempt:
    """An answer from someone who may not decide the approval: kept for audit, changes nothing."""

    decision: str
    actor: str
    reason: str


ApprovalCommand = (
    RecordApproval
    | PublishApproval
    | DiscardApproval
    | DecideApproval
    | ExpireApproval
    | WithdrawApproval
    | RefuseAttempt
)


def decide(state: ApprovalState, command: ApprovalCommand, now: datetime) -> Decision:
    """The events a command produces, and the error the caller gets after they are recorded."""
    a = state.approval
    if isinstance(command, RecordApproval):
        if state.status != NONE:
            raise ApprovalValidationError(f"approval {state.id!r} already exists")
        ap = command.approval
        events: list[Event] = [
            ApprovalRequested(
                ap.id,
                ap.run_id,
                ap.tool_call_id,
                ap.kind,
                ap.title,
                ap.detail,
                ap.risk,
                ap.payload_sha256,
                ap.requires_fleet_quorum,
                command.quorum,
                ap.requested_at,
                ap.expires_at,
                command.requested_by,
            )
        ]
        if command.publish:
            events.append(ApprovalPublished(ap.id, now))
        return Decision(events)
    if isinstance(command, PublishApproval):
        if state.status != RECORDING:
            return Decision()
        return Decision([ApprovalPublished(state.id, now)])
    if isinstance(command, DiscardApproval):
        if state.status != RECORDING:
            return Decision()
        return Decision([ApprovalDiscarded(state.id, command.reason, now)])
    if isinstance(command, RefuseAttempt):
        if state.status == NONE:
            return Decision(error=ApprovalNotPendingError(state.id))
        return Decision(
            [ApprovalAttemptRefused(state.id, command.decision, command.actor, command.reason, now)]
        )
    if isinstance(command, ExpireApproval):
        if not state.open:
            return Decision(error=ApprovalNotPendingError(state.id))
        return Decision([ApprovalDecided(state.id, EXPIRED, command.actor, "", now)])
    if isinstance(command, WithdrawApproval):
        if not state.open or a is None:
            return Decision(error=ApprovalNotPendingError(state.id))
        if now >= a.expires_at:  # its deadline passed first: the outcome is the expiry
            return Decision([ApprovalDecided(state.id, EXPIRED, approval_actor_state().timeout, "", now)])
        # An outcome like any other (ApprovalDecided): a later decision on it is refused.
        return Decision([ApprovalDecided(state.id, WITHDRAWN, command.actor, "", now)])
    return _decide_decision(state, command, now, a)


def _decide_decision(
    state: ApprovalState, cmd: DecideApproval, now: datetime, a: Approval | None
) -> Decision:
    if cmd.decision not in (APPROVE, REJECT):
        raise ApprovalValidationError("decision must be approve or reject")
    if state.status == NONE or a is None:
        return Decision(error=ApprovalNotPendingError(state.id))
    if state.status == RECORDING:
        return Decision(error=ApprovalRecordingError(state.id))
    if state.status in (DECIDED, DISCARDED):
        r = state.resolution
        why = f"already {r.decision} by {r.actor!r}" if r else "the request was discarded"
        refused = ApprovalDecisionRefused(state.id, cmd.decision, cmd.actor, cmd.identity, why, now)
        return Decision([refused], error=ApprovalNotPendingError(state.id))
    if now >= a.expires_at:
        timeout = approval_actor_state().timeout
        expired = ApprovalDecided(state.id, EXPIRED, timeout, "", now)
        refused = ApprovalDecisionRefused(
            state.id, cmd.decision, cmd.actor, cmd.identity, "the approval had expired", now
        )
        resolution = ApprovalResolution(a, EXPIRED, timeout, now)
        return Decision([expired, refused], error=ApprovalExpiredError(resolution, cmd.actor, cmd.decision))
    if state.quorum > 1 and cmd.decision == APPROVE:
        if cmd.actor in state.votes or (cmd.identity and cmd.identity in state.voters):
            why = (
                f"{cmd.actor!r} has already approved"
                if cmd.actor in state.votes
                else f"credential {cmd.identity!r} has already approved"
            )
            why += "; a quorum needs distinct operators, each with their own credential"
            refused = ApprovalDecisionRefused(state.id, cmd.decision, cmd.actor, cmd.identity, why, now)
            return Decision([refused], error=DuplicateVoteError(state.id, cmd.actor, why))
        vote = ApprovalVoted(state.id, cmd.actor, cmd.identity, now)
        if len(state.votes) + 1 < state.quorum:
            return Decision([vote])
        return Decision([vote, ApprovalDecided(state.id, APPROVE, cmd.actor, cmd.identity, now)])
    return Decision([ApprovalDecided(state.id, cmd.decision, cmd.actor, cmd.identity, now)])


def evolve(state: ApprovalState, event: Event) -> ApprovalState:
    """The state after one recorded event."""
    if isinstance(event, ApprovalRequested):
        approval = Approval(
            event.approval_id,
            event.run_id,
            event.tool_call_id,
            event.kind,
            event.title,
            event.detail,
            event.risk,
            event.payload_sha256,
            event.requires_fleet_quorum,
            event.requested_at,
            event.expires_at,
        )
        return dataclasses.replace(state, approval=approval, status=RECORDING, quorum=max(1, event.quorum))
    if isinstance(event, ApprovalPublished) and state.status == RECORDING:
        return dataclasses.replace(state, status=PENDING)
    if isinstance(event, ApprovalDiscarded) and state.open:
        return dataclasses.replace(state, status=DISCARDED)
    if isinstance(event, ApprovalVoted):
        return dataclasses.replace(
            state, votes=(*state.votes, event.actor), voters=(*state.voters, event.identity)
        )
    if isinstance(event, ApprovalDecided) and state.open and state.approval is not None:
        resolution = ApprovalResolution(state.approval, event.decision, event.actor, event.at, event.identity)
        return dataclasses.replace(state, status=DECIDED, resolution=resolution)
    return state
