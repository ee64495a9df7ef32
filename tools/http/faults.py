"""Storage faults as HTTP answers: 503 with the cause and Retry-After, one log line per incident.

A request that meets a StorageError (disk full, a read-only file, corruption, a lost
database connection), raised directly or as the cause of an actor's error, is answered
`503 {"error": "<cause>"}` with `Retry-After`; nothing reaches uvicorn, so no traceback.
Reads that still work keep being answered. The first fault of an incident is logged once;
the next line comes when a write goes through again (the log's head moved past where it was
when the incident began) or when the fault changes.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from eventlog import (
    CorruptDatabaseError,
    DiskFullError,
    EventLog,
    ReadOnlyDatabaseError,
    StorageError,
)

from .._output import storage_fault
from .wire import WireError, json_error

RETRY_AFTER = 5  # seconds a client is told to wait before trying again

logger = logging.getLogger("flightlog.storage")


def fault_message(fault: StorageError) -> str:
    """What a client is told: the kind of fault, never the path or the driver's text."""
    if isinstance(fault, DiskFullError):
        return "disk full: nothing was written"
    if isinstance(fault, ReadOnlyDatabaseError):
        return "database is read-only: nothing was written"
    if isinstance(fault, CorruptDatabaseError):
        return "database is corrupt"
    if "connection lost" in fault.cause or "cannot connect" in fault.cause:
        return "database unreachable"
    return "storage error"


class Incidents:
    """The storage incident in progress, if any: logs its start and its end once each.

    Thread-safe; `report` is where the lines go (the `flightlog.storage` logger by default).
    """

    def __init__(self, log: EventLog, report: Callable[[str], object] | None = None) -> None:
        self._log = log
        self._report = report or logger.warning
        self._lock = threading.Lock()
        self._current: str | None = None  # the message of the incident in progress
        self._since_seq = -1  # the head when it began (-1: unreadable then)

    @property
    def current(self) -> str | None:
        return self._current

    def fault(self, fault: StorageError) -> None:
        """Note a fault: logged if it starts an incident or differs from the one in progress."""
        message = fault_message(fault)
        with self._lock:
            if self._current == message:
                return
            self._current = message
        try:
            since = self._log.head().seq
        except StorageError:
            since = -1
        with self._lock:
            if self._current == message:
                self._since_seq = since
        self._report(f"flightlog: storage fault: {message} ({fault}); answering 503 until a write succeeds")

    def succeeded(self) -> None:
        """After a request served without a fault: end the incident if a write got through since."""
        with self._lock:
            current, since = self._current, self._since_seq
        if current is None:
            return
        try:
            head = self._log.head().seq
        except StorageError:
            return
        if head <= since:
            return
        with self._lock:
            if self._current != current:
                return
            self._current = None
        self._report(f"flightlog: storage fault cleared ({current}): writes succeed again")


class StorageFaults:
    """ASGI middleware: storage faults raised by the app become 503 answers (see the module)."""

    def __init__(self, app: ASGIApp, incidents: Incidents) -> None:
        self.app = app
        self.incidents = incidents

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status: list[int] = []

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                status.append(int(message["status"]))
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as e:
            fault = storage_fault(e)
            if fault is None:
                raise
            await run_in_threadpool(self.incidents.fault, fault)
            if status:  # a stream was under way: it ends here, nothing more can be said
                return
            error = WireError(503, fault_message(fault), {"Retry-After": str(RETRY_AFTER)})
            await json_error(error)(scope, receive, send)
            return
        if status and status[0] < 400 and self.incidents.current is not None:
            await run_in_threadpool(self.incidents.succeeded)
