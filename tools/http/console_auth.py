"""Operator authentication for the HTTP edges: a Bearer token, or a console session cookie.

The console trades the operator token for a session once (POST /ui/login): the browser then
holds only an HttpOnly, SameSite=Strict cookie naming a random session id, and the server
holds only that id's SHA-256 digest. A state-changing request authenticated by the cookie
must also carry the `X-Flightlog-Request` header and, when the browser sends one, an Origin
naming this server: a cross-site page can make neither.
"""

from __future__ import annotations

import hashlib
import hmac
import threading
import time
from dataclasses import dataclass

from starlette.requests import Request

from actors import make_token

from .wire import bearer_token, digest_matches

COOKIE = "flightlog_session"
CSRF_HEADER = "x-flightlog-request"
SESSION_SECONDS = 12 * 3600
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


@dataclass(frozen=True, slots=True)
class Operator:
    """Who made a request: the actor key to record, and the name the operator gave."""

    actor: str
    identity: str
    via_cookie: bool


class ConsoleSessions:
    """Server-side console sessions, keyed by the SHA-256 of the cookie value."""

    def __init__(self, operator_token_sha256: str) -> None:
        self.operator_token_sha256 = operator_token_sha256
        self._sessions: dict[str, tuple[str, float]] = {}
        self._lock = threading.Lock()

    def login(self, token: str, name: str) -> str | None:
        """A new session's cookie value if `token` is the operator token; else None."""
        if not digest_matches(token.encode("utf-8", "surrogatepass"), self.operator_token_sha256):
            return None
        value = make_token() + make_token()
        with self._lock:
            self._sessions[_digest(value)] = (name, time.monotonic() + SESSION_SECONDS)
        return value

    def logout(self, value: str) -> None:
        with self._lock:
            self._sessions.pop(_digest(value), None)

    def name(self, value: str | None) -> str | None:
        if not value:
            return None
        key = _digest(value)
        with self._lock:
            entry = self._sessions.get(key)
            if entry is None:
                return None
            if entry[1] < time.monotonic():
                del self._sessions[key]
                return None
            return entry[0]

    def authenticate(self, request: Request) -> Operator | None:
        """The operator behind a request, or None (a cookie without CSRF proof counts as none)."""
        if digest_matches(bearer_token(request), self.operator_token_sha256):
            return Operator("operator", "operator-token", via_cookie=False)
        name = self.name(request.cookies.get(COOKIE))
        if name is None:
            return None
        if request.method not in SAFE_METHODS and not same_origin_request(request):
            return None
        return Operator("web-operator", name, via_cookie=True)


def same_origin_request(request: Request) -> bool:
    """Whether an unsafe cookie-authenticated request provably comes from our own pages."""
    if request.headers.get(CSRF_HEADER) != "1":
        return False
    origin = request.headers.get("origin")
    if origin is None:
        return True  # same-origin fetches may omit it; the custom header already needs CORS
    host = request.headers.get("host", "")
    return origin in (f"http://{host}", f"https://{host}")


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("ascii", "replace")).hexdigest()


def constant_time_equal(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())
