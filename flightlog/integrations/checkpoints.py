"""Where a recorded LangGraph run can be resumed: the checkpoint recorded before a gated tool call.

The LangGraph adapter (`flightlog.integrations.langgraph`) reports, right before it files a tool
call for a decision, the checkpoint the graph's step started from (`langgraph.gate`), and after
each super-step the checkpoint it produced (`langgraph.checkpoint`). Given a run's records and one
of its approvals (its id, its request id, or the seq of any of its records), `resume_point` finds
the checkpoint to resume from: resumed there, the graph runs that tool call again (and asks for a
decision again) and nothing before it. This module imports no framework, so a fork reads the
record without LangGraph installed.

Report shapes (the `state` of a report, and its payload; stable, documented in
docs/integrations.md):

    langgraph.gate        {"thread_id", "checkpoint_ns", "checkpoint_id", "tool", "tool_call_id",
                           "request_id", "node", "step"}
    langgraph.checkpoint  {"thread_id", "checkpoint_ns", "checkpoint_id", "parent_checkpoint_id",
                           "step", "source", "next", "nodes"}
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import httpx
import orjson

from .. import _protocol as wire
from .._client import Client
from .._errors import ConfigurationError, FlightlogError

GATE: Final = "langgraph.gate"
CHECKPOINT: Final = "langgraph.checkpoint"
NODE_START: Final = "langgraph.node.start"
NODE_END: Final = "langgraph.node.end"
PAGE = 5000  # records asked for per page of `/api/v1/events` (the server's most)
# The records that name a permission request: the run's and its approval's.
_REQUEST_RECORDS = frozenset(
    {"PermissionRequested", "PermissionDecided", "ApprovalRequested", "ApprovalDecided", "ApprovalPublished"}
)


class ResumePointNotFound(FlightlogError, LookupError):
    """Raised when a run's record names no such approval, or no checkpoint recorded before it."""


@dataclass(frozen=True, slots=True)
class ResumePoint:
    """The checkpoint a LangGraph run resumes from to run a gated tool call again.

    `source` says how it was found: `gate` (the adapter's report right before the request was
    filed, exact) or `checkpoint` (the last checkpoint reported before the request, for a gate
    filed without the adapter's tool wrapper). `seq` is the seq of that report.
    """

    thread_id: str
    checkpoint_id: str
    checkpoint_ns: str
    request_id: str
    approval_id: str
    tool: str
    seq: int
    source: str

    @property
    def config(self) -> dict[str, Any]:
        """The graph config that resumes here: `graph.invoke(None, point.config)`."""
        return {
            "configurable": {
                "thread_id": self.thread_id,
                "checkpoint_ns": self.checkpoint_ns,
                "checkpoint_id": self.checkpoint_id,
            }
        }


@dataclass(frozen=True, slots=True)
class _Request:
    request_id: str
    approval_id: str
    tool: str
    seq: int  # of its first PermissionRequested (or ApprovalRequested) record


def resume_point(
    records: Iterable[Mapping[str, Any]],
    *,
    approval_id: str | None = None,
    request_id: str | None = None,
    seq: int | None = None,
) -> ResumePoint:
    """The checkpoint to resume from to run the gated call named by exactly one of the keywords.

    `records` are one run's records as `GET /api/v1/events?run=RUN` answers them and `flightlog
    export --run RUN` writes them (dicts with `seq`, `type` and `data`), in seq order. `seq` may
    be the seq of any record of the request or its approval, or of its `langgraph.gate` report.
    """
    if sum(key is not None for key in (approval_id, request_id, seq)) != 1:
        raise ConfigurationError("name the gated call by one of approval_id, request_id or seq")
    rows = list(records)
    request = _find_request(rows, approval_id, request_id, seq)
    gate: ResumePoint | None = None
    last_checkpoint: ResumePoint | None = None
    for row in rows:
        if int(row["seq"]) >= request.seq:
            break
        state, payload = _report(row)
        if state == GATE and payload.get("request_id") == request.request_id:
            gate = _point(payload, request, int(row["seq"]), "gate") or gate
        elif state == CHECKPOINT and not payload.get("checkpoint_ns"):
            last_checkpoint = _point(payload, request, int(row["seq"]), "checkpoint") or last_checkpoint
    found = gate or last_checkpoint
    if found is None:
        raise ResumePointNotFound(
            f"no LangGraph checkpoint was recorded before request {request.request_id!r} "
            f"(approval {request.approval_id}): run the graph with a checkpointer, through "
            "flightlog.integrations.langgraph"
        )
    return found


def resume_config(
    client: Client,
    run_id: str,
    *,
    approval_id: str | None = None,
    request_id: str | None = None,
    seq: int | None = None,
) -> dict[str, Any]:
    """The graph config that resumes run `run_id` before one of its gated calls, read from a server.

    The client's credential (`token`, FLIGHTLOG_TOKEN) must be an operator's that may read.
    """
    point = resume_point(run_records(client, run_id), approval_id=approval_id, request_id=request_id, seq=seq)
    return point.config


def run_records(client: Client, run_id: str) -> Iterator[dict[str, Any]]:
    """Run `run_id`'s records from the server's `/api/v1/events?run=`, page by page."""
    if not client.settings.token:
        raise ConfigurationError("reading a run's records needs an operator token (FLIGHTLOG_TOKEN)")
    headers = {"Authorization": f"Bearer {client.settings.token}"}
    after = 0
    while True:
        params: dict[str, str | int] = {"run": run_id, "after": after, "limit": PAGE}
        try:
            response = client._http.get("/api/v1/events", params=params, headers=headers)
        except httpx.TransportError as e:
            raise wire.transport_error(e, client.url) from e
        page = wire.answer(response)
        yield from page["records"]
        if not page["records"]:
            return
        after = int(page["last_seq"])


def _find_request(
    rows: list[Mapping[str, Any]], approval_id: str | None, request_id: str | None, seq: int | None
) -> _Request:
    if seq is not None:
        named = next((row for row in rows if int(row["seq"]) == seq), None)
        if named is None:
            raise ResumePointNotFound(f"no record at seq {seq} in this run")
        state, payload = _report(named)
        data = _data(named)
        if state == GATE:
            request_id = str(payload.get("request_id", ""))
        elif named.get("type") in _REQUEST_RECORDS:
            approval_id = str(data.get("approval_id", ""))
        else:
            raise ResumePointNotFound(f"the record at seq {seq} ({named.get('type')}) names no gated call")
    requests: dict[str, _Request] = {}  # by approval id, the first filing of each
    tools: dict[str, str] = {}  # approval id -> tool (ApprovalRequested, first, does not name it)
    for row in rows:
        data = _data(row)
        kind = row.get("type")
        if kind == "PermissionRequested" or (
            kind == "ApprovalRequested" and data.get("kind") == "permission"
        ):
            key = str(data.get("approval_id", ""))
            rid = str(data.get("request_id") or data.get("tool_call_id") or "")
            if key and key not in requests:
                requests[key] = _Request(rid, key, "", int(row["seq"]))
            if data.get("tool_name"):
                tools.setdefault(key, str(data["tool_name"]))
    for found in requests.values():
        if found.approval_id == approval_id or (request_id is not None and found.request_id == request_id):
            return _Request(found.request_id, found.approval_id, tools.get(found.approval_id, ""), found.seq)
    if request_id is not None:
        raise ResumePointNotFound(f"no permission request {request_id!r} in this run")
    raise ResumePointNotFound(f"no approval {approval_id!r} of a permission request in this run")


def _point(payload: Mapping[str, Any], request: _Request, seq: int, source: str) -> ResumePoint | None:
    thread_id, checkpoint_id = payload.get("thread_id"), payload.get("checkpoint_id")
    if not isinstance(thread_id, str) or not isinstance(checkpoint_id, str) or not checkpoint_id:
        return None  # a graph without a checkpointer: nothing to resume from
    return ResumePoint(
        thread_id=thread_id,
        checkpoint_id=checkpoint_id,
        checkpoint_ns=str(payload.get("checkpoint_ns") or ""),
        request_id=request.request_id,
        approval_id=request.approval_id,
        tool=request.tool or str(payload.get("tool", "")),
        seq=seq,
        source=source,
    )


def _data(row: Mapping[str, Any]) -> Mapping[str, Any]:
    data = row.get("data")
    return data if isinstance(data, Mapping) else {}


def _report(row: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    """A RunReported record's state and payload (("", {}) for any other record)."""
    if row.get("type") != "RunReported":
        return "", {}
    data = _data(row)
    payload = data.get("payload")
    if isinstance(payload, str | bytes):
        try:
            payload = orjson.loads(payload) if payload else {}
        except orjson.JSONDecodeError:
            return str(data.get("state", "")), {}
    return str(data.get("state", "")), payload if isinstance(payload, Mapping) else {}
