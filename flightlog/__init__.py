"""flightlog's Python SDK: an agent's door to a flightlog server, over HTTP."""

# Layering: the SDK imports only the standard library, httpx and orjson — never eventlog,
# projections, actors or tools (the server's layers), so that it installs and imports beside
# any agent, even one with its own `tools` package. `tools` may import it (a test enforces this).

from ._aio import AsyncClient, AsyncRun
from ._client import Client, Run
from ._decision import ALLOW, DENY, EXPIRED, WITHDRAWN, Decision, Message
from ._errors import (
    AskTimeout,
    BadRequest,
    ConfigurationError,
    Conflict,
    FlightlogError,
    Forbidden,
    GateDenied,
    GateTimeout,
    NotFound,
    QuotaExceeded,
    ServerError,
    ServerUnreachable,
    ServiceUnavailable,
    Unauthorized,
)
from ._gating import current_run, gate

__all__ = [
    "ALLOW",
    "DENY",
    "EXPIRED",
    "WITHDRAWN",
    "AskTimeout",
    "AsyncClient",
    "AsyncRun",
    "BadRequest",
    "Client",
    "ConfigurationError",
    "Conflict",
    "Decision",
    "FlightlogError",
    "Forbidden",
    "GateDenied",
    "GateTimeout",
    "Message",
    "NotFound",
    "QuotaExceeded",
    "Run",
    "ServerError",
    "ServerUnreachable",
    "ServiceUnavailable",
    "Unauthorized",
    "current_run",
    "gate",
]
