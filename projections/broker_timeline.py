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

from .timeline import TimelineEntry


def _payload_text(payload: str | None) -> str:
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


ASK_ENDINGS = {
    "AskReplyTaken": "collected",
    "AskCancelled": "cancelled",
    "AskTimedOut": "timed out",
    "AskWithdrawn": "withdrawn",
}


def broker_timeline(records: Iterable[Record]) -> list[TimelineEntry]:
    """The entries of one broker run's stream (its records in version order)."""
    entries: list[TimelineEntry] = []
    permissions: dict[str, int] = {}
    asks: dict[str, str] = {}  # open ask id -> the run asked
    for r in records:
        d = r.data
        at: datetime = r.recorded_at
        eid = f"{r.stream}@{r.version}"
        t = r.type
        if t == "RunRegistered":
            entries, permissions, asks = [], {}, {}
            entries.append(
                TimelineEntry(eid, "notice", at, text=f"Run {d['run_id']} registered", status="registered")
            )
        elif t == "RunReported":
            entries.append(
                TimelineEntry(
                    eid,
                    "report",
                    at,
                    role="agent",
                    name=d["run_id"],
                    text=_payload_text(d["payload"]),
                    detail=d["payload"] or "",
                    status=d["state"],
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
                )
            )
        elif t == "ControlQueued" and d["type"] != "permission_decision":
            who = d["from_run_id"] or "operator"
            entries.append(
                TimelineEntry(
                    eid,
                    "message",
                    at,
                    role="inbound",
                    name=who,
                    text=_payload_text(d["payload"]),
                    status=d["type"],
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
                )
            )
        elif t == "AskSent":
            asks[d["message_id"]] = d["to_run_id"]
            entries.append(
                TimelineEntry(
                    eid, "message", at, role="outbound", name=d["to_run_id"],
                    text=_payload_text(d["payload"]), detail=d["message_id"], status="ask",
                )
            )  # fmt: skip
        elif t == "AskAnswered":
            entries.append(
                TimelineEntry(
                    eid, "message", at, role="inbound", name=d["from_run_id"],
                    text=_payload_text(d["payload"]), detail=d["message_id"], status="answer",
                )
            )  # fmt: skip
        elif t in ASK_ENDINGS:
            how = ASK_ENDINGS[t]
            who = asks.pop(d["message_id"], "")
            text = f"Ask {d['message_id']} to {who} {how}" + (
                f" ({d['reason']})" if t == "AskWithdrawn" else ""
            )
            entries.append(
                TimelineEntry(eid, "notice", at, name=who, text=text, detail=d["message_id"], status=how)
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
                )
            )
        elif t == "RunDeleted":
            entries.append(
                TimelineEntry(eid, "notice", at, text=f"Run deleted ({d['reason']})", status="deleted")
            )
    return entries
