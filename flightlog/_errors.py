"""The SDK's exception tree.

FlightlogError
├── ConfigurationError          no server URL, or a setting that cannot work (also ValueError)
├── ServerUnreachable           the server could not be reached or stopped answering (also ConnectionError)
├── ServerError                 the server answered with an error status (.status, .message)
│   ├── BadRequest                  400: the request was malformed (also ValueError)
│   ├── Unauthorized                401: a missing, wrong or revoked credential (also PermissionError)
│   ├── Forbidden                   403: the credential may not do this (also PermissionError)
│   ├── NotFound                    404: no such run, request or ask (also LookupError)
│   ├── Conflict                    409: the run exists, the request id names other content, …
│   ├── QuotaExceeded               413 or 429: over a documented limit (.retry_after)
│   └── ServiceUnavailable          503: the server's storage failed for now (.retry_after)
├── GateDenied                  a gated function was not allowed to run (.decision; also PermissionError)
├── GateTimeout                 no decision came within the gate's timeout (.request_id; also TimeoutError)
└── AskTimeout                  no reply came within the ask's timeout (.message_id; also TimeoutError)
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._decision import Decision


class FlightlogError(Exception):
    """Raised when the SDK cannot do what it was asked; the root of every SDK error."""


class ConfigurationError(FlightlogError, ValueError):
    """Raised when the client is missing a setting it needs (such as the server's URL)."""


class ServerUnreachable(FlightlogError, ConnectionError):
    """Raised when the server cannot be reached, or the connection failed before it answered."""


class ServerError(FlightlogError):
    """Raised when the server answers with an error status; `status` and `message` say which."""

    def __init__(self, status: int, message: str, retry_after: float | None = None) -> None:
        super().__init__(f"{status}: {message}" if message else str(status))
        self.status = status
        self.message = message
        self.retry_after = retry_after


class BadRequest(ServerError, ValueError):
    """Raised when the server refuses a malformed request (400)."""


class Unauthorized(ServerError, PermissionError):
    """Raised when a credential is missing, wrong or revoked (401)."""


class Forbidden(ServerError, PermissionError):
    """Raised when the credential is valid but may not do this (403)."""


class NotFound(ServerError, LookupError):
    """Raised when the run, request or ask named does not exist (404)."""


class Conflict(ServerError):
    """Raised when the request conflicts with what is recorded (409): an existing run, a reused id."""


class QuotaExceeded(ServerError):
    """Raised when a request goes over a documented limit (413, 429); `retry_after` in seconds, if given."""


class ServiceUnavailable(ServerError):
    """Raised when the server's storage fails for now (503); `retry_after` in seconds, if given."""


class GateDenied(FlightlogError, PermissionError):
    """Raised when a gated function is called and its gate does not allow it (`decision` says why)."""

    def __init__(self, decision: Decision) -> None:
        why = f" by {decision.decided_by}" if decision.decided_by else ""
        reason = f": {decision.reason}" if decision.reason else ""
        super().__init__(f"{decision.tool or 'the call'} was not allowed ({decision.outcome}{why}){reason}")
        self.decision = decision


class GateTimeout(FlightlogError, TimeoutError):
    """Raised when a gate's wait ends with no decision and the request is left open (`request_id`)."""

    def __init__(self, request_id: str, timeout: float) -> None:
        super().__init__(f"no decision on request {request_id!r} within {timeout:g} s; it is still open")
        self.request_id = request_id


class AskTimeout(FlightlogError, TimeoutError):
    """Raised when an ask gets no reply within its timeout; the ask is cancelled (`message_id`)."""

    def __init__(self, message_id: str, timeout: float | None) -> None:
        within = f" within {timeout:g} s" if timeout is not None else " before its deadline"
        super().__init__(f"no reply to ask {message_id!r}{within}")
        self.message_id = message_id


STATUS_ERRORS: dict[int, type[ServerError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: QuotaExceeded,
    429: QuotaExceeded,
    503: ServiceUnavailable,
}
