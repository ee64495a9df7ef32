"""Waiting requests: one future and one wheel deadline each; woken from any thread, never
timed out early, and told at once when their client goes away."""

from __future__ import annotations

import asyncio
import gc
import socket
import threading
import time
import weakref
from typing import Any

import orjson

from tools.http.protocol import ReadDeadlineProtocol
from tools.http.waits import GONE, TIMED_OUT, WOKEN, Wait, Wheel
from tools.http.wire import CONNECTION

from .conftest import AGENT_HEADERS
from .server import served_app


class _Loop:
    """An event loop's clock and `call_at` timers, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.timers: list[_Timer] = []

    def time(self) -> float:
        return self.now

    def call_at(self, when: float, callback: Any) -> _Timer:
        timer = _Timer(when, callback)
        self.timers.append(timer)
        return timer

    def advance(self, seconds: float) -> None:
        """Move the clock, running each live timer that comes due on the way."""
        end = self.now + seconds
        while due := sorted(
            (t for t in self.timers if t.when <= end and not t.cancelled), key=lambda t: t.when
        ):
            self.timers.remove(due[0])
            self.now = max(self.now, due[0].when)
            due[0].callback()
        self.now = end


class _Timer:
    def __init__(self, when: float, callback: Any) -> None:
        self.when = when
        self.callback = callback
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True


def _when(timer: _Timer) -> float:
    return timer.when


class _Waiter:
    """What the wheel sees of a Wait: a deadline, its slot, and `expired()`."""

    def __init__(self, loop: _Loop, deadline: float) -> None:
        self.loop = loop
        self.deadline = deadline
        self._slot = -1
        self.fired_at: float | None = None

    def expired(self) -> None:
        self._slot = -1
        self.fired_at = self.loop.now


def _wheel(loop: _Loop) -> Wheel:
    return Wheel(loop, tick=0.025)  # type: ignore[arg-type]  # the wheel keeps a weak reference only


def test_a_deadline_fires_at_its_slots_turn_never_before():
    loop = _Loop()
    wheel = _wheel(loop)
    waiters = [_Waiter(loop, loop.now + d) for d in (0.01, 0.5, 0.5001, 2.0)]
    for w in waiters:
        wheel.add(w)  # type: ignore[arg-type]
    loop.advance(3.0)
    for w in waiters:
        assert w.fired_at is not None
        assert w.deadline <= w.fired_at <= w.deadline + 0.025


def test_many_deadlines_keep_one_timer():
    # A timer per waiting request is what the wheel replaces: thousands of waits, one live timer.
    loop = _Loop()
    wheel = _wheel(loop)
    for k in range(1000):
        wheel.add(_Waiter(loop, loop.now + 2.0 + k / 1000))  # type: ignore[arg-type]
    assert sum(not t.cancelled for t in loop.timers) == 1
    loop.advance(1.0)
    assert sum(not t.cancelled for t in loop.timers) == 1
    loop.advance(2.5)
    assert len(wheel) == 0
    assert [t for t in loop.timers if not t.cancelled] == []  # nothing waits: no timer either


def test_an_earlier_deadline_moves_the_timer_forward():
    loop = _Loop()
    wheel = _wheel(loop)
    late, early = _Waiter(loop, loop.now + 60.0), _Waiter(loop, loop.now + 0.1)
    wheel.add(late)  # type: ignore[arg-type]
    wheel.add(early)  # type: ignore[arg-type]
    loop.advance(0.2)
    assert early.fired_at is not None
    assert late.fired_at is None


def test_a_wait_that_left_its_slot_is_not_fired():
    loop = _Loop()
    wheel = _wheel(loop)
    gone = _Waiter(loop, loop.now + 0.1)
    wheel.add(gone)  # type: ignore[arg-type]
    gone._slot = -1  # as Wait.close() leaves it
    loop.advance(1.0)
    assert gone.fired_at is None
    assert len(wheel) == 0


class _Connection:
    def __init__(self, lost: bool = False) -> None:
        self.watcher: Any = None
        self.lost = lost

    def watch(self, lost: Any) -> bool:
        if self.lost:
            return False
        self.watcher = lost
        return True

    def unwatch(self, lost: Any) -> None:
        if self.watcher == lost:
            self.watcher = None


def _run(main: Any) -> Any:
    return asyncio.run(asyncio.wait_for(main(), 30))


def test_a_wake_before_the_wait_ends_the_next_wait_at_once():
    async def main() -> str:
        loop = asyncio.get_running_loop()
        with Wait({CONNECTION: _Connection()}, _never) as wait:
            wait.wake()
            return await wait.until(loop.time() + 60.0)  # 60 s: only the wake can end it in time

    assert _run(main) == WOKEN


def test_a_wake_from_another_thread_ends_the_wait():
    async def main() -> str:
        loop = asyncio.get_running_loop()
        with Wait({CONNECTION: _Connection()}, _never) as wait:
            waker = threading.Thread(target=wait.wake)
            loop.call_soon(waker.start)
            try:
                return await wait.until(loop.time() + 60.0)
            finally:
                waker.join(10)

    assert _run(main) == WOKEN


def test_a_deadline_ends_the_wait_never_early():
    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        with Wait({CONNECTION: _Connection()}, _never) as wait:
            deadline = loop.time() + 0.05
            how = await wait.until(deadline)
            return how, loop.time() - deadline

    how, late = _run(main)
    assert how == TIMED_OUT
    assert late >= 0


def test_a_lost_connection_ends_the_wait_and_is_watched_no_more():
    connection = _Connection()

    async def main() -> str:
        loop = asyncio.get_running_loop()
        with Wait({CONNECTION: connection}, _never) as wait:
            loop.call_soon(connection.watcher)
            return await wait.until(loop.time() + 60.0)

    assert _run(main) == GONE
    assert connection.watcher is None


def test_a_connection_lost_already_is_gone_at_once():
    async def main() -> str:
        loop = asyncio.get_running_loop()
        with Wait({CONNECTION: _Connection(lost=True)}, _never) as wait:
            return await wait.until(loop.time() + 60.0)

    assert _run(main) == GONE


def test_under_another_server_the_disconnect_message_ends_the_wait():
    async def main() -> str:
        loop = asyncio.get_running_loop()

        async def receive() -> dict[str, Any]:
            return {"type": "http.disconnect"}

        with Wait({}, receive) as wait:
            return await wait.until(loop.time() + 60.0)

    assert _run(main) == GONE


def test_a_loop_gone_leaves_no_wheel_behind():
    loops: list[weakref.ref[asyncio.AbstractEventLoop]] = []

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loops.append(weakref.ref(loop))
        with Wait({CONNECTION: _Connection()}, _never) as wait:
            await wait.until(loop.time() + 0.01)

    asyncio.run(main())
    gc.collect()
    assert loops[0]() is None


async def _never() -> dict[str, Any]:
    await asyncio.Future()
    raise AssertionError("unreachable")


# -- through a real server -------------------------------------------------------------------


def test_a_poll_whose_client_leaves_stops_waiting_at_once(make_app, register, system, monkeypatch):
    # A 60 s poll timeout: a poll that did not hear its client leave would wait all of it, and
    # the test would time out rather than pass.
    token = register("a")
    subscribed, unsubscribed = threading.Event(), threading.Event()
    on_control = system.broker.on_control

    def watched(run_id, fn):
        unsubscribe = on_control(run_id, fn)
        subscribed.set()

        def leave() -> None:
            unsubscribe()
            unsubscribed.set()

        return leave

    monkeypatch.setattr(system.broker, "on_control", watched)
    watching: list[bool] = []  # the connection itself tells the poll (no task reads for it)
    watch = ReadDeadlineProtocol.watch
    monkeypatch.setattr(
        ReadDeadlineProtocol, "watch", lambda self, lost: watching.append(True) or watch(self, lost)
    )
    with served_app(make_app(poll_timeout=60.0)) as port:
        body = orjson.dumps({"run_id": "a", "token": token})
        head = "".join(f"{k}: {v}\r\n" for k, v in AGENT_HEADERS.items())
        request = f"POST /poll-control HTTP/1.1\r\nHost: t\r\n{head}Content-Length: {len(body)}\r\n\r\n"
        with socket.create_connection(("127.0.0.1", port), timeout=30) as client:
            client.sendall(request.encode() + body)
            assert subscribed.wait(30)
        assert unsubscribed.wait(30)  # the client closed its socket: the poll stopped waiting
    assert system.broker.has_waiters("a") is False
    assert watching == [True]


def test_a_kept_alive_connection_idle_too_long_is_closed_without_an_answer(make_app):
    # The keep-alive wait is a deadline in the protocol's sweep, not a timer per answer.
    with (
        served_app(make_app(), keep_alive=0.3) as port,
        socket.create_connection(("127.0.0.1", port), 30) as client,
    ):
        client.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        answer = b""
        while not answer.endswith(b"ok"):
            answer += client.recv(4096)
        answered = time.monotonic()
        rest = client.recv(4096)  # blocks until the server closes the idle connection
        assert rest == b""  # closed, and no 408: there was no request to time out
        # (the server counted from its answer's end, a moment before this side read it)
        assert time.monotonic() - answered >= 0.2


def test_a_request_begun_on_a_kept_alive_connection_has_the_read_deadline(make_app):
    # Between the two requests the connection's deadline is the keep-alive wait's (60 s here);
    # the second request's first bytes must put the read deadline (0.3 s) in its place.
    served = served_app(make_app(), keep_alive=60.0, read_timeout=0.3)
    with served as port, socket.create_connection(("127.0.0.1", port), 30) as client:
        client.sendall(b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n")
        answer = b""
        while not answer.endswith(b"ok"):
            answer += client.recv(4096)
        client.sendall(b"GET /health HTTP/1.1\r\nHo")  # and nothing more
        rest = b""
        while chunk := client.recv(4096):
            rest += chunk
    assert rest.startswith(b"HTTP/1.1 408 ")
