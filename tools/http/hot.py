"""The broker's busiest wire routes served from ASGI, without Starlette's router, Request or Response.

A POST to `/report`, `/heartbeat`, `/finish`, `/reply` or `/poll-control` is what agents send
all day (`/push-control`, an operator's, authenticates against the log and goes the long
way); through the router, `Request`, `Endpoint` and `Response` it costs more than everything
else it needs. `HotRoutes` sits inside the app's middleware (storage
faults as 503, the tamper header, the server-error handler all still apply), matches such a
request by a dict lookup, and applies the very rules of the other routes in the same order:
the cross-site rules first (`wire.cross_site_refusal`: a foreign Origin is a 403, a body that
is not JSON a 415), then the body limit, then the handler of `BrokerRoutes`, whose errors are
rendered as theirs are. Any other method on these paths goes on to Starlette, whose method
guard answers it. Under `flightlog serve` the server's protocol calls `serve` itself, past
ASGI and the middleware (`lean`); this middleware is the way for everything else that
reaches these routes (an escaped path, a pipelined request, an in-process client).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Receive, Scope, Send

from .broker import OK, BrokerRoutes
from .wire import MAX_BODY, NoResponse, WireError, check_declared_length, cross_site_refusal, text_error

# (raw body, request headers, scope, receive, arrival time) -> the JSON value of the answer.
HotHandler = Callable[[bytes, "Headers", Scope, Receive, float], Awaitable[Any]]
PLAIN_OK = object()  # the plain-text `ok` of /heartbeat
_WANTED = (b"origin", b"content-type", b"content-length", b"authorization")
_JSON_HEADERS = [(b"content-type", b"application/json")]
_TEXT_HEADERS = [(b"content-type", b"text/plain; charset=utf-8")]
_OK_BODY = orjson.dumps(OK) + b"\n"  # the answer to most of what agents send
_NULL_BODY = b"null\n"


class Headers:
    """The few request headers the hot routes read (the last of each, latin-1 as Starlette does)."""

    __slots__ = ("authorization", "content_length", "content_type", "origin")

    def __init__(self, scope: Scope) -> None:
        found: dict[bytes, bytes] = {}
        for name, value in scope["headers"]:
            if name in _WANTED:
                found[name] = value
        self.origin = _text(found.get(b"origin"))
        self.content_type = _text(found.get(b"content-type"))
        self.content_length = _text(found.get(b"content-length"))
        self.authorization = found.get(b"authorization")

    def bearer(self) -> bytes | None:
        """The credential of `Authorization: Bearer <token>`, as `wire.bearer_token` reads it."""
        header = _text(self.authorization)
        if header is None or not header.startswith("Bearer "):
            return None
        return header[len("Bearer ") :].strip().encode("latin-1")


class HotRoutes:
    """ASGI middleware serving the hot POST routes of `routes` (see the module)."""

    def __init__(self, app: ASGIApp, routes: BrokerRoutes) -> None:
        self.app = app
        self.routes = routes
        self.handlers: dict[str, HotHandler] = {
            "/report": self.report,
            "/heartbeat": self.heartbeat,
            "/finish": self.finish,
            "/reply": self.reply,
            "/poll-control": self.poll_control,
        }

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            handler = self.handlers.get(scope["path"])
            if handler is not None:
                await self.serve(handler, scope, receive, send)
                return
        await self.app(scope, receive, send)

    async def serve(self, handler: HotHandler, scope: Scope, receive: Receive, send: Send) -> None:
        arrived = asyncio.get_running_loop().time()
        headers = Headers(scope)
        try:
            refusal = cross_site_refusal("POST", headers.origin, headers.content_type, scope.get("server"))
            if refusal is not None:
                raise refusal
            check_declared_length(headers.content_length, MAX_BODY)
            value = await handler(await read_raw(receive), headers, scope, receive, arrived)
        except WireError as e:
            await text_error(e)(scope, receive, send)
            return
        except ClientDisconnect:
            return  # nobody to answer
        if value is NoResponse:
            return  # the client went away while the handler waited
        if value is PLAIN_OK:
            body, kind = b"ok", _TEXT_HEADERS
        elif value is OK:
            body, kind = _OK_BODY, _JSON_HEADERS
        elif value is None:
            body, kind = _NULL_BODY, _JSON_HEADERS  # an empty poll's
        else:
            body = orjson.dumps(value, option=orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS) + b"\n"
            kind = _JSON_HEADERS
        length = (b"content-length", str(len(body)).encode())
        await send({"type": "http.response.start", "status": 200, "headers": [length, *kind]})
        await send({"type": "http.response.body", "body": body})

    # -- the routes (each the `BrokerRoutes` handler of its path) ------------------------------

    async def report(
        self, raw: bytes, headers: Headers, scope: Scope, receive: Receive, arrived: float
    ) -> Any:
        await self.routes.report_raw(raw)
        return OK

    async def heartbeat(
        self, raw: bytes, headers: Headers, scope: Scope, receive: Receive, arrived: float
    ) -> Any:
        await self.routes.heartbeat_raw(raw)
        return PLAIN_OK

    async def finish(
        self, raw: bytes, headers: Headers, scope: Scope, receive: Receive, arrived: float
    ) -> Any:
        await self.routes.finish_raw(raw)
        return OK

    async def reply(
        self, raw: bytes, headers: Headers, scope: Scope, receive: Receive, arrived: float
    ) -> Any:
        await self.routes.reply_raw(raw)
        return OK

    async def poll_control(
        self, raw: bytes, headers: Headers, scope: Scope, receive: Receive, arrived: float
    ) -> Any:
        return await self.routes.poll_raw(raw, scope, receive, arrived)


async def read_raw(receive: Receive, limit: int = MAX_BODY) -> bytes:
    """The body, refused with 413 as soon as it exceeds `limit` (as `wire.read_body`)."""
    message = await receive()
    if message["type"] == "http.disconnect":
        raise ClientDisconnect
    body = message.get("body", b"")
    if not message.get("more_body", False):
        if len(body) > limit:
            raise WireError(413, "request body too large")
        return bytes(body)
    chunks = bytearray(body)
    while True:
        if len(chunks) > limit:
            raise WireError(413, "request body too large")
        message = await receive()
        if message["type"] == "http.disconnect":
            raise ClientDisconnect
        chunks += message.get("body", b"")
        if not message.get("more_body", False):
            break
    if len(chunks) > limit:
        raise WireError(413, "request body too large")
    return bytes(chunks)


def _text(value: bytes | None) -> str | None:
    return None if value is None else value.decode("latin-1")
