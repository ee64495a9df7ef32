"""Who an operator request comes from: a Bearer token or a console session, and what it may do.

Principals (DESIGN.md, trust boundaries): the bootstrap admin (FLIGHTLOG_OPERATOR_TOKEN,
held by the server only as its digest), operators enrolled in the log with a role, and
nobody. A request authenticates as exactly one credential; what it may do follows from the
credential's role as the log says *now*, so a revocation or a role change counts from the
next request on. Failed authentications are throttled per client address.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from actors import Operators
from actors.operators import BOOTSTRAP, Credential, allows, bootstrap_credential

from .console_auth import CSRF_HEADER, ConsoleSessions, cookie_name
from .throttle import AuthThrottle, retry_after_header
from .wire import WireError, bearer_token

Handler = Callable[[Request], Awaitable[Response]]
# Cookie-authenticated requests that need no CSRF secret: the change stream (an EventSource
# cannot send headers) says only that the log's head moved.
_NO_CSRF_PATHS = frozenset({"/api/v1/console/stream"})


@dataclass(frozen=True, slots=True)
class Operator:
    """The authenticated operator of a request: name, credential and role, and how it came."""

    name: str
    credential_id: str
    role: str
    via_cookie: bool = False

    def may(self, action: str) -> bool:
        return allows(self.role, action)

    @property
    def label(self) -> str:
        """`name (credential id)`, as control messages and run events record it."""
        return f"{self.name} ({self.credential_id})"


class OperatorAuth:
    """Authenticates operator requests against the bootstrap digest and the enrolled credentials."""

    def __init__(
        self,
        operators: Operators,
        bootstrap_sha256: str,
        sessions: ConsoleSessions,
        throttle: AuthThrottle | None = None,
    ) -> None:
        self.operators = operators
        self.bootstrap_sha256 = bootstrap_sha256
        self.sessions = sessions
        self.throttle = throttle

    @property
    def any_credential(self) -> bool:
        """Whether any operator could authenticate (a bootstrap token, or enrolled operators)."""
        return bool(self.bootstrap_sha256) or any(c.active for c in self.operators.list())

    def from_token(self, token: bytes | str | None) -> Credential | None:
        """The active credential this token belongs to, or None. Blocking: reads the log."""
        if token is None or token in ("", b""):
            return None
        raw = token if isinstance(token, bytes) else token.encode("utf-8", "surrogatepass")
        if self.bootstrap_sha256 and hmac.compare_digest(
            hashlib.sha256(raw).hexdigest(), self.bootstrap_sha256
        ):
            return bootstrap_credential(self.bootstrap_sha256)
        return self.operators.authenticate(raw.decode("utf-8", "surrogatepass"))

    def credential(self, credential_id: str) -> Credential | None:
        """The credential with this id as the log says now (None when unknown)."""
        if credential_id == BOOTSTRAP:
            return bootstrap_credential(self.bootstrap_sha256) if self.bootstrap_sha256 else None
        return self.operators.credential(credential_id)

    def bearer(self, request: Request, token: bytes | None) -> Operator | None:
        """The operator of a Bearer token, throttled per address. Blocking: reads the log."""
        address = client_address(request)
        self.check_throttle(address)
        credential = self.from_token(token)
        if credential is None:
            self.failed(address)
            return None
        if self.throttle is not None:
            self.throttle.succeeded(address)
        return Operator(credential.name, credential.credential_id, credential.role)

    def authenticate(self, request: Request) -> Operator | None:
        """The operator behind a request (Bearer first, then the session cookie), or None.

        Blocking (it reads the log): call it from a worker thread.
        """
        token = bearer_token(request)
        if token is not None:
            return self.bearer(request, token)
        need_csrf = request.url.path not in _NO_CSRF_PATHS
        credential_id = self.sessions.find(
            request.cookies.get(cookie_name(request)), request.headers.get(CSRF_HEADER), need_csrf=need_csrf
        )
        if credential_id is None:
            return None
        credential = self.credential(credential_id)
        if credential is None or not credential.active:
            self.sessions.end_credential(credential_id)
            return None
        return Operator(credential.name, credential.credential_id, credential.role, via_cookie=True)

    def check_throttle(self, address: str) -> None:
        """Refuse with 429 (and Retry-After) an address that failed too often lately."""
        if self.throttle is None:
            return
        wait = self.throttle.retry_after(address)
        if wait is not None:
            raise _too_many(wait)

    def failed(self, address: str) -> None:
        """Count a failed authentication of `address`; 429 once that starts a block."""
        if self.throttle is None:
            return
        wait = self.throttle.failed(address)
        if wait is not None:
            raise _too_many(wait)

    def guard(self, handler: Handler, action: str) -> Handler:
        """`handler` for operators whose role allows `action`: 401 for nobody, 403 for too little."""

        async def guarded(request: Request) -> Response:
            operator = await run_in_threadpool(self.authenticate, request)
            if operator is None:
                raise WireError(401, "unauthorized", {"WWW-Authenticate": "Bearer"})
            if not operator.may(action):
                role = operator.role
                raise WireError(
                    403, f"forbidden: operator {operator.name!r} has the role {role}, which may not {action}"
                )
            request.state.operator = operator
            return await handler(request)

        return guarded


def client_address(request: Request) -> str:
    """The client's address as the socket says (never a header a client could forge)."""
    return request.client.host if request.client else ""


def _too_many(wait: float) -> WireError:
    return WireError(
        429,
        "too many failed authentications from this address; try again later",
        {"Retry-After": retry_after_header(wait)},
    )
