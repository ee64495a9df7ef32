"""The web console: static pages under /ui/, login, and the JSON the pages read.

`/api/v1/console/*` serves what the pages show: an overview (runs and pending approvals),
a run as it was at any of its events (time travel, with what changed since), the audit
trail with the chain's verdict, and a server-sent event stream that says "the log grew".
"""

from __future__ import annotations

import asyncio
import importlib.resources
from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from actors import System
from projections import ApprovalRow

from .console_auth import COOKIE, SESSION_SECONDS, ConsoleSessions, Operator
from .wire import Endpoint, WireError, json_error, json_response, parse_object, read_body

STATIC = {
    "index.html": "text/html; charset=utf-8",
    "app.js": "text/javascript; charset=utf-8",
    "style.css": "text/css; charset=utf-8",
}
HEAD_POLL = 0.25  # how often the event stream looks at the log's head
KEEPALIVE = 15.0
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _static(name: str) -> bytes:
    return importlib.resources.files("tools").joinpath("console", name).read_bytes()


class ConsoleRoutes:
    def __init__(self, system: System, sessions: ConsoleSessions) -> None:
        self.system = system
        self.sessions = sessions

    def routes(self) -> list[Route]:
        def guarded(handler: Any) -> Any:
            async def run(request: Request) -> Response:
                operator = self.sessions.authenticate(request)
                if operator is None:
                    raise WireError(401, "unauthorized")
                request.state.operator = operator
                result: Response = await handler(request)
                return result

            return run

        def get(path: str, handler: Any) -> Route:
            return Route(path, Endpoint(guarded(handler), ("GET",), json_error))

        return [
            Route("/ui", Endpoint(self.redirect, ("GET",))),
            Route("/ui/", Endpoint(self.page, ("GET", "HEAD"))),
            Route("/ui/login", Endpoint(self.login, ("POST",), json_error)),
            Route("/ui/logout", Endpoint(self.logout, ("POST",), json_error)),
            Route("/ui/{name}", Endpoint(self.page, ("GET", "HEAD"))),
            get("/api/v1/console/me", self.me),
            get("/api/v1/console/overview", self.overview),
            get("/api/v1/console/runs/{run_id:path}/travel", self.travel),
            get("/api/v1/console/audit", self.audit),
            get("/api/v1/console/stream", self.stream),
        ]

    # -- pages and login -------------------------------------------------------------------

    async def redirect(self, request: Request) -> Response:
        return Response(status_code=307, headers={"Location": "/ui/"})

    async def page(self, request: Request) -> Response:
        name = request.path_params.get("name", "index.html")
        if name not in STATIC:
            raise WireError(404, "404 page not found")
        return Response(_static(name), media_type=STATIC[name], headers=SECURITY_HEADERS)

    async def login(self, request: Request) -> Response:
        body = parse_object(await read_body(request))
        token, name = str(body.get("token") or ""), str(body.get("name") or "").strip()
        if not name or len(name) > 100 or not name.isprintable():
            raise WireError(400, "a name of 1 to 100 printable characters is required")
        value = self.sessions.login(token, name)
        if value is None:
            raise WireError(401, "unauthorized")
        response = json_response({"name": name})
        response.set_cookie(
            COOKIE, value, max_age=SESSION_SECONDS, httponly=True, samesite="strict", path="/"
        )
        return response

    async def logout(self, request: Request) -> Response:
        value = request.cookies.get(COOKIE)
        if value:
            self.sessions.logout(value)
        response = json_response({"ok": True})
        response.delete_cookie(COOKIE, path="/", httponly=True, samesite="strict")
        return response

    # -- data ------------------------------------------------------------------------------

    async def me(self, request: Request) -> Response:
        operator: Operator = request.state.operator
        return json_response({"name": operator.identity, "actor": operator.actor})

    async def overview(self, request: Request) -> Response:
        return json_response(await run_in_threadpool(self._overview))

    def _overview(self) -> dict[str, Any]:
        views = self.system.views
        head = views.catch_up()
        now = self.system.clock.now()
        broker_runs = []
        for row in views.runs():
            finish = views.finish_status(row.run_id)
            status = finish.last_status if finish and finish.count else (row.last_state or "registered")
            broker_runs.append(
                {
                    "run_id": row.run_id,
                    "kind": "broker",
                    "title": row.run_id,
                    "status": status,
                    "last_activity": row.last_seen,
                    "pending": len(row.pending_permissions),
                }
            )
        agent_runs = [
            {
                "run_id": r.run_id,
                "kind": "agent",
                "title": r.title,
                "status": r.status,
                "last_activity": r.started_at,
                "controller": r.controller_id,
            }
            for r in views.agent_runs()
        ]
        pending = [_approval_json(a) for a in views.pending_approvals()]
        return {"head": head, "now": now, "runs": broker_runs + agent_runs, "approvals": pending}

    async def travel(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        raw_at = request.query_params.get("at")
        at: int | None = None
        if raw_at not in (None, ""):
            try:
                at = int(str(raw_at))
            except ValueError:
                raise WireError(400, "at must be a seq (an integer)") from None
        result = await run_in_threadpool(self._travel, run_id, at)
        if result is None:
            raise WireError(404, "run not found")
        return json_response(result)

    def _travel(self, run_id: str, at: int | None) -> dict[str, Any] | None:
        views = self.system.views
        views.catch_up()
        moments = views.timeline_at_each_event(run_id)
        if not moments:
            return None
        kind = "agent" if views.agent_run(run_id) is not None else "broker"
        seqs = [m.seq for m in moments]
        last = seqs[-1]
        at = last if at is None else at
        chosen = [m for m in moments if m.seq <= at]
        then = list(chosen[-1].entries) if chosen else []
        status = chosen[-1].status if chosen else ""
        # What changed since: the same diff as `Views.diff` and `flightlog diff` (keyed by seq).
        since = views.diff("timeline", run_id, a=at, b=last) if at < last else None
        approvals = [_approval_json(a) for a in views.approval_history(at=at) if a.run_id == run_id]
        return {
            "run_id": run_id,
            "kind": kind,
            "seqs": seqs,
            "at": at,
            "live": at >= last,
            "status": status,
            "moment": views.moment(at) if at else None,
            "entries": [e.to_dict() for e in then],
            "approvals": approvals,
            "since": since.to_dict() if since else {"added": [], "removed": [], "changed": []},
        }

    async def audit(self, request: Request) -> Response:
        return json_response(await run_in_threadpool(self._audit))

    def _audit(self) -> dict[str, Any]:
        result = self.system.log.verify()
        rows = self.system.views.approval_history()
        return {
            "verify": {
                "ok": result.ok,
                "checked": result.checked,
                "first_bad_seq": result.first_bad_seq,
                "reason": result.reason,
                "head": result.head.seq if result.head else 0,
            },
            "approvals": [_approval_json(a) for a in rows],
        }

    async def stream(self, request: Request) -> Response:
        async def events() -> AsyncIterator[bytes]:
            last = -1
            idle = 0.0
            while not await request.is_disconnected():
                head = (await run_in_threadpool(self.system.log.head)).seq
                if head != last:
                    last = head
                    idle = 0.0
                    yield b"event: change\ndata: " + orjson.dumps({"head": head}) + b"\n\n"
                elif idle >= KEEPALIVE:
                    idle = 0.0
                    yield b": keepalive\n\n"
                await asyncio.sleep(HEAD_POLL)
                idle += HEAD_POLL

        headers = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
        return StreamingResponse(events(), media_type="text/event-stream", headers=headers)


def _approval_json(a: ApprovalRow) -> dict[str, Any]:
    return {
        "id": a.id,
        "run_id": a.run_id,
        "kind": a.kind,
        "title": a.title,
        "detail": a.detail,
        "risk": a.risk,
        "payload_sha256": a.payload_sha256,
        "requested_by": a.requested_by,
        "requested_at": a.requested_at,
        "expires_at": a.expires_at,
        "status": a.status,
        "decision": a.decision,
        "actor": a.actor,
        "identity": a.identity,
        "decided_at": a.decided_at,
        "latency_ms": a.latency_ms,
        "quorum": a.quorum,
        "votes": list(a.votes),
        "refused": len(a.refused),
    }
