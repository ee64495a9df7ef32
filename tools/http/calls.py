"""Blocking broker calls from the event loop: the thread pool, a run actor's answer, a long wait.

The broker's refusals raised inside become HTTP errors (`WireError`) here, for every wire
handler alike.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from starlette.concurrency import run_in_threadpool

from actors import (
    BrokerError,
    ContentionError,
    ControlQueueFullError,
    OperatorOnlyError,
    PermissionConflictError,
    PermissionNotFoundError,
    RunAlreadyRegisteredError,
    RunNotEnrolledError,
    RunNotFoundError,
    TooLargeError,
    TooManyError,
)

from .wire import WireError

# The answer to /register of a run nobody created, on a server taking enrolled runs only.
NOT_ENROLLED = (
    "forbidden: this server takes enrolled runs only: an operator or an enrolment credential "
    "must create the run (POST /api/v1/runs, or flightlog runs create) and give its agent the token"
)

T = TypeVar("T")


async def call(
    fn: Callable[..., T], *args: Any, missing: tuple[int, str | None] = (404, "run not found")
) -> T:
    """Run a blocking broker call in the thread pool, its refusals turned into HTTP errors.

    `missing` is the answer to RunNotFoundError: a status and a message (None: the error's
    own text, `run not found: <id>`).
    """
    with refusals(missing):
        return await run_in_threadpool(fn, *args)


@contextlib.contextmanager
def refusals(missing: tuple[int, str | None] = (404, "run not found")) -> Iterator[None]:
    """The broker's refusals raised inside, turned into HTTP errors (`missing` as in `call`)."""
    try:
        yield
    except _REFUSALS as e:
        e.__traceback__ = None  # (as in `answer`: no cycle through the frames that raised it)
        raise refusal(e, missing) from None


def refusal(e: Exception, missing: tuple[int, str | None] = (404, "run not found")) -> WireError:
    """The HTTP error a broker refusal `e` (one of _REFUSALS) is answered with."""
    if isinstance(e, RunNotFoundError):
        status, message = missing
        return WireError(status, message if message is not None else str(e))
    if isinstance(e, RunNotEnrolledError):
        return WireError(403, NOT_ENROLLED)
    if isinstance(e, OperatorOnlyError):
        return WireError(403, str(e), as_json=True)
    if isinstance(e, RunAlreadyRegisteredError | PermissionConflictError):
        return WireError(409, str(e))
    if isinstance(e, PermissionNotFoundError):
        return WireError(404, str(e))
    if isinstance(e, ControlQueueFullError):
        return WireError(429, str(e))
    if isinstance(e, TooLargeError):
        return WireError(413, str(e))
    if isinstance(e, TooManyError):
        wait = e.retry_after
        return WireError(429, str(e), {"Retry-After": str(int(wait))} if wait is not None else None)
    if isinstance(e, ContentionError):
        return WireError(503, "busy: try again")
    return WireError(400, str(e))


_REFUSALS = (RunNotFoundError, OperatorOnlyError, RunAlreadyRegisteredError, ControlQueueFullError,
             ContentionError, BrokerError, ValueError)  # fmt: skip


class Answerable(Protocol):
    """What the broker's non-blocking calls return (`actors.Broker.call_as_run` and the like)."""

    def result(self) -> Any: ...


async def answer(start: Callable[[Callable[[], object]], Answerable]) -> Any:
    """The result of a non-blocking broker call that `start(done)` begins, awaited without a thread.

    Its refusals are turned into HTTP errors as `call` turns them. A call answered inside
    `start` (on the loop's thread: a poll's take on a known empty queue, its leave) is not
    waited for at all: no future, and the answer does not wait behind every other ready callback.
    """
    loop = asyncio.get_running_loop()
    waiting = _Answer(inbox_of(loop))
    # As `refusals()` twice, without a context manager per request: this is every hot write.
    try:
        run_call = start(waiting.done)
    except _REFUSALS as e:
        raise refusal(e) from None
    if not waiting.settled:
        future = waiting.future = loop.create_future()
        await future
    try:
        return run_call.result()
    except _REFUSALS as e:
        # The call keeps its error, whose traceback holds the frame that holds the call: a cycle
        # only the collector would free, and with it the request's body (a megabyte, refused).
        e.__traceback__ = None
        raise refusal(e) from None


class _Answer:
    """The `done` of one non-blocking call: it settles the waiter on the loop's thread."""

    __slots__ = ("future", "inbox", "settled", "thread")

    def __init__(self, inbox: _Inbox) -> None:
        self.inbox = inbox
        self.thread = threading.get_ident()
        self.settled = False
        self.future: asyncio.Future[None] | None = None

    def done(self) -> None:
        if threading.get_ident() == self.thread:
            self.settle()  # inside the call, or a delivery settled on the loop's thread
        else:
            self.inbox.post(self.settle)  # from the broker's writer thread

    def settle(self) -> None:
        self.settled = True
        future = self.future
        # A waiter cancelled meanwhile (its client gone) has nothing left to settle.
        if future is not None and not future.done():
            future.set_result(None)


def inbox_of(loop: asyncio.AbstractEventLoop) -> _Inbox:
    """The loop's inbox: callbacks posted from other threads, run on the loop in batches."""
    global _last
    last = _last
    if last is not None and last[0]() is loop:
        return last[1]  # (a server has one loop: no weak reference made per lookup)
    inbox = _inboxes.get(loop)
    if inbox is None:
        inbox = _inboxes[loop] = _Inbox(loop)
    _last = (weakref.ref(loop), inbox)
    return inbox


class _Inbox:
    """Callbacks of one loop posted from other threads: one wake-up of the loop per batch of them.

    The writer answers many calls after each commit; waking the loop for each (a byte down
    its self-pipe, a syscall) would cost more than running them all in one turn.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = weakref.ref(loop)  # weakly: the inbox is the loop's entry in _inboxes
        self._lock = threading.Lock()
        self._waiting: list[Callable[[], object]] = []

    def post(self, callback: Callable[[], object]) -> None:
        """Run `callback()` on the loop soon (from any thread); dropped if the loop is closed."""
        with self._lock:
            self._waiting.append(callback)
            if len(self._waiting) > 1:
                return  # a wake-up is on its way, and takes this one too
        loop = self._loop()
        if loop is not None:
            try:
                loop.call_soon_threadsafe(self._settle)
            except RuntimeError:  # closed meanwhile
                loop = None
        if loop is None:  # the loop is closed or gone: nobody waits any more, nothing is kept
            with self._lock:
                self._waiting.clear()

    def _settle(self) -> None:
        with self._lock:
            waiting, self._waiting = self._waiting, []
        for callback in waiting:
            callback()


_inboxes: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Inbox] = weakref.WeakKeyDictionary()
_last: tuple[weakref.ref[asyncio.AbstractEventLoop], _Inbox] | None = None  # the loop asked for last
