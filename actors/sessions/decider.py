"""The session aggregate as a pure decider: the registry's resolution rules and a session's turns.

One stream per session (`session-<id>`). `Ensure` is the registry's resolution of a request
against what the stream says (resume, exact-id creation, or not found); the turn commands
record a conversation turn by turn, each harness event as it arrives.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from eventlog import Event
from eventlog.events import (
    SessionArchived,
    SessionCompacted,
    SessionCreated,
    TurnEventRecorded,
    TurnFinished,
    TurnStarted,
)

from .._aggregate import Decision
from .._errors import (
    GroupCompactionUnsupportedError,
    InvalidSessionRequestError,
    SessionArchivedError,
    SessionForbiddenError,
    SessionNotFoundError,
    SessionWrongKindError,
)
from ..harnesses import ASSISTANT_MESSAGE, SESSION_ERROR, SESSION_IDLE, SESSION_SHUTDOWN
from .keys import DEFAULT_SESSION_KIND, build_group_session_key, default_channel

TURN_SUCCEEDED: Final = "succeeded"
TURN_FAILED: Final = "failed"
TURN_INTERRUPTED: Final = "interrupted"  # the process stopped, or a new turn found it unfinished

# The harness events that end a turn, as they end a controller run.
TURN_TERMINAL: Final = frozenset({SESSION_IDLE, SESSION_ERROR, SESSION_SHUTDOWN})


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session as the registry knows it: identity, owner, agent, group, project."""

    id: str
    key: str
    kind: str
    channel: str
    user_id: str
    agent_id: str
    group_id: str = ""
    project_id: str = ""
    parent_id: str = ""
    archived: bool = False
    created_at: datetime | None = None

    @property
    def is_group(self) -> bool:
        return bool(self.group_id)


@dataclass(frozen=True, slots=True)
class SessionRequest:
    """What a caller asks the registry for (the seed's `session.Request`).

    A group request is owned by its group: the owner is `group_id` whenever it is set.
    """

    session_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    kind: str = ""
    channel: str = ""
    require_kind: str = ""
    group_id: str = ""
    key: str = ""
    project_id: str = ""
    parent_id: str = ""
    allow_exact_id_create: bool = False
    create_if_missing: bool = False

    @property
    def owner(self) -> str:
        return self.group_id or self.user_id

    def validate(self) -> None:
        """Raise InvalidSessionRequestError when the user or the agent is missing."""
        if not self.owner:
            raise InvalidSessionRequestError("UserID is required")
        if not self.agent_id:
            raise InvalidSessionRequestError("AgentID is required")


@dataclass(frozen=True, slots=True)
class OpenTurn:
    """The turn in progress: the event ids seen so far, its last assistant output and its error."""

    turn_id: str
    entry: str
    seen: frozenset[str] = frozenset()
    output: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True)
class SessionState:
    """What the log says about one session."""

    id: str
    info: SessionInfo | None = None
    turns: int = 0
    turn: OpenTurn | None = None
    summary: str = ""
    last_active: datetime | None = None


# -- commands ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Ensure:
    """Resolve a request against this session: resume it, create it with its exact id, or refuse."""

    request: SessionRequest


@dataclass(frozen=True, slots=True)
class Archive:
    user_id: str
    agent_id: str


@dataclass(frozen=True, slots=True)
class StartTurn:
    turn_id: str
    entry: str
    prompt: str
    extra_tools: tuple[str, ...] = ()
    excluded_tools: tuple[str, ...] = ()
    system_prompt: str = ""


@dataclass(frozen=True, slots=True)
class RecordTurnEvent:
    turn_id: str
    type: str
    event_id: str = ""
    data: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class FinishTurn:
    turn_id: str
    status: str
    error: str = ""


@dataclass(frozen=True, slots=True)
class Compact:
    turn_id: str
    summary: str
    keep_tail: int


SessionCommand = Ensure | Archive | StartTurn | RecordTurnEvent | FinishTurn | Compact


def decide(state: SessionState, command: SessionCommand, now: datetime) -> Decision:
    """The events a command produces, and the error the caller gets (nothing is recorded then)."""
    if isinstance(command, Ensure):
        return _ensure(state, command.request, now)
    info = state.info
    if info is None:
        return Decision(error=SessionNotFoundError(state.id))
    if isinstance(command, Archive):
        if info.user_id != command.user_id or info.agent_id != command.agent_id:
            return Decision(error=SessionForbiddenError(state.id))
        if info.archived:
            return Decision()
        return Decision([SessionArchived(state.id, command.user_id, now)])
    if isinstance(command, StartTurn):
        return _start_turn(state, info, command, now)
    if isinstance(command, Compact):
        if info.is_group:
            return Decision(error=GroupCompactionUnsupportedError())
        compacted = SessionCompacted(state.id, command.turn_id, command.summary, command.keep_tail, now)
        return Decision([compacted])
    turn = state.turn
    if turn is None or turn.turn_id != command.turn_id:
        return Decision()  # the turn already ended: a late event or a second finish changes nothing
    if isinstance(command, RecordTurnEvent):
        return _record(state, turn, command, now)
    return Decision([_finished(state, turn, command.status, command.error, now)])


def _ensure(state: SessionState, req: SessionRequest, now: datetime) -> Decision:
    req.validate()
    info = state.info
    if info is not None:
        if info.user_id != req.owner or info.agent_id != req.agent_id:
            return Decision(error=SessionForbiddenError(state.id))
        if info.archived:
            return Decision(error=SessionArchivedError(state.id))
        if req.require_kind and info.kind != req.require_kind:
            return Decision(error=SessionWrongKindError(info.kind, req.require_kind, state.id))
        if req.group_id and req.group_id != info.group_id:
            # A request in a group may use only that group's own session.
            return Decision(error=SessionForbiddenError(state.id))
        return Decision()
    if not (req.allow_exact_id_create and req.create_if_missing):
        return Decision(error=SessionNotFoundError(state.id))
    kind = req.kind or DEFAULT_SESSION_KIND
    key = req.key or (build_group_session_key(req.agent_id, req.group_id) if req.group_id else "")
    created = SessionCreated(
        state.id,
        key,
        kind,
        req.channel or default_channel(kind),
        req.owner,
        req.agent_id,
        req.group_id,
        req.project_id,
        req.parent_id,
        now,
    )
    return Decision([created])


def _start_turn(state: SessionState, info: SessionInfo, c: StartTurn, now: datetime) -> Decision:
    if info.archived:
        return Decision(error=SessionArchivedError(state.id))
    events: list[Event] = []
    if state.turn is not None:
        # Only one turn runs per session; an unfinished one means its process stopped.
        why = "a later turn started before this one finished"
        events.append(_finished(state, state.turn, TURN_INTERRUPTED, why, now))
    started = TurnStarted(
        state.id, c.turn_id, c.entry, c.prompt, c.extra_tools, c.excluded_tools, c.system_prompt, now
    )
    return Decision([*events, started])


def _record(state: SessionState, turn: OpenTurn, cmd: RecordTurnEvent, now: datetime) -> Decision:
    if cmd.event_id and cmd.event_id in turn.seen:
        return Decision()  # the first event with an id wins
    recorded = TurnEventRecorded(state.id, turn.turn_id, cmd.type, cmd.event_id, dict(cmd.data), now)
    if cmd.type not in TURN_TERMINAL:
        return Decision([recorded])
    after = _evolve_turn(turn, recorded)
    if cmd.type == SESSION_IDLE:
        status, error = TURN_SUCCEEDED, ""
    elif cmd.type == SESSION_ERROR:
        status, error = TURN_FAILED, after.error or "session error"
    else:
        reason = str(cmd.data.get("reason") or "")
        stopped = f"The agent runtime stopped: {reason}" if reason else "The agent runtime stopped."
        status, error = TURN_FAILED, stopped
    return Decision([recorded, _finished(state, after, status, error, now)])


def _finished(state: SessionState, turn: OpenTurn, status: str, error: str, now: datetime) -> TurnFinished:
    return TurnFinished(state.id, turn.turn_id, status, turn.output, error, now)


def evolve(state: SessionState, event: Event) -> SessionState:
    """The state after one recorded event."""
    if isinstance(event, SessionCreated):
        info = SessionInfo(
            event.session_id,
            event.key,
            event.kind,
            event.channel,
            event.user_id,
            event.agent_id,
            event.group_id,
            event.project_id,
            event.parent_id,
            False,
            event.at,
        )
        return dataclasses.replace(state, info=info, last_active=event.at)
    if isinstance(event, SessionArchived) and state.info is not None:
        return dataclasses.replace(state, info=dataclasses.replace(state.info, archived=True))
    if isinstance(event, TurnStarted):
        turn = OpenTurn(event.turn_id, event.entry)
        return dataclasses.replace(state, turn=turn, turns=state.turns + 1, last_active=event.at)
    if isinstance(event, TurnEventRecorded) and state.turn is not None:
        if state.turn.turn_id == event.turn_id:
            return dataclasses.replace(state, turn=_evolve_turn(state.turn, event))
        return state
    if isinstance(event, TurnFinished) and state.turn is not None and state.turn.turn_id == event.turn_id:
        return dataclasses.replace(state, turn=None, last_active=event.at)
    if isinstance(event, SessionCompacted):
        return dataclasses.replace(state, summary=event.summary)
    return state


def _evolve_turn(turn: OpenTurn, event: TurnEventRecorded) -> OpenTurn:
    seen = turn.seen | {event.event_id} if event.event_id else turn.seen
    data = event.data
    if event.type == ASSISTANT_MESSAGE:
        return dataclasses.replace(turn, seen=seen, output=str(data.get("content", "")))
    if event.type == SESSION_ERROR:
        return dataclasses.replace(turn, seen=seen, error=str(data.get("message") or "session error"))
    return dataclasses.replace(turn, seen=seen)
