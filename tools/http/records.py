"""`GET /api/v1/events`: the log's records after a seq, as the export writes them, long-polled.

`after` (default 0) and `limit` (default 500, at most 5000) page through the log; `wait`
(seconds, at most 30) holds an empty answer open until a record is committed, so a client
follows the log with one request per batch (`flightlog events --server URL --follow`).
`run=ID` keeps only that run's streams (see `flightlog export --run`). The answer:
`{"records": [...], "last_seq": N, "head": H}`; the next page starts after `last_seq`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actors import System

from .._records import record_json, run_records, run_streams
from .wire import Endpoint, WireError, json_error, json_response

Handler = Callable[[Request], Awaitable[Response]]
LIMIT, MAX_LIMIT = 500, 5000
MAX_WAIT = 30.0
HEAD_POLL = 0.1  # seconds between two looks at the head while a long poll waits


def _number(request: Request, name: str, default: float, low: float, high: float) -> float:
    text = request.query_params.get(name, "")
    if text == "":
        return default
    try:
        value = float(text)
    except ValueError:
        raise WireError(400, f"{name} must be a number") from None
    if not low <= value <= high:
        raise WireError(400, f"{name} must be between {low:g} and {high:g}")
    return value


class RecordRoutes:
    """The records read of the operator API over one System; `guard` authenticates each request."""

    def __init__(
        self, system: System, guard: Callable[[Handler], Handler], max_wait: float = MAX_WAIT
    ) -> None:
        self.system = system
        self.guard = guard
        self.max_wait = max_wait

    def routes(self) -> list[Route]:
        return [Route("/api/v1/events", Endpoint(self.guard(self.events), ("GET",), json_error))]

    async def events(self, request: Request) -> Response:
        log = self.system.log
        after = int(_number(request, "after", 0, 0, 2**62))
        limit = int(_number(request, "limit", LIMIT, 1, MAX_LIMIT))
        wait = min(_number(request, "wait", 0, 0, MAX_WAIT), self.max_wait)
        run_id = request.query_params.get("run") or None

        def page() -> dict[str, Any]:
            head = log.head().seq
            if run_id is not None:
                streams = run_streams(log, run_id)
                if not streams:
                    raise WireError(404, f"no run {run_id!r}")
                found = []
                for r in run_records(log, streams, after):
                    found.append(r)
                    if len(found) >= limit:
                        break
            else:
                found = []
                for r in log.read_all(after_seq=after):
                    found.append(r)
                    if len(found) >= limit:
                        break
            last = found[-1].seq if found else max(after, head) if run_id is not None else after
            return {"records": [record_json(r) for r in found], "last_seq": last, "head": head}

        body = await run_in_threadpool(page)
        waited = 0.0
        while not body["records"] and waited < wait and not await request.is_disconnected():
            await asyncio.sleep(HEAD_POLL)
            waited += HEAD_POLL
            if (await run_in_threadpool(log.head)).seq > after:
                body = await run_in_threadpool(page)
        return json_response(body)


def record_paths(op: Callable[..., dict[str, Any]], error: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI path of this read; `op` builds an operator operation."""

    def query(name: str, description: str) -> dict[str, Any]:
        return {"name": name, "in": "query", "required": False, "schema": {"type": "string"},
                "description": description}  # fmt: skip

    def answer(description: str, schema: dict[str, Any]) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    page = {"type": "object"}
    return {
        "/api/v1/events": {
            "get": op(
                "The log's records after a seq, as `flightlog export` writes them; long-polled with wait",
                {
                    "200": answer("records, last_seq (the next page starts after it), head", page),
                    "400": answer("A parameter out of range", error),
                    "404": answer("No such run", error),
                },
                parameters=[
                    query("after", "Records after this seq (default 0)."),
                    query("limit", f"At most this many records (default {LIMIT}, at most {MAX_LIMIT})."),
                    query("wait", f"Seconds an empty answer waits for a record (at most {MAX_WAIT:g})."),
                    query("run", "Only this run's streams: run-<id>, its controller's, its approvals'."),
                ],
            )
        }
    }
