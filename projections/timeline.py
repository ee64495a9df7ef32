"""The operator timeline: a run's conversation as the controller renders it.

A run's timeline is its session's timeline up to and including that run: earlier runs'
entries stay (the conversation goes on), their unfinished streaming deltas do not. A run's
harness events count while it is its session's newest run (the controller records none
later; a late one is ignored, as the seed ignores late harness events), and a tool's
completion ends a tool call its own run started and that is still running: so a run's entries
are settled once its session's next run starts, and a tool call's once it ended.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from eventlog import Record

from ._view import canonical

ASSISTANT_NAME = "Claw"
USER_NAME = "You"
COMPACTED = "Compacted the conversation to stay inside the model context window."
TRUNCATED = "Dropped earlier conversation to stay inside the model context window."


@dataclass(frozen=True, slots=True)
class TimelineEntry:
    """One operator-visible item of a run: a message, a tool call, an error or a notice.

    `seq` is the seq of the event that created the entry: unique within a timeline and
    stable as the run goes on, so it is the key diffs match entries by (`id` follows the
    seed's rules and may be empty or repeat). It is where the entry sits in the log, not
    what it says, so it takes no part in equality.
    """

    id: str
    kind: str
    at: datetime
    role: str = ""
    name: str = ""
    text: str = ""
    detail: str = ""
    status: str = ""
    seq: int = field(default=0, compare=False)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "seq": self.seq, "kind": self.kind}
        for key in ("role", "name", "text", "detail", "status"):
            value = getattr(self, key)
            if value:
                out[key] = value
        out["at"] = self.at
        return out


# A slot is a list, `[id, kind, at, role, name, text, detail, status, run_order, stream, gone,
# seq]`: the fold edits it in place and the dump is the list itself. `at` stays the ISO time as
# recorded; entries (with a parsed time) are built only when a timeline is rendered. `seq` is
# the seq of the record that created the slot.
ID, KIND, AT, ROLE, NAME, TEXT, DETAIL, STATUS, ORDER, STREAM, GONE, SEQ = range(12)

SessionKey = tuple[str, str]  # (stream, session id): a fork replays a session in a stream of its own


@dataclass(slots=True)
class _Session:
    key: SessionKey
    slots: list[list[Any]] = dataclasses.field(default_factory=list)
    by_id: dict[str, int] = dataclasses.field(default_factory=dict)
    runs: int = 0
    parts: dict[int, list[str]] = dataclasses.field(default_factory=dict)  # slot -> streamed text to join


Session = _Session  # one session's slots, for the folds that build it themselves (agent_fold)


@dataclass(slots=True)
class TimelineState:
    """Every session's slots, and where each run is: its session and its order in it."""

    sessions: dict[SessionKey, _Session] = dataclasses.field(default_factory=dict)
    runs: dict[str, tuple[_Session, int]] = dataclasses.field(default_factory=dict)


def compact_json(value: Any) -> str:
    """Compact JSON with sorted keys, as Go's encoding/json writes maps."""
    return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()


class TimelineView:
    """Every controller session's timeline, folded from AgentRunStarted and HarnessEventRecorded.

    Sessions are keyed by stream and session id, so the state of one controller stream is
    folded from that stream alone: a run's timeline at any moment needs only its own stream.
    """

    name = "timeline"
    # 3: slots carry the seq that created them; 4: a run's harness events count only while it is
    # its session's newest run, and a completion ends only a tool call its own run started;
    # 5: and only one still running (a second completion changes nothing)
    version = 5
    types = frozenset({"AgentRunStarted", "HarnessEventRecorded"})

    def initial(self) -> TimelineState:
        return TimelineState()

    def apply(self, state: TimelineState, record: Record) -> TimelineState:
        d = record.data
        if record.type == "AgentRunStarted":
            key = (record.stream, d["session_id"])
            session = state.sessions.get(key)
            if session is None:
                session = state.sessions[key] = _Session(key)
            session.runs += 1
            state.runs[d["run_id"]] = (session, session.runs)
            return state
        where = state.runs.get(d["run_id"])
        if where is None:
            return state
        session, order = where
        if order != session.runs:  # late: once the session's next run started, as the seed ignores them
            return state
        data = d["data"]
        if d["type"] == "assistant.delta":  # most harness events: handled here, without a call
            pos = session.by_id.get(f"stream-{order}-{data.get('message_id') or 'active'}")
            if pos is not None:
                parts = session.parts.get(pos)
                if parts is None:
                    session.parts[pos] = [str(data.get("delta", ""))]
                else:
                    parts.append(str(data.get("delta", "")))
                return state
        apply_harness_event(session, order, d["type"], d["event_id"], data, d["at"], record.seq)
        return state

    def copy(self, state: TimelineState) -> TimelineState:
        sessions = {
            k: _Session(
                k,
                [list(slot) for slot in v.slots],
                dict(v.by_id),
                v.runs,
                {i: list(p) for i, p in v.parts.items()},
            )
            for k, v in state.sessions.items()
        }
        runs = {run_id: (sessions[session.key], order) for run_id, (session, order) in state.runs.items()}
        return TimelineState(sessions, runs)

    def dump(self, state: TimelineState) -> dict[str, Any]:
        """The whole state: each run's place, and the sessions (by stream and id) with their slots."""
        return {
            "runs": _dump_runs(state),
            "sessions": [_dump_session(session) for _, session in sorted(state.sessions.items())],
        }

    def dump_chunks(self, state: TimelineState) -> Iterator[bytes]:
        """`canonical(self.dump(state))` in pieces, one session at a time (bounded memory)."""
        yield b'{"runs":' + canonical(_dump_runs(state)) + b',"sessions":['
        for i, (_, session) in enumerate(sorted(state.sessions.items())):
            yield (b"," if i else b"") + canonical(_dump_session(session))
        yield b"]}"

    def load(self, data: dict[str, Any]) -> TimelineState:
        state = TimelineState()
        for s in data["sessions"]:
            key = (s["stream"], s["session_id"])
            state.sessions[key] = _Session(key, s["slots"], dict(s["by_id"]), s["runs"])
        for run_id, (stream, session_id, order) in data["runs"].items():
            state.runs[run_id] = (state.sessions[(stream, session_id)], order)
        return state


def _dump_runs(state: TimelineState) -> dict[str, list[Any]]:
    return {run_id: [s.key[0], s.key[1], order] for run_id, (s, order) in state.runs.items()}


def _dump_session(session: _Session) -> dict[str, Any]:
    slots = session.slots
    if session.parts:  # streamed text is joined in: the dump shows each slot as it reads
        slots = list(slots)
        for i, parts in session.parts.items():
            slot = slots[i] = list(slots[i])
            slot[TEXT] += "".join(parts)
    return {
        "stream": session.key[0],
        "session_id": session.key[1],
        "runs": session.runs,
        "slots": slots,
        "by_id": session.by_id,
    }


def _add(session: _Session, slot: list[Any]) -> None:
    session.by_id[slot[ID]] = len(session.slots)
    session.slots.append(slot)


def apply_harness_event(
    session: _Session, order: int, type_: str, event_id: str, data: dict[str, Any], when: str, seq: int
) -> None:
    """Apply one harness event (record `seq`, recorded at the ISO time `when`) to its session, in place."""
    # This runs for most records of a log: slots are plain lists edited in place.
    if type_ == "assistant.delta":
        message_id = str(data.get("message_id") or "active")
        key = f"stream-{order}-{message_id}"
        pos = session.by_id.get(key)
        delta = str(data.get("delta", ""))
        if pos is None:
            session.by_id[key] = len(session.slots)
            session.slots.append(
                [f"stream-{message_id}", "message", when, "assistant", ASSISTANT_NAME, delta, "", "streaming",
                 order, True, False, seq]
            )  # fmt: skip
        else:
            # Deltas are kept as parts and joined when read: a long stream stays linear.
            parts = session.parts.get(pos)
            if parts is None:
                session.parts[pos] = [delta]
            else:
                parts.append(delta)
    elif type_ == "user.message":
        delivery = str(data.get("delivery") or data.get("status") or "")
        status = delivery if delivery in ("steering", "queued") else ""
        content = str(data.get("content", ""))
        _add(
            session,
            [event_id, "message", when, "user", USER_NAME, content, "", status, order, False, False, seq],
        )
    elif type_ == "assistant.message":
        message_id = str(data.get("message_id") or "active")
        stream_pos = session.by_id.pop(f"stream-{order}-{message_id}", None)
        if stream_pos is not None:
            # The message replaces its stream: the stream's text is never shown again.
            gone = session.slots[stream_pos]
            gone[TEXT], gone[GONE] = "", True
            session.parts.pop(stream_pos, None)
        entry_id = str(data.get("message_id") or event_id)
        content = str(data.get("content", ""))
        _add(
            session,
            [
                entry_id,
                "message",
                when,
                "assistant",
                ASSISTANT_NAME,
                content,
                "",
                "",
                order,
                False,
                False,
                seq,
            ],
        )
    elif type_ == "tool.start":
        call_id = str(data.get("tool_call_id") or event_id)
        detail = compact_json(data.get("arguments", {}))
        name = str(data.get("tool_name", ""))
        _add(session, [call_id, "tool", when, "", name, "", detail, "running", order, False, False, seq])
    elif type_ == "tool.complete":
        pos = session.by_id.get(str(data.get("tool_call_id") or ""))
        slot = session.slots[pos] if pos is not None else None
        # It ends a tool call its own run started and that is still running: the first one wins.
        if slot is not None and slot[ORDER] == order and slot[KIND] == "tool" and slot[STATUS] == "running":
            failed = isinstance(data.get("error"), str) and bool(data.get("error"))
            slot[DETAIL], slot[STATUS] = compact_json(data), "failed" if failed else "complete"
    elif type_ == "session.error":
        text = str(data.get("message", ""))
        _add(
            session,
            [event_id, "error", when, "", ASSISTANT_NAME, text, "", "failed", order, False, False, seq],
        )
    elif type_ == "session.shutdown":
        reason = str(data.get("reason") or "")
        text = f"The agent runtime stopped: {reason}" if reason else "The agent runtime stopped."
        _add(session, [event_id, "notice", when, "", "", text, "", "stopped", order, False, False, seq])
    elif type_ == "warning":
        text = str(data.get("message", ""))
        _add(session, [event_id, "notice", when, "", "", text, "", "warning", order, False, False, seq])
    elif type_ == "compaction":
        _add(
            session, [event_id, "notice", when, "", "", COMPACTED, "", "compacted", order, False, False, seq]
        )
    elif type_ == "truncation":
        _add(
            session, [event_id, "notice", when, "", "", TRUNCATED, "", "truncated", order, False, False, seq]
        )


def render(state: TimelineState, run_id: str) -> list[TimelineEntry]:
    """The timeline as the operator saw it during `run_id`, ordered by time (stable)."""
    where = state.runs.get(run_id)
    if where is None:
        return []
    session, order = where
    entries = [slot_entry(session, i, s) for i, s in enumerate(session.slots) if shows(s, order)]
    return sorted(entries, key=lambda e: e.at)


def shows(s: list[Any], order: int) -> bool:
    """Whether the run at `order` in its session shows slot `s`: not replaced, not a later
    run's, and not another run's unfinished stream."""
    return not (s[GONE] or s[ORDER] > order or (s[STREAM] and s[ORDER] != order))


def slot_entry(session: Session, i: int, s: list[Any]) -> TimelineEntry:
    """The entry slot `s` (at `i` in `session`) shows, its streamed text joined in."""
    parts = session.parts.get(i)
    text = s[TEXT] + "".join(parts) if parts else s[TEXT]
    at = datetime.fromisoformat(s[AT])
    return TimelineEntry(s[ID], s[KIND], at, s[ROLE], s[NAME], text, s[DETAIL], s[STATUS], s[SEQ])


@dataclass(frozen=True, slots=True)
class RunMoment:
    """A run right after one of its events: the event, the run's status then, and its timeline."""

    seq: int
    at: datetime
    type: str
    status: str
    entries: tuple[TimelineEntry, ...]

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "at": self.at,
            "type": self.type,
            "status": self.status,
            "entries": [e.to_dict() for e in self.entries],
        }
