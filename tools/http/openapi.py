"""The OpenAPI 3.1 document of the HTTP server: the broker's wire protocol and the operator API."""

from __future__ import annotations

from typing import Any

from .fork_routes import fork_paths
from .openapi_parts import (
    BODY_TOO_LARGE,
    NEXT,
    Schema,
    json_retry_after,
    page_parameters,
    with_storage_faults,
)
from .openapi_parts import body as _body
from .openapi_parts import json_answer as _json
from .openapi_parts import obj as _obj
from .openapi_parts import ref as _ref
from .openapi_parts import strings as _strings
from .openapi_wire import PAYLOAD as _PAYLOAD
from .openapi_wire import broker_paths
from .operator_admin import operator_admin_paths
from .records import record_paths
from .run_admin import run_admin_paths
from .views import view_paths


def _schemas() -> dict[str, Schema]:
    time = {"type": "string", "format": "date-time"}
    return {
        "Credentials": _obj(
            _strings("run_id", "token"),
            ("run_id", "token"),
            description="Run credentials, in the JSON body of every run-authenticated request.",
        ),
        "ControlMessage": _obj(
            {**_strings("id", "type", "run_id", "from_run_id"), "payload": _PAYLOAD, "created_at": time},
            ("id", "type", "run_id", "created_at"),
        ),
        "Report": _obj({**_strings("run_id", "state"), "payload": _PAYLOAD}, ("run_id", "state")),
        "Finish": _obj(
            {
                **_strings("run_id", "status", "summary"),
                "files_changed": {"type": "array", "items": {"type": "string"}},
                "payload": _PAYLOAD,
            },
            ("run_id", "status", "summary"),
        ),
        "Reply": _obj({**_strings("run_id", "to"), "payload": _PAYLOAD}, ("run_id", "to")),
        "Ok": _obj({"ok": {"type": "boolean"}}, ("ok",)),
        "Queued": _obj({"queued": {"type": "boolean"}}, ("queued",)),
        "Registered": _obj(_strings("token", "run_id"), ("token", "run_id")),
        "RunSummary": _obj(
            {
                "run_id": {"type": "string"},
                "registered_at": {"type": ["string", "null"], "format": "date-time"},
                "last_seen": time,
                **{
                    k: {"type": "integer"}
                    for k in (
                        "queue_depth",
                        "report_count",
                        "finish_count",
                        "reply_count",
                        "permission_request_count",
                    )
                },
                "last_finish_status": {"type": "string"},
            },
            ("run_id", "registered_at", "last_seen", "queue_depth"),
        ),
        "RunDetail": {
            "allOf": [
                _ref("RunSummary"),
                _obj(
                    {
                        **_strings("origin", "created_by", "created_by_credential"),
                        "token_revoked": {"type": "boolean"},
                        "page": _obj(
                            {
                                "limit": {"type": "integer"},
                                "before": {"type": ["integer", "null"]},
                                "next_before": {
                                    "type": ["integer", "null"],
                                    "description": "The `before` of the next older page; null on the oldest",
                                },
                            }
                        ),
                        "control_queue": {"type": "array", "items": _ref("ControlMessage")},
                        "reports": {"type": "array", "items": _ref("Report")},
                        "finishes": {"type": "array", "items": _ref("Finish")},
                        "replies": {"type": "array", "items": _ref("Reply")},
                        "permission_requests": {"type": "array", "items": {"type": "object"}},
                    }
                ),
            ]
        },
        "Approval": _obj(
            {
                **_strings("id", "run_id", "tool_call_id", "kind", "title", "detail", "payload_sha256"),
                "risk": {"type": "string", "enum": ["low", "medium", "high"]},
                "requires_fleet_quorum": {"type": "boolean"},
                "requested_at": time,
                "expires_at": time,
            },
            ("id", "kind", "title", "detail", "risk", "payload_sha256", "requested_at", "expires_at"),
        ),
        "ApprovalRow": _obj(
            {
                **_strings("id", "run_id", "kind", "status", "decision", "actor", "identity"),
                "votes": {"type": "array", "items": {"type": "string"}},
                "refused": {"type": "array", "items": {"type": "object"}},
                "latency_ms": {"type": ["number", "null"]},
            },
            ("id", "status"),
            description="One approval in the audit trail, with its outcome (more fields than listed).",
        ),
        "Resolution": _obj(
            {
                **_strings("approval_id", "decision", "actor", "identity"),
                "at": time,
                **_strings("run_id", "kind", "title", "payload_sha256"),
            },
            ("approval_id", "decision", "actor", "at"),
        ),
        "Error": _obj({"error": {"type": "string"}}, ("error",)),
    }


def _operator_paths() -> dict[str, Schema]:
    def op(summary: str, responses: dict[str, Schema], **extra: Any) -> Schema:
        return {
            "tags": ["operator"],
            "summary": summary,
            "security": [{"operatorToken": []}],
            "responses": {
                "401": _json("No or wrong operator token", _ref("Error")),
                "403": _json("The operator's role does not allow this", _ref("Error")),
                "429": json_retry_after("Too many failed authentications from this address"),
                **responses,
            },
            **extra,
        }

    def param(name: str) -> Schema:
        return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}

    pending = {"allOf": [_ref("Approval"), _ref("ApprovalRow")]}
    listing = _obj({"approvals": {"type": "array", "items": pending}, "next": NEXT}, ("approvals", "next"))
    history = _obj(
        {"approvals": {"type": "array", "items": _ref("ApprovalRow")}, "next": NEXT}, ("approvals", "next")
    )
    error = _ref("Error")
    runs = _obj({"runs": {"type": "array", "items": _ref("RunSummary")}, "next": NEXT}, ("runs", "next"))
    paths: dict[str, Schema] = {
        "/api/v1/runs": {
            "get": op(
                "Registered runs, a page at a time in registration order",
                {"200": _json("Runs", runs), "400": _json("A malformed `after` or `limit`", error)},
                parameters=page_parameters("runs registered"),
            )
        },
        "/api/v1/runs/{run_id}": {
            "get": op(
                "One run",
                {
                    "200": _json("The run", _ref("RunDetail")),
                    "400": _json("A malformed `limit` or `before`", error),
                    "404": _json("No such run", error),
                },
                parameters=[param("run_id"), *_run_page_parameters()],
            )
        },
        "/api/v1/runs/{run_id}/control": {
            "post": op(
                "Queue a control message for a run",
                {
                    "200": _json(
                        "Queued", _obj({"queued": {"type": "boolean"}, "message": _ref("ControlMessage")})
                    ),
                    "400": _json("No type", error),
                    "404": _json("No such run", error),
                },
                parameters=[param("run_id")],
                requestBody=_body(_obj({**_strings("type", "id"), "payload": _PAYLOAD}, ("type",))),
            )
        },
        "/api/v1/approvals": {
            "get": op(
                "Pending approvals, oldest first, a page at a time",
                {
                    "200": _json("A page of them: each in the seed's shape and with its audit row", listing),
                    "400": _json("A malformed `after` or `limit`, or an `after` no page gave", error),
                },
                parameters=page_parameters("approvals requested"),
            )
        },
        "/api/v1/approvals/history": {
            "get": op(
                "Every approval and its outcome, in request order, a page at a time",
                {
                    "200": _json("A page of the history", history),
                    "400": _json("A malformed `after` or `limit`", error),
                },
                parameters=page_parameters("approvals requested"),
            )
        },
        "/api/v1/approvals/{approval_id}/{decision}": {
            "post": op(
                "Approve or reject a pending approval",
                {
                    "200": _json("Decided", _ref("Resolution")),
                    "202": _json(
                        "Vote recorded; the quorum is not reached yet",
                        _obj(
                            {
                                **_strings("approval_id", "status"),
                                "votes": {"type": "integer"},
                                "needed": {"type": "integer"},
                            }
                        ),
                    ),
                    "400": _json("A malformed body", error),
                    "404": _json("No such approval", error),
                    "409": _json("Already decided, expired (with `expires_at`), or a duplicate vote", error),
                },
                parameters=[
                    param("approval_id"),
                    {
                        "name": "decision",
                        "in": "path",
                        "required": True,
                        "schema": {"type": "string", "enum": ["approve", "reject"]},
                    },
                ],
                requestBody={
                    "required": False,
                    "content": {
                        "application/json": {
                            "schema": _obj(
                                _strings("actor"),
                                description="`actor`, if given, must be the authenticated operator's name",
                            )
                        }
                    },
                },
            )
        },
        **view_paths(op, error),
        **record_paths(op, error),
        **fork_paths(op, error),
        **operator_admin_paths(op, error),
        "/api/v1/verify": {
            "get": op(
                "Walk the log's hash chain (and check it against an anchor kept elsewhere); with the "
                "view snapshots as the server checked them when it started. When that start-up check "
                "found tampering, every answer of the server carries a Flightlog-Tamper header saying so",
                {
                    "200": _json(
                        "The verification result: `ok` is false if the chain or a snapshot failed, or a "
                        "record did not fit the event catalogue when the server started (`catalogue`)",
                        _obj(
                            {
                                "ok": {"type": "boolean"},
                                "chain_ok": {"type": "boolean"},
                                "checked": {"type": "integer"},
                                "first_bad_seq": {"type": ["integer", "null"]},
                                "reason": {"type": "string"},
                                "head": {"type": ["object", "null"]},
                                "snapshots": {"type": ["object", "null"]},
                                "catalogue": {"type": ["object", "null"]},
                            },
                            ("ok", "checked"),
                        ),
                    ),
                    "400": _json("A malformed anchor", error),
                },
                parameters=[
                    {"name": "anchor_seq", "in": "query", "required": False, "schema": {"type": "integer"}},
                    {"name": "anchor_hash", "in": "query", "required": False, "schema": {"type": "string"}},
                ],
            )
        },
    }
    paths = run_admin_paths(op, error, paths)
    for item in paths.values():  # every operator route that reads a body bounds it
        for operation in item.values():
            if "requestBody" in operation:
                operation["responses"].setdefault("413", _json(BODY_TOO_LARGE, error))
    return paths


def _run_page_parameters() -> list[Schema]:
    """A run detail's page of reports, finishes, replies and permission requests, newest first."""
    return [
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "description": "At most this many of the run's reports, finishes, replies and permission "
            "requests together, the newest (default 200, at most 1000)",
            "schema": {"type": "integer", "minimum": 1, "maximum": 1000},
        },
        {
            "name": "before",
            "in": "query",
            "required": False,
            "description": "Only those recorded before this seq: the `page.next_before` of the page shown",
            "schema": {"type": "integer", "minimum": 1},
        },
    ]


def openapi_document() -> dict[str, Any]:
    """The whole document (a fresh dict each call)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "flightlog",
            "version": "1",
            "description": "The run broker's wire protocol (seed-compatible) and the operator API.",
        },
        "paths": with_storage_faults(
            {
                **broker_paths(),
                **_operator_paths(),
                "/openapi.json": {
                    "get": {
                        "summary": "This document",
                        "responses": {"200": _json("OpenAPI 3.1", {"type": "object"})},
                    }
                },
            }
        ),
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "operatorToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An operator's token (the bootstrap admin's, or an enrolled operator's)",
                },
                "runToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "A run's token, with the run's id in `X-Run-Id` (`GET /sessions`)",
                },
            },
        },
        "tags": [
            {"name": "broker", "description": "The seed broker's wire protocol, for agent processes"},
            {"name": "operator", "description": "Runs, approvals and the log, for operators"},
        ],
    }
