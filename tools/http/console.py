"""The web console: static pages under /ui/, login, and the JSON the pages read.

`/api/v1/console/*` serves what the pages show: an overview (pending approvals and who voted),
the runs list (search, filters, sort, pages), a run as it was at any of its events (time
travel, with what changed since, by the same diff as `flightlog diff`), its raw events, one
event, one approval, the audit trail with the chain's verdict, and a server-sent event
stream that says "the log grew". Every page path (`/ui/runs/<id>`, `/ui/approvals/<id>`,
`/ui/events/<seq>`) serves the one page, which routes itself.
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
from actors.operators import READ
from projections import ApprovalRow

from .console_auth import cookie_name
from .console_reads import (
    QueryError,
    RunIndex,
    event_json,
    event_run_id,
    parse_query,
    voters,
)
from .integrity import Integrity
from .paging import MAX_CURSOR, page_query, whole
from .principals import Operator, OperatorAuth, client_address
from .run_travel import (
    agent_events,
    agent_travel,
    approvals_changed,
    broker_travel,
    page_params,
    permission_tool,
    step_seq,
)
from .travel_reads import moment_seq
from .wire import Endpoint, WireError, json_error, json_response, parse_object, read_body

MEDIA = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}  # fmt: skip
PAGES = ("runs", "approvals", "events")  # /ui/<page>/<id>: the one page, routed in the browser
MAX_EVENTS = 500
OVERVIEW_PAGE = 200
HEAD_POLL = 0.25  # how often the event stream looks at the log's head
KEEPALIVE = 15.0
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}


def _static(name: str) -> bytes | None:
    if "/" in name or name.startswith(".") or not name.endswith(tuple(MEDIA)):
        return None
    path = importlib.resources.files("tools").joinpath("console", name)
    return path.read_bytes() if path.is_file() else None


class ConsoleRoutes:
    def __init__(self, system: System, auth: OperatorAuth) -> None:
        self.system = system
        self.auth = auth
        self.index = RunIndex(system)

    def routes(self) -> list[Route]:
        def get(path: str, handler: Any) -> Route:
            return Route(path, Endpoint(self.auth.guard(handler, READ), ("GET",), json_error))

        return [
            Route("/ui", Endpoint(self.redirect, ("GET",))),
            Route("/ui/", Endpoint(self.page, ("GET", "HEAD"))),
            Route("/ui/login", Endpoint(self.login, ("POST",), json_error)),
            Route("/ui/logout", Endpoint(self.logout, ("POST",), json_error)),
            *(Route(f"/ui/{page}/{{rest:path}}", Endpoint(self.page, ("GET", "HEAD"))) for page in PAGES),
            Route("/ui/{name}", Endpoint(self.page, ("GET", "HEAD"))),
            Route("/ui/{other:path}", Endpoint(self.missing, ("GET", "HEAD"))),
            get("/api/v1/console/me", self.me),
            get("/api/v1/console/overview", self.overview),
            get("/api/v1/console/runs", self.runs),
            get("/api/v1/console/runs/{run_id:path}/travel", self.travel),
            get("/api/v1/console/runs/{run_id:path}/events", self.events),
            get("/api/v1/console/events/{seq}", self.event),
            get("/api/v1/console/approvals/{approval_id}", self.approval),
            get("/api/v1/console/audit", self.audit),
            get("/api/v1/console/stream", self.stream),
        ]

    # -- pages and login -------------------------------------------------------------------

    async def redirect(self, request: Request) -> Response:
        return Response(status_code=307, headers={"Location": "/ui/"})

    async def page(self, request: Request) -> Response:
        name = request.path_params.get("name", "index.html")
        status = 200
        if "." not in name:  # a page the console does not have: its own 404 page, drawn by the page
            name, status = "index.html", 404
        body = _static(name)
        if body is None:
            raise WireError(404, "404 page not found")
        media = MEDIA[name[name.rindex(".") :]]
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
        return Response(body, status_code=status, media_type=media, headers=headers)

    async def missing(self, request: Request) -> Response:
        """A deeper path the console does not have: the page, which draws its 404, with a 404."""
        body = _static("index.html") or b""
        headers = {**SECURITY_HEADERS, "Cache-Control": "no-cache"}
        return Response(body, status_code=404, media_type=MEDIA[".html"], headers=headers)

    async def login(self, request: Request) -> Response:
        """Trade an operator's token for a session: the cookie, and the CSRF secret in the body.

        The session is the token's credential's: its enrolled name and role, whatever the
        page says. Failed logins count towards the address's throttle, as Bearer failures do.
        """
        body = parse_object(await read_body(request))
        token = body.get("token")
        if not isinstance(token, str) or not token:
            raise WireError(400, "token is required")
        auth = self.auth
        address = client_address(request)

        def check() -> Operator | None:
            auth.check_throttle(address)
            credential = auth.from_token(token)
            if credential is None:
                auth.failed(address)
                return None
            if auth.throttle is not None:
                auth.throttle.succeeded(address)
            return Operator(credential.name, credential.credential_id, credential.role, via_cookie=True)

        operator = await run_in_threadpool(check)
        if operator is None:
            raise WireError(401, "unauthorized: that token is not an operator's")
        value, csrf = auth.sessions.start(operator.credential_id)
        response = json_response(
            {
                "name": operator.name,
                "credential_id": operator.credential_id,
                "role": operator.role,
                "csrf": csrf,
            },
            headers={"Cache-Control": "no-store"},
        )
        response.set_cookie(
            cookie_name(request),
            value,
            max_age=int(auth.sessions.lifetime),
            httponly=True,
            samesite="strict",
            path="/",
        )
        return response

    async def logout(self, request: Request) -> Response:
        """End the session; like any unsafe request, only with the session's CSRF secret."""
        name = cookie_name(request)
        value = request.cookies.get(name)
        operator = await run_in_threadpool(self.auth.authenticate, request)
        if operator is None or not operator.via_cookie:
            raise WireError(403, "forbidden: logout needs the session's CSRF secret")
        self.auth.sessions.end(value)
        response = json_response({"ok": True})
        response.delete_cookie(name, path="/", httponly=True, samesite="strict")
        return response

    # -- data ------------------------------------------------------------------------------

    async def me(self, request: Request) -> Response:
        operator: Operator = request.state.operator
        return json_response(
            {"name": operator.name, "credential_id": operator.credential_id, "role": operator.role}
        )

    async def overview(self, request: Request) -> Response:
        after, limit = page_query(request.query_params, OVERVIEW_PAGE, MAX_EVENTS)
        since = request.query_params.get("since") or ""
        try:
            return json_response(await run_in_threadpool(self._overview, after, limit, since))
        except ValueError as e:
            raise WireError(400, str(e)) from None

    def _overview(self, after: int | None, limit: int, since: str = "") -> dict[str, Any]:
        """A page of pending approvals (oldest first, after the cursor `after`, a requested seq);
        with `since` (a head seen before), `unchanged` when no approval record came after it."""
        views = self.system.views
        head = views.catch_up()
        now = self.system.clock.now()
        if since.isdigit() and int(since) <= head and not approvals_changed(self.system, int(since)):
            return {"head": head, "now": now, "unchanged": True}
        page = self.system.approvals.pending_page(after, limit)
        total = views.lists.pending_total(now)
        return {"head": head, "now": now, "total": total, "approvals": [self._approval(a) for a in page.rows],
                "next": page.next}  # fmt: skip

    def _approval(self, a: ApprovalRow) -> dict[str, Any]:
        """An approval with every vote (name and identity) and, for a run's permission, its tool."""
        out = _approval_json(a)
        out["voters"] = voters(self.system, a.id)
        out["tool"] = permission_tool(self.system, a)
        return out

    async def runs(self, request: Request) -> Response:
        try:
            query = parse_query(request.query_params)
        except QueryError as e:
            raise WireError(400, str(e)) from None
        return json_response(await run_in_threadpool(self.index.query, query))

    async def travel(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        raw_at = request.query_params.get("at")
        at: int | None = None
        if raw_at not in (None, ""):
            try:
                at = moment_seq(self.system.log, str(raw_at))
            except ValueError as e:
                raise WireError(400, f"at: {e}") from None
        step = request.query_params.get("step") or ""
        try:
            before, limit = page_params(request.query_params)
            if step:
                found = step_seq(self.system, run_id, int(step)) if step.isdigit() else None
                if found is None:
                    raise ValueError(f"step {step} is not one of the run's")
                at = found
            result = await run_in_threadpool(self._travel, run_id, at, before, limit)
        except ValueError as e:
            raise WireError(400, str(e)) from None
        if result is None:
            raise WireError(404, "run not found")
        return json_response(result)

    def _travel(
        self, run_id: str, at: int | None, before: int | None = None, limit: int = 200
    ) -> dict[str, Any] | None:
        views = self.system.views
        views.catch_up()
        row = views.agent_run(run_id)
        if row is None:  # a broker run: a page, folded from its nearest checkpoint
            return broker_travel(self.system, run_id, at, before, limit, self._approval)
        return agent_travel(self.system, row, at, before, limit, self._approval)

    async def events(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        try:
            offset = int(request.query_params.get("offset") or 0)
            limit = min(int(request.query_params.get("limit") or 100), MAX_EVENTS)
        except ValueError:
            raise WireError(400, "offset and limit must be whole numbers") from None
        if offset > MAX_CURSOR:
            raise WireError(400, "offset is past any run's events")

        def load() -> dict[str, Any] | None:
            if self.system.views.agent_run(run_id) is None:  # a broker run: read the page's versions only
                stream = f"run-{run_id}"
                total = self.system.log.stream_version(stream)
                if not total:
                    return None
                first = max(offset, 0) + 1
                page = list(self.system.log.read(stream, first, first + max(limit, 1) - 1))
                return {"run_id": run_id, "total": total, "offset": offset,
                        "events": [event_json(r) for r in page]}  # fmt: skip
            row = self.system.views.agent_run(run_id)
            return agent_events(self.system, row, offset, limit) if row is not None else None

        result = await run_in_threadpool(load)
        if result is None:
            raise WireError(404, "run not found")
        return json_response(result)

    async def event(self, request: Request) -> Response:
        text = request.path_params["seq"]
        found = whole(text)
        if found is None or found > MAX_CURSOR:
            raise WireError(400, "seq must be a whole number, a seq of the log")

        def load() -> dict[str, Any] | None:
            seq = found
            for r in self.system.log.read_all(after_seq=seq - 1, to_seq=seq):
                return {**event_json(r), "run_id": event_run_id(self.system, r)}
            return None

        result = await run_in_threadpool(load)
        if result is None:
            raise WireError(404, "no event at that seq")
        return json_response(result)

    async def approval(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]

        def load() -> dict[str, Any] | None:
            row = self.system.views.approval(approval_id)
            return None if row is None else self._approval(row)

        result = await run_in_threadpool(load)
        if result is None:
            raise WireError(404, "approval not found")
        return json_response(result)

    async def audit(self, request: Request) -> Response:
        started: Integrity | None = getattr(request.app.state, "integrity", None)
        after, limit = page_query(request.query_params)
        try:
            return json_response(await run_in_threadpool(self._audit, started, after, limit))
        except ValueError as e:
            raise WireError(400, str(e)) from None

    def _audit(self, started: Integrity | None, after: int | None, limit: int) -> dict[str, Any]:
        """A page of the audit trail (request order, after the cursor `after`); the first page
        also carries the chain's verdict."""
        page = self.system.views.lists.history(after, limit)
        out: dict[str, Any] = {"approvals": [_approval_json(a) for a in page.rows], "next": page.next}
        if after is not None:
            return out
        result = self.system.log.verify()
        found = Integrity(result, started.snapshots if started else None)
        out["verify"] = {
            "ok": found.ok,
            "checked": result.checked,
            "first_bad_seq": result.first_bad_seq,
            "reason": result.reason,
            "head": result.head.seq if result.head else 0,
            "snapshots": found.to_dict()["snapshots"],
            "tamper": found.tamper() or (started.tamper() if started else ""),
        }
        return out

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
        "agent_reported": sum(1 for r in a.refused if r.agent_reported),  # a run's own answers, refused
    }
