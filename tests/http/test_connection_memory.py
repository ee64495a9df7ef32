"""A closed connection is freed with its last reference, not at the next full collection.

A server's collector runs rarely (`tools.http.binding.GC_THRESHOLDS`), so anything left in a
reference cycle stays until a full collection: a connection's protocol named itself in its
request's scope and its request cycle pointed back at it, and each crowd of agents that
connected and left stayed in memory (bench broker's capacity level, 5,000 agents connecting
again and again: RSS 130 -> 230 MiB in seven rounds; 130 -> 151, then flat, once broken).
Here the collector is off while connections serve requests both ways (the lean front and the
ASGI app, a refusal, a long poll whose client leaves) and close: every protocol must be gone.
"""

from __future__ import annotations

import gc
import socket
import threading
import weakref
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tools.http.lean import LeanCycle
from tools.http.protocol import ReadDeadlineProtocol

from .server import served_app

CONNECTIONS = 20
WAIT = 10.0


@pytest.fixture
def no_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


def request(path: str, value: object) -> bytes:
    body = orjson.dumps(value)
    return (
        b"POST %s HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (
            path.encode(),
            len(body),
            body,
        )
    )


def test_closed_connections_leave_no_protocol_behind(make_app, register, monkeypatch, no_collector):
    token = register("a")
    me = {"run_id": "a", "token": token}
    made: list[weakref.ref[ReadDeadlineProtocol]] = []
    lost = threading.Semaphore(0)
    connection_made, connection_lost = (
        ReadDeadlineProtocol.connection_made,
        ReadDeadlineProtocol.connection_lost,
    )

    def on_made(self: ReadDeadlineProtocol, transport: object) -> None:
        made.append(weakref.ref(self))
        connection_made(self, transport)  # type: ignore[arg-type]

    def on_lost(self: ReadDeadlineProtocol, exc: Exception | None) -> None:
        connection_lost(self, exc)
        self.loop.call_soon(lost.release)  # once its transport let go of it too

    monkeypatch.setattr(ReadDeadlineProtocol, "connection_made", on_made)
    monkeypatch.setattr(ReadDeadlineProtocol, "connection_lost", on_lost)
    # What may still hold a closed connection for a moment: a request still finishing (the
    # poll whose client left is told so and returns) and a refused one's hold (its timer).
    finished, answered = threading.Semaphore(0), threading.Semaphore(0)
    run, next_request = LeanCycle.run, ReadDeadlineProtocol._next_request

    async def run_then_tell(self: LeanCycle, front: Any) -> None:
        try:
            await run(self, front)
        finally:
            finished.release()

    def next_then_tell(self: ReadDeadlineProtocol) -> None:  # after an answer (a refusal's: its hold)
        next_request(self)
        self.loop.call_soon(answered.release)  # once the loop let go of the hold's timer too

    monkeypatch.setattr(LeanCycle, "run", run_then_tell)
    monkeypatch.setattr(ReadDeadlineProtocol, "_next_request", next_then_tell)
    sent = [
        request("/report", {**me, "state": "lean"}),  # the lean front
        request("/rep%6Frt", {**me, "state": "asgi"}),  # the same route through the ASGI app
        request("/register", {"run_id": "b", "label": "x" * 300}),  # a refusal (413), held
        request("/poll-control", me),  # a long poll its client leaves
    ]
    with served_app(make_app(poll_timeout=60.0)) as port:
        socks = []
        for n in range(CONNECTIONS):
            sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
            sock.sendall(sent[n % len(sent)])
            if n % len(sent) != 3:  # the poll's client leaves without its answer
                assert sock.recv(4096).startswith(b"HTTP/1.1 ")
            socks.append(sock)
        for sock in socks:
            sock.close()
        for _ in range(CONNECTIONS):
            assert lost.acquire(timeout=WAIT)
        each = CONNECTIONS // len(sent)
        for _ in range(2 * each):  # the lean front's requests: the reports and the polls
            assert finished.acquire(timeout=WAIT)
        for _ in range(3 * each):  # every answer's end: the reports', the ASGI app's, the refusals' holds
            assert answered.acquire(timeout=WAIT)
        assert len(made) == CONNECTIONS
        alive = [n % len(sent) for n, ref in enumerate(made) if ref() is not None]
        assert alive == []
