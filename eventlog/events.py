"""The event catalogue: every domain event flightlog records, with its type name and schema.

This module is the contract between writers (actors) and readers (projections). Each event
is a frozen, slotted dataclass registered with `@event(type_name, schema)`; an event whose
shape changes gets a new schema number and an `@upcaster` from the old one.
"""

from ._catalogue import Event, catalogue, event, upcaster
from ._events_approval import (
    ApprovalDecided,
    ApprovalDecisionRefused,
    ApprovalDiscarded,
    ApprovalPublished,
    ApprovalRequested,
    ApprovalVoted,
)
from ._events_controller import (
    AgentRunStarted,
    AgentRunStatusChanged,
    ControllerClosed,
    ControllerStarted,
    HarnessEventRecorded,
    PromptDelivered,
    ReconcileApprovalDropped,
    ReconcileApprovalGranted,
    ReconcileDispatched,
    ReconcilePrepared,
)
from ._events_run import (
    BrokerReset,
    ControlDelivered,
    ControlQueued,
    PermissionDecided,
    PermissionRequested,
    RunDeleted,
    RunFinished,
    RunHeartbeat,
    RunRegistered,
    RunRegistrationRefreshed,
    RunReplied,
    RunReported,
)

__all__ = [
    "AgentRunStarted",
    "AgentRunStatusChanged",
    "ApprovalDecided",
    "ApprovalDecisionRefused",
    "ApprovalDiscarded",
    "ApprovalPublished",
    "ApprovalRequested",
    "ApprovalVoted",
    "BrokerReset",
    "ControlDelivered",
    "ControlQueued",
    "ControllerClosed",
    "ControllerStarted",
    "Event",
    "HarnessEventRecorded",
    "PermissionDecided",
    "PermissionRequested",
    "PromptDelivered",
    "ReconcileApprovalDropped",
    "ReconcileApprovalGranted",
    "ReconcileDispatched",
    "ReconcilePrepared",
    "RunDeleted",
    "RunFinished",
    "RunHeartbeat",
    "RunRegistered",
    "RunRegistrationRefreshed",
    "RunReplied",
    "RunReported",
    "catalogue",
    "event",
    "upcaster",
]
