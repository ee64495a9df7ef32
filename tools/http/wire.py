"""HTTP plumbing shared by the broker's wire protocol and the operator API.

Bodies are read incrementally up to a limit; JSON bodies must be objects whose fields have
the types the seed's Go structs declare; errors are raised as `WireError` and rendered by
the `Endpoint` that wraps every handler. Nothing here ever renders a token.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import re
from collections.abc import Awaitable, Callable, Collection, Mapping
from contextlib import aclosing
from datetime import datetime
from typing import Any

import orjson
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

MAX_BODY = 1 << 20  # 1 MiB, as the seed
CONNECTION = "flightlog.connection"  # the scope key of the connection a request came on (`waits`)
REFUSALS = frozenset({413, 429})  # answers that hold their connection's next request back
REFUSAL_HOLD = 0.25  # seconds such a connection is not read (`tools.http.protocol`), by default
# TRACE echoes a request back (cross-site tracing) and CONNECT opens a tunnel: no path takes them.
NEVER_ALLOWED = frozenset({"TRACE", "CONNECT"})
ANY_METHOD = frozenset({"DELETE", "GET", "HEAD", "OPTIONS", "PATCH", "POST", "PUT"})

_TEXT = "text/plain; charset=utf-8"
_JSON = "application/json"
# A JSON string, or one bracket: enough to skip a value without a character loop.
_SCAN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_SCALAR = re.compile(rb"[^,}\]\s]+")
_WS = re.compile(rb"\s*")


class WireError(Exception):
    """Raised by a handler to answer with an error status and a short message."""

    def __init__(
        self, status: int, message: str, headers: Mapping[str, str] | None = None, *, as_json: bool = False
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = dict(headers or {})
        self.as_json = as_json  # a refusal the seed has no text for: `{"error": ...}` on any path


Handler = Callable[[Request], Awaitable[Response]]
ErrorRenderer = Callable[[WireError], Response]


# -- responses -------------------------------------------------------------------------------


def text_error(error: WireError) -> Response:
    """A plain-text error, as Go's http.Error writes it (message, newline, nosniff)."""
    if error.as_json:
        return json_error(error)
    headers = {"X-Content-Type-Options": "nosniff", **error.headers}
    kind = Refusal if error.status in REFUSALS else Response
    return kind(f"{error.message}\n", error.status, headers, media_type=_TEXT)


def json_error(error: WireError) -> Response:
    """An operator-API error: `{"error": message}` plus whatever the error carries."""
    kind = Refusal if error.status in REFUSALS else Response
    return kind(json_bytes({"error": error.message}), error.status, error.headers, media_type=_JSON)


class Refusal(Response):
    """An answer that refuses a request over a bound (413, 429): it holds its connection's next
    request back (`tools.http.protocol`: a flood of refused requests slows down)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        connection = scope.get(CONNECTION)
        if connection is not None:
            connection.refused()
        await super().__call__(scope, receive, send)


def text_ok() -> Response:
    return Response("ok", 200, media_type=_TEXT)


def json_bytes(value: Any) -> bytes:
    """JSON with a trailing newline (as Go's json.Encoder writes it); times in UTC with `Z`."""
    return orjson.dumps(value, option=orjson.OPT_UTC_Z | orjson.OPT_NON_STR_KEYS) + b"\n"


def json_response(value: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> Response:
    """A `json_bytes` answer."""
    return Response(json_bytes(value), status, dict(headers or {}), media_type=_JSON)


class NoResponse(Response):
    """Sends nothing: the client went away, as the seed's handler returns on disconnect."""

    def __init__(self) -> None:
        super().__init__(b"")

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        return None


def by_method(handlers: Mapping[str, Handler]) -> Handler:
    """One handler per method of one path (an Endpoint takes every method of its path, so two
    routes of one path would shadow each other): give it `methods=handlers.keys()`."""

    async def dispatch(request: Request) -> Response:
        return await handlers[request.method](request)

    return dispatch


class Endpoint:
    """One path as an ASGI app: the method guard, then the handler; errors rendered by `render`.

    Starlette routes a non-function endpoint for every method, so the guard here decides
    what a wrong method gets (the seed's 405 `method not allowed`).
    """

    def __init__(
        self, handler: Handler, methods: Collection[str] | None = None, render: ErrorRenderer = text_error
    ) -> None:
        self.handler = handler
        self.methods = frozenset(methods) if methods is not None else None
        self.render = render

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        request = Request(scope, receive)
        response: Response
        if request.method in NEVER_ALLOWED:
            allow = ", ".join(sorted(self.methods if self.methods is not None else ANY_METHOD))
            response = self.render(WireError(405, "method not allowed", {"Allow": allow}))
        elif self.methods is not None and request.method not in self.methods:
            allow = ", ".join(sorted(self.methods))
            response = self.render(WireError(405, "method not allowed", {"Allow": allow}))
        else:
            try:
                response = await self.handler(request)
            except WireError as e:
                response = self.render(e)
            except ClientDisconnect:
                return  # nobody to answer
        await response(scope, receive, send)


# -- browsers ------------------------------------------------------------------------------


def browser_guard(handler: Handler) -> Handler:
    """`handler` behind the wire protocol's cross-site rules, checked before any credential.

    A web page can make a browser POST `text/plain` (or a form) anywhere without asking, and
    say where it comes from only in `Origin`. So a request naming an Origin other than this
    server's own loopback origin is a 403, and a POST body that is not `application/json` a
    415 (a JSON type with parameters, `; charset=utf-8`, is fine). Agents send JSON and no
    Origin, as the seed's clients do.
    """

    async def guarded(request: Request) -> Response:
        headers = request.headers
        refusal = cross_site_refusal(
            request.method, headers.get("origin"), headers.get("content-type"), request.scope.get("server")
        )
        if refusal is not None:
            raise refusal
        return await handler(request)

    return guarded


def cross_site_refusal(
    method: str, origin: str | None, content_type: str | None, server: tuple[str, int | None] | None
) -> WireError | None:
    """The refusal `browser_guard` answers a request with (see there), or None: it may go on.

    `server` is the ASGI scope's (host, port) the request came in on.
    """
    if origin is not None and origin not in own_origins(server):
        return WireError(403, "cross-site request refused: this Origin may not use the wire protocol",
                         as_json=True)  # fmt: skip
    if method == "POST" and media_type(content_type or "") != _JSON:
        return WireError(415, "the body must be JSON: send Content-Type: application/json", as_json=True)
    return None


def media_type(content_type: str) -> str:
    """The media type of a Content-Type header, lower-cased, without its parameters."""
    return content_type.split(";", 1)[0].strip().lower()


def own_origins(server: tuple[str, int | None] | None) -> frozenset[str]:
    """The loopback origins of the port this server answers on (never what `Host` claims).

    Host is the caller's to choose, so a page on a name it rebinds to 127.0.0.1 could make
    any Host-derived origin its own; the loopback names cannot be rebound.
    """
    port = server[1] if server and server[1] is not None else 80
    return _origins(port)


@functools.lru_cache(maxsize=64)
def _origins(port: int) -> frozenset[str]:
    suffix = "" if port == 80 else f":{port}"
    return frozenset(f"http://{host}{suffix}" for host in ("127.0.0.1", "localhost", "[::1]"))


# -- bodies ----------------------------------------------------------------------------------


async def read_body(request: Request, limit: int = MAX_BODY) -> bytes:
    """The request body, refused with 413 as soon as it is known to exceed `limit` bytes."""
    check_declared_length(request.headers.get("content-length"), limit)
    body = bytearray()
    async with aclosing(request.stream()) as chunks:
        async for chunk in chunks:
            body += chunk
            if len(body) > limit:
                raise WireError(413, "request body too large")
    return bytes(body)


def check_declared_length(declared: str | None, limit: int) -> None:
    """Refuse a body whose Content-Length is not a number (400) or exceeds `limit` (413)."""
    if declared is None:
        return
    try:
        size = int(declared)
    except ValueError:
        raise WireError(400, "bad request") from None
    if size > limit:
        raise WireError(413, "request body too large")


def parse_object(raw: bytes) -> dict[str, Any]:
    """A JSON object body; JSON `null` reads as `{}` (as Go decodes it into a struct)."""
    try:
        value = orjson.loads(raw)
    except orjson.JSONDecodeError:
        raise WireError(400, "bad request") from None
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise WireError(400, "bad request")
    return value


def string_field(body: Mapping[str, Any], key: str) -> str:
    """A string member (absent or null is `""`); any other type is a 400, as in Go."""
    value = body.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise WireError(400, "bad request")
    return value


def strings_field(body: Mapping[str, Any], key: str) -> tuple[str, ...]:
    value = body.get(key)
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise WireError(400, "bad request")
    return tuple(value)


def time_field(body: Mapping[str, Any], key: str) -> None:
    """Check an RFC 3339 time member (Go refuses a struct whose time.Time does not parse)."""
    value = body.get(key)
    if value is None:
        return
    if not isinstance(value, str):
        raise WireError(400, "bad request")
    try:
        datetime.fromisoformat(value)
    except ValueError:
        raise WireError(400, "bad request") from None


def raw_member(raw: bytes, key: str, parsed: Mapping[str, Any] | None = None) -> str | None:
    """The exact text of a top-level member of a JSON object (the last if repeated), or None.

    Like Go's json.RawMessage: a payload is kept byte for byte, so numbers beyond 64 bits,
    spacing and key order survive. `raw` must already have parsed as a JSON object; `parsed`,
    when given, is what it parsed to (a member it lacks is absent at once).
    """
    if parsed is not None:
        if key not in parsed:
            return None
        found = _sole_member(raw, key, parsed[key])  # `parsed` has the member: the fast path may look
        if found is not None:
            return found
    return _scan_member(raw, key)


def _sole_member(raw: bytes, key: str, value: Any) -> str | None:
    """The text of top-level member `key`, which the body has (parsed as `value`): when nothing
    is escaped and its quoted name occurs once; else None (scan).

    Without a backslash in the body, a string cannot hold a quote, and the top-level name is
    written as it is: if `"key"` occurs once, that occurrence is the top-level member's name.
    An object, array or string written compactly, as most clients write them, is the compact
    text of what it parsed to: if that text is there, it is the member's whole text (it ends
    with its own closing bracket or quote), found without a scan in Python.
    """
    if b"\\" in raw:
        return None
    name = orjson.dumps(key)
    at = raw.find(name)
    if at < 0 or raw.find(name, at + 1) >= 0:
        return None
    colon = _skip_ws(raw, at + len(name))
    if raw[colon : colon + 1] != b":":
        return None
    start = _skip_ws(raw, colon + 1)
    if type(value) is str:
        # Without a backslash a string holds no quote: its text ends at the next one. (Found so,
        # a payload of a megabyte is not written out again to be compared.)
        end = raw.find(b'"', start + 1) if raw[start : start + 1] == b'"' else -1
        return raw[start : end + 1].decode("utf-8") if end > start else None
    delimited = type(value) in _DELIMITED
    compact = orjson.dumps(value) if delimited else b""
    if delimited and raw.startswith(compact, start):
        return compact.decode("utf-8")
    return raw[start : _skip_value(raw, start)].decode("utf-8")


_DELIMITED = (dict, list, str)  # values whose text ends with a closing bracket or quote


def _scan_member(raw: bytes, key: str) -> str | None:
    i = _skip_ws(raw, 0)
    if raw[i : i + 1] != b"{":
        return None
    i += 1
    found: bytes | None = None
    while True:
        i = _skip_ws(raw, i)
        if raw[i : i + 1] == b"}":
            return None if found is None else found.decode("utf-8")
        name_match = _STRING.match(raw, i)
        assert name_match is not None, "raw_member needs a valid JSON object"
        name = orjson.loads(name_match.group())
        i = _skip_ws(raw, name_match.end()) + 1  # past the colon
        start = _skip_ws(raw, i)
        i = _skip_value(raw, start)
        if name == key:
            found = raw[start:i]
        i = _skip_ws(raw, i)
        if raw[i : i + 1] == b",":
            i += 1


def _skip_ws(raw: bytes, i: int) -> int:
    match = _WS.match(raw, i)
    return match.end() if match else i


def _skip_value(raw: bytes, i: int) -> int:
    head = raw[i : i + 1]
    if head == b'"':
        match = _STRING.match(raw, i)
        assert match is not None
        return match.end()
    if head not in (b"{", b"["):
        match = _SCALAR.match(raw, i)
        assert match is not None
        return match.end()
    depth = 0
    for match in _SCAN.finditer(raw, i):
        token = match.group()
        if token in (b"{", b"["):
            depth += 1
        elif token in (b"}", b"]"):
            depth -= 1
            if depth == 0:
                return match.end()
    raise AssertionError("raw_member needs a valid JSON object")


# -- tokens ----------------------------------------------------------------------------------


def bearer_token(request: Request) -> bytes | None:
    """The credential of `Authorization: Bearer <token>` (exact prefix, remainder trimmed), as bytes."""
    return bearer_credential(request.headers.get("authorization"))


def bearer_credential(header: str | None) -> bytes | None:
    """`bearer_token` of an Authorization header's value (None: no such header)."""
    if header is None or not header.startswith("Bearer "):
        return None
    # Starlette decodes headers as latin-1: encoding back gives the bytes the client sent.
    return header[len("Bearer ") :].strip().encode("latin-1")


def digest_matches(token: bytes | None, expected_sha256: str) -> bool:
    """Whether sha256(token) is `expected_sha256`, compared digest to digest in constant time."""
    if token is None or not expected_sha256:
        return False
    return hmac.compare_digest(hashlib.sha256(token).hexdigest(), expected_sha256)


def visible_ascii(text: str, max_length: int) -> bool:
    """Whether `text` is 1..max_length characters from `!` to `~` (no spaces, no controls)."""
    return 0 < len(text) <= max_length and all("!" <= c <= "~" for c in text)
