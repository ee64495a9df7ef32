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
    """The fold of one broker run's stream: its entries and status so far.

    `made` counts the entries every record so far created (a re-registration starts the
    timeline again, so `base` is the `made` of its first entry): entry `i` of the timeline
    is the `base + i`-th made. A fold may start mid-stream from a `RunCheckpoint` and keep
    only the entries whose made-index falls in `window`; the entries outside it are counted,
    never built, and a decision on one of them changes nothing kept.
    """

    __slots__ = ("asks", "base", "entries", "made", "permissions", "status", "window")

    def __init__(self, window: tuple[int, int] | None = None) -> None:
        self.entries: list[TimelineEntry] = []
        self.permissions: dict[str, int] = {}  # request id -> its entry in `entries` (-1: one not kept)
        self.asks: dict[str, str] = {}  # open ask id -> the run asked
        self.status = "registered"
        self.made = 0
        self.base = 0
        self.window = window

    @classmethod
    def resume(
        cls, status: str, made: int, base: int, asks: dict[str, str], window: tuple[int, int] | None
    ) -> BrokerFold:
        """A fold picking up after a checkpoint: its counts, status and open asks, no entries."""
        fold = cls(window)
        fold.status, fold.made, fold.base, fold.asks = status, made, base, dict(asks)
        return fold

    @property
    def total(self) -> int:
        """How many entries the run's timeline holds now."""
        return self.made - self.base

    def _add(self, entry: TimelineEntry) -> bool:
        made = self.made
        self.made = made + 1
        window = self.window
        if window is None or window[0] <= made < window[1]:
            self.entries.append(entry)
            return True
        return False

    def _kept(self) -> bool:
        """Whether the entry the next record makes is one this fold keeps."""
        window = self.window
        return window is None or window[0] <= self.made < window[1]

    def apply(self, r: Record) -> None:
        d = r.data
        t = r.type
        if t == "RunReported":  # most records of a long run: handled first, built only when kept
            self.status = d["state"]
            if self._kept():
                payload = d["payload"]
                self.entries.append(
                    TimelineEntry(
                        f"{r.stream}@{r.version}", "report", r.recorded_at, role="agent", name=d["run_id"],
                        text=_payload_text(payload), detail=_payload_json(payload), status=d["state"],
                        seq=r.seq,
                    )
                )  # fmt: skip
            self.made += 1
            return
        entry = self._entry(r, d, t)
        if entry is not None:
            kept = self._add(entry)
            if t == "PermissionRequested":
                self.permissions[d["request_id"]] = len(self.entries) - 1 if kept else -1
        if t == "RunFinished":
            self.status = d["status"] or "done"
        elif t == "RunDeleted":
            self.status = "deleted"

    def _entry(self, r: Record, d: dict[str, Any], t: str) -> TimelineEntry | None:
        """The entry record `r` makes (None for one that makes none), its effects on the fold applied."""
        at: datetime = r.recorded_at
        eid = f"{r.stream}@{r.version}"
        seq = r.seq
        if t == "RunRegistered":
            self.entries, self.permissions, self.asks = [], {}, {}
            self.status = "registered"
            self.base = self.made
            origin = d.get("origin", "")  # "" in records older than the field: said as before
            return TimelineEntry(
                eid, "notice", at, name=_who(d), text=_registered(d["run_id"], origin, d.get("by", "")),
                detail=origin, status="registered", seq=seq,
            )  # fmt: skip
        if t == "RunForked":
            text = (
                f"Forked from run {d['origin_run_id']} at approval {d['approval_id']}: "
                f"{d['decision']} by {d['decided_by']} here, {d['recorded']} there"
            )
            return TimelineEntry(
                eid, "notice", at, name=d["decided_by"], text=text, detail=d["origin_run_id"],
                status="forked", seq=seq,
            )  # fmt: skip
        if t == "RunTokenRevoked":
            reason = f": {d['reason']}" if d["reason"] else ""
            return TimelineEntry(
                eid, "notice", at, name=_who(d), text=f"Token revoked by {_who(d)}{reason}",
                detail=d["reason"], status="revoked", seq=seq,
            )  # fmt: skip
        if t == "RunRekeyed":
            return TimelineEntry(
                eid, "notice", at, name=_who(d),
                text=f"Token re-keyed by {_who(d)}: the old token stopped working", status="rekeyed", seq=seq,
            )  # fmt: skip
        if t == "PermissionRequested":
            return TimelineEntry(
                eid, "permission", at, name=d["tool_name"], text=d["description"] or d["input_preview"],
                detail=d["approval_id"], status="pending", seq=seq,
            )  # fmt: skip
        if t == "PermissionDecided":
            pos = self.permissions.get(d["request_id"], -1)
            if pos >= 0:
                entries = self.entries
                entries[pos] = dataclasses.replace(entries[pos], status=d["behavior"])
            return TimelineEntry(
                eid, "decision", at, name=d["actor"], text=f"{d['behavior']} {d['request_id']}",
                status=d["behavior"], seq=seq,
            )  # fmt: skip
        if t == "ControlQueued":
            if d["type"] == "permission_decision":
                return None
            who = d["from_run_id"] or d.get("sent_by") or "operator"
            return TimelineEntry(
                eid, "message", at, role="inbound", name=who, text=_payload_text(d["payload"]),
                status=d["type"], seq=seq,
            )  # fmt: skip
        if t == "RunReplied":
            return TimelineEntry(
                eid, "message", at, role="outbound", name=d["to"], text=_payload_text(d["payload"]),
                status="reply", seq=seq,
            )  # fmt: skip
        if t == "AskSent":
            self.asks[d["message_id"]] = d["to_run_id"]
            return TimelineEntry(
                eid, "message", at, role="outbound", name=d["to_run_id"],
                text=_payload_text(d["payload"]), detail=d["message_id"], status="ask", seq=seq,
            )  # fmt: skip
        if t == "AskAnswered":
            return TimelineEntry(
                eid, "message", at, role="inbound", name=d["from_run_id"],
                text=_payload_text(d["payload"]), detail=d["message_id"], status="answer", seq=seq,
            )  # fmt: skip
        if t in ASK_ENDINGS:
            how = ASK_ENDINGS[t]
            who = self.asks.pop(d["message_id"], "")
            text = f"Ask {d['message_id']} to {who} {how}" + (
                f" ({d['reason']})" if t == "AskWithdrawn" else ""
            )
            return TimelineEntry(
                eid, "notice", at, name=who, text=text, detail=d["message_id"], status=how, seq=seq
            )
        if t == "RunFinished":
            return TimelineEntry(
                eid, "finish", at, name=d["run_id"], text=d["summary"], detail=", ".join(d["files_changed"]),
                status=d["status"] or "done", seq=seq,
            )  # fmt: skip
        if t == "RunDeleted":
            return TimelineEntry(
                eid, "notice", at, text=f"Run deleted ({d['reason']})", status="deleted", seq=seq
            )
        return None


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
