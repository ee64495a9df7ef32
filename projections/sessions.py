"""Session views: every session, each agent's last activity per user, and a session's history."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from eventlog import Record

RUNNING = "running"  # the status of a turn whose end is not recorded (yet)


@dataclass(frozen=True, slots=True)
class SessionRow:
    """One session as the sessions view shows it."""

    session_id: str
    key: str
    kind: str
    channel: str
    user_id: str
    agent_id: str
    group_id: str
    project_id: str
    parent_id: str
    created_at: datetime
    first_seq: int
    archived: bool = False
    turns: int = 0
    compactions: int = 0
    open_turn: str = ""
    last_active: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "session_id": self.session_id,
            "key": self.key,
            "kind": self.kind,
            "channel": self.channel,
            "user_id": self.user_id,
            "agent_id": self.agent_id,
            "group_id": self.group_id,
            "project_id": self.project_id,
            "parent_id": self.parent_id,
            "created_at": self.created_at,
            "first_seq": self.first_seq,
            "archived": self.archived,
            "turns": self.turns,
            "compactions": self.compactions,
            "open_turn": self.open_turn,
            "last_active": self.last_active,
        }


# The session events the two summary views read (never the many TurnEventRecorded).
SESSION_TYPES = frozenset(
    {"SessionCreated", "SessionArchived", "TurnStarted", "TurnFinished", "SessionCompacted"}
)


class SessionsView:
    """Every session: identity, owner, agent, group, archived, turns and last activity."""

    name = "sessions"
    version = 1
    types = SESSION_TYPES

    def initial(self) -> dict[str, SessionRow]:
        return {}

    def apply(self, state: dict[str, SessionRow], record: Record) -> dict[str, SessionRow]:
        d = record.data
        sid = d["session_id"]
        if record.type == "SessionCreated":
            at = _at(d["at"])
            state[sid] = SessionRow(
                sid, d["key"], d["kind"], d["channel"], d["user_id"], d["agent_id"], d["group_id"],
                d["project_id"], d["parent_id"], at, record.seq, last_active=at,
            )  # fmt: skip
            return state
        r = state.get(sid)
        if r is None:
            return state
        archived, turns, compactions, open_turn = r.archived, r.turns, r.compactions, r.open_turn
        last = r.last_active
        t = record.type
        if t == "SessionArchived":
            archived = True
        elif t == "TurnStarted":
            turns, open_turn, last = turns + 1, d["turn_id"], _later(last, _at(d["at"]))
        elif t == "TurnFinished":
            open_turn = "" if open_turn == d["turn_id"] else open_turn
            last = _later(last, _at(d["at"]))
        else:  # SessionCompacted
            compactions += 1
        state[sid] = SessionRow(
            sid, r.key, r.kind, r.channel, r.user_id, r.agent_id, r.group_id, r.project_id, r.parent_id,
            r.created_at, r.first_seq, archived, turns, compactions, open_turn, last,
        )  # fmt: skip
        return state

    def copy(self, state: dict[str, SessionRow]) -> dict[str, SessionRow]:
        return dict(state)  # rows are frozen: a shallow copy is a snapshot

    def dump(self, state: dict[str, SessionRow]) -> list[dict[str, Any]]:
        return [row.to_dict() for row in session_order(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, SessionRow]:
        rows = (
            SessionRow(
                d["session_id"], d["key"], d["kind"], d["channel"], d["user_id"], d["agent_id"],
                d["group_id"], d["project_id"], d["parent_id"], _at(d["created_at"]), d["first_seq"],
                d["archived"], d["turns"], d["compactions"], d["open_turn"], _when(d["last_active"]),
            )
            for d in data
        )  # fmt: skip
        return {row.session_id: row for row in rows}


def session_order(state: dict[str, SessionRow]) -> list[SessionRow]:
    return sorted(state.values(), key=lambda r: (r.first_seq, r.session_id))


@dataclass
class ActivityState:
    """Who owns each session (user, agent), and each user's last activity per agent."""

    owners: dict[str, tuple[str, str]]
    last: dict[str, dict[str, datetime]]


class AgentActivityView:
    """The last-active time per agent of each user's own conversations."""

    name = "agent_activity"
    version = 1
    types = frozenset({"SessionCreated", "TurnStarted", "TurnFinished", "SessionCompacted"})

    def initial(self) -> ActivityState:
        return ActivityState({}, {})

    def apply(self, state: ActivityState, record: Record) -> ActivityState:
        d = record.data
        sid = d["session_id"]
        if record.type == "SessionCreated":
            state.owners[sid] = (d["user_id"], d["agent_id"])
        owner = state.owners.get(sid)
        if owner is None or not owner[1]:
            return state  # an unknown session, or one without an agent: no activity to show
        user, agent = owner
        per_agent = state.last.setdefault(user, {})
        per_agent[agent] = _later(per_agent.get(agent), _at(d["at"]))
        return state

    def copy(self, state: ActivityState) -> ActivityState:
        return ActivityState(dict(state.owners), {u: dict(a) for u, a in state.last.items()})

    def dump(self, state: ActivityState) -> dict[str, Any]:
        return {
            "owners": [[sid, *state.owners[sid]] for sid in sorted(state.owners)],
            "last": [
                [user, agent, state.last[user][agent]]
                for user in sorted(state.last)
                for agent in sorted(state.last[user])
            ],
        }

    def load(self, data: dict[str, Any]) -> ActivityState:
        state = ActivityState({sid: (user, agent) for sid, user, agent in data["owners"]}, {})
        for user, agent, at in data["last"]:
            state.last.setdefault(user, {})[agent] = _at(at)
        return state


def last_active(state: ActivityState, user_id: str) -> dict[str, datetime]:
    """Agent id -> last-active time of `user_id`'s conversations (agents without any omitted)."""
    return dict(sorted(state.last.get(user_id, {}).items()))


# -- a session's history -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnEvent:
    """One harness event of a turn, as recorded."""

    type: str
    id: str
    data: dict[str, Any]
    at: datetime
    seq: int

    def to_dict(self) -> dict[str, Any]:
        return {"type": self.type, "id": self.id, "data": self.data, "at": self.at, "seq": self.seq}


@dataclass(frozen=True, slots=True)
class SessionTurn:
    """One turn of a session: what was asked, every event it published, and how it ended.

    `summary` is set on a compaction turn whose summary the session recorded.
    """

    turn_id: str
    entry: str
    prompt: str
    started_at: datetime
    extra_tools: tuple[str, ...] = ()
    excluded_tools: tuple[str, ...] = ()
    system_prompt: str = ""
    events: tuple[TurnEvent, ...] = ()
    status: str = RUNNING
    output: str = ""
    error: str = ""
    finished_at: datetime | None = None
    summary: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "turn_id": self.turn_id,
            "entry": self.entry,
            "prompt": self.prompt,
            "started_at": self.started_at,
            "extra_tools": list(self.extra_tools),
            "excluded_tools": list(self.excluded_tools),
            "system_prompt": self.system_prompt,
            "events": [e.to_dict() for e in self.events],
            "status": self.status,
            "output": self.output,
            "error": self.error,
            "finished_at": self.finished_at,
            "summary": self.summary,
        }


def session_history(records: Iterable[Record]) -> list[SessionTurn]:
    """A session's turns in order, folded from its stream's records (any prefix of it)."""
    turns: dict[str, SessionTurn] = {}
    events: dict[str, list[TurnEvent]] = {}
    for record in records:
        d = record.data
        t = record.type
        if t == "TurnStarted":
            turns[d["turn_id"]] = SessionTurn(
                d["turn_id"], d["entry"], d["prompt"], _at(d["at"]), tuple(d["extra_tools"]),
                tuple(d["excluded_tools"]), d["system_prompt"],
            )  # fmt: skip
            events[d["turn_id"]] = []
        elif t == "TurnEventRecorded" and d["turn_id"] in events:
            events[d["turn_id"]].append(
                TurnEvent(d["type"], d["event_id"], d["data"], _at(d["at"]), record.seq)
            )
        elif t == "TurnFinished" and d["turn_id"] in turns:
            turns[d["turn_id"]] = replace(
                turns[d["turn_id"]], status=d["status"], output=d["output"], error=d["error"],
                finished_at=_at(d["at"]),
            )  # fmt: skip
        elif t == "SessionCompacted" and d["turn_id"] in turns:
            turns[d["turn_id"]] = replace(turns[d["turn_id"]], summary=d["summary"])
    return [replace(turn, events=tuple(events[tid])) for tid, turn in turns.items()]


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


def _when(value: str | None) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def _later(a: datetime | None, b: datetime) -> datetime:
    return b if a is None or b > a else a
