"""A broker run's timeline: what its agent reported, asked, heard and finished, in order.

Folded from the run's own stream (`run-<id>`), so "the run as it was at seq N" is the fold of
its records up to N. Pure: the same records give the same entries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from datetime import datetime
from typing import Any

import orjson

from eventlog import Record

from .timeline import RunMoment, TimelineEntry


def _payload_json(payload: Any) -> str:
    """A stored payload as JSON text: as stored, or (a value a Python caller once stored as it
    was, before payloads were kept as text) encoded, so that every reader gets text."""
    if payload is None or payload == "":
        return ""
    return payload if isinstance(payload, str) else orjson.dumps(payload, default=str).decode()


def _payload_text(stored: Any) -> str:
    payload = _payload_json(stored)
    if not payload:
        return ""
    try:
        value: Any = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return payload
    if isinstance(value, dict):
        for key in ("note", "message", "summary", "text"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return payload


def _who(d: dict[str, Any]) -> str:
    """Who made a run's registration, revocation or re-key: `name (credential)`, or the name alone."""
    by, credential = d.get("by", ""), d.get("by_credential", "")
    return f"{by} ({credential})" if by and credential else str(by)


def _registered(run_id: str, origin: str, by: str) -> str:
    """How a run came to be, as its first entry says it."""
    if origin == "operator":
        return f"Run {run_id} created by operator {by}"
    if origin == "enrolment":
        return f"Run {run_id} created by enrolment credential {by}"
    if origin == "self":
        return f"Run {run_id} registered itself" + (f" from {by}" if by else "")
    if origin == "local":
        return f"Run {run_id} created in process" + (f" by {by}" if by else "")
    return f"Run {run_id} registered"


ASK_ENDINGS = {
    "AskReplyTaken": "collected",
    "AskCancelled": "cancelled",
    "AskTimedOut": "timed out",
    "AskWithdrawn": "withdrawn",
}


class BrokerFold:
    """The fold of one broker run's stream: its entries and status so far."""

    __slots__ = ("asks", "entries", "permissions", "status")

    def __init__(self) -> None:
        self.entries: list[TimelineEntry] = []
        self.permissions: dict[str, int] = {}
        self.asks: dict[str, str] = {}  # open ask id -> the run asked
        self.status = "registered"

    def apply(self, r: Record) -> None:
        entries, permissions, asks = self.entries, self.permissions, self.asks
        d = r.data
        at: datetime = r.recorded_at
        eid = f"{r.stream}@{r.version}"
        seq = r.seq
        t = r.type
        if t == "RunRegistered":
            self.entries, self.permissions, self.asks = entries, permissions, asks = [], {}, {}
            self.status = "registered"
            origin = d.get("origin", "")  # "" in records older than the field: said as before
            entries.append(
                TimelineEntry(
                    eid, "notice", at, name=_who(d), text=_registered(d["run_id"], origin, d.get("by", "")),
                    detail=origin, status="registered", seq=seq,
                )
            )  # fmt: skip
        elif t == "RunTokenRevoked":
            reason = f": {d['reason']}" if d["reason"] else ""
            entries.append(
                TimelineEntry(
                    eid, "notice", at, name=_who(d), text=f"Token revoked by {_who(d)}{reason}",
                    detail=d["reason"], status="revoked", seq=seq,
                )
            )  # fmt: skip
        elif t == "RunRekeyed":
            entries.append(
                TimelineEntry(
                    eid, "notice", at, name=_who(d),
                    text=f"Token re-keyed by {_who(d)}: the old token stopped working", status="rekeyed",
                    seq=seq,
                )
            )  # fmt: skip
        elif t == "RunReported":
            entries.append(
                TimelineEntry(
                    eid,
                    "report",
                    at,
                    role="agent",
                    name=d["run_id"],
                    text=_payload_text(d["payload"]),
                    detail=_payload_json(d["payload"]),
                    status=d["state"],
                    seq=seq,
                )
            )
        elif t == "PermissionRequested":
            permissions[d["request_id"]] = len(entries)
            entries.append(
                TimelineEntry(
                    eid,
                    "permission",
                    at,
                    name=d["tool_name"],
                    text=d["description"] or d["input_preview"],
                    detail=d["approval_id"],
                    status="pending",
                    seq=seq,
                )
            )
        elif t == "PermissionDecided":
            pos = permissions.get(d["request_id"])
            if pos is not None:
                entries[pos] = dataclasses.replace(entries[pos], status=d["behavior"])
            entries.append(
                TimelineEntry(
                    eid,
                    "decision",
                    at,
                    name=d["actor"],
                    text=f"{d['behavior']} {d['request_id']}",
                    status=d["behavior"],
                    seq=seq,
                )
            )
        elif t == "ControlQueued" and d["type"] != "permission_decision":
            who = d["from_run_id"] or d.get("sent_by") or "operator"
            entries.append(
                TimelineEntry(
                    eid,
                    "message",
                    at,
                    role="inbound",
                    name=who,
                    text=_payload_text(d["payload"]),
                    status=d["type"],
                    seq=seq,
                )
            )
        elif t == "RunReplied":
            entries.append(
                TimelineEntry(
                    eid,
                    "message",
                    at,
                    role="outbound",
                    name=d["to"],
                    text=_payload_text(d["payload"]),
                    status="reply",
                    seq=seq,
                )
            )
        elif t == "AskSent":
            asks[d["message_id"]] = d["to_run_id"]
            entries.append(
                TimelineEntry(
                    eid, "message", at, role="outbound", name=d["to_run_id"],
                    text=_payload_text(d["payload"]), detail=d["message_id"], status="ask", seq=seq,
                )
            )  # fmt: skip
        elif t == "AskAnswered":
            entries.append(
                TimelineEntry(
                    eid, "message", at, role="inbound", name=d["from_run_id"],
                    text=_payload_text(d["payload"]), detail=d["message_id"], status="answer", seq=seq,
                )
            )  # fmt: skip
        elif t in ASK_ENDINGS:
            how = ASK_ENDINGS[t]
            who = asks.pop(d["message_id"], "")
            text = f"Ask {d['message_id']} to {who} {how}" + (
                f" ({d['reason']})" if t == "AskWithdrawn" else ""
            )
            entries.append(
                TimelineEntry(
                    eid, "notice", at, name=who, text=text, detail=d["message_id"], status=how, seq=seq
                )
            )
        elif t == "RunFinished":
            entries.append(
                TimelineEntry(
                    eid,
                    "finish",
                    at,
                    name=d["run_id"],
                    text=d["summary"],
                    detail=", ".join(d["files_changed"]),
                    status=d["status"] or "done",
                    seq=seq,
                )
            )
        elif t == "RunDeleted":
            entries.append(
                TimelineEntry(
                    eid, "notice", at, text=f"Run deleted ({d['reason']})", status="deleted", seq=seq
                )
            )
        if t == "RunFinished":
            self.status = d["status"] or "done"
        elif t == "RunReported":
            self.status = d["state"]
        elif t == "RunDeleted":
            self.status = "deleted"


def broker_timeline(records: Iterable[Record]) -> list[TimelineEntry]:
    """The entries of one broker run's stream (its records in version order)."""
    fold = BrokerFold()
    for r in records:
        fold.apply(r)
    return fold.entries


def broker_status(records: Iterable[Record]) -> str:
    """A broker run's status after `records` (its stream in order): its last report or finish."""
    fold = BrokerFold()
    for r in records:
        fold.apply(r)
    return fold.status


def broker_moments(records: Iterable[Record]) -> list[RunMoment]:
    """The run right after each record of its stream: status and timeline, in seq order."""
    fold = BrokerFold()
    moments = []
    for r in records:
        fold.apply(r)
        moments.append(RunMoment(r.seq, r.recorded_at, r.type, fold.status, tuple(fold.entries)))
    return moments
