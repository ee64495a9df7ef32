"""Approval views: pending approvals (oldest first) and the full approval history."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Record, decode
from eventlog.events import (
    ApprovalAttemptRefused,
    ApprovalDecided,
    ApprovalDecisionRefused,
    ApprovalDiscarded,
    ApprovalPublished,
    ApprovalRequested,
    ApprovalVoted,
)

from ._rows import positional

RECORDING = "recording"
PENDING = "pending"
DISCARDED = "discarded"
WITHDRAWN = "withdrawn"  # an ApprovalDecided outcome: its requester gave the request up
TERMINAL = frozenset({"approve", "reject", "expired", WITHDRAWN, DISCARDED})


@dataclass(frozen=True, slots=True)
class RefusedAttempt:
    """A decision that arrived but could not count, kept in the audit trail.

    `agent_reported`: the answer came from someone who may not decide the approval at all
    (a run answering its own request that needs an operator), not from a late or second
    operator decision.
    """

    decision: str
    actor: str
    identity: str
    reason: str
    at: datetime
    seq: int
    agent_reported: bool = False

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"decision": self.decision, "actor": self.actor, "identity": self.identity,
                               "reason": self.reason, "at": self.at, "seq": self.seq}  # fmt: skip
        if self.agent_reported:  # only then: dumps of logs without such attempts stay as they were
            out["agent_reported"] = True
        return out


@dataclass(frozen=True, slots=True)
class ApprovalRow:
    """One approval as the audit trail knows it: the request, its digest and its outcome."""

    id: str
    run_id: str
    tool_call_id: str
    kind: str
    title: str
    detail: str
    risk: str
    payload_sha256: str
    requires_fleet_quorum: bool
    quorum: int
    requested_at: datetime
    expires_at: datetime
    requested_by: str
    status: str
    requested_seq: int
    decision: str = ""
    actor: str = ""
    identity: str = ""
    decided_at: datetime | None = None
    decided_seq: int = 0
    votes: tuple[str, ...] = ()
    refused: tuple[RefusedAttempt, ...] = ()

    @property
    def latency_ms(self) -> float | None:
        """Milliseconds from request to outcome; None while undecided."""
        if self.decided_at is None:
            return None
        return (self.decided_at - self.requested_at).total_seconds() * 1000.0

    @property
    def terminal(self) -> bool:
        return self.status in TERMINAL

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run_id": self.run_id,
            "tool_call_id": self.tool_call_id,
            "kind": self.kind,
            "title": self.title,
            "detail": self.detail,
            "risk": self.risk,
            "payload_sha256": self.payload_sha256,
            "requires_fleet_quorum": self.requires_fleet_quorum,
            "quorum": self.quorum,
            "requested_at": self.requested_at,
            "expires_at": self.expires_at,
            "requested_by": self.requested_by,
            "status": self.status,
            "requested_seq": self.requested_seq,
            "decision": self.decision,
            "actor": self.actor,
            "identity": self.identity,
            "decided_at": self.decided_at,
            "decided_seq": self.decided_seq,
            "votes": list(self.votes),
            "refused": [r.to_dict() for r in self.refused],
            "latency_ms": self.latency_ms,
        }  # fmt: skip


_new_row = positional(ApprovalRow)


# The two approval views fold each approval record in turn, from rows that are the same
# objects (both start empty and take each other's rows): the second reuses the first's work.
_last: tuple[Record | None, Any, ApprovalRow | None, ApprovalRow | None] = (None, None, None, None)


def _fold(rows: dict[str, ApprovalRow], record: Record) -> ApprovalRow | None:
    """Apply one approval record to `rows` (in place); return the row it produced."""
    global _last
    last = _last  # one read and one write of a tuple: safe when threads fold at once
    if last[0] is record:
        ev = last[1]
        old = rows.get(getattr(ev, "approval_id", ""))
        if old is last[2]:
            new = last[3]
            if new is not None:
                rows[new.id] = new
            return new
    else:
        ev = decode(record)
        old = rows.get(getattr(ev, "approval_id", ""))
    new = _next_row(ev, old, record.seq)
    if new is not None:
        rows[new.id] = new
    _last = (record, ev, old, new)
    return new


def _shared(value: Any) -> Any:
    """`value`, interned if it is a string: one object for every row that holds an equal one."""
    return sys.intern(value) if type(value) is str else value


def _next_row(ev: Any, old: ApprovalRow | None, seq: int) -> ApprovalRow | None:
    """The row an approval event makes of `old` (None: the event changes nothing)."""
    if isinstance(ev, ApprovalRequested):
        # The history keeps every approval for good: the strings a fleet repeats (run, kind,
        # tool, risk, who asked) are shared between rows rather than held once per approval.
        return _new_row(
            ev.approval_id, _shared(ev.run_id), ev.tool_call_id, _shared(ev.kind), _shared(ev.title),
            ev.detail, _shared(ev.risk), ev.payload_sha256, ev.requires_fleet_quorum, ev.quorum,
            ev.requested_at, ev.expires_at, _shared(ev.requested_by), RECORDING, seq, "", "", "",
            None, 0, (), (),
        )  # fmt: skip
    if old is None:
        return None
    # dataclasses.replace is several times slower than building the row: this runs per event.
    if isinstance(ev, ApprovalPublished):
        return _derive(old, PENDING)
    if isinstance(ev, ApprovalDiscarded):
        return _derive(old, DISCARDED, decided_at=ev.at, decided_seq=seq)
    if isinstance(ev, ApprovalVoted):
        return _derive(old, old.status, votes=(*old.votes, ev.actor))
    if isinstance(ev, ApprovalDecided):
        decision = _shared(ev.decision)
        return _derive(old, decision, decision, _shared(ev.actor), _shared(ev.identity), ev.at, seq)
    if isinstance(ev, ApprovalDecisionRefused):
        attempt = RefusedAttempt(ev.decision, ev.actor, ev.identity, ev.reason, ev.at, seq)
        return _derive(old, old.status, refused=(*old.refused, attempt))
    if isinstance(ev, ApprovalAttemptRefused):
        attempt = RefusedAttempt(ev.decision, ev.actor, "", ev.reason, ev.at, seq, agent_reported=True)
        return _derive(old, old.status, refused=(*old.refused, attempt))
    return None


_KEEP: Any = object()


def _derive(
    o: ApprovalRow,
    status: str,
    decision: str = _KEEP,
    actor: str = _KEEP,
    identity: str = _KEEP,
    decided_at: datetime | None = _KEEP,
    decided_seq: int = _KEEP,
    votes: tuple[str, ...] = _KEEP,
    refused: tuple[RefusedAttempt, ...] = _KEEP,
) -> ApprovalRow:
    """`o` with a new status and whichever outcome fields are given."""
    return _new_row(
        o.id,
        o.run_id,
        o.tool_call_id,
        o.kind,
        o.title,
        o.detail,
        o.risk,
        o.payload_sha256,
        o.requires_fleet_quorum,
        o.quorum,
        o.requested_at,
        o.expires_at,
        o.requested_by,
        status,
        o.requested_seq,
        o.decision if decision is _KEEP else decision,
        o.actor if actor is _KEEP else actor,
        o.identity if identity is _KEEP else identity,
        o.decided_at if decided_at is _KEEP else decided_at,
        o.decided_seq if decided_seq is _KEEP else decided_seq,
        o.votes if votes is _KEEP else votes,
        o.refused if refused is _KEEP else refused,
    )


def _when(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def load_row(d: dict[str, Any]) -> ApprovalRow:
    """The row `ApprovalRow.to_dict()` (as JSON) describes."""
    refused = tuple(
        RefusedAttempt(
            r["decision"],
            r["actor"],
            r["identity"],
            r["reason"],
            _at(r["at"]),
            r["seq"],
            r.get("agent_reported", False),
        )
        for r in d["refused"]
    )
    return ApprovalRow(
        d["id"],
        d["run_id"],
        d["tool_call_id"],
        d["kind"],
        d["title"],
        d["detail"],
        d["risk"],
        d["payload_sha256"],
        d["requires_fleet_quorum"],
        d["quorum"],
        _at(d["requested_at"]),
        _at(d["expires_at"]),
        d["requested_by"],
        d["status"],
        d["requested_seq"],
        d["decision"],
        d["actor"],
        d["identity"],
        _when(d["decided_at"]),
        d["decided_seq"],
        tuple(d["votes"]),
        refused,
    )


def _at(value: str) -> datetime:
    return datetime.fromisoformat(value)


APPROVAL_TYPES = frozenset(
    {
        ApprovalRequested.type_name,
        ApprovalPublished.type_name,
        ApprovalDiscarded.type_name,
        ApprovalVoted.type_name,
        ApprovalDecided.type_name,
        ApprovalDecisionRefused.type_name,
        ApprovalAttemptRefused.type_name,
    }
)


class ApprovalHistoryView:
    """Every approval ever requested, with its outcome, actor, latency and refused attempts."""

    name = "approval_history"
    version = 1
    row_key = "approval_id"  # the one row each record may change
    types = APPROVAL_TYPES

    def initial(self) -> dict[str, ApprovalRow]:
        return {}

    def apply(self, state: dict[str, ApprovalRow], record: Record) -> dict[str, ApprovalRow]:
        _fold(state, record)
        return state

    def copy(self, state: dict[str, ApprovalRow]) -> dict[str, ApprovalRow]:
        return dict(state)  # rows are frozen: a shallow copy is a snapshot

    def dump(self, state: dict[str, ApprovalRow]) -> list[dict[str, Any]]:
        return [row.to_dict() for row in history_order(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, ApprovalRow]:
        return {row.id: row for row in map(load_row, data)}


class PendingApprovalsView:
    """Approvals published and not yet decided (deadlines are applied when read, not folded)."""

    name = "pending_approvals"
    version = 1
    row_key = "approval_id"  # the one row each record may change
    types = APPROVAL_TYPES

    def initial(self) -> dict[str, ApprovalRow]:
        return {}

    def apply(self, state: dict[str, ApprovalRow], record: Record) -> dict[str, ApprovalRow]:
        # Recording rows are kept too (not listed as pending) so a later Published finds them.
        row = _fold(state, record)
        if row is not None and row.terminal:
            del state[row.id]
        return state

    def copy(self, state: dict[str, ApprovalRow]) -> dict[str, ApprovalRow]:
        return dict(state)

    def dump(self, state: dict[str, ApprovalRow]) -> list[dict[str, Any]]:
        # Every open row, recording ones too: the dump is the whole state, so it loads back.
        return [row.to_dict() for row in history_order(state)]

    def load(self, data: list[dict[str, Any]]) -> dict[str, ApprovalRow]:
        return {row.id: row for row in map(load_row, data)}


@dataclass(slots=True)
class ActorsState:
    """Who voted on or decided each run's approvals, and the run of every open approval."""

    open: dict[str, str]  # approval id -> run id, until the approval's outcome
    actors: dict[str, tuple[str, ...]]  # run id -> actors, sorted


class ApprovalActorsView:
    """Run id -> everyone who voted on or decided one of its approvals (the runs listing's column).

    It holds the open approvals and one entry per run, not the history: the history is read
    from the log's approval records when asked for (`Views.approval_history`).
    """

    name = "approval_actors"
    version = 1
    types = frozenset({ApprovalRequested.type_name, ApprovalVoted.type_name, ApprovalDecided.type_name,
                       ApprovalDiscarded.type_name})  # fmt: skip

    def initial(self) -> ActorsState:
        return ActorsState({}, {})

    def apply(self, state: ActorsState, record: Record) -> ActorsState:
        d = record.data
        approval_id = d["approval_id"]
        if record.type == ApprovalRequested.type_name:
            state.open[approval_id] = _shared(d["run_id"])
            return state
        run_id = state.open.get(approval_id)
        if run_id is None:
            return state
        if record.type == ApprovalDiscarded.type_name:
            del state.open[approval_id]
            return state
        if record.type == ApprovalDecided.type_name:
            del state.open[approval_id]
        actor = d["actor"]
        if actor:
            known = state.actors.get(run_id, ())
            if actor not in known:
                state.actors[run_id] = tuple(sorted((*known, _shared(actor))))
        return state

    def copy(self, state: ActorsState) -> ActorsState:
        return ActorsState(dict(state.open), dict(state.actors))

    def dump(self, state: ActorsState) -> dict[str, Any]:
        return {
            "open": [[k, state.open[k]] for k in sorted(state.open)],
            "actors": [[k, list(state.actors[k])] for k in sorted(state.actors)],
        }

    def load(self, data: dict[str, Any]) -> ActorsState:
        return ActorsState({k: v for k, v in data["open"]}, {k: tuple(v) for k, v in data["actors"]})


def history_order(state: dict[str, ApprovalRow]) -> list[ApprovalRow]:
    return sorted(state.values(), key=lambda r: (r.requested_seq, r.id))


def pending_order(state: dict[str, ApprovalRow], now: datetime | None) -> list[ApprovalRow]:
    """Pending rows, oldest request first; with `now`, those past their deadline are left out."""
    rows = [r for r in state.values() if r.status == PENDING and (now is None or now < r.expires_at)]
    rows.sort(key=lambda r: (r.requested_at, r.requested_seq, r.id))
    return rows
