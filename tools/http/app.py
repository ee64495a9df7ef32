"""The HTTP server's ASGI app: the broker's wire protocol, the operator API, the OpenAPI document."""

from __future__ import annotations

import re

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from actors import System
from eventlog import SessionStore, SnapshotsUnsupported, session_store

from .broker import ENROLLED, POLL_TIMEOUT, BrokerRoutes
from .console import ConsoleRoutes
from .console_auth import SESSION_IDLE, SESSION_LIFETIME, ConsoleSessions
from .faults import Incidents, StorageFaults
from .gates import MAX_WAIT as GATE_WAIT
from .gates import GateRoutes
from .hot import HotRoutes
from .integrity import TAMPER_HEADER, Integrity
from .lean import LeanFront
from .openapi import openapi_document
from .operator import OperatorRoutes
from .principals import OperatorAuth
from .throttle import AuthThrottle
from .wire import Endpoint, WireError, json_response, text_error

_DIGEST = re.compile(r"[0-9a-f]{64}")


WORKER_HEADER = "Flightlog-Worker"


def _session_table(system: System) -> SessionStore | None:
    """The console sessions' table beside the log, shared by every process serving it; None
    (sessions in this process) for a log that keeps no table beside it."""
    try:
        return session_store(system.log)
    except SnapshotsUnsupported:
        return None


def create_app(
    system: System,
    *,
    operator_token_sha256: str,
    poll_timeout: float = POLL_TIMEOUT,
    integrity: Integrity | None = None,
    session_idle: float = SESSION_IDLE,
    session_lifetime: float = SESSION_LIFETIME,
    throttle: AuthThrottle | None = None,
    registration: str = ENROLLED,
    max_wait: float = GATE_WAIT,
    worker: int | None = None,
) -> Starlette:
    """The app over an open System; the caller keeps the System open while the app serves.

    `integrity` is what was verified of the log before serving (`check_log`): its snapshot
    verdict joins every verify answer, and if it found tampering every answer carries the
    `Flightlog-Tamper` header, which the console shows as a banner.

    `operator_token_sha256` is the lower-case hex SHA-256 of the bootstrap admin's token
    (FLIGHTLOG_OPERATOR_TOKEN; the raw token never reaches the app), or "" for none. Operators
    enrolled in the log authenticate with their own tokens either way. With no operator at
    all, `/push-control` takes run credentials, as the seed's broker without a global token.

    `session_idle` and `session_lifetime` bound a console session (seconds unused, seconds
    since login); `throttle` limits failed operator authentications per address (default:
    `AuthThrottle()`).

    `registration` is who may create a run: `enrolled` (the default, as `flightlog serve`'s)
    only operators and enrolment credentials, through the API, so that no stranger takes a
    run id first; `open` also an agent's `/register` of a new id, as the seed (see `broker`).
    `worker` is this process's number among `serve --workers N`'s, sent back in the
    `Flightlog-Worker` header of every answer (None: one process, no header).
    `max_wait` is the longest a `/permission_wait` or `/api/v1/events` long poll holds (seconds).
    """
    if operator_token_sha256 and not _DIGEST.fullmatch(operator_token_sha256):
        raise ValueError("operator_token_sha256 must be 64 lower-case hex digits (or empty)")
    if poll_timeout <= 0:
        raise ValueError("poll_timeout must be positive")
    document = openapi_document()

    async def openapi(request: Request) -> Response:
        return json_response(document)

    sessions = ConsoleSessions(
        idle=session_idle,
        lifetime=session_lifetime,
        store=_session_table(system),
        bootstrap_sha256=operator_token_sha256,
    )
    auth = OperatorAuth(system.operators, operator_token_sha256, sessions, throttle or AuthThrottle())
    broker_routes = BrokerRoutes(system.broker, auth, poll_timeout, registration)
    routes = [
        *broker_routes.routes(),
        *GateRoutes(system.gates, broker_routes.authenticated, max_wait).routes(),
        *ConsoleRoutes(system, auth).routes(),
        *OperatorRoutes(system, auth, max_wait).routes(),
        Route("/openapi.json", Endpoint(openapi, ("GET", "HEAD"))),
    ]
    # Storage faults become 503s with their cause inside uvicorn's error handler, never a 500;
    # inside that, the agents' busiest routes are served without the router (`hot`).
    incidents = Incidents(system.log)
    middleware = [Middleware(StorageFaults, incidents=incidents), Middleware(HotRoutes, routes=broker_routes)]
    app = Starlette(routes=routes, middleware=middleware)
    # As the seed's ServeMux: `/register/` is not `/register`, and an unknown path is a plain 404.
    app.router.redirect_slashes = False
    app.router.default = _not_found
    app.state.system = system
    app.state.auth = auth
    app.state.storage_incidents = incidents
    app.state.integrity = integrity
    headers = []
    tamper = integrity.tamper() if integrity is not None else ""
    if tamper:  # on every answer, so that no client can miss it
        headers.append((TAMPER_HEADER.lower().encode(), tamper.encode("ascii", "replace")[:2000]))
    if worker is not None:
        headers.append((WORKER_HEADER.lower().encode(), str(worker).encode()))
    if headers:
        app.add_middleware(_ExtraHeaders, headers=headers)
    # Under `flightlog serve`, the hot routes are answered by the protocol itself (`lean`).
    app.state.lean_front = LeanFront(HotRoutes(_not_found, broker_routes), incidents, headers)
    return app


class _ExtraHeaders:
    """Adds the same headers to every HTTP answer."""

    def __init__(self, app: ASGIApp, headers: list[tuple[bytes, bytes]]) -> None:
        self.app = app
        self.headers = headers

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def tagged(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": [*message.get("headers", []), *self.headers]}
            await send(message)

        await self.app(scope, receive, tagged)


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    await text_error(WireError(404, "404 page not found"))(scope, receive, send)
