"""The read deadlines' sweep: a request is dropped once past its deadline, never before, and
a loop with no request under way keeps no timer."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any

from tools.http import protocol


class _Loop:
    """An event loop's clock and timers, moved by hand."""

    def __init__(self) -> None:
        self.now = 100.0
        self.timers: list[tuple[float, Any]] = []

    def time(self) -> float:
        return self.now

    def call_later(self, delay: float, callback: Any) -> object:
        self.timers.append((self.now + delay, callback))
        return object()

    def advance(self, seconds: float) -> None:
        """Move the clock, running each timer that comes due on the way."""
        end = self.now + seconds
        while True:
            due = sorted((t for t in self.timers if t[0] <= end), key=lambda t: t[0])
            if not due:
                break
            at, callback = due[0]
            self.timers.remove(due[0])
            self.now = at
            callback()
        self.now = end


class _Conn:
    def __init__(self) -> None:
        self.dropped_at: float | None = None
        self.loop: _Loop | None = None

    def _timed_out(self) -> None:
        assert self.loop is not None
        self.dropped_at = self.loop.now


def test_a_request_is_dropped_after_its_deadline_within_one_sweep():
    loop = _Loop()
    deadlines = protocol._Deadlines(loop)  # type: ignore[arg-type]
    first, second, finished = _Conn(), _Conn(), _Conn()
    for conn in (first, second, finished):
        conn.loop = loop
    deadlines.arm(first, 2.0)  # type: ignore[arg-type]
    loop.advance(1.0)
    deadlines.arm(second, 2.0)  # type: ignore[arg-type]
    deadlines.arm(finished, 2.0)  # type: ignore[arg-type]
    loop.advance(0.5)
    deadlines.disarm(finished)  # type: ignore[arg-type]  # its request arrived whole
    loop.advance(10.0)
    sweep = 2.0 / 4  # a quarter of the timeout, as it is under SWEEP_SECONDS
    assert first.dropped_at is not None
    assert second.dropped_at is not None
    assert 102.0 <= first.dropped_at <= 102.0 + sweep
    assert 103.0 <= second.dropped_at <= 103.0 + sweep
    assert finished.dropped_at is None
    assert loop.timers == []  # nothing armed, nothing swept


def test_a_long_timeout_is_swept_every_second():
    loop = _Loop()
    deadlines = protocol._Deadlines(loop)  # type: ignore[arg-type]
    conn = _Conn()
    conn.loop = loop
    deadlines.arm(conn, 10.0)  # type: ignore[arg-type]
    assert [at - loop.now for at, _ in loop.timers] == [protocol.SWEEP_SECONDS]
    loop.advance(9.9)
    assert conn.dropped_at is None
    loop.advance(2.0)
    assert conn.dropped_at is not None
    assert 110.0 <= conn.dropped_at <= 110.0 + protocol.SWEEP_SECONDS


def test_a_loop_gone_leaves_no_table_behind():
    loop = asyncio.new_event_loop()
    protocol._Deadlines.of(loop)
    assert loop in protocol._LOOPS
    gone = weakref.ref(loop)
    loop.close()
    del loop
    gc.collect()
    assert gone() is None  # its table held it alive when the table held the loop
