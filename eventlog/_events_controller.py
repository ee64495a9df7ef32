"""Events of the operator controller (`controller-<id>`) and of its runs (`agentrun-<run id>`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._catalogue import Event, event


@event("ControllerStarted")
@dataclass(frozen=True, slots=True)
class ControllerStarted(Event):
    """The controller's harness session started (or restarted with a new session id)."""

    controller_id: str
    session_id: str
    at: datetime


@event("ControllerClosed")
@dataclass(frozen=True, slots=True)
class ControllerClosed(Event):
    """The controller was closed; later harness events are ignored."""

    controller_id: str
    at: datetime


@event("AgentRunStarted")
@dataclass(frozen=True, slots=True)
class AgentRunStarted(Event):
    """The controller admitted a prompt as a new run of its session."""

    run_id: str
    controller_id: str
    session_id: str
    title: str
    prompt: str
    at: datetime


@event("AgentRunStatusChanged")
@dataclass(frozen=True, slots=True)
class AgentRunStatusChanged(Event):
    """The run's status changed: running, aborting, succeeded, failed or aborted."""

    run_id: str
    status: str
    reason: str
    at: datetime


@event("PromptDelivered")
@dataclass(frozen=True, slots=True)
class PromptDelivered(Event):
    """A prompt was handed to the harness for the run (the first one, or a steer)."""

    run_id: str
    prompt: str
    delivery: str
    steer: bool
    at: datetime


@event("HarnessEventRecorded")
@dataclass(frozen=True, slots=True)
class HarnessEventRecorded(Event):
    """One event the harness published for the run, as ingested (the timeline's source)."""

    run_id: str
    type: str
    event_id: str
    data: dict[str, Any]
    at: datetime


@event("ReconcilePrepared")
@dataclass(frozen=True, slots=True)
class ReconcilePrepared(Event):
    """The reconciler prepared a revision for a reconcile tool call; the approval follows."""

    run_id: str
    tool_call_id: str
    input_sha256: str
    revision: dict[str, Any]
    at: datetime


@event("ReconcileApprovalGranted")
@dataclass(frozen=True, slots=True)
class ReconcileApprovalGranted(Event):
    """A one-time approval to dispatch exactly this input, until it expires."""

    run_id: str
    tool_call_id: str
    approval_id: str
    input_sha256: str
    expires_at: datetime
    at: datetime


@event("ReconcileApprovalDropped")
@dataclass(frozen=True, slots=True)
class ReconcileApprovalDropped(Event):
    """One-time approvals were dropped (abort, close, start, or a new gate for the same call)."""

    run_id: str
    tool_call_ids: tuple[str, ...]
    reason: str
    at: datetime


@event("ReconcileDispatched")
@dataclass(frozen=True, slots=True)
class ReconcileDispatched(Event):
    """A reconcile dispatch consumed its one-time approval and ran (or was refused: `outcome`)."""

    run_id: str
    tool_call_id: str
    input_sha256: str
    outcome: str
    detail: str
    at: datetime
