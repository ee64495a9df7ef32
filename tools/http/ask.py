"""Conversations on the wire: asks and replies through `/send`, `/wait_reply`, `/cancel_message`
and peer discovery at `/sessions`, as avenor's broker answers them.

Refusals that avenor's clients decode as JSON (403, 409, and every `/wait_reply` answer)
are JSON `{"error": …}`; the rest are plain text, like every other wire error. Tokens never
travel in a URL: `/sessions` takes them in headers (GET) or the body (POST). `/sessions` answers
a page of runs in registration order (`?after=` the `next` of the page before, `?limit=`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar

import orjson
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actors import AskError, AskOutcome, Broker

from .calls import refusals
from .paging import page_query
from .waits import GONE, Wait
from .wire import Endpoint, NoResponse, WireError, bearer_token, browser_guard, json_response, string_field

T = TypeVar("T")
R = TypeVar("R")
P = ParamSpec("P")
Body = dict[str, Any]
Authenticate = Callable[[Request], Awaitable[tuple[Body, bytes]]]

RECHECK = 1.0  # seconds between two looks of a waiting /wait_reply (changes wake it at once)
URL_TOKEN = "tokens never go in URLs: send Authorization: Bearer <token> and X-Run-Id: <run id>"


class JsonRefusal(Exception):
    """Raised to answer with a JSON body and an error status."""

    def __init__(self, status: int, body: dict[str, Any]) -> None:
        super().__init__(status)
        self.response = json_response(body, status)


def json_refusals(handler: Callable[P, Awaitable[R]]) -> Callable[P, Awaitable[R | Response]]:
    """The handler, with a JsonRefusal raised inside turned into its answer."""

    async def wrapped(*args: P.args, **kwargs: P.kwargs) -> R | Response:
        try:
            return await handler(*args, **kwargs)
        except JsonRefusal as e:
            return e.response

    return wrapped


class AskRoutes:
    """The conversation endpoints over one broker; `authenticated` checks a run's body credentials."""

    def __init__(self, broker: Broker, authenticated: Authenticate, recheck: float = RECHECK) -> None:
        self.broker = broker
        self.authenticated = authenticated
        self.recheck = recheck

    def routes(self) -> list[Route]:
        return [
            Route("/wait_reply", Endpoint(browser_guard(self.wait_reply), ("POST",))),
            Route("/cancel_message", Endpoint(browser_guard(self.cancel_message), ("POST",))),
            Route("/sessions", Endpoint(browser_guard(self.sessions), ("GET", "POST"))),
        ]

    # -- /send's ask and reply branches --------------------------------------------------

    @json_refusals
    async def send(
        self, body: Body, from_run_id: str, to_run_id: str, payload: str | None
    ) -> Response | None:
        """The answer to an agent_message that asks or replies; None for a plain message."""
        message = body.get("payload")
        if not isinstance(message, dict):
            return None
        message_id, reply_to, expects = (
            message.get("id", ""),
            message.get("reply_to", ""),
            message.get("expects_reply"),
        )
        # A payload that does not fit the seed's AgentMessage struct is a plain message, as there.
        if not (
            isinstance(message_id, str) and isinstance(reply_to, str) and isinstance(expects, bool | None)
        ):
            return None
        if expects:
            if message_id and not await run_in_threadpool(self.broker.exists, to_run_id):
                raise WireError(404, "to run not found")
            await ask_call(self.broker.ask, from_run_id, to_run_id, message_id, payload)
            return json_response({"expects_reply": True, "message_id": message_id, "queued": True})
        if not reply_to:
            return None
        note = await ask_call(self.broker.answer, from_run_id, to_run_id, reply_to, payload)
        if note:
            return json_response({"note": note, "queued": True})
        return json_response({"queued": True, "reply_to": reply_to})

    # -- the asker's endpoints -----------------------------------------------------------

    @json_refusals
    async def wait_reply(self, request: Request) -> Response:
        body, _ = await self.authenticated(request)
        run_id = string_field(body, "run_id")
        message_id = string_field(body, "waiting_for")
        if not message_id:
            raise WireError(400, "missing waiting_for")
        conversations = self.broker.conversations
        loop = asyncio.get_running_loop()
        with Wait(request.scope, request.receive) as wait:
            # Called from the thread that changed the run's conversations.
            unsubscribe = conversations.subscribers.add(run_id, wait.wake)
            try:
                step = await ask_call(conversations.wait_step, run_id, message_id, None)
                while not isinstance(step, AskOutcome):
                    # A client that goes away leaves its ask open: asking again gets the reply.
                    if await wait.until(loop.time() + self.recheck) == GONE:
                        return NoResponse()
                    step = await ask_call(conversations.wait_step, run_id, message_id, step)
            finally:
                unsubscribe()
        return outcome_response(step)

    async def cancel_message(self, request: Request) -> Response:
        body, _ = await self.authenticated(request)
        message_id = string_field(body, "cancel_message_id")
        if not message_id:
            raise WireError(400, "missing cancel_message_id")
        await ask_call(self.broker.cancel_message, string_field(body, "run_id"), message_id)
        return json_response({"cancelled": True, "message_id": message_id})

    async def sessions(self, request: Request) -> Response:
        if request.method == "GET":
            if "token" in request.query_params:
                raise WireError(400, URL_TOKEN)
            token = bearer_token(request)
            run_id = request.headers.get("x-run-id", "")
            if not run_id or not token:
                raise WireError(401, "unauthorized: missing run_id or token")
            if not await run_in_threadpool(self.broker.authenticate, run_id, token.decode("latin-1")):
                raise WireError(401, "unauthorized")
        else:
            await self.authenticated(request)
        after, limit = page_query(request.query_params)
        sessions, more = await run_in_threadpool(self.broker.conversations.sessions_page, after, limit)
        return json_response({"sessions": sessions, "next": more})


def outcome_response(outcome: AskOutcome) -> Response:
    """A finished wait as avenor answers it: the reply, a cancel (200) or a timeout (504)."""
    if outcome.status == "cancelled":
        return json_response({"cancelled": True, "message_id": outcome.message_id})
    if outcome.status == "timeout":
        return json_response({"message_id": outcome.message_id, "timeout": True}, 504)
    payload = orjson.Fragment(outcome.payload) if outcome.payload is not None else None
    return json_response(
        {"from_run_id": outcome.from_run_id, "message_id": outcome.message_id, "payload": payload}
    )


async def ask_call(fn: Callable[..., T], *args: Any) -> T:
    """A blocking broker call in the thread pool; ask refusals answered as avenor answers them."""
    with refusals():
        try:
            return await run_in_threadpool(fn, *args)
        except AskError as e:
            if e.status in (403, 409):
                raise JsonRefusal(e.status, {"error": str(e)}) from None
            raise WireError(e.status, str(e)) from None
