"""Helpers for the controller's tests: a harness the test drives, and waits that never sleep."""

from __future__ import annotations

import itertools
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from actors import Approval, Controller, HarnessEvent, System
from eventlog import Event, decode

T = TypeVar("T")
E = TypeVar("E", bound=Event)

WAIT = 10.0  # seconds any single wait may take before the test fails (never a sleep)


class ManualHarness:
    """A harness that records every call and publishes only when the test tells it to.

    `*_error` make the matching call raise; `on_send` / `on_abort` run inside the call (so a
    test can publish synchronously from within the harness, as a real one may).
    """

    def __init__(self, session_id: str = "session-1") -> None:
        self.session_id = session_id
        self.publish: Callable[[HarnessEvent], Any] | None = None
        self.sends: list[tuple[str, str, str]] = []
        self.aborts: list[str] = []
        self.starts = 0
        self.closes = 0
        self.start_error: Exception | None = None
        self.send_error: Exception | None = None
        self.abort_error: Exception | None = None
        self.close_error: Exception | None = None
        self.on_send: Callable[[str, str, str], None] | None = None
        self.on_abort: Callable[[str], None] | None = None
        self._ids = itertools.count(1)

    def start(self, publish: Callable[[HarnessEvent], Any]) -> str:
        self.starts += 1
        if self.start_error is not None:
            raise self.start_error
        self.publish = publish
        return self.session_id

    def send(self, run_id: str, prompt: str, delivery: str) -> None:
        self.sends.append((run_id, prompt, delivery))
        if self.on_send is not None:
            self.on_send(run_id, prompt, delivery)
        if self.send_error is not None:
            raise self.send_error

    def abort(self, run_id: str) -> None:
        self.aborts.append(run_id)
        if self.on_abort is not None:
            self.on_abort(run_id)
        if self.abort_error is not None:
            raise self.abort_error

    def close(self) -> None:
        self.closes += 1
        if self.close_error is not None:
            raise self.close_error

    def emit(self, type_: str, run_id: str, id: str = "", **data: Any) -> Any:
        """Publish one event (a fresh id unless given); returns what publish returned."""
        assert self.publish is not None, "the harness was never started"
        return self.publish(HarnessEvent(type_, run_id, id or f"ev-{next(self._ids)}", data))


def recorded(system: System, cls: type[E], stream: str = "controller-default") -> list[E]:
    """The events of one type recorded in a controller's stream, oldest first."""
    return [e for e in map(decode, system.log.read(stream)) if isinstance(e, cls)]


def ask_permission(harness: ManualHarness, run_id: str) -> Future[Any]:
    """Publish a shell permission request from a harness thread; the future holds its resolution."""
    return in_thread(harness.emit, "permission.request", run_id, title="Run: ls", risk="high", payload="ls")


def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Run `fn` in a daemon thread; its result or exception lands in the returned future."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # handed to the test through the future
            future.set_exception(e)

    threading.Thread(target=run, daemon=True, name=f"test-{getattr(fn, '__name__', 'call')}").start()
    return future


def wait_until(ctrl: Controller, cond: Callable[[], Any], timeout: float = WAIT) -> Any:
    """Wait on the controller's change signal until `cond()` is truthy; return its value."""
    signal, unsubscribe = ctrl.subscribe()
    try:
        deadline = time.monotonic() + timeout
        while not (value := cond()):
            left = deadline - time.monotonic()
            assert left > 0, "timed out waiting for the controller"
            signal.wait(left)
        return value
    finally:
        unsubscribe()


def wait_pending(ctrl: Controller, count: int = 1) -> list[Approval]:
    """Wait until the controller's queue has `count` pending approvals; return them."""
    queue = ctrl.approval_queue()
    result: list[Approval] = wait_until(ctrl, lambda: len(queue.pending()) >= count and queue.pending())
    return result


class ObservedLock:
    """A lock that tells when a second caller is waiting for it (to see serialization happen)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.contended = threading.Event()

    def __enter__(self) -> ObservedLock:
        if not self._lock.acquire(blocking=False):
            self.contended.set()
            self._lock.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


# One turn: a streamed answer, a permission request, and (if approved) a tool call and its result.
TURN = [
    {"type": "assistant.delta", "data": {"message_id": "m", "delta": "Let me "}},
    {"type": "assistant.delta", "data": {"message_id": "m", "delta": "look."}},
    {"type": "assistant.message", "data": {"message_id": "m", "content": "Let me look."}},
    {
        "type": "permission.request",
        "data": {"title": "Run: ls", "risk": "high", "tool_call_id": "c1", "payload": "ls"},
    },
    {"type": "tool.start", "if": "approve", "data": {"tool_call_id": "c1", "tool_name": "shell"}},
    {"type": "tool.complete", "if": "approve", "data": {"tool_call_id": "c1", "output": "a b"}},
    {"type": "assistant.message", "if": "approve", "content": "Found a and b."},
    {"type": "assistant.message", "if": ["reject", "expired"], "content": "I did not look."},
    {"type": "session.idle"},
]
