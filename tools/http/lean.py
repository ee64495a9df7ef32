"""The lean front: the agents' busiest wire routes answered by the server's protocol, past ASGI.

A POST to `/report`, `/heartbeat`, `/finish`, `/reply` or `/poll-control` is most of what a
server hears. Through uvicorn's request cycle and the app's middleware (the ASGI messages, a
coroutine for each `receive` and `send`, the headers re-validated, an error handler, the
storage-fault and extra-header wrappers) it cost ~38 µs of CPU before any of our own work
(`flightlog bench broker`'s ceilings: uvicorn with an empty ASGI app against a bare
httptools protocol, 14 µs). Here the protocol hands such a request to a `LeanCycle`: the
handler of `HotRoutes` is called with the body as it arrived, and the answer is written to
the transport as one buffer — status line, uvicorn's default headers, the handler's, the
app's extra headers (`Flightlog-Worker`, the tamper finding), the body.

Everything the ASGI path does for these routes still happens, in the same order and through
the same code: the cross-site rules, the body limit and the handler are `HotRoutes.serve`'s;
a storage fault is a 503 with its cause (`faults.StorageFaults`, the same incidents); an
unexpected error a 500 and one logged traceback; the access log line; a refusal's hold. Any
other request, or one this front does not take (another method, HTTP/1.0, `Expect:
100-continue`, an escaped path, a request pipelined behind one in progress), goes the ASGI way.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Protocol

from starlette.types import Message, Receive, Scope, Send
from uvicorn._types import HTTPScope
from uvicorn.protocols.http.httptools_impl import STATUS_LINE
from uvicorn.protocols.utils import get_client_addr, get_path_with_query_string

from .faults import Incidents, StorageFaults
from .hot import HotHandler, HotRoutes

logger = logging.getLogger("uvicorn.error")
_SERVER_ERROR = (
    b"content-type: text/plain; charset=utf-8\r\ncontent-length: 21\r\nconnection: close\r\n\r\n"
    b"Internal Server Error"
)


class LeanFront:
    """The hot routes of one app, served from the protocol (see the module)."""

    def __init__(self, hot: HotRoutes, incidents: Incidents, headers: list[tuple[bytes, bytes]]) -> None:
        self.handlers: dict[bytes, HotHandler] = {path.encode(): h for path, h in hot.handlers.items()}
        self.extra = b"".join(b"%s: %s\r\n" % (name, value) for name, value in headers)

        async def serve(scope: Scope, receive: Receive, send: Send) -> None:
            await hot.serve(scope["flightlog.lean"], scope, receive, send)

        self.app = StorageFaults(serve, incidents)  # storage faults as on the ASGI path


class Host(Protocol):
    """What a lean cycle uses of the connection's protocol (`protocol.ReadDeadlineProtocol`)."""

    transport: asyncio.Transport
    flow: Any  # uvicorn's FlowControl
    server_state: Any  # uvicorn's ServerState: its default headers
    access_log: bool
    access_logger: logging.Logger
    lean: LeanFront | None

    def on_response_complete(self) -> None: ...


class LeanCycle:
    """One request on the lean front: what uvicorn's protocol reads of a cycle, and the ASGI
    `receive`/`send` the handler uses, writing the answer straight to the transport."""

    __slots__ = (
        "_chunks",
        "_headers",
        "_started",
        "_status",
        "body",
        "disconnected",
        "keep_alive",
        "message_event",
        "more_body",
        "protocol",
        "response_complete",
        "scope",
    )  # fmt: skip

    def __init__(self, protocol: Host, scope: HTTPScope, keep_alive: bool) -> None:
        self.protocol = protocol
        self.scope = scope
        self.keep_alive = keep_alive
        self.disconnected = False
        self.body = bytearray()
        self.more_body = True
        self.message_event = Signal()
        self.response_complete = False
        self._started = False
        self._status = 0
        self._headers = b""
        self._chunks: list[bytes] = []

    async def run(self, front: LeanFront) -> None:
        try:
            await front.app(self.scope, self.receive, self.send)  # type: ignore[arg-type]
        except BaseException as exc:
            logger.error("Exception in ASGI application\n", exc_info=exc)
            if not self._started and not self.disconnected:
                self._write(STATUS_LINE[500] + _SERVER_ERROR, 500, keep_alive=False)
            else:
                self.protocol.transport.close()
            if not isinstance(exc, Exception):
                raise

    async def receive(self) -> Message:
        protocol = self.protocol
        if not self.disconnected and not self.response_complete and self.more_body and not self.body:
            protocol.flow.resume_reading()
            await self.message_event.wait()
            self.message_event.clear()
        if self.disconnected or self.response_complete:
            return {"type": "http.disconnect"}
        body, self.body = bytes(self.body), bytearray()
        return {"type": "http.request", "body": body, "more_body": self.more_body}

    async def send(self, message: Message) -> None:
        protocol = self.protocol
        if protocol.flow.write_paused and not self.disconnected:
            await protocol.flow.drain()
        if self.disconnected:
            return
        if message["type"] == "http.response.start":
            self._started = True
            self._status = int(message["status"])
            lines = []
            for name, value in message.get("headers", ()):
                if name.lower() == b"connection" and value.lower() == b"close":
                    self.keep_alive = False
                lines.append(b"%s: %s\r\n" % (name, value))
            self._headers = b"".join(lines)
            return
        self._chunks.append(message.get("body", b""))
        if message.get("more_body", False):
            return
        head = [STATUS_LINE[self._status]]
        head.extend(b"%s: %s\r\n" % header for header in protocol.server_state.default_headers)
        head.append(self._headers)
        head.append(protocol.lean.extra if protocol.lean is not None else b"")
        if not self.keep_alive:
            head.append(b"connection: close\r\n")
        head.append(b"\r\n")
        self._write(b"".join([*head, *self._chunks]), self._status, keep_alive=self.keep_alive)

    def _write(self, data: bytes, status: int, *, keep_alive: bool) -> None:
        protocol = self.protocol
        protocol.transport.write(data)
        self.response_complete = True
        self.message_event.set()
        if protocol.access_log:
            scope = self.scope
            protocol.access_logger.info(
                '%s - "%s %s HTTP/%s" %d',
                get_client_addr(scope),
                scope["method"],
                get_path_with_query_string(scope),
                scope["http_version"],
                status,
            )
        if not keep_alive:
            protocol.transport.close()
        protocol.on_response_complete()


class Signal:
    """What uvicorn's protocol sets when more of the body came or the client left (the
    `asyncio.Event` of its cycles), costing no future until someone waits."""

    __slots__ = ("_set", "_waiter")

    def __init__(self) -> None:
        self._set = False
        self._waiter: asyncio.Future[None] | None = None

    def set(self) -> None:
        self._set = True
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def clear(self) -> None:
        self._set = False

    async def wait(self) -> None:
        if self._set:
            return
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None


def lean_front_of(app: Any) -> LeanFront | None:
    """The lean front `create_app` gave `app`, if any (an app wrapped by uvicorn has none)."""
    state = getattr(app, "state", None)
    front = getattr(state, "lean_front", None) if state is not None else None
    return front if isinstance(front, LeanFront) else None
