"""Approval views: pending approvals (oldest first) and the full approval history."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import Record, decode
from eventlog.events import (
    ApprovalDecided,
    ApprovalDecisionRefused,
    ApprovalDiscarded,
    ApprovalPublished,
    ApprovalRequested,
    ApprovalVoted,
)

RECORDING = "recording"
PENDING = "pending"
DISCARDED = "discarded"
TERMINAL = frozenset({"approve", "reject", "expired", DISCARDED})


@dataclass(frozen=True, slots=True)
class RefusedAttempt:
    """A decision that arrived but could not count, kept in the audit trail."""

    decision: str
    actor: str
    identity: str
    reason: str
    at: datetime
    seq: int


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
        out = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        out["refused"] = [dataclasses.asdict(r) for r in self.refused]
        out["votes"] = list(self.votes)
        out["latency_ms"] = self.latency_ms
        return out


def _fold(rows: dict[str, ApprovalRow], record: Record) -> ApprovalRow | None:
    """Apply one approval record to `rows` (in place); return the row it produced."""
    ev = decode(record)
    if isinstance(ev, ApprovalRequested):
        row = ApprovalRow(
            id=ev.approval_id,
            run_id=ev.run_id,
            tool_call_id=ev.tool_call_id,
            kind=ev.kind,
            title=ev.title,
            detail=ev.detail,
            risk=ev.risk,
            payload_sha256=ev.payload_sha256,
            requires_fleet_quorum=ev.requires_fleet_quorum,
            quorum=ev.quorum,
            requested_at=ev.requested_at,
            expires_at=ev.expires_at,
            requested_by=ev.requested_by,
            status=RECORDING,
            requested_seq=record.seq,
        )
        rows[row.id] = row
        return row
    old = rows.get(getattr(ev, "approval_id", ""))
    if old is None:
        return None
    if isinstance(ev, ApprovalPublished):
        new = dataclasses.replace(old, status=PENDING)
    elif isinstance(ev, ApprovalDiscarded):
        new = dataclasses.replace(old, status=DISCARDED, decided_at=ev.at, decided_seq=record.seq)
    elif isinstance(ev, ApprovalVoted):
        new = dataclasses.replace(old, votes=(*old.votes, ev.actor))
    elif isinstance(ev, ApprovalDecided):
        new = dataclasses.replace(
            old,
            status=ev.decision,
            decision=ev.decision,
            actor=ev.actor,
            identity=ev.identity,
            decided_at=ev.at,
            decided_seq=record.seq,
        )
    elif isinstance(ev, ApprovalDecisionRefused):
        attempt = RefusedAttempt(ev.decision, ev.actor, ev.identity, ev.reason, ev.at, record.seq)
        new = dataclasses.replace(old, refused=(*old.refused, attempt))
    else:
        return None
    rows[new.id] = new
    return new


APPROVAL_TYPES = frozenset(
    {
        ApprovalRequested.type_name,
        ApprovalPublished.type_name,
        ApprovalDiscarded.type_name,
        ApprovalVoted.type_name,
        ApprovalDecided.type_name,
        ApprovalDecisionRefused.type_name,
    }
)


class ApprovalHistoryView:
    """Every approval ever requested, with its outcome, actor, latency and refused attempts."""

    name = "approval_history"
    version = 1
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


class PendingApprovalsView:
    """Approvals published and not yet decided (deadlines are applied when read, not folded)."""

    name = "pending_approvals"
    version = 1
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
        return [row.to_dict() for row in pending_order(state, None)]


def history_order(state: dict[str, ApprovalRow]) -> list[ApprovalRow]:
    return sorted(state.values(), key=lambda r: (r.requested_seq, r.id))


def pending_order(state: dict[str, ApprovalRow], now: datetime | None) -> list[ApprovalRow]:
    """Pending rows, oldest request first; with `now`, those past their deadline are left out."""
    rows = [r for r in state.values() if r.status == PENDING and (now is None or now < r.expires_at)]
    rows.sort(key=lambda r: (r.requested_at, r.requested_seq, r.id))
    return rows
