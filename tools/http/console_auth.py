"""Console sessions: a cookie this server alone reads, and a secret no other program holds.

The console trades an operator's token for a session once (POST /ui/login). The browser then
holds an HttpOnly, SameSite=Strict cookie named after this server's port, and the page keeps
the session's CSRF secret, returned only in the login answer, in its origin's storage (which,
unlike a cookie, is specific to the port). Every API request authenticated by the cookie must
carry that secret in `X-Flightlog-CSRF`: a cookie sent to, or stolen by, another program on
the same host is useless without it. The server holds only SHA-256 digests of both.

A session ends at logout, after SESSION_IDLE seconds unused, SESSION_LIFETIME after login,
or as soon as its operator's credential is revoked.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from starlette.requests import Request

CSRF_HEADER = "x-flightlog-csrf"
SESSION_IDLE = 30 * 60.0
SESSION_LIFETIME = 12 * 3600.0
MAX_SESSIONS = 10_000  # live sessions kept; the oldest go first beyond it


def cookie_name(request: Request) -> str:
    """The session cookie's name on this server: browsers scope cookies by host, not by port."""
    server = request.scope.get("server")
    port = server[1] if server and len(server) > 1 and server[1] else 0
    return f"flightlog_session_{port}"


@dataclass(frozen=True, slots=True)
class Session:
    """A console session: whose credential it holds, and its CSRF secret's digest."""

    credential_id: str
    csrf_sha256: str
    started: float
    last_used: float


class ConsoleSessions:
    """Server-side console sessions, keyed by the SHA-256 of the cookie value."""

    def __init__(
        self,
        *,
        idle: float = SESSION_IDLE,
        lifetime: float = SESSION_LIFETIME,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if idle <= 0 or lifetime <= 0:
            raise ValueError("session idle timeout and lifetime must be positive")
        self.idle = idle
        self.lifetime = lifetime
        self._clock = clock
        self._sessions: dict[str, Session] = {}
        self._lock = threading.Lock()

    def start(self, credential_id: str) -> tuple[str, str]:
        """A new session for `credential_id`: (cookie value, CSRF secret), both shown only now."""
        value, csrf = secrets.token_hex(32), secrets.token_hex(32)
        now = self._clock()
        with self._lock:
            if len(self._sessions) >= MAX_SESSIONS:
                oldest = min(self._sessions, key=lambda k: self._sessions[k].last_used)
                del self._sessions[oldest]
            self._sessions[_digest(value)] = Session(credential_id, _digest(csrf), now, now)
        return value, csrf

    def end(self, value: str | None) -> None:
        if value:
            with self._lock:
                self._sessions.pop(_digest(value), None)

    def end_credential(self, credential_id: str) -> int:
        """End every session of `credential_id` (it was revoked); return how many ended."""
        with self._lock:
            gone = [k for k, s in self._sessions.items() if s.credential_id == credential_id]
            for k in gone:
                del self._sessions[k]
        return len(gone)

    def find(self, value: str | None, csrf: str | None, *, need_csrf: bool) -> str | None:
        """The credential id of a live session with this cookie (and CSRF secret), or None.

        Using a session keeps it alive for another idle period, up to its lifetime.
        """
        if not value:
            return None
        key = _digest(value)
        now = self._clock()
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if now - session.last_used > self.idle or now - session.started > self.lifetime:
                del self._sessions[key]
                return None
            if need_csrf and not (csrf and hmac.compare_digest(_digest(csrf), session.csrf_sha256)):
                return None
            self._sessions[key] = Session(session.credential_id, session.csrf_sha256, session.started, now)
            return session.credential_id

    def __len__(self) -> int:
        with self._lock:
            return len(self._sessions)


def _digest(value: str) -> str:
    return hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()
