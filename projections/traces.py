"""Runs as traces: the spans a run's records describe, each emitted when the record ending it arrives.

A run is a trace: a root span for the run (ended by its finish, whose status it takes), a
child span for each tool call (start to result), each approval (requested to its outcome)
and each ask to another run (sent to answered or ended), and span events on the root for
what the run reported. Broker runs (stream `run-<id>`) and controller runs (AgentRunStarted
and the harness events after it) are both folded.

Ids come from the log alone: a trace id is a hash of the event id of the record that opened
the run, a span id a hash of the event id that opened the span. So exporting the same log
twice, or a copy of it, or only one run of it, gives the same ids. Pure: no clock, no I/O;
the fold's state is plain JSON (`dump`/`TraceFold(state)`), so a follower can save it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from eventlog import Record

Attributes = Mapping[str, str | int | float | bool]

MAX_EVENTS = 128  # span events kept per root span (the OpenTelemetry SDK's default limit)
OK_FINISHES = frozenset({"", "done", "succeeded", "success", "completed", "complete", "ok"})
ENDED_AGENT_RUN = frozenset({"succeeded", "failed", "aborted"})
ASK_ENDS = {"AskCancelled": "cancelled", "AskTimedOut": "timed out", "AskWithdrawn": "withdrawn"}


def trace_id(opening_event_id: str) -> str:
    """The trace id (32 hex digits) of the run opened by the record with this event id."""
    return hashlib.sha256(b"flightlog trace\0" + opening_event_id.encode()).hexdigest()[:32]


def span_id(opening_event_id: str, role: str = "span") -> str:
    """The span id (16 hex digits) of the span opened by the record with this event id."""
    return hashlib.sha256(f"flightlog {role}\0{opening_event_id}".encode()).hexdigest()[:16]


def digest(value: Any) -> str:
    """SHA-256 of a value's canonical JSON (sorted keys), as approvals digest their payloads."""
    return hashlib.sha256(orjson.dumps(value, option=orjson.OPT_SORT_KEYS)).hexdigest()


@dataclass(frozen=True, slots=True)
class SpanEvent:
    """A moment inside a span: what a run reported or said."""

    name: str
    at: datetime
    attributes: Attributes = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Span:
    """One finished span; `status` is "ok", "error" or "unset"; `run_id` names its trace's run."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    start: datetime
    end: datetime
    status: str
    message: str
    attributes: Attributes
    events: tuple[SpanEvent, ...]
    run_id: str
    seq: int  # the record that ended it


def _iso(at: datetime) -> str:
    return at.isoformat()


class TraceFold:
    """The fold of the log (or of one run's streams) into spans: `apply` returns those a record ends."""

    def __init__(self, state: Mapping[str, Any] | None = None) -> None:
        state = state or {}
        self.runs: dict[str, dict[str, Any]] = dict(state.get("runs", {}))
        self.open: dict[str, dict[str, Any]] = dict(state.get("open", {}))

    def dump(self) -> dict[str, Any]:
        """The state as plain JSON values: `TraceFold(fold.dump())` folds on where this one is."""
        return {"runs": self.runs, "open": self.open}

    # -- spans ---------------------------------------------------------------------------------

    def _start_run(self, r: Record, run_id: str, kind: str, attrs: dict[str, Any]) -> None:
        self.runs[run_id] = {
            "trace": trace_id(r.event_id), "span": span_id(r.event_id, "run"), "start": _iso(r.recorded_at),
            "name": f"run {run_id}", "attrs": {"flightlog.run.id": run_id, "flightlog.run.kind": kind,
                                               "flightlog.stream": r.stream, **attrs},
            "events": [], "dropped": 0,
        }  # fmt: skip

    def _end_run(
        self, r: Record, run_id: str, status: str, message: str, attrs: dict[str, Any]
    ) -> list[Span]:
        run = self.runs.pop(run_id, None)
        if run is None:
            return []
        events = tuple(SpanEvent(n, datetime.fromisoformat(at), a) for n, at, a in run["events"])
        attributes = {**run["attrs"], **attrs, "flightlog.run.events_dropped": run["dropped"]}
        return [
            Span(run["trace"], run["span"], "", run["name"], datetime.fromisoformat(run["start"]),
                 r.recorded_at, status, message, attributes, events, run_id, r.seq)
        ]  # fmt: skip

    def _event(self, run_id: str, name: str, r: Record, attrs: dict[str, Any]) -> None:
        run = self.runs.get(run_id)
        if run is None:
            return
        if len(run["events"]) >= MAX_EVENTS:
            run["dropped"] += 1
        else:
            run["events"].append([name, _iso(r.recorded_at), attrs])

    def _open(self, key: str, r: Record, run_id: str, name: str, attrs: dict[str, Any]) -> None:
        run = self.runs.get(run_id)
        if run is not None:
            trace, parent = run["trace"], run["span"]
        else:  # a request of no run this fold knows (an ApprovalQueue user's): a trace of its own
            trace, parent = trace_id(r.event_id), ""
        self.open[key] = {"trace": trace, "span": span_id(r.event_id), "parent": parent, "name": name,
                          "start": _iso(r.recorded_at), "run": run_id, "attrs": attrs}  # fmt: skip

    def _close(self, key: str, r: Record, status: str, message: str, attrs: dict[str, Any]) -> list[Span]:
        s = self.open.pop(key, None)
        if s is None:
            return []
        return [
            Span(s["trace"], s["span"], s["parent"], s["name"], datetime.fromisoformat(s["start"]),
                 r.recorded_at, status, message, {**s["attrs"], **attrs}, (), s["run"], r.seq)
        ]  # fmt: skip

    def flush(self, at: Record | None = None) -> list[Span]:
        """The spans still open (status "unset", ended at `at`'s time or their start), for an
        export of the past that shows unfinished runs too. The fold's state is left as it is."""
        out = []
        for s in self.open.values():
            start = datetime.fromisoformat(s["start"])
            end = max(start, at.recorded_at) if at is not None else start
            attrs = {**s["attrs"], "flightlog.open": True}
            out.append(Span(s["trace"], s["span"], s["parent"], s["name"], start, end, "unset", "", attrs,
                            (), s["run"], at.seq if at else 0))  # fmt: skip
        for run_id, run in self.runs.items():
            start = datetime.fromisoformat(run["start"])
            end = max(start, at.recorded_at) if at is not None else start
            events = tuple(SpanEvent(n, datetime.fromisoformat(t), a) for n, t, a in run["events"])
            attrs = {**run["attrs"], "flightlog.open": True, "flightlog.run.events_dropped": run["dropped"]}
            out.append(Span(run["trace"], run["span"], "", run["name"], start, end, "unset", "", attrs,
                            events, run_id, at.seq if at else 0))  # fmt: skip
        return out

    # -- the fold ------------------------------------------------------------------------------

    def apply(self, r: Record) -> list[Span]:
        """Fold one record (in seq order); the spans it ends."""
        t, d = r.type, r.data
        if t == "RunRegistered":
            self._start_run(r, d["run_id"], "broker", {"flightlog.run.origin": d.get("origin", "")})
        elif t == "AgentRunStarted":
            self._start_run(
                r, d["run_id"], "agent",
                {"flightlog.run.title": d["title"], "flightlog.session.id": d["session_id"],
                 "flightlog.controller.id": d["controller_id"]},
            )  # fmt: skip
        elif t == "RunFinished":
            status = d["status"] or "done"
            ok = status in OK_FINISHES
            return self._end_run(
                r, d["run_id"], "ok" if ok else "error", "" if ok else d["summary"],
                {"flightlog.run.status": status, "flightlog.run.summary": d["summary"],
                 "flightlog.run.files_changed": len(d["files_changed"])},
            )  # fmt: skip
        elif t == "AgentRunStatusChanged" and d["status"] in ENDED_AGENT_RUN:
            ok = d["status"] == "succeeded"
            return self._end_run(
                r, d["run_id"], "ok" if ok else "error", "" if ok else (d["reason"] or d["status"]),
                {"flightlog.run.status": d["status"]},
            )  # fmt: skip
        elif t == "RunDeleted":
            return self._end_run(r, d["run_id"], "unset", "", {"flightlog.run.status": "deleted"})
        elif t == "RunReported":
            report = {"flightlog.report.state": d["state"], "flightlog.report.payload": d["payload"] or ""}
            self._event(d["run_id"], "report", r, report)
        elif t == "HarnessEventRecorded":
            return self._harness(r, d["run_id"], d["type"], d["data"])
        elif t == "ApprovalRequested":
            self._open(
                f"approval:{d['approval_id']}", r, d["run_id"], f"approval {d['kind']}",
                {"flightlog.approval.id": d["approval_id"], "flightlog.approval.kind": d["kind"],
                 "flightlog.approval.title": d["title"], "flightlog.approval.risk": d["risk"],
                 "flightlog.approval.payload_sha256": d["payload_sha256"],
                 "flightlog.approval.quorum": d["quorum"], "flightlog.tool_call.id": d["tool_call_id"]},
            )  # fmt: skip
        elif t == "PermissionRequested":
            s = self.open.get(f"approval:{d['approval_id']}")
            if s is not None:
                s["attrs"] = {**s["attrs"], "flightlog.tool.name": d["tool_name"]}
        elif t == "ApprovalDecided":
            key = f"approval:{d['approval_id']}"
            s = self.open.get(key)
            if s is None:
                return []
            latency = (r.recorded_at - datetime.fromisoformat(s["start"])).total_seconds() * 1000
            ok = d["decision"] in ("approve", "reject")
            return self._close(
                key, r, "ok" if ok else "error", "" if ok else d["decision"],
                {"flightlog.approval.decision": d["decision"], "flightlog.approval.decided_by": d["actor"],
                 "flightlog.approval.decided_by_credential": d["identity"],
                 "flightlog.approval.latency_ms": round(latency, 3)},
            )  # fmt: skip
        elif t == "ApprovalDiscarded":
            return self._close(f"approval:{d['approval_id']}", r, "error", "discarded",
                               {"flightlog.approval.decision": "discarded"})  # fmt: skip
        elif t == "AskSent":
            self._open(
                f"ask:{d['run_id']}:{d['message_id']}", r, d["run_id"], f"ask {d['to_run_id']}",
                {"flightlog.ask.id": d["message_id"], "flightlog.ask.to": d["to_run_id"]},
            )  # fmt: skip
        elif t == "AskAnswered":
            answered = {"flightlog.ask.outcome": "answered", "flightlog.ask.answered_by": d["from_run_id"]}
            return self._close(f"ask:{d['run_id']}:{d['message_id']}", r, "ok", "", answered)
        elif t in ASK_ENDS:
            how = ASK_ENDS[t]
            return self._close(f"ask:{d['run_id']}:{d['message_id']}", r, "error", how,
                               {"flightlog.ask.outcome": how})  # fmt: skip
        return []

    def _harness(self, r: Record, run_id: str, kind: str, data: dict[str, Any]) -> list[Span]:
        if kind == "tool.start":
            call = str(data.get("tool_call_id") or r.event_id)
            name = str(data.get("tool_name", ""))
            self._open(
                f"tool:{run_id}:{call}", r, run_id, f"tool {name}",
                {"flightlog.tool.name": name, "flightlog.tool_call.id": call,
                 "flightlog.tool.arguments_sha256": digest(data.get("arguments", {}))},
            )  # fmt: skip
        elif kind == "tool.complete":
            error = data.get("error")
            failed = isinstance(error, str) and bool(error)
            return self._close(
                f"tool:{run_id}:{data.get('tool_call_id') or ''}", r, "error" if failed else "ok",
                str(error) if failed else "",
                {"flightlog.tool.outcome": "failed" if failed else "complete",
                 "flightlog.tool.result_sha256": digest(data)},
            )  # fmt: skip
        elif kind in ("user.message", "assistant.message"):
            self._event(run_id, kind, r, {"flightlog.message.content": str(data.get("content", ""))})
        elif kind in ("session.error", "warning"):
            self._event(run_id, kind, r, {"flightlog.message.content": str(data.get("message", ""))})
        return []


def trace_spans(records: Iterable[Record], *, unfinished: bool = True) -> list[Span]:
    """Every span `records` (in seq order) describe; with `unfinished`, open ones too (status unset)."""
    fold = TraceFold()
    spans: list[Span] = []
    last = None
    for r in records:
        spans.extend(fold.apply(r))
        last = r
    if unfinished:
        spans.extend(fold.flush(last))
    return spans
