"""The operator API's time-travel reads: the runs, and a run's timeline, as of any moment.

`GET /api/v1/views/runs?at=MOMENT` and `GET /api/v1/runs/{run_id}/timeline?at=MOMENT[&each=1]`
answer with what `flightlog runs --json` and `flightlog timeline --json` print on a database
file, plus `moment` (when the seq was recorded), so the CLI's `--server` mode prints the same.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actors import System

from .travel_reads import AT_HELP, moment_seq, runs_payload, timeline_payload
from .wire import Endpoint, WireError, json_error, json_response

Handler = Callable[[Request], Awaitable[Response]]


class ViewRoutes:
    """Handlers of the time-travel reads over one System; `guard` authenticates each request."""

    def __init__(self, system: System, guard: Callable[[Handler], Handler]) -> None:
        self.system = system
        self.guard = guard

    def routes(self) -> list[Route]:
        def get(path: str, handler: Handler) -> Route:
            return Route(path, Endpoint(self.guard(handler), ("GET",), json_error))

        return [
            get("/api/v1/views/runs", self.runs),
            get("/api/v1/runs/{run_id:path}/timeline", self.timeline),
        ]

    def _seq(self, request: Request) -> int:
        text = request.query_params.get("at")
        if text is None or text == "":
            return self.system.log.head().seq
        try:
            return moment_seq(self.system.log, text)
        except ValueError as e:
            raise WireError(400, f"at: {e}") from None

    async def runs(self, request: Request) -> Response:
        def load() -> dict[str, Any]:
            seq = self._seq(request)
            views = self.system.views
            return {**runs_payload(views, seq), "moment": views.moment(seq) if seq else None}

        return json_response(await run_in_threadpool(load))

    async def timeline(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        each = request.query_params.get("each", "") in ("1", "true")

        def load() -> dict[str, Any]:
            views = self.system.views
            head = self.system.log.head().seq
            if views.agent_run(run_id, at=head) is None and views.run(run_id, at=head) is None:
                raise WireError(404, f"no run {run_id!r}")
            seq = None if each else self._seq(request)
            moment = views.moment(seq) if seq else None
            return {**timeline_payload(views, run_id, seq, each), "moment": moment}

        return json_response(await run_in_threadpool(load))


def view_paths(op: Callable[..., dict[str, Any]], error: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI paths of these reads; `op` builds an operator operation."""

    def query(name: str, description: str) -> dict[str, Any]:
        return {"name": name, "in": "query", "required": False, "schema": {"type": "string"},
                "description": description}  # fmt: skip

    def ok(description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": {"type": "object"}}}}

    def failed(description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": error}}}

    bad_at = failed("`at` names no seq")
    return {
        "/api/v1/views/runs": {
            "get": op(
                "The broker's runs and the agent runs as of a moment (`flightlog runs --json`)",
                {"200": ok("seq, moment, runs (each with its finish), agent_runs"), "400": bad_at},
                parameters=[query("at", f"The moment. {AT_HELP} Default: now.")],
            )
        },
        "/api/v1/runs/{run_id}/timeline": {
            "get": op(
                "A run's timeline (agent or broker run) as of a moment, or after each of its events",
                {
                    "200": ok("run_id, seq, moment, entries; or run_id and moments with each=1"),
                    "400": bad_at,
                    "404": {
                        "description": "No such run",
                        "content": {"application/json": {"schema": error}},
                    },
                },
                parameters=[
                    {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}},
                    query("at", f"The moment. {AT_HELP} Default: now."),
                    query("each", "1: the run after each of its events (at is ignored)."),
                ],
            )
        },
    }
