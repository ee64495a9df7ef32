"""uvicorn's HTTP protocol with a read deadline: a request must arrive whole, head and body, in time.

uvicorn times out an idle keep-alive connection but not a request being sent: a client that
opens a connection and sends half a request line (or a body that never ends) would hold its
socket forever, and a few thousand such clients exhaust the server's descriptors. Here each
request gets `read_timeout` seconds from its first byte (from the connection for the first
request) until its last; a request still incomplete then is answered 408 if its head never
arrived, and the connection closed either way (a handler waiting on the body hears a
disconnect). The time a handler takes to answer (a long poll) is not counted.

The deadlines are not timers: a timer armed and cancelled per request cost the event loop
2 to 4 µs of every request (a heap push, a cancel, the purge of cancelled handles). Each
armed connection notes its deadline in its loop's `_Deadlines`, and one sweep per
`SWEEP_SECONDS` (a quarter of the shortest timeout when that is less) drops those past theirs:
a late request is dropped after its deadline, and at most one sweep after it. The keep-alive
wait between two requests (uvicorn's `timeout_keep_alive`, a timer of its own after every
answer there) is such a deadline too: a connection idle that long is closed, without a 408.

Each request's scope carries its connection (`wire.CONNECTION`): a request that waits (a long
poll) asks it to tell when the connection is lost, rather than reading for the disconnect.

A refused request (413 or 429, `refused()`) holds its connection's next request back for
`refusal_hold` seconds: the connection is not read meanwhile. A client that floods the
server with what it refuses (bodies over a bound, writes past its rate) is slowed to one
refusal per hold on each connection, at no cost to the other connections; an honest client
that is refused waits that little longer for its next answer. Behind a proxy that carries
many clients on one connection, turn it off (`--refusal-hold 0`).

The agents' hot routes are taken past ASGI when the app has a lean front (`lean`): the
request goes to a `LeanCycle` in place of uvicorn's cycle, everything else as above.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable
from typing import Any

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from .lean import LeanCycle, LeanFront, lean_front_of
from .wire import CONNECTION, REFUSAL_HOLD

READ_TIMEOUT = 10.0  # seconds a client has to send one whole request
SWEEP_SECONDS = 1.0  # how often a loop drops the connections past their deadline, at most
_LATE = b'{"error": "the request did not arrive in time"}\n'
_TIMED_OUT = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: %d\r\n\r\n%s" % (len(_LATE), _LATE)
)


class ReadDeadlineProtocol(HttpToolsProtocol):
    """HttpToolsProtocol that drops a connection whose request does not arrive within `read_timeout`."""

    read_timeout = READ_TIMEOUT
    refusal_hold = REFUSAL_HOLD

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadlines = _Deadlines.of(self.loop)
        self._armed = False  # whether this connection's request has a deadline in `_deadlines`
        self._awaiting_request = True  # between requests (or before the first): a new one may start
        self._head_read = False
        self._idle = False  # the armed deadline is the keep-alive wait's, not a request's
        self._lost = False
        self._watcher: Callable[[], object] | None = None  # told when the connection is lost
        self._held = False  # the answer under way refuses: the next request waits `refusal_hold`
        self.lean: LeanFront | None = lean_front_of(self.app)  # the hot routes, past ASGI (`lean`)

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        self._lost = True
        super().connection_lost(exc)
        watcher, self._watcher = self._watcher, None
        if watcher is not None:
            watcher()
        # Its request's scope names it (CONNECTION) and its cycle points back at it: cycles a
        # server's collector, tuned to run rarely (`binding.GC_THRESHOLDS`), freed only at a
        # full collection, so a crowd of closed connections stayed in memory (bench broker's
        # capacity level, 5,000 agents connecting again and again: RSS 130 -> 230 MiB in 7
        # rounds). Broken here, they go with their last reference.
        scope = getattr(self, "scope", None)
        if scope is not None:
            scope.pop(CONNECTION, None)
        self.cycle = None  # type: ignore[assignment]
        self.pipeline.clear()

    def watch(self, lost: Callable[[], object]) -> bool:
        """Call `lost()` when the connection is lost (a waiting request's client left); False if it is.

        One request of a connection is served at a time: one watcher at most.
        """
        if self._lost:
            return False
        self._watcher = lost
        # A large body may have left reading paused: without reading, a close is never seen.
        self.flow.resume_reading()
        return True

    def unwatch(self, lost: Callable[[], object]) -> None:
        if self._watcher == lost:
            self._watcher = None

    def refused(self) -> None:
        """The answer under way refuses its request (413, 429): hold the next one back (see the module)."""
        self._held = self.refusal_hold > 0

    def data_received(self, data: bytes) -> None:
        if self._awaiting_request and (self._idle or not self._armed):
            self._arm()  # the first bytes of the next request on a kept-alive connection
        super().data_received(data)

    def on_headers_complete(self) -> None:
        self._head_read = True
        self.scope[CONNECTION] = self  # type: ignore[literal-required]  # a waiting request watches it
        if not self._lean_request():
            super().on_headers_complete()

    def _lean_request(self) -> bool:
        """Start the request on the lean front if it takes it (`tools.http.lean`); else False."""
        front = self.lean
        if (
            front is None
            or self.expect_100_continue
            or (self.cycle is not None and not self.cycle.response_complete)
        ):
            return False
        parser = self.parser
        if parser.get_method() != b"POST" or parser.get_http_version() != "1.1" or parser.should_upgrade():
            return False
        raw = self.url
        handler = front.handlers.get(raw)  # most requests: the bare path, nothing to parse
        query = b""
        if handler is None and b"?" in raw:
            url = httptools.parse_url(raw)
            raw, query = url.path, url.query or b""
            handler = front.handlers.get(raw)
        if handler is None:
            return False
        scope = self.scope
        scope.update(method="POST", path=self.root_path + raw.decode("ascii"), query_string=query)  # type: ignore[call-arg]
        scope["raw_path"] = self.root_path.encode("ascii") + raw
        scope["flightlog.lean"] = handler  # type: ignore[typeddict-unknown-key]
        lean = LeanCycle(self, scope, keep_alive=parser.should_keep_alive())
        self.cycle = lean  # type: ignore[assignment]  # what the protocol reads of a cycle
        task = self.loop.create_task(lean.run(front))
        task.add_done_callback(self.tasks.discard)
        self.tasks.add(task)
        return True

    def on_message_complete(self) -> None:
        self._disarm()
        self._awaiting_request = False
        super().on_message_complete()

    def on_response_complete(self) -> None:
        # uvicorn's, but the keep-alive wait that follows is a deadline in the sweep's table
        # rather than a timer armed (and cancelled by the next request) after every answer.
        self._awaiting_request = True
        self._head_read = False
        self.server_state.total_requests += 1
        if self.transport.is_closing():
            return
        self._unset_keepalive_if_required()
        if self._held:
            self._held = False
            self.flow.pause_reading()  # a pipelined request already read waits as well
            self.loop.call_later(self.refusal_hold, self._next_request)
            return
        self._next_request()

    def _next_request(self) -> None:
        if self.transport.is_closing():
            return
        self.flow.resume_reading()
        if self.pipeline:
            cycle, app = self.pipeline.pop()
            self._start_asgi_task(cycle, app)
        else:
            self._arm(self.timeout_keep_alive, idle=True)

    def _arm(self, timeout: float | None = None, *, idle: bool = False) -> None:
        self._deadlines.arm(self, self.read_timeout if timeout is None else timeout)
        self._armed = True
        self._idle = idle

    def _disarm(self) -> None:
        if self._armed:
            self._deadlines.disarm(self)
            self._armed = False

    def _timed_out(self) -> None:
        self._armed = False
        if self.transport.is_closing():
            return
        if not self._head_read and not self._idle:
            self.transport.write(_TIMED_OUT)
        self.transport.close()  # (a kept-alive connection idle too long just closes, as uvicorn's)


class _Deadlines:
    """The read deadlines of one event loop's connections, and the sweep that enforces them."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # weakly: the table is the loop's entry in _LOOPS
        self._due: dict[ReadDeadlineProtocol, float] = {}
        self._sweep: asyncio.TimerHandle | None = None
        self._every = SWEEP_SECONDS

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> _Deadlines:
        deadlines = _LOOPS.get(loop)
        if deadlines is None:
            deadlines = _LOOPS[loop] = cls(loop)
        return deadlines

    def arm(self, conn: ReadDeadlineProtocol, timeout: float) -> None:
        loop = self._loop()
        assert loop is not None  # a connection's loop outlives it
        self._due[conn] = loop.time() + timeout
        if timeout / 4 < self._every:
            self._every = timeout / 4
        if self._sweep is None:
            self._sweep = loop.call_later(self._every, self._swept)

    def disarm(self, conn: ReadDeadlineProtocol) -> None:
        self._due.pop(conn, None)

    def _swept(self) -> None:
        self._sweep = None
        loop = self._loop()
        if loop is None:
            return
        now = loop.time()
        late = [conn for conn, due in self._due.items() if due <= now]
        for conn in late:
            del self._due[conn]
            conn._timed_out()
        if self._due:
            self._sweep = loop.call_later(self._every, self._swept)


_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Deadlines] = weakref.WeakKeyDictionary()


def read_deadline_protocol(
    read_timeout: float, refusal_hold: float = REFUSAL_HOLD
) -> type[ReadDeadlineProtocol]:
    """The protocol class to hand uvicorn (`Config(http=...)`) for a read deadline of `read_timeout` s
    and a connection held `refusal_hold` s after a refusal (0: not held)."""
    if read_timeout <= 0:
        raise ValueError("read_timeout must be positive")
    if refusal_hold < 0:
        raise ValueError("refusal_hold must not be negative")
    attributes = {"read_timeout": read_timeout, "refusal_hold": refusal_hold}
    return type("ReadDeadlineProtocol", (ReadDeadlineProtocol,), attributes)
