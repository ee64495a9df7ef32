"""The broker's run aggregate as a pure decider (stream `run-<id>`)."""

from __future__ import annotations

import dataclasses
import hmac
from dataclasses import dataclass
from datetime import datetime

import orjson

from eventlog import Event
from eventlog.events import (
    ControlDelivered,
    ControlQueued,
    PermissionDecided,
    PermissionRequested,
    RunDeleted,
    RunFinished,
    RunForked,
    RunHeartbeat,
    RunInfoUpdated,
    RunRegistered,
    RunRegistrationRefreshed,
    RunRekeyed,
    RunReplied,
    RunReported,
    RunTokenRevoked,
)
from projections import RECENT_PERMISSIONS

from .._aggregate import Decision
from .._broker_errors import (
    ControlQueueBytesError,
    ControlQueueFullError,
    ControlQueueShareError,
    RunAlreadyRegisteredError,
    RunNotEnrolledError,
    RunNotFoundError,
    RunRevokedError,
)
from .asks import ASK_COMMANDS, ASK_EVENTS, AskEdge, Closure, decide_ask, evolve_ask
from .model import ControlMessage, make_token


@dataclass(frozen=True, slots=True)
class RunState:
    """What the broker decides with: existence, token digest, the undelivered queue, counts."""

    id: str
    exists: bool = False
    token_sha256: str = ""  # "" while revoked: no token's digest is ""
    queue: tuple[ControlMessage, ...] = ()
    finish_count: int = 0
    last_finish_status: str = ""
    # The latest RECENT_PERMISSIONS requests (request_id, approval_id), oldest first, and the
    # approval ids whose answer is recorded among the latest as many answers: a run that asks
    # for months holds a window, not every request it ever made.
    permissions: tuple[tuple[str, str], ...] = ()
    decided: tuple[str, ...] = ()
    asks: tuple[AskEdge, ...] = ()  # this run's open asks, oldest first
    closed: tuple[Closure, ...] = ()  # how its last asks ended, for waiters
    revoked: bool = False  # its token was revoked and not re-keyed since


# Record types after which a run's waiting polls must show their token again: it may have
# stopped working (revoked, re-keyed, the run deleted).
TOKEN_CHANGES = frozenset({"RunTokenRevoked", "RunRekeyed", "RunDeleted"})


# -- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RegisterRun:
    token_sha256: str
    over_http: bool  # HTTP /register sets registered_at; the Go API leaves it zero
    exclusive: bool  # create_run: an existing run is an error (over HTTP: unless the token matches)
    # Who creates it (RunRegistered's provenance), and whether this registration may create
    # a run at all: on a server taking enrolled runs only, /register may only re-register.
    origin: str = ""
    by: str = ""
    by_credential: str = ""
    create: bool = True


@dataclass(frozen=True, slots=True)
class RevokeToken:
    """Stop the run's token: it authenticates nothing until a re-key (again: nothing recorded)."""

    reason: str
    by: str
    by_credential: str


@dataclass(frozen=True, slots=True)
class Rekey:
    """Give the run a new token (its digest); the old one stops working."""

    token_sha256: str
    by: str
    by_credential: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    pass


@dataclass(frozen=True, slots=True)
class QueueControl:
    """Queue a message: one between runs is bounded by `limit` in all and `share` per sending run.

    Operator control (and the system's own notices) has its own lane: no bound refuses it, so
    traffic between runs can never keep the operator from stopping a run.
    """

    message: ControlMessage
    limit: int  # messages between runs the queue may hold (0: no bound)
    share: int = 0  # of those, how many from one sending run (0: no bound)
    max_bytes: int = 0  # their payloads' bytes in all, this one's included (0: no bound)


@dataclass(frozen=True, slots=True)
class TakeControl:
    pass


@dataclass(frozen=True, slots=True)
class RecordReport:
    state: str
    payload: str | None


@dataclass(frozen=True, slots=True)
class RecordFinish:
    status: str
    summary: str
    files_changed: tuple[str, ...]
    payload: str | None


@dataclass(frozen=True, slots=True)
class RecordReply:
    to: str
    payload: str | None


@dataclass(frozen=True, slots=True)
class RequestPermission:
    request_id: str
    tool_name: str
    description: str
    input_preview: str
    approval_id: str


@dataclass(frozen=True, slots=True)
class RecordPermissionDecision:
    request_id: str
    behavior: str
    approval_id: str
    actor: str
    at: datetime


@dataclass(frozen=True, slots=True)
class UpdateInfo:
    label: str
    backend: str
    model: str
    dir: str
    status: str


@dataclass(frozen=True, slots=True)
class DeleteRun:
    reason: str


@dataclass(frozen=True, slots=True)
class RecordFork:
    """Open a new run's history as a fork: its RunForked, then the origin's events it copies."""

    opening: RunForked
    copies: tuple[Event, ...]


def decide(state: RunState, c: object, now: datetime) -> Decision:
    rid = state.id
    if isinstance(c, RegisterRun):
        if state.exists:
            if state.revoked and (c.exclusive or c.over_http):
                return Decision(error=RunRevokedError(rid))
            if c.over_http and hmac.compare_digest(c.token_sha256, state.token_sha256):
                return Decision([RunRegistrationRefreshed(rid, now)])
            if c.exclusive or c.over_http:
                return Decision(error=RunAlreadyRegisteredError(rid))
            return Decision()
        if not c.create:
            return Decision(error=RunNotEnrolledError(rid))
        registered_at = now if c.over_http else None
        return Decision(
            [RunRegistered(rid, c.token_sha256, registered_at, now, c.origin, c.by, c.by_credential)]
        )
    if isinstance(c, DeleteRun):
        return Decision([RunDeleted(rid, c.reason, now)] if state.exists else [])
    if not state.exists:
        return Decision(error=RunNotFoundError(rid))
    if isinstance(c, RevokeToken):
        if state.revoked:
            return Decision()
        return Decision([RunTokenRevoked(rid, c.reason, c.by, c.by_credential, now)])
    if isinstance(c, Rekey):
        return Decision([RunRekeyed(rid, c.token_sha256, c.by, c.by_credential, now)])
    if isinstance(c, Heartbeat):
        return Decision([RunHeartbeat(rid, now)])
    if isinstance(c, RecordFork):
        return Decision([c.opening, *c.copies])
    if isinstance(c, ASK_COMMANDS):
        return decide_ask(state.asks, rid, c, now)
    if isinstance(c, UpdateInfo):
        return Decision([RunInfoUpdated(rid, c.label, c.backend, c.model, c.dir, c.status, now)])
    if isinstance(c, QueueControl):
        m = c.message
        if between_runs(m) and (c.limit or c.share or c.max_bytes):
            error = _over_bound(state.queue, rid, m.from_run_id, c)
            if error is not None:
                return Decision(error=error)
        return Decision([ControlQueued(rid, m.id, m.type, m.from_run_id, m.payload, now, m.sent_by)])
    if isinstance(c, TakeControl):
        if not state.queue:
            return Decision()
        return Decision([ControlDelivered(rid, tuple(m.id for m in state.queue), now)])
    if isinstance(c, RecordReport):
        return Decision([RunReported(rid, c.state, c.payload, now)])
    if isinstance(c, RecordFinish):
        return Decision([RunFinished(rid, c.status, c.summary, c.files_changed, c.payload, now)])
    if isinstance(c, RecordReply):
        return Decision([RunReplied(rid, c.to, c.payload, now)])
    if isinstance(c, RequestPermission):
        return Decision(
            [
                PermissionRequested(
                    rid, c.request_id, c.tool_name, c.description, c.input_preview, c.approval_id, now
                )
            ]
        )
    if isinstance(c, RecordPermissionDecision):
        if c.approval_id and c.approval_id in state.decided:
            return Decision()
        decided = PermissionDecided(rid, c.request_id, c.behavior, c.approval_id, c.actor, c.at)
        # The agent hears the answer on its control queue, in the same commit.
        payload = orjson.dumps({"request_id": c.request_id, "behavior": c.behavior}).decode()
        notice = ControlQueued(rid, c.approval_id or make_token(), "permission_decision", "", payload, now)
        return Decision([decided, notice])
    raise TypeError(f"unknown run command {type(c).__name__}")


def between_runs(m: ControlMessage) -> bool:
    """Whether a queued message is one run's to another (not an operator's nor the system's)."""
    return bool(m.from_run_id) and not m.sent_by


def _over_bound(
    queue: tuple[ControlMessage, ...], rid: str, sender: str, c: QueueControl
) -> ControlQueueFullError | None:
    """Why the run's queue refuses one more message from `sender`, or None."""
    total = mine = held = 0
    for queued in queue:
        if between_runs(queued):
            total += 1
            mine += queued.from_run_id == sender
            held += _bytes(queued.payload) if c.max_bytes else 0
    if c.limit and total >= c.limit:
        return ControlQueueFullError(rid, c.limit)
    if c.share and mine >= c.share:
        return ControlQueueShareError(rid, sender, c.share)
    if c.max_bytes and held + _bytes(c.message.payload) > c.max_bytes:
        return ControlQueueBytesError(rid, c.max_bytes)
    return None


def _bytes(payload: str | None) -> int:
    """A payload's size in UTF-8 bytes (ASCII text, the usual case, without encoding it)."""
    if not payload:
        return 0
    return len(payload) if payload.isascii() else len(payload.encode("utf-8", "surrogatepass"))


def evolve(state: RunState, e: Event) -> RunState:
    if isinstance(e, RunRegistered):
        return RunState(state.id, exists=True, token_sha256=e.token_sha256)
    if isinstance(e, RunDeleted):
        return RunState(state.id)
    if isinstance(e, RunTokenRevoked):
        return dataclasses.replace(state, token_sha256="", revoked=True)
    if isinstance(e, RunRekeyed):
        return dataclasses.replace(state, token_sha256=e.token_sha256, revoked=False)
    if isinstance(e, ControlQueued):
        msg = ControlMessage(
            e.message_id, e.type, e.run_id, e.from_run_id, e.payload, e.created_at, e.sent_by
        )
        return dataclasses.replace(state, queue=(*state.queue, msg))
    if isinstance(e, ControlDelivered):
        taken = set(e.message_ids)
        return dataclasses.replace(state, queue=tuple(m for m in state.queue if m.id not in taken))
    if isinstance(e, RunFinished):
        return dataclasses.replace(state, finish_count=state.finish_count + 1, last_finish_status=e.status)
    if isinstance(e, PermissionRequested):
        kept = state.permissions[1 - RECENT_PERMISSIONS :]
        return dataclasses.replace(state, permissions=(*kept, (e.request_id, e.approval_id)))
    if isinstance(e, PermissionDecided):
        return dataclasses.replace(state, decided=(*state.decided[1 - RECENT_PERMISSIONS :], e.approval_id))
    if isinstance(e, ASK_EVENTS):
        asks, closed = evolve_ask(state.asks, state.closed, e)
        return dataclasses.replace(state, asks=asks, closed=closed)
    return state


class RunAggregate:
    category = "run"

    def initial(self, id: str) -> RunState:
        return RunState(id)

    def decide(self, state: RunState, command: object, now: datetime) -> Decision:
        return decide(state, command, now)

    def evolve(self, state: RunState, event: Event) -> RunState:
        return evolve(state, event)


RUNS = RunAggregate()
