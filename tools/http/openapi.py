"""The OpenAPI 3.1 document of the HTTP server: the broker's wire protocol and the operator API."""

from __future__ import annotations

from typing import Any

from .fork_routes import fork_paths
from .operator_admin import operator_admin_paths
from .records import record_paths
from .run_admin import run_admin_paths
from .views import view_paths

Schema = dict[str, Any]

_TEXT = {"text/plain": {"schema": {"type": "string"}}}


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _strings(*names: str) -> dict[str, Schema]:
    return {name: {"type": "string"} for name in names}


def _obj(properties: dict[str, Schema], required: tuple[str, ...] = (), **extra: Any) -> Schema:
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    out.update(extra)
    return out


def _text(description: str) -> Schema:
    return {"description": description, "content": _TEXT}


def _json(description: str, schema: Schema) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def _body(schema: Schema) -> Schema:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


# Every run-authenticated broker path answers these the same way (spec §1.9).
_AUTH_ERRORS = {
    "400": _text("`bad request`: the body is not a JSON object of the expected field types"),
    "401": _text("`unauthorized: missing run_id or token`, or `unauthorized`"),
    "405": _text("`method not allowed`"),
    "413": _text("`request body too large` (over 1 MiB)"),
}

_PAYLOAD: Schema = {"description": "Any JSON value, kept byte for byte; omitted when absent."}
# One permission request's state, as /permission_wait and /permission_withdraw answer it.
_GATE: Schema = _obj(
    {
        **_strings("request_id", "decided_by", "reason", "approval_id"),
        "status": {"enum": ["pending", "decided"]},
        "behavior": {"enum": ["allow", "deny"]},
        "decision": {"enum": ["approve", "reject", "expired", "withdrawn"]},
    },
    ("request_id", "status"),
)


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


def _broker_paths() -> dict[str, Schema]:
    def post(summary: str, request: Schema, ok: Schema, **errors: Schema) -> Schema:
        return {
            "post": {
                "tags": ["broker"],
                "summary": summary,
                "requestBody": _body(request),
                "responses": {"200": ok, **_AUTH_ERRORS, **errors},
            }
        }

    def authed(schema: Schema) -> Schema:
        return {"allOf": [_ref("Credentials"), schema]}

    ok = _json("Recorded", _ref("Ok"))
    missing = {"404": _text("`run not found`")}
    health_op = {"tags": ["broker"], "summary": "Liveness", "responses": {"200": _text("`ok`")}}
    return {
        "/health": {"get": health_op, "post": {**health_op, "operationId": "health_post"}},
        "/register": {
            "post": {
                "tags": ["broker"],
                "summary": "Register a run (the caller may choose its token), or re-register with it",
                "requestBody": _body(_obj(_strings("run_id", "token"), ("run_id",))),
                "responses": {
                    "200": _json("The run's token", _ref("Registered")),
                    "400": _text("`bad request`, `missing run_id`, or an unusable token"),
                    "403": _text("On a server taking enrolled runs only: nobody created this run"),
                    "405": _text("`method not allowed`"),
                    "409": _text("`run already registered` (and the token given is not its token)"),
                    "413": _text("`request body too large`"),
                },
            }
        },
        "/heartbeat": post("Mark the run as seen now", _ref("Credentials"), _text("`ok`")),
        "/push-control": {
            "post": {
                "tags": ["broker"],
                "summary": "Queue a control message for a run",
                "description": "With an operator token configured, only `Authorization: Bearer` is "
                "accepted here; otherwise the body carries run credentials.",
                "security": [{"operatorToken": []}, {}],
                "requestBody": _body(_ref("ControlMessage")),
                "responses": {
                    "200": _json("Queued", _ref("Queued")),
                    **_AUTH_ERRORS,
                    "404": _text("`run not found`"),
                    "429": _text("The run's control queue is full"),
                },
            }
        },
        "/poll-control": post(
            "Take every queued control message, waiting up to 2 s when there is none",
            _ref("Credentials"),
            _json("Oldest first; `[]` when none arrived", {"type": "array", "items": _ref("ControlMessage")}),
            **missing,
        ),
        "/report": post("Record a progress report", authed(_ref("Report")), ok, **missing),
        "/finish": post("Record a finish (as given)", authed(_ref("Finish")), ok, **missing),
        "/reply": post("Record a reply", authed(_ref("Reply")), ok, **missing),
        "/permission_request": post(
            "Ask the operator for a permission (an approval of kind `permission`)",
            authed(_obj(_strings("request_id", "tool_name", "description", "input_preview", "risk"))),
            ok,
            **missing,
        ),
        "/permission_wait": post(
            "Wait for the decision on one of the run's permission requests (flightlog's, not the seed's)",
            authed(
                _obj(
                    {**_strings("request_id"), "timeout": {"type": "number", "minimum": 0}},
                    ("request_id",),
                )
            ),
            _json("Decided, or still pending at the timeout (default 30 s, at most 60)", _GATE),
            **{"404": _text("`run not found`, or the run filed no such request")},
        ),
        "/permission_withdraw": post(
            "Give one of the run's permission requests up: its outcome is `withdrawn` unless decided first",
            authed(_obj(_strings("request_id", "reason"), ("request_id",))),
            _json("The request's state afterwards", _GATE),
            **{"404": _text("`run not found`, or the run filed no such request")},
        ),
        "/permission": post(
            "Record a permission decision (`allow` or `deny`)",
            authed(_obj(_strings("request_id", "behavior"))),
            ok,
            **missing,
        ),
        "/send": post(
            "Send a message to another run (the token must be from_run_id's)",
            authed(
                _obj(
                    {**_strings("from_run_id", "to_run_id", "type"), "payload": _PAYLOAD},
                    ("from_run_id", "to_run_id", "type"),
                )
            ),
            _json("Queued", _ref("Queued")),
            **{"404": _text("`from run not found`, or `run not found: <to_run_id>`")},
            **{"429": _text("The target's control queue is full")},
        ),
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
                "429": _json(
                    "Too many failed authentications from this address (Retry-After)", _ref("Error")
                ),
                **responses,
            },
            **extra,
        }

    def param(name: str) -> Schema:
        return {"name": name, "in": "path", "required": True, "schema": {"type": "string"}}

    listing = _obj({"approvals": {"type": "array", "items": _ref("Approval")}}, ("approvals",))
    history = _obj({"approvals": {"type": "array", "items": _ref("ApprovalRow")}}, ("approvals",))
    error = _ref("Error")
    paths: dict[str, Schema] = {
        "/api/v1/runs": {
            "get": op(
                "Registered runs",
                {"200": _json("Runs", _obj({"runs": {"type": "array", "items": _ref("RunSummary")}}))},
            )
        },
        "/api/v1/runs/{run_id}": {
            "get": op(
                "One run",
                {"200": _json("The run", _ref("RunDetail")), "404": _json("No such run", error)},
                parameters=[param("run_id")],
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
                    "429": _json("The run's control queue is full", error),
                },
                parameters=[param("run_id")],
                requestBody=_body(_obj({**_strings("type", "id"), "payload": _PAYLOAD}, ("type",))),
            )
        },
        "/api/v1/approvals": {
            "get": op("Pending approvals, oldest first", {"200": _json("Pending", listing)})
        },
        "/api/v1/approvals/history": {
            "get": op("Every approval and its outcome, in request order", {"200": _json("History", history)})
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
    return run_admin_paths(op, error, paths)


def openapi_document() -> dict[str, Any]:
    """The whole document (a fresh dict each call)."""
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "flightlog",
            "version": "1",
            "description": "The run broker's wire protocol (seed-compatible) and the operator API.",
        },
        "paths": {
            **_broker_paths(),
            **_operator_paths(),
            "/openapi.json": {
                "get": {
                    "summary": "This document",
                    "responses": {"200": _json("OpenAPI 3.1", {"type": "object"})},
                }
            },
        },
        "components": {
            "schemas": _schemas(),
            "securitySchemes": {
                "operatorToken": {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "An operator's token (the bootstrap admin's, or an enrolled operator's)",
                }
            },
        },
        "tags": [
            {"name": "broker", "description": "The seed broker's wire protocol, for agent processes"},
            {"name": "operator", "description": "Runs, approvals and the log, for operators"},
        ],
    }
