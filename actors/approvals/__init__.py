"""The approval gate: requests, decisions and their quorum, one actor per approval."""

# Layering: actors.approvals imports the actors shell (_aggregate, _directory, _errors), eventlog and
# projections; never a sibling subpackage or tools.

from .actor import ApprovalActor
from .model import (
    APPROVE,
    EXPIRED,
    OPERATOR_DECIDES,
    REJECT,
    WITHDRAWN,
    Approval,
    ApprovalActorKeys,
    ApprovalRequest,
    ApprovalResolution,
    approval_actor_state,
    needs_operator,
    payload_digest,
)
from .queue import ApprovalQueue

__all__ = [
    "APPROVE",
    "EXPIRED",
    "OPERATOR_DECIDES",
    "REJECT",
    "WITHDRAWN",
    "Approval",
    "ApprovalActor",
    "ApprovalActorKeys",
    "ApprovalQueue",
    "ApprovalRequest",
    "ApprovalResolution",
    "approval_actor_state",
    "needs_operator",
    "payload_digest",
]
