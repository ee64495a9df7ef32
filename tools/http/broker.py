"""The broker's HTTP wire protocol at the seed's paths, wire-compatible with its clients.

Every rule is the seed's (spec §1.9): the method guard first, then run credentials from the
JSON body (POST) or the query (GET), then the handler; plain-text errors, JSON successes.
Blocking broker calls run in the thread pool; a run's writes (report, finish, reply,
heartbeat) instead go to its actor as one message with the token check, whose answer wakes
the loop directly. A long poll is a `waits.Wait` that the broker's queue listener wakes: a
future and a deadline in the loop's wheel, no thread, task or timer of its own; its timeout
counts from the request's arrival. A run id that names no run is refused before any actor is asked: a
stranger's request starts nothing.

Registration (`registration`): on a server taking `enrolled` runs (the default), `/register`
creates nothing. An operator or an enrolment credential creates the run (`POST
/api/v1/runs`, `flightlog runs create`) and hands its agent the token, and the agent
registers with it, as the seed's clients do with a token their orchestrator got; an unknown
id is a 403, so nobody can take a run id first. An `open` server lets agents register new
ids themselves, as the seed does, and records each such run as self-registered from the
client's address.

A run's revoked or re-keyed token is refused on every route from the moment the revocation
is recorded, and a poll waiting on the run is woken to show its token again: it ends with a
401. Another server on the same database refuses it at once too where it writes or
authenticates (a write decided on its older state fails the log's version check; the other
routes fold the run first); its polls end when its follower reads the revocation, and it
takes a re-keyed run's new token from then on (refusing it meanwhile).
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import Receive, Scope

from actors import (
    Broker,
    ControlMessage,
    Finish,
    Reply,
    Report,
    make_token,
)
from actors.broker import ORIGIN_SELF
from actors.operators import CONTROL

from .ask import AskRoutes
from .calls import Answerable, answer, call, refusals
from .principals import OperatorAuth, client_address
from .waits import GONE, TIMED_OUT, Wait
from .wire import (
    Endpoint,
    Handler,
    NoResponse,
    WireError,
    bearer_token,
    browser_guard,
    cross_site_refusal,
    json_response,
    parse_object,
    raw_member,
    read_body,
    string_field,
    strings_field,
    text_ok,
    time_field,
    visible_ascii,
)

POLL_TIMEOUT = 2.0  # seconds a poll waits on an empty queue, as the seed
# A caller may choose its run's token at /register (the seed allows it); we take only what
# survives every client and header unchanged, and long enough not to be guessed.
MIN_TOKEN_LENGTH = 16
MAX_TOKEN_LENGTH = 512
POST = ("POST",)
# What a run may say about itself at /register, for peer discovery (/sessions).
PEER_FIELDS = ("label", "backend", "model", "dir", "status")
# The text fields of a permission request, each bounded by `Quotas.text_bytes`.
PERMISSION_TEXTS = ("request_id", "tool_name", "description", "input_preview", "risk")
Body = dict[str, Any]
OK = {"ok": True}
QUEUED = {"queued": True}
# Who may create a run: only operators and enrolment credentials (`enrolled`), or also an
# agent registering a new id itself (`open`, as the seed).
ENROLLED = "enrolled"
OPEN = "open"
REGISTRATION_MODES = (ENROLLED, OPEN)


class BrokerRoutes:
    """The wire protocol's handlers over one broker.

    `auth` stands for the seed's global token: while any operator can authenticate (the
    bootstrap token is set, or operators are enrolled), `/push-control` takes only
    `Authorization: Bearer <token>` of an operator whose role may push control.
    """

    def __init__(
        self,
        broker: Broker,
        auth: OperatorAuth,
        poll_timeout: float = POLL_TIMEOUT,
        registration: str = ENROLLED,
    ) -> None:
        if registration not in REGISTRATION_MODES:
            raise ValueError(f"registration must be one of {', '.join(REGISTRATION_MODES)}")
        self.broker = broker
        self.auth = auth
        self.poll_timeout = poll_timeout
        self.registration = registration
        self.asks = AskRoutes(broker, self.authenticated)

    def routes(self) -> list[Route]:
        def route(path: str, handler: Handler, methods: tuple[str, ...] | None = POST) -> Route:
            return Route(path, Endpoint(browser_guard(handler), methods))

        return [
            Route("/health", Endpoint(self.health, None)),  # any method and body (see health)
            route("/register", self.register),
            route("/heartbeat", self.heartbeat),
            route("/push-control", self.push_control),
            route("/poll-control", self.poll_control),
            route("/report", self.report),
            route("/finish", self.finish),
            route("/reply", self.reply),
            route("/permission_request", self.permission_request),
            route("/permission", self.permission),
            route("/send", self.send),
            *self.asks.routes(),
        ]

    # -- auth ----------------------------------------------------------------------------

    async def authenticated(self, request: Request) -> tuple[Body, bytes]:
        """(body, raw body) of a request whose run credentials check out; else a 4xx."""
        if request.method != "GET":
            return await self.authenticated_raw(await read_body(request))
        query = request.query_params
        return await self._authenticated(query.get("run_id", ""), query.get("token", ""), {}, b"")

    async def authenticated_raw(self, raw: bytes) -> tuple[Body, bytes]:
        """`authenticated` for the POST body `raw`."""
        body = parse_object(raw)
        return await self._authenticated(string_field(body, "run_id"), string_field(body, "token"), body, raw)

    async def _authenticated(self, run_id: str, token: str, body: Body, raw: bytes) -> tuple[Body, bytes]:
        if not run_id or not token:
            raise WireError(401, "unauthorized: missing run_id or token")
        if not await run_in_threadpool(self.broker.authenticate, run_id, token):
            raise WireError(401, "unauthorized")
        return body, raw

    async def write_as_run(
        self, raw: bytes, build: Callable[[Body, bytes], Report | Finish | Reply | None]
    ) -> None:
        """Authenticate and record the write `build` makes of the body `raw`, in one step of the run's writes.

        The answers are those of `authenticated` followed by the write: a field of the wrong
        type is a 400 only for a caller whose credentials check out, else a 401.
        """
        body = parse_object(raw)
        run_id, token = await self.admitted(body)
        try:
            write = build(body, raw)
        except WireError:
            if not await run_in_threadpool(self.broker.authenticate, run_id, token):
                raise WireError(401, "unauthorized") from None
            raise
        authorized, _ = await answer(lambda done: self.broker.call_as_run(run_id, token, write, done))
        if not authorized:
            raise WireError(401, "unauthorized")

    async def admitted(self, body: Body) -> tuple[str, str]:
        """(run id, token) of the body, refused with 401 when missing or when the run is unknown."""
        run_id = string_field(body, "run_id")
        token = string_field(body, "token")
        if not run_id or not token:
            raise WireError(401, "unauthorized: missing run_id or token")
        # The live check inline (as `admits`), one coroutine fewer on every run write.
        if not self.broker.admits(run_id, catch_up=False) and not await self.admits(run_id):
            raise WireError(401, "unauthorized")
        return run_id, token

    async def admits(self, run_id: str) -> bool:
        """Whether `run_id` may name a run: from the live actor or views on the loop, else in a thread.

        Only an id the live views do not know costs a catch-up with the log (a run registered
        by another process is found that way), and it runs in the thread pool.
        """
        if self.broker.admits(run_id, catch_up=False):
            return True
        return await run_in_threadpool(self.broker.admits, run_id)

    # -- handlers ------------------------------------------------------------------------

    async def health(self, request: Request) -> Response:
        """`ok` to any method with any body, as avenor's broker answers: it reads no body, so
        only a cross-site Origin is refused (as everywhere), never a content type."""
        headers = request.headers
        refusal = cross_site_refusal("GET", headers.get("origin"), None, request.scope.get("server"))
        if refusal is not None:
            raise refusal
        return text_ok()

    async def register(self, request: Request) -> Response:
        body = parse_object(await read_body(request))
        run_id = string_field(body, "run_id")
        token = string_field(body, "token")
        if not run_id:
            raise WireError(400, "missing run_id")
        if token and not (len(token) >= MIN_TOKEN_LENGTH and visible_ascii(token, MAX_TOKEN_LENGTH)):
            raise WireError(
                400, f"invalid token: {MIN_TOKEN_LENGTH} to {MAX_TOKEN_LENGTH} printable ASCII characters"
            )
        info = {key: string_field(body, key) for key in PEER_FIELDS}
        with refusals():
            self.broker.quotas.check_peer_fields(info.items())  # before anything is recorded
        token = token or make_token()
        address, create = client_address(request), self.registration == OPEN

        def register(done: Callable[[], object]) -> Answerable:
            broker = self.broker
            return broker.register_soon(run_id, token, done, origin=ORIGIN_SELF, by=address, create=create)

        await answer(register)
        if any(info.values()):
            await call(functools.partial(self.broker.update_session_info, run_id, **info))
        # The body carries the run's secret: no cache may keep it. Keys in the seed's order.
        return json_response({"run_id": run_id, "token": token}, headers={"Cache-Control": "no-store"})

    async def heartbeat(self, request: Request) -> Response:
        await self.heartbeat_raw(await read_body(request))
        return text_ok()

    async def heartbeat_raw(self, raw: bytes) -> None:
        await self.write_as_run(raw, lambda body, raw: None)

    async def push_control(self, request: Request) -> Response:
        auth = self.auth
        if await run_in_threadpool(lambda: auth.any_credential):
            raw = await read_body(request)
            operator = await run_in_threadpool(auth.bearer, request, bearer_token(request))
            if operator is None:
                raise WireError(401, "unauthorized")
            if not operator.may(CONTROL):
                role = operator.role
                raise WireError(
                    403,
                    f"forbidden: operator {operator.name!r} has the role {role}, which may not push control",
                )
            await self.push_raw(raw, parse_object(raw), sent_by=operator.label)
        else:
            body, raw = await self.authenticated(request)
            await self.push_raw(raw, body)
        return json_response(QUEUED)

    async def push_raw(self, raw: bytes, body: Body, sent_by: str = "") -> None:
        """Queue the pushed message `raw` (its parsed `body`), from the operator `sent_by` if any."""
        message = ControlMessage(
            string_field(body, "id"),
            string_field(body, "type"),
            string_field(body, "run_id"),
            string_field(body, "from_run_id"),
            raw_member(raw, "payload", body),
            sent_by=sent_by,
        )
        time_field(body, "created_at")
        if not (message.run_id and message.id and message.type):
            raise WireError(400, "missing fields")
        if not await self.admits(message.run_id):
            raise WireError(404, "run not found")
        await answer(lambda done: self.broker.queue_control(message.run_id, message, done))

    async def poll_control(self, request: Request) -> Response:
        arrived = asyncio.get_running_loop().time()
        messages = await self.poll_raw(await read_body(request), request.scope, request.receive, arrived)
        if messages is NoResponse:
            return NoResponse()
        return json_response(messages)

    async def poll_raw(self, raw: bytes, scope: Scope, receive: Receive, arrived: float) -> Any:
        """The messages a poll `raw` takes, as JSON (null: none), waiting up to the timeout from `arrived`.

        NoResponse (the class) if the client went away meanwhile.
        """
        loop = asyncio.get_running_loop()
        deadline = arrived + self.poll_timeout  # from the request's arrival
        run_id, token = await self.admitted(parse_object(raw))

        def take(done: Callable[[], object]) -> Answerable:
            # The token check and the take are one step of the run's writes: no thread waits.
            return self.broker.call_take_as_run(run_id, token, done)

        with Wait(scope, receive) as wait:
            # Called from an actor's (or the follower's) thread when a message is queued.
            unsubscribe = self.broker.on_control(run_id, wait.wake)
            try:
                authorized, messages = await answer(take)
                if not authorized:
                    raise WireError(401, "unauthorized")
                while not messages and loop.time() < deadline:
                    # Parked: a push may hand over its message in its own commit.
                    parked = self.broker.park(run_id, wait.wake, token)
                    woke = await wait.until(deadline)
                    messages = await answer(functools.partial(self.broker.leave, parked))
                    if woke == GONE:
                        return NoResponse
                    if messages or woke == TIMED_OUT:
                        break  # handed its messages, or timed out: nothing was queued meanwhile
                    # Woken by a push, or by the run's token changing: the token shows again.
                    authorized, messages = await answer(take)
                    if not authorized:
                        raise WireError(401, "unauthorized")
            finally:
                unsubscribe()
        # Nothing queued is `null`, as the seed's nil slice encodes.
        return [m.to_json() for m in messages] if messages else None

    async def report(self, request: Request) -> Response:
        await self.report_raw(await read_body(request))
        return json_response(OK)

    async def report_raw(self, raw: bytes) -> None:
        def build(body: Body, raw: bytes) -> Report:
            payload = raw_member(raw, "payload", body)
            return Report(string_field(body, "run_id"), string_field(body, "state"), payload)

        await self.write_as_run(raw, build)

    async def finish(self, request: Request) -> Response:
        await self.finish_raw(await read_body(request))
        return json_response(OK)

    async def finish_raw(self, raw: bytes) -> None:
        def build(body: Body, raw: bytes) -> Finish:
            return Finish(
                string_field(body, "run_id"),
                string_field(body, "status"),
                string_field(body, "summary"),
                strings_field(body, "files_changed"),
                raw_member(raw, "payload", body),
            )

        await self.write_as_run(raw, build)

    async def reply(self, request: Request) -> Response:
        await self.reply_raw(await read_body(request))
        return json_response(OK)

    async def reply_raw(self, raw: bytes) -> None:
        def build(body: Body, raw: bytes) -> Reply:
            payload = raw_member(raw, "payload", body)
            return Reply(string_field(body, "run_id"), string_field(body, "to"), payload)

        await self.write_as_run(raw, build)

    async def permission_request(self, request: Request) -> Response:
        body, _ = await self.authenticated(request)
        texts = tuple((key, string_field(body, key)) for key in PERMISSION_TEXTS)
        await call(self.broker.charge, string_field(body, "run_id"), "permission request", texts)
        relay = functools.partial(
            self.broker.permission_request,
            # flightlog's `risk` may raise the risk the tool's name implies, never lower it.
            risk=string_field(body, "risk"),
        )
        await call(
            relay,
            string_field(body, "run_id"),
            string_field(body, "request_id"),
            string_field(body, "tool_name"),
            string_field(body, "description"),
            string_field(body, "input_preview"),
        )
        return json_response({"ok": True})

    async def permission(self, request: Request) -> Response:
        body, _ = await self.authenticated(request)
        texts = (
            ("request_id", string_field(body, "request_id")),
            ("behavior", string_field(body, "behavior")),
        )
        await call(self.broker.charge, string_field(body, "run_id"), "permission answer", texts)
        await call(
            self.broker.permission_decision,
            string_field(body, "run_id"),
            string_field(body, "request_id"),
            string_field(body, "behavior"),
        )
        return json_response({"ok": True})

    async def send(self, request: Request) -> Response:
        body, raw = await self.authenticated(request)
        from_run_id = string_field(body, "from_run_id")
        to_run_id = string_field(body, "to_run_id")
        kind = string_field(body, "type")
        if not (from_run_id and to_run_id and kind):
            raise WireError(400, "missing fields")
        if not await call(self.broker.exists, from_run_id):
            raise WireError(404, "from run not found")
        # Anti-spoofing: the caller's token must be the sender's, not just any run's.
        if not await call(self.broker.authenticate, from_run_id, string_field(body, "token")):
            raise WireError(401, "unauthorized")
        payload = raw_member(raw, "payload")
        await call(
            self.broker.charge, from_run_id, "message", (("type", kind), ("to_run_id", to_run_id)), payload
        )
        if kind == "agent_message":
            asked = await self.asks.send(body, from_run_id, to_run_id, payload)
            if asked is not None:
                return asked
        await call(self.broker.send_to, from_run_id, to_run_id, kind, payload, missing=(404, None))
        return json_response({"queued": True})
