"""The operator timeline: a run's conversation as the controller renders it.

A run's timeline is its session's timeline up to and including that run: earlier runs'
entries stay (the conversation goes on), their unfinished streaming deltas do not.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import orjson

from eventlog import Record

ASSISTANT_NAME = "Claw"
USER_NAME = "You"
COMPACTED = "Compacted the conversation to stay inside the model context window."
TRUNCATED = "Dropped earlier conversation to stay inside the model context window."


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One operator-visible item of a run: a message, a tool call, an error or a notice."""

    id: str
    kind: str
    at: datetime
    role: str = ""
    name: str = ""
    text: str = ""
    detail: str = ""
    status: str = ""

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "kind": self.kind}
        for key in ("role", "name", "text", "detail", "status"):
            value = getattr(self, key)
            if value:
                out[key] = value
        out["at"] = self.at
        return out


@dataclass(slots=True)
class _Slot:
    entry: TimelineEntry
    run_order: int
    stream: bool = False
    gone: bool = False


@dataclass(slots=True)
class _Session:
    slots: list[_Slot] = dataclasses.field(default_factory=list)
    by_id: dict[str, int] = dataclasses.field(default_factory=dict)
    runs: int = 0


@dataclass(slots=True)
class TimelineState:
    sessions: dict[str, _Session] = dataclasses.field(default_factory=dict)
    runs: dict[str, tuple[str, int]] = dataclasses.field(default_factory=dict)  # run -> (session, order)


def compact_json(value: Any) -> str:
    """Compact JSON with sorted keys, as Go's encoding/json writes maps."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


class TimelineView:
    """Every controller session's timeline, folded from AgentRunStarted and HarnessEventRecorded."""

    name = "timeline"
    version = 1
    types = frozenset({"AgentRunStarted", "HarnessEventRecorded"})

    def initial(self) -> TimelineState:
        return TimelineState()

    def apply(self, state: TimelineState, record: Record) -> TimelineState:
        d = record.data
        if record.type == "AgentRunStarted":
            session = state.sessions.setdefault(d["session_id"], _Session())
            session.runs += 1
            state.runs[d["run_id"]] = (d["session_id"], session.runs)
            return state
        where = state.runs.get(d["run_id"])
        if where is None:
            return state
        session = state.sessions[where[0]]
        apply_harness_event(
            session, where[1], d["type"], d["event_id"], d["data"], datetime.fromisoformat(d["at"])
        )
        return state

    def copy(self, state: TimelineState) -> TimelineState:
        sessions = {
            k: _Session(
                [_Slot(s.entry, s.run_order, s.stream, s.gone) for s in v.slots], dict(v.by_id), v.runs
            )
            for k, v in state.sessions.items()
        }
        return TimelineState(sessions, dict(state.runs))

    def dump(self, state: TimelineState) -> dict[str, Any]:
        return {run_id: [e.to_dict() for e in render(state, run_id)] for run_id in sorted(state.runs)}


def apply_harness_event(
    session: _Session, order: int, type_: str, event_id: str, data: dict[str, Any], at: datetime
) -> None:

    def add(entry: TimelineEntry, stream: bool = False) -> None:
        session.by_id[entry.id] = len(session.slots)
        session.slots.append(_Slot(entry, order, stream))

    if type_ == "user.message":
        delivery = str(data.get("delivery") or data.get("status") or "")
        status = delivery if delivery in ("steering", "queued") else ""
        add(
            TimelineEntry(
                event_id, "message", at, "user", USER_NAME, str(data.get("content", "")), status=status
            )
        )
    elif type_ == "assistant.message":
        message_id = str(data.get("message_id") or "active")
        stream_pos = session.by_id.pop(f"stream-{order}-{message_id}", None)
        if stream_pos is not None:
            session.slots[stream_pos].gone = True
        entry_id = str(data.get("message_id") or event_id)
        add(TimelineEntry(entry_id, "message", at, "assistant", ASSISTANT_NAME, str(data.get("content", ""))))
    elif type_ == "assistant.delta":
        message_id = str(data.get("message_id") or "active")
        key = f"stream-{order}-{message_id}"
        pos = session.by_id.get(key)
        if pos is None:
            entry = TimelineEntry(
                f"stream-{message_id}",
                "message",
                at,
                "assistant",
                ASSISTANT_NAME,
                str(data.get("delta", "")),
                status="streaming",
            )
            session.by_id[key] = len(session.slots)
            session.slots.append(_Slot(entry, order, stream=True))
        else:
            slot = session.slots[pos]
            slot.entry = dataclasses.replace(slot.entry, text=slot.entry.text + str(data.get("delta", "")))
    elif type_ == "tool.start":
        call_id = str(data.get("tool_call_id") or event_id)
        detail = compact_json(data.get("arguments", {}))
        add(
            TimelineEntry(
                call_id, "tool", at, name=str(data.get("tool_name", "")), detail=detail, status="running"
            )
        )
    elif type_ == "tool.complete":
        pos = session.by_id.get(str(data.get("tool_call_id") or ""))
        if pos is not None:
            slot = session.slots[pos]
            failed = isinstance(data.get("error"), str) and bool(data.get("error"))
            slot.entry = dataclasses.replace(
                slot.entry, status="failed" if failed else "complete", detail=compact_json(data)
            )
    elif type_ == "session.error":
        add(
            TimelineEntry(
                event_id, "error", at, name=ASSISTANT_NAME, text=str(data.get("message", "")), status="failed"
            )
        )
    elif type_ == "session.shutdown":
        reason = str(data.get("reason") or "")
        text = f"The agent runtime stopped: {reason}" if reason else "The agent runtime stopped."
        add(TimelineEntry(event_id, "notice", at, text=text, status="stopped"))
    elif type_ == "warning":
        add(TimelineEntry(event_id, "notice", at, text=str(data.get("message", "")), status="warning"))
    elif type_ == "compaction":
        add(TimelineEntry(event_id, "notice", at, text=COMPACTED, status="compacted"))
    elif type_ == "truncation":
        add(TimelineEntry(event_id, "notice", at, text=TRUNCATED, status="truncated"))


def render(state: TimelineState, run_id: str) -> list[TimelineEntry]:
    """The timeline as the operator saw it during `run_id`, ordered by time (stable)."""
    where = state.runs.get(run_id)
    if where is None:
        return []
    session, order = state.sessions[where[0]], where[1]
    entries = [
        s.entry
        for s in session.slots
        if not s.gone and s.run_order <= order and not (s.stream and s.run_order != order)
    ]
    return sorted(entries, key=lambda e: e.at)
