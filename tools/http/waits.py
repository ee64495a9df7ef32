"""Requests that wait (long polls, `/wait_reply`, `/permission_wait`): a future and a deadline each.

A waiting request costs one future while it waits and one entry in its event loop's `Wheel`:
no task, no timer of its own. The wheel keeps the deadlines in slots of `TICK` seconds and
runs one timer, for the earliest slot in use, whatever the number of waiters; a deadline
fires when its slot's turn comes, at most one tick late and never early.

A waiter learns that its client went away without reading from it: the server's protocol
(`tools.http.protocol`) puts itself in the request's scope under `CONNECTION`, and tells the
waiter it watches when the connection is lost. Under another ASGI server (the in-process test
client), a task reading the request's last message (`http.disconnect`) stands in for it.
"""

from __future__ import annotations

import asyncio
import heapq
import math
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from starlette.types import Receive, Scope

from .calls import inbox_of
from .wire import CONNECTION

TICK = 0.025  # seconds: a deadline fires at most this late
WOKEN, TIMED_OUT, GONE = "woken", "timed out", "gone"  # what ended a wait


class Connection(Protocol):
    """What a waiter asks of the connection its request came on."""

    def watch(self, lost: Callable[[], object]) -> bool:
        """Call `lost()` when the connection is lost; False if it is lost already (nothing is kept)."""
        ...

    def unwatch(self, lost: Callable[[], object]) -> None:
        """Stop calling `lost()`."""
        ...

    def refused(self) -> None:
        """The answer under way refuses its request: hold the connection's next request back."""
        ...


class Wait:
    """One request waiting for a wake-up (from any thread), its deadline, or its client leaving.

    `wake()` may come before `until()` is awaited: the next `until()` then ends at once. Use it
    as a context manager, or call `close()` when the request stops waiting (it stops watching
    the connection).
    """

    __slots__ = ("_connection", "_future", "_gone", "_loop", "_post", "_reading", "_slot", "_thread",
                 "_wheel", "_woken", "deadline")  # fmt: skip

    def __init__(self, scope: Scope, receive: Receive) -> None:
        loop = asyncio.get_running_loop()
        self._loop = loop
        self._wheel = Wheel.of(loop)
        self._post = inbox_of(loop).post
        self._thread = threading.get_ident()
        self._future: asyncio.Future[str] | None = None
        self._woken = False
        self._gone = False
        self._slot = -1  # the wheel slot this wait's deadline is in (-1: none)
        self.deadline = math.inf
        self._reading: asyncio.Future[Any] | None = None
        self._connection: Connection | None = scope.get(CONNECTION)
        if self._connection is not None:
            self._gone = not self._connection.watch(self.lost)
        else:
            # The body has been read in full: the only message left to receive is the disconnect.
            self._reading = asyncio.ensure_future(receive())
            self._reading.add_done_callback(self._received)

    async def until(self, deadline: float) -> str:
        """Wait until woken, `deadline` (the loop's time) or the client's leaving: WOKEN, TIMED_OUT or GONE.

        A wake-up that came meanwhile is taken (WOKEN at once); a client already gone is GONE.
        """
        if self._gone:
            return GONE
        if self._woken:
            self._woken = False
            return WOKEN
        if deadline <= self._loop.time():
            return TIMED_OUT
        future: asyncio.Future[str] = self._loop.create_future()
        self._future = future
        if deadline != self.deadline or self._slot < 0:
            self.deadline = deadline
            self._wheel.add(self)
        try:
            return await future
        finally:
            self._future = None

    def wake(self) -> None:
        """Something the waiter waits for may have happened; from any thread."""
        if threading.get_ident() == self._thread:
            self._end(WOKEN)
        else:
            self._post(self._woke)

    def _woke(self) -> None:
        self._end(WOKEN)

    def lost(self) -> None:
        """The client went away (called on the loop's thread)."""
        self._gone = True
        self._end(GONE)

    def expired(self) -> None:
        """The wheel's turn for this wait's deadline came (on the loop's thread)."""
        self._slot = -1
        if self._loop.time() >= self.deadline:
            self._end(TIMED_OUT)

    def _end(self, how: str) -> None:
        future = self._future
        if future is None or future.done():
            if how == WOKEN:
                self._woken = True  # for the next `until`
            return
        future.set_result(how)

    def _received(self, reading: asyncio.Future[Any]) -> None:
        if reading.cancelled() or reading.exception() is not None:
            return
        if reading.result().get("type") == "http.disconnect":
            self.lost()

    def close(self) -> None:
        """The request stops waiting: nothing watches its connection for it any more."""
        if self._connection is not None:
            self._connection.unwatch(self.lost)
            self._connection = None  # the wheel keeps this wait till its slot's turn, not the connection
        if self._reading is not None:
            self._reading.cancel()
        self._slot = -1  # the wheel drops it at its slot's turn

    def __enter__(self) -> Wait:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Wheel:
    """The deadlines of one event loop's waits in slots of `TICK` seconds, and the one timer firing them."""

    def __init__(self, loop: asyncio.AbstractEventLoop, tick: float = TICK) -> None:
        self._loop = weakref.ref(loop)  # weakly: the wheel is the loop's entry in _WHEELS
        self.tick = tick
        self._slots: dict[int, list[Wait]] = {}
        self._order: list[int] = []  # the slots in use, a heap
        self._timer: asyncio.TimerHandle | None = None
        self._timer_slot = 0

    @classmethod
    def of(cls, loop: asyncio.AbstractEventLoop) -> Wheel:
        global _last
        last = _last
        if last is not None and last[0]() is loop:
            return last[1]  # (a server has one loop: no weak reference made per lookup)
        wheel = _WHEELS.get(loop)
        if wheel is None:
            wheel = _WHEELS[loop] = cls(loop)
        _last = (weakref.ref(loop), wheel)
        return wheel

    def add(self, wait: Wait) -> None:
        """Fire `wait.expired()` once the loop's time has reached `wait.deadline` (never before)."""
        self._put(wait, math.ceil(wait.deadline / self.tick))

    def _put(self, wait: Wait, slot: int) -> None:
        waiting = self._slots.get(slot)
        if waiting is None:
            waiting = self._slots[slot] = []
            heapq.heappush(self._order, slot)
            if self._timer is None or slot < self._timer_slot:
                self._arm(slot)
        waiting.append(wait)
        wait._slot = slot

    def _arm(self, slot: int) -> None:
        loop = self._loop()
        if loop is None:
            return
        if self._timer is not None:
            self._timer.cancel()
        self._timer = loop.call_at(slot * self.tick, self._turn)
        self._timer_slot = slot

    def _turn(self) -> None:
        self._timer = None
        loop = self._loop()
        if loop is None:
            return
        now = loop.time()
        order, slots = self._order, self._slots
        while order and order[0] * self.tick <= now:
            slot = heapq.heappop(order)
            for wait in slots.pop(slot):
                if wait._slot != slot:
                    continue  # closed, or its deadline moved to another slot
                if wait.deadline <= now:
                    wait.expired()
                else:  # the timer came a hair early (the loop's clock resolution): the next slot
                    self._put(wait, slot + 1)
        if order:
            self._arm(order[0])

    def __len__(self) -> int:
        """Waits with a deadline in a slot still to come (closed ones included until their slot's turn)."""
        return sum(map(len, self._slots.values()))


_WHEELS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Wheel] = weakref.WeakKeyDictionary()
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], Wheel] | None = None  # the loop asked for last
