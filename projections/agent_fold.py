"""The timeline fold of one controller stream, resumable from a checkpoint that holds no entries.

A controller stream (one operator session's controller) holds its runs one after another, and
each run's timeline is its session's conversation up to and including it. The fold is the
timeline view's own (`TimelineView.apply`), over a state whose sessions hold only the slots
made after the checkpoint it starts from: the slots before it are counted, never held (a
scratch slot stands for one when a record reaches back to it, so what the record does to it
is dropped). What the fold needs to go on is small: per session, how many slots and runs it
has, the streamed messages still open (a delta or the final message may still reach them)
and its newest run with that run's status.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any, SupportsIndex, overload

import orjson

from eventlog import Record, RunCheckpointRow

from .agent_runs import FORKED
from .timeline import (
    GONE,
    KIND,
    ORDER,
    STATUS,
    STREAM,
    RunMoment,
    Session,
    TimelineEntry,
    TimelineState,
    TimelineView,
    shows,
    slot_entry,
)

_SLOT = 12  # fields of a slot (see projections.timeline)


class UnknownRun(Exception):
    """Raised when a record names a run the fold does not know: fold from further back."""


class Tail(list[list[Any]]):
    """A session's slots from `base` on; each one before it reads as a fresh scratch slot."""

    def __init__(self, base: int) -> None:
        super().__init__()
        self.base = base

    def __len__(self) -> int:
        return self.base + super().__len__()

    @overload
    def __getitem__(self, i: SupportsIndex) -> list[Any]: ...

    @overload
    def __getitem__(self, i: slice) -> list[list[Any]]: ...

    def __getitem__(self, i: SupportsIndex | slice) -> list[Any] | list[list[Any]]:
        if isinstance(i, slice):
            raise TypeError("a session's tail is read a slot at a time")
        n = int(i)
        if n < self.base:
            return [None] * _SLOT  # a slot before the checkpoint: what is done to it is not kept
        return super().__getitem__(n - self.base)

    def held(self, lo: int, hi: int) -> list[tuple[int, list[Any]]]:
        """The held slots from `lo` to `hi`, with their positions."""
        start = max(lo, self.base)
        return [(i, super(Tail, self).__getitem__(i - self.base)) for i in range(start, min(hi, len(self)))]


@dataclass(frozen=True, slots=True)
class SessionPoint:
    """One session of a controller stream at a checkpoint: all the fold needs to go on."""

    session_id: str
    runs: int
    made: int
    streams: tuple[tuple[str, int], ...]  # open streamed messages: their key, their slot
    latest: str  # the newest run ("" if its place is taken by another session's run)
    status: str  # that run's status then


@dataclass(frozen=True, slots=True)
class AgentCheckpoint:
    """The fold of a controller stream right after its record at `version` (log `seq`, chain `hash`)."""

    version: int
    seq: int
    hash: str
    sessions: tuple[SessionPoint, ...]

    def data(self) -> bytes:
        return orjson.dumps(
            [
                [s.session_id, s.runs, s.made, [list(p) for p in s.streams], s.latest, s.status]
                for s in self.sessions
            ]
        )

    def session(self, session_id: str) -> SessionPoint | None:
        return next((s for s in self.sessions if s.session_id == session_id), None)

    @classmethod
    def of(cls, row: RunCheckpointRow) -> AgentCheckpoint | None:
        """The checkpoint a stored row holds, or None if the row is not one."""
        try:
            sessions = tuple(
                SessionPoint(str(sid), int(runs), int(made), tuple((str(k), int(p)) for k, p in streams),
                             str(latest), str(status))
                for sid, runs, made, streams, latest, status in orjson.loads(row.data)
            )  # fmt: skip
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return None
        return cls(row.version, row.seq, row.hash, sessions)


class AgentFold:
    """The timeline fold of one controller stream, from `point` (or its start).

    `apply` folds one record with `TimelineView.apply` and keeps what a page needs besides
    the slots: each run's status, each session's newest run, and, for `target` (a run id and
    its session), when the next run of its session started (`ended`: its slot count then, and
    `end`: the record before, the last of the target's steps).
    """

    def __init__(self, stream: str, target: tuple[str, str], point: AgentCheckpoint | None = None) -> None:
        self.stream = stream
        self.view = TimelineView()
        self.state = TimelineState()
        self.status: dict[str, str] = {}
        self.latest: dict[str, str] = {}  # session id -> its newest run
        self.run_id, self.session_id = target
        self.order = 0  # the target's place in its session (0: not started)
        self.ended: int | None = None  # slots of the target's session when the next run started
        self.end: Record | None = None  # the stream's record just before that start
        self.next: Record | None = None  # that start
        self.last: Record | None = None
        self.resumed = point is not None
        for p in point.sessions if point is not None else ():
            session = Session((stream, p.session_id), Tail(p.made), dict(p.streams), p.runs)
            self.state.sessions[(stream, p.session_id)] = session
            if p.latest:
                self.state.runs[p.latest] = (session, p.runs)
                self.status[p.latest] = p.status
                self.latest[p.session_id] = p.latest
                if p.latest == self.run_id and p.session_id == self.session_id:
                    self.order = p.runs

    def apply(self, r: Record) -> None:
        t = r.type
        d = r.data
        before, self.last = self.last, r
        if t == "HarnessEventRecorded":
            if self.resumed and d["run_id"] not in self.state.runs:
                raise UnknownRun(d["run_id"])
            self.view.apply(self.state, r)
        elif t == "AgentRunStarted":
            run_id, session_id = d["run_id"], d["session_id"]
            key = (r.stream, session_id)
            if key not in self.state.sessions:  # every session holds its slots in a tail
                self.state.sessions[key] = Session(key, Tail(0))
            self.view.apply(self.state, r)
            self.latest[session_id] = run_id
            self.status.setdefault(run_id, "")
            if session_id == self.session_id:
                session = self.state.sessions[(r.stream, session_id)]
                if run_id == self.run_id:
                    self.order, self.ended = session.runs, None
                elif self.order and self.ended is None:
                    self.ended, self.end, self.next = len(session.slots), before, r
        elif t == "AgentRunStatusChanged":
            self.status[d["run_id"]] = d["status"]
        elif t == "ForkedFrom":
            self.status[d["run_id"]] = FORKED

    def session(self) -> Session | None:
        """The target's session, once it exists."""
        return self.state.sessions.get((self.stream, self.session_id))

    def made(self) -> int:
        session = self.session()
        return len(session.slots) if session is not None else 0

    def checkpoint(self, r: Record) -> AgentCheckpoint:
        """The checkpoint right after `r`, the last record folded."""
        points = []
        for (_, session_id), session in sorted(self.state.sessions.items()):
            latest = self.latest.get(session_id, "")
            where = self.state.runs.get(latest)
            if where is None or where[0] is not session or where[1] != session.runs:
                latest = ""  # that run's place is another session's now: not carried
            streams = tuple(sorted((k, p) for k, p in session.by_id.items() if k.startswith("stream-")))
            points.append(
                SessionPoint(session_id, session.runs, len(session.slots), streams, latest,
                             self.status.get(latest, "") if latest else "")
            )  # fmt: skip
        return AgentCheckpoint(r.version, r.seq, r.hash, tuple(points))

    def settled(self, lo: int, hi: int) -> bool:
        """Whether no later record can change the target's entries among slots `lo` to `hi`
        (held): none of its tool calls there still running, none of its streams still open."""
        session = self.session()
        slots = session.slots if session is not None else None
        if not isinstance(slots, Tail) or not self.order:
            return False
        for _, s in slots.held(lo, hi):
            if s[ORDER] == self.order and (
                (s[KIND] == "tool" and s[STATUS] == "running") or (s[STREAM] and not s[GONE])
            ):
                return False
        return True

    def entries(self, lo: int, hi: int) -> list[TimelineEntry]:
        """The target's timeline entries among slots `lo` to `hi` (those held), in time order."""
        session = self.session()
        slots = session.slots if session is not None else None
        if session is None or not isinstance(slots, Tail) or not self.order:
            return []
        out = [slot_entry(session, i, slot) for i, slot in slots.held(lo, hi) if shows(slot, self.order)]
        return sorted(out, key=lambda e: e.at)


def agent_moments(records: Iterable[Record], run_id: str) -> list[RunMoment]:
    """The controller run `run_id` right after each of its events (`records`: its stream, in
    order): the event, the run's status then, and its timeline.

    One fold of the stream. An entry is built again only when a record changed its slot (the
    new slot, the stream a delta or final message reaches, the tool call a completion ends),
    so a moment costs its record and a copy of the entries shown, not a timeline rendered anew.
    """
    view = TimelineView()
    state = TimelineState()
    status = ""
    order = 0
    shown: dict[int, TimelineEntry] = {}  # slot -> its entry, for the slots the run shows, in slot order
    newest: datetime | None = None
    ordered = True  # whether slot order is time order (else each moment's entries are sorted)
    moments = []
    for r in records:
        d = r.data
        mine = d.get("run_id") == run_id
        where = state.runs.get(d["run_id"]) if r.type == "HarnessEventRecorded" else None
        reached = _reached(where, d) if where is not None else ()
        made = len(where[0].slots) if where is not None else 0
        if r.type in view.types:
            view.apply(state, r)
        if r.type == "AgentRunStarted" and mine:
            session, order = state.runs[run_id]
            shown = {
                i: slot_entry(session, i, slot) for i, slot in enumerate(session.slots) if shows(slot, order)
            }
            ats = [e.at for e in shown.values()]
            ordered = all(a <= b for a, b in itertools.pairwise(ats))
            newest = max(ats, default=None)
        elif where is not None and order and where[0] is state.runs[run_id][0]:
            session = where[0]
            for i in (*reached, *range(made, len(session.slots))):
                slot = session.slots[i]
                if not shows(slot, order):
                    shown.pop(i, None)
                    continue
                entry = shown[i] = slot_entry(session, i, slot)
                if i >= made:  # a new slot: shown last, so it must not be older than those before it
                    ordered = ordered and (newest is None or newest <= entry.at)
                    newest = entry.at if newest is None else max(newest, entry.at)
        if not mine:
            continue
        if r.type == "AgentRunStatusChanged":
            status = d["status"]
        elif r.type == "ForkedFrom":
            status = FORKED
        entries = tuple(shown.values()) if ordered else tuple(sorted(shown.values(), key=lambda e: e.at))
        moments.append(RunMoment(r.seq, r.recorded_at, r.type, status, entries))
    return moments


def _reached(where: tuple[Session, int], d: dict[str, Any]) -> tuple[int, ...]:
    """The slots made before that a harness event may change (as `apply_harness_event` finds them)."""
    session, order = where
    data, type_ = d["data"], d["type"]
    if type_ in ("assistant.delta", "assistant.message"):
        pos = session.by_id.get(f"stream-{order}-{data.get('message_id') or 'active'}")
    elif type_ == "tool.complete":
        pos = session.by_id.get(str(data.get("tool_call_id") or ""))
    else:
        return ()
    return () if pos is None else (pos,)
