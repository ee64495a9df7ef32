"""The broker's wire protocol in the OpenAPI document: avenor's paths, and flightlog's own beside them."""

from __future__ import annotations

from .openapi_parts import BODY_TOO_LARGE, FIELD_TOO_LARGE, NEXT, RATE, Schema, page_parameters, retry_after
from .openapi_parts import body as _body
from .openapi_parts import json_answer as _json
from .openapi_parts import obj as _obj
from .openapi_parts import ref as _ref
from .openapi_parts import strings as _strings
from .openapi_parts import text as _text

# Every run-authenticated broker path answers these the same way (spec §1.9).
_AUTH_ERRORS = {
    "400": _text("`bad request`: the body is not a JSON object of the expected field types"),
    "401": _text("`unauthorized: missing run_id or token`, or `unauthorized`"),
    "405": _text("`method not allowed`"),
    "413": _text(BODY_TOO_LARGE),
}
# The writes charged to a run: their fields are bounded, and so is the run's rate of writes.
_RATE = {"429": retry_after(RATE)}
_QUOTAS = {"413": _text(FIELD_TOO_LARGE), **_RATE}
_PEER = ("label", "backend", "model", "dir", "status")  # what a run may say of itself, for /sessions

PAYLOAD: Schema = {"description": "Any JSON value, kept byte for byte; omitted when absent."}
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


def broker_paths() -> dict[str, Schema]:
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
        "/sessions": _sessions(),
        "/register": {
            "post": {
                "tags": ["broker"],
                "summary": "Register a run (the caller may choose its token), or re-register with it",
                "requestBody": _body(
                    _obj(
                        _strings("run_id", "token", "label", "backend", "model", "dir", "status"), ("run_id",)
                    )
                ),
                "responses": {
                    "200": _json("The run's token", _ref("Registered")),
                    "400": _text("`bad request`, `missing run_id`, or an unusable token"),
                    "403": _text("On a server taking enrolled runs only: nobody created this run"),
                    "405": _text("`method not allowed`"),
                    "409": _text("`run already registered` (and the token given is not its token)"),
                    "413": _text(f"{BODY_TOO_LARGE}, or a peer field over `--max-peer-field` (256 bytes)"),
                },
            }
        },
        "/heartbeat": post("Mark the run as seen now", _ref("Credentials"), _text("`ok`"), **_RATE),
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
        "/report": post("Record a progress report", authed(_ref("Report")), ok, **missing, **_QUOTAS),
        "/finish": post("Record a finish (as given)", authed(_ref("Finish")), ok, **missing, **_QUOTAS),
        "/reply": post("Record a reply", authed(_ref("Reply")), ok, **missing, **_QUOTAS),
        "/permission_request": post(
            "Ask the operator for a permission (an approval of kind `permission`)",
            authed(_obj(_strings("request_id", "tool_name", "description", "input_preview", "risk"))),
            ok,
            **missing,
            **{"413": _text(FIELD_TOO_LARGE)},
            **{
                "429": retry_after(
                    f"{RATE}; or as many of the run's requests wait for a decision as "
                    "`--max-open-permissions` allows (no Retry-After: a decision or a withdrawal makes room)"
                )
            },
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
            **_QUOTAS,
        ),
        "/send": post(
            "Send a message to another run (the token must be from_run_id's)",
            authed(
                _obj(
                    {**_strings("from_run_id", "to_run_id", "type"), "payload": PAYLOAD},
                    ("from_run_id", "to_run_id", "type"),
                )
            ),
            _json("Queued", _ref("Queued")),
            **{"404": _text("`from run not found`, or `run not found: <to_run_id>`")},
            **{"413": _text(FIELD_TOO_LARGE)},
            **{
                "429": retry_after(
                    f"{RATE}; or the target's queue holds as many messages from runs as it "
                    "may (`--queue-limit`), or as many from this sender (`--queue-share`); or, for an ask, "
                    "as many of the sender's asks wait as `--max-open-asks` allows (those without "
                    "Retry-After: a delivery or a reply makes room)"
                )
            },
        ),
    }


def _sessions() -> Schema:
    """Peer discovery, a page of runs at a time (GET with the run's token in headers, or POST)."""
    peer = _obj({**_strings("run_id", *_PEER), "last_seen": {"type": "integer"}}, ("run_id", "last_seen"))
    listing = _obj({"sessions": {"type": "array", "items": peer}, "next": NEXT}, ("sessions",))
    answers = {
        "200": _json("Registered runs in registration order (empty fields left out)", listing),
        "400": _text("A `token` in the query (tokens never go in URLs), or a malformed `after` or `limit`"),
        "401": _text("`unauthorized: missing run_id or token`, or `unauthorized`"),
        "405": _text("`method not allowed`"),
    }
    summary = "Peer discovery: the registered runs, a page at a time (avenor's later versions)"
    pages = page_parameters("runs registered")
    headers = [
        {"name": "X-Run-Id", "in": "header", "required": True, "schema": {"type": "string"}},
    ]
    return {
        "get": {
            "tags": ["broker"],
            "summary": summary,
            "description": "The caller's run credentials travel in `Authorization: Bearer <run token>` "
            "and `X-Run-Id`, never in the URL.",
            "security": [{"runToken": []}],
            "parameters": [*headers, *pages],
            "responses": answers,
        },
        "post": {
            "tags": ["broker"],
            "summary": summary,
            "operationId": "sessions_post",
            "parameters": pages,
            "requestBody": _body(_ref("Credentials")),
            "responses": {**answers, "413": _text(BODY_TOO_LARGE)},
        },
    }
