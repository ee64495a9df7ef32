"""`POST /api/v1/runs/{run_id}/fork`: fork an agent run at a seq, and re-drive the fork if asked.

The same machinery as `flightlog fork … [--redrive]`: `fork_run` records the fork at once;
a re-drive serves the origin's recording in a background thread of this server, and the
fork's approvals wait for an operator in the console (or the approval timeout), exactly as
they would beside `flightlog redrive`. A fork is re-driven once.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from actors import ActorsError, System

from .forks import ForkError, fork_run, redrive
from .principals import Operator
from .wire import WireError, json_response, parse_object, read_body

MAX_REASON = 500
MAX_FAILURES = 100


class ForkRoutes:
    """The fork handler over one System; re-drives run in threads it starts and names."""

    def __init__(self, system: System) -> None:
        self.system = system
        self._lock = threading.Lock()
        self.redriving: dict[str, threading.Thread] = {}  # fork run id -> its re-drive, while it runs
        self.failures: dict[str, str] = {}  # fork run id -> why its re-drive stopped early (the latest few)

    async def fork(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body = parse_object(await read_body(request))
        at = body.get("at")
        if isinstance(at, bool) or not isinstance(at, int):
            raise WireError(400, "at must be a seq (an integer)")
        reason = body.get("reason", "")
        if not isinstance(reason, str) or len(reason) > MAX_REASON or not reason.isprintable():
            raise WireError(400, f"reason must be printable text of at most {MAX_REASON} characters")
        then_redrive = body.get("redrive", False)
        if not isinstance(then_redrive, bool):
            raise WireError(400, "redrive must be true or false")
        operator: Operator = request.state.operator
        actor = f"operator:{operator.label}"

        def record() -> dict[str, Any]:
            try:
                fork = fork_run(
                    self.system.log, run_id, at, actor=actor, reason=reason, views=self.system.views
                )
            except ForkError as e:
                status = 404 if "no agent run" in str(e) else 400
                raise WireError(status, str(e)) from None
            if then_redrive:
                self._start(fork.run_id, actor)
            return {"fork": fork.to_dict(), "redrive": "started" if then_redrive else None}

        return json_response(await run_in_threadpool(record), 201)

    def _start(self, fork_run_id: str, actor: str) -> None:
        def drive() -> None:
            try:
                redrive(self.system, fork_run_id, actor=actor)
            except ActorsError as e:  # the fork's stream says what happened to its run; keep why here
                with self._lock:
                    self.failures[fork_run_id] = f"{type(e).__name__}: {e}"
                    while len(self.failures) > MAX_FAILURES:
                        del self.failures[next(iter(self.failures))]
            finally:
                with self._lock:
                    self.redriving.pop(fork_run_id, None)

        thread = threading.Thread(target=drive, name=f"redrive-{fork_run_id[:8]}", daemon=True)
        with self._lock:
            self.redriving[fork_run_id] = thread
        thread.start()

    def wait(self, timeout: float) -> None:
        """Wait for the re-drives running now (tests, and a server that stops)."""
        with self._lock:
            threads = list(self.redriving.values())
        for thread in threads:
            thread.join(timeout)


def fork_paths(op: Callable[..., dict[str, Any]], error: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI path of the fork endpoint; `op` builds an operator operation."""
    body = {
        "type": "object",
        "properties": {
            "at": {
                "type": "integer",
                "minimum": 1,
                "description": "Copy the origin's history up to this seq.",
            },
            "reason": {"type": "string", "maxLength": MAX_REASON, "description": "Why, for the record."},
            "redrive": {"type": "boolean", "description": "Re-drive the fork from the origin's recording."},
        },
        "required": ["at"],
    }
    fork = {
        "type": "object",
        "properties": {
            "fork": {
                "type": "object",
                "description": "run_id, stream, origin_run_id, origin_stream, at_seq, copied, seq",
            },
            "redrive": {"type": ["string", "null"], "description": "started, or null"},
        },
        "required": ["fork"],
    }

    def failed(description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": error}}}

    return {
        "/api/v1/runs/{run_id}/fork": {
            "post": op(
                "Fork an agent run at a seq (`flightlog fork`), and re-drive the fork from its recording",
                {
                    "201": {"description": "The fork", "content": {"application/json": {"schema": fork}}},
                    "400": failed("A bad body, or a seq the run cannot be forked at"),
                    "404": failed("No such agent run"),
                },
                parameters=[{"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                requestBody={"required": True, "content": {"application/json": {"schema": body}}},
            )
        }
    }
