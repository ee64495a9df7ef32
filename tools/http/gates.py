"""One permission request's decision on the wire: `/permission_wait` and `/permission_withdraw`.

flightlog's own routes beside avenor's (whose clients never call them): a run waits for the
decision on one request id, however many of its requests wait at once, and gives a request up.
Both answer the request's state as `actors.GateStatus.to_json` says it.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actors import Gates

from .ask import Authenticate
from .calls import call
from .waits import GONE, TIMED_OUT, Wait
from .wire import Endpoint, NoResponse, WireError, browser_guard, json_response, string_field

DEFAULT_WAIT = 30.0  # seconds `/permission_wait` holds a pending request without `timeout`
MAX_WAIT = 60.0  # the longest it holds one: a longer wait asks again


class GateRoutes:
    """The two routes over a System's gates; `authenticated` checks a run's body credentials.

    `max_wait` is the longest a `/permission_wait` holds a pending request (seconds).
    """

    def __init__(self, gates: Gates, authenticated: Authenticate, max_wait: float = MAX_WAIT) -> None:
        self.gates = gates
        self.authenticated = authenticated
        self.max_wait = max_wait

    def routes(self) -> list[Route]:
        return [
            Route("/permission_wait", Endpoint(browser_guard(self.permission_wait), ("POST",))),
            Route("/permission_withdraw", Endpoint(browser_guard(self.permission_withdraw), ("POST",))),
        ]

    async def permission_wait(self, request: Request) -> Response:
        loop = asyncio.get_running_loop()
        arrived = loop.time()
        body, _ = await self.authenticated(request)
        run_id, request_id = string_field(body, "run_id"), _request_id(body)
        deadline = arrived + min(wait_field(body), self.max_wait)
        # Watching first, then reading: a decision between the two still wakes the wait.
        with Wait(request.scope, request.receive) as wait:
            # Called from the thread that committed to the run's stream.
            unsubscribe = self.gates.watch(run_id, wait.wake)
            try:
                status = await call(self.gates.status, run_id, request_id)
                while status.pending and loop.time() < deadline:
                    woke = await wait.until(deadline)
                    if woke == GONE:
                        return NoResponse()
                    if woke == TIMED_OUT:
                        break  # nothing new
                    status = await call(self.gates.status, run_id, request_id)
            finally:
                unsubscribe()
        return json_response(status.to_json())

    async def permission_withdraw(self, request: Request) -> Response:
        body, _ = await self.authenticated(request)
        reason = string_field(body, "reason")
        status = await call(self.gates.withdraw, string_field(body, "run_id"), _request_id(body), reason)
        return json_response(status.to_json())


def _request_id(body: dict[str, Any]) -> str:
    request_id = string_field(body, "request_id")
    if not request_id:
        raise WireError(400, "missing request_id")
    return request_id


def wait_field(body: dict[str, Any]) -> float:
    """The body's `timeout` in seconds (default DEFAULT_WAIT, at most MAX_WAIT); 400 if not a number ≥ 0."""
    value = body.get("timeout")
    if value is None:
        return DEFAULT_WAIT
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise WireError(400, "timeout must be a number of seconds, at least 0")
    return min(float(value), MAX_WAIT)
