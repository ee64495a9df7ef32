"""Helpers for the approval gate's tests: requests in threads, waits without sleeping."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, TypeVar

from actors import ApprovalRequest, System
from eventlog import EventLog, decode
from projections import ApprovalRow

T = TypeVar("T")

WAIT = 10.0  # seconds any single wait may take before the test fails (never a sleep)


def make_request(**overrides: Any) -> ApprovalRequest:
    """A valid request; `tool_call_id` is unique so a test can find its approval."""
    fields: dict[str, Any] = {
        "kind": "shell",
        "title": "Run a command",
        "detail": "rm -rf build",
        "risk": "medium",
        "run_id": "run-1",
        "tool_call_id": f"call-{uuid.uuid4().hex[:8]}",
        "payload": {"cmd": "rm -rf build"},
    }
    fields.update(overrides)
    return ApprovalRequest(**fields)


def in_thread(fn: Callable[..., T], *args: Any, **kwargs: Any) -> Future[T]:
    """Run `fn` in a daemon thread; its result or exception lands in the returned future."""
    future: Future[T] = Future()

    def run() -> None:
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as e:  # handed to the test through the future
            future.set_exception(e)

    threading.Thread(target=run, daemon=True, name=f"test-{fn.__name__}").start()
    return future


def row_for(system: System, tool_call_id: str) -> ApprovalRow | None:
    for row in system.views.approval_history():
        if row.tool_call_id == tool_call_id:
            return row
    return None


def wait_for_row(
    system: System, tool_call_id: str, status: str = "pending", future: Future[Any] | None = None
) -> ApprovalRow:
    """Wait (on the queue's change signal) until the request's row has `status`; return it."""
    changed = threading.Event()
    unsubscribe = system.approvals.subscribe(changed.set)
    deadline = time.monotonic() + WAIT
    try:
        while True:
            # Checked after every change signal, and once before the first: a change between
            # the check and the wait leaves the event set, so no wake-up is lost.
            row = row_for(system, tool_call_id)
            if row is not None and row.status == status:
                return row
            if future is not None and future.done():
                future.result()  # re-raises what the request raised
                raise AssertionError(f"request finished before its approval was {status}: {row}")
            if not changed.wait(max(0.0, deadline - time.monotonic())):
                raise AssertionError(f"approval for {tool_call_id} never became {status}: {row}")
            changed.clear()
    finally:
        unsubscribe()


def start_request(
    system: System, request: ApprovalRequest | None = None, **kwargs: Any
) -> tuple[Future[Any], ApprovalRow]:
    """Start a blocking request in a thread; return its future and its published approval."""
    request = request or make_request()
    future = in_thread(system.approvals.request, request, **kwargs)
    return future, wait_for_row(system, request.tool_call_id, "pending", future)


def types_in(log: EventLog, approval_id: str) -> list[str]:
    return [r.type for r in log.read(f"approval-{approval_id}")]


def decided_events(log: EventLog) -> dict[str, list[Any]]:
    """ApprovalDecided events of the whole log, by approval id."""
    out: dict[str, list[Any]] = {}
    for record in log.read_all():
        if record.type == "ApprovalDecided":
            event = decode(record)
            out.setdefault(record.stream_id, []).append(event)
    return out


class Gate:
    """A hook that signals when it is entered and blocks until released (or a test times out)."""

    def __init__(self, error: Exception | None = None) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[Any] = []
        self.error = error

    def __call__(self, value: Any) -> None:
        self.calls.append(value)
        self.entered.set()
        if not self.release.wait(WAIT):
            raise AssertionError("the gate was never released")
        if self.error is not None:
            raise self.error

    def wait_entered(self) -> Any:
        assert self.entered.wait(WAIT), "the hook was never called"
        return self.calls[-1]
