"""The HTTP server's ASGI app: the broker's wire protocol, the operator API, the OpenAPI document."""

from __future__ import annotations

import re

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from actors import System

from .broker import POLL_TIMEOUT, BrokerRoutes
from .console import ConsoleRoutes
from .console_auth import ConsoleSessions
from .faults import Incidents, StorageFaults
from .openapi import openapi_document
from .operator import OperatorRoutes
from .wire import Endpoint, WireError, json_response, text_error

_DIGEST = re.compile(r"[0-9a-f]{64}")


def create_app(
    system: System, *, operator_token_sha256: str, poll_timeout: float = POLL_TIMEOUT
) -> Starlette:
    """The app over an open System; the caller keeps the System open while the app serves.

    `operator_token_sha256` is the lower-case hex SHA-256 of the operator token (the raw token
    never reaches the app), or "" for none: then `/push-control` takes run credentials, as the
    seed's broker without a global token, and the operator API refuses every request.
    """
    if operator_token_sha256 and not _DIGEST.fullmatch(operator_token_sha256):
        raise ValueError("operator_token_sha256 must be 64 lower-case hex digits (or empty)")
    if poll_timeout <= 0:
        raise ValueError("poll_timeout must be positive")
    document = openapi_document()

    async def openapi(request: Request) -> Response:
        return json_response(document)

    sessions = ConsoleSessions(operator_token_sha256)
    routes = [
        *BrokerRoutes(system.broker, operator_token_sha256, poll_timeout).routes(),
        *ConsoleRoutes(system, sessions).routes(),
        *OperatorRoutes(system, operator_token_sha256, sessions).routes(),
        Route("/openapi.json", Endpoint(openapi, ("GET", "HEAD"))),
    ]
    # Storage faults become 503s with their cause inside uvicorn's error handler, never a 500.
    incidents = Incidents(system.log)
    app = Starlette(routes=routes, middleware=[Middleware(StorageFaults, incidents=incidents)])
    # As the seed's ServeMux: `/register/` is not `/register`, and an unknown path is a plain 404.
    app.router.redirect_slashes = False
    app.router.default = _not_found
    app.state.system = system
    app.state.storage_incidents = incidents
    return app


async def _not_found(scope: Scope, receive: Receive, send: Send) -> None:
    await text_error(WireError(404, "404 page not found"))(scope, receive, send)
