"""Events of the broker's run aggregate (stream `run-<id>`) and of the broker itself (`broker-main`).

Payloads are kept as the raw JSON text the agent sent (None when absent), so a report reads
back byte for byte as it arrived, exactly like the seed's json.RawMessage.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ._catalogue import Event, event


@event("RunRegistered")
@dataclass(frozen=True, slots=True)
class RunRegistered(Event):
    """A run was registered; only the SHA-256 of its token is recorded.

    `origin` says how it came to be: created by an operator (`operator`) or an enrolment
    credential (`enrolment`) through the API, by the run's own `/register` on a server open
    to that (`self`), or in process (`local`: the Python API, a command on the database
    file). `by` names who: the operator's name, the client's address for `self`, `local:<user>`
    for a command; `by_credential` the operator credential used ("" otherwise). Records
    written before these fields read with "" for each.
    """

    run_id: str
    token_sha256: str
    registered_at: datetime | None
    at: datetime
    origin: str = ""
    by: str = ""
    by_credential: str = ""


@event("RunRegistrationRefreshed")
@dataclass(frozen=True, slots=True)
class RunRegistrationRefreshed(Event):
    """A run registered again over HTTP with its own token."""

    run_id: str
    at: datetime


@event("RunHeartbeat")
@dataclass(frozen=True, slots=True)
class RunHeartbeat(Event):
    """The run's agent said it is alive."""

    run_id: str
    at: datetime


@event("ControlQueued")
@dataclass(frozen=True, slots=True)
class ControlQueued(Event):
    """A control message was queued for the run (from an operator or another run)."""

    run_id: str
    message_id: str
    type: str
    from_run_id: str
    payload: str | None
    created_at: datetime
    # The operator who pushed it, as `name (credential id)`; "" from a run or the system.
    sent_by: str = ""


@event("ControlDelivered")
@dataclass(frozen=True, slots=True)
class ControlDelivered(Event):
    """The run's agent took these queued messages (a poll drains the whole queue)."""

    run_id: str
    message_ids: tuple[str, ...]
    at: datetime


@event("RunReported")
@dataclass(frozen=True, slots=True)
class RunReported(Event):
    """The run reported progress (any state other than done/failed/blocked)."""

    run_id: str
    state: str
    payload: str | None
    at: datetime


@event("RunFinished")
@dataclass(frozen=True, slots=True)
class RunFinished(Event):
    """The run reported a finish (status as given; done/failed/blocked when ingested)."""

    run_id: str
    status: str
    summary: str
    files_changed: tuple[str, ...]
    payload: str | None
    at: datetime


@event("RunReplied")
@dataclass(frozen=True, slots=True)
class RunReplied(Event):
    """The run replied to someone."""

    run_id: str
    to: str
    payload: str | None
    at: datetime


@event("PermissionRequested")
@dataclass(frozen=True, slots=True)
class PermissionRequested(Event):
    """The run asked an operator for permission; the request is the approval `approval_id`."""

    run_id: str
    request_id: str
    tool_name: str
    description: str
    input_preview: str
    approval_id: str
    at: datetime


@event("PermissionDecided")
@dataclass(frozen=True, slots=True)
class PermissionDecided(Event):
    """A permission request got its answer (allow or deny), from whichever path decided it."""

    run_id: str
    request_id: str
    behavior: str
    approval_id: str
    actor: str
    at: datetime


@event("RunTokenRevoked")
@dataclass(frozen=True, slots=True)
class RunTokenRevoked(Event):
    """The run's token stopped working: nothing authenticates as the run until it is re-keyed."""

    run_id: str
    reason: str
    by: str
    by_credential: str
    at: datetime


@event("RunRekeyed")
@dataclass(frozen=True, slots=True)
class RunRekeyed(Event):
    """The run got a new token (its digest only); the old one, revoked or not, stopped working."""

    run_id: str
    token_sha256: str
    by: str
    by_credential: str
    at: datetime


@event("RunDeleted")
@dataclass(frozen=True, slots=True)
class RunDeleted(Event):
    """The run was removed from the broker; its history stays in the log."""

    run_id: str
    reason: str
    at: datetime


@event("BrokerReset")
@dataclass(frozen=True, slots=True)
class BrokerReset(Event):
    """Every run was dropped; each one also gets a RunDeleted with reason `reset`."""

    run_ids: tuple[str, ...]
    at: datetime
