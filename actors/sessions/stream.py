"""EventStream: the live events of a session's turns, as an iterator that ends with the turn."""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator

from ..harnesses import SESSION_ERROR, HarnessEvent

_END = object()


class EventStream:
    """A queue of harness events read as an iterator (the seed's `<-chan Event`).

    A turn's stream ends when the turn does; a subscription's when it is unsubscribed or
    the service closes. Writers never block: the queue is unbounded, so a slow reader cannot
    stall a turn. `timeout` bounds each wait for the next event (TimeoutError), None waits
    as long as it takes. `error` is the exception behind a stream that carries only an error.
    """

    def __init__(self, session_id: str = "", turn_id: str = "", *, timeout: float | None = None) -> None:
        self.session_id = session_id
        self.turn_id = turn_id
        self.timeout = timeout
        self.error: Exception | None = None
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()
        self._ended = threading.Event()
        self._drained = False

    @classmethod
    def failed(cls, error: Exception, prefix: str, session_id: str = "") -> EventStream:
        """A stream holding one `session.error` event for `error`, already ended."""
        stream = cls(session_id)
        stream.error = error
        stream.put(error_event(f"{prefix}: {error}"))
        stream.end()
        return stream

    def put(self, event: HarnessEvent) -> None:
        if not self._ended.is_set():
            self._queue.put(event)

    def end(self) -> None:
        """No more events: a reader gets the ones queued, then the iteration stops."""
        if not self._ended.is_set():
            self._ended.set()
            self._queue.put(_END)

    @property
    def ended(self) -> bool:
        return self._ended.is_set()

    def __iter__(self) -> Iterator[HarnessEvent]:
        return self

    def __next__(self) -> HarnessEvent:
        if self._drained:
            raise StopIteration
        try:
            item = self._queue.get(timeout=self.timeout)
        except queue.Empty:
            raise TimeoutError(f"no event within {self.timeout} s") from None
        if item is _END:
            self._drained = True
            raise StopIteration
        assert isinstance(item, HarnessEvent)
        return item

    def collect(self, timeout: float | None = None) -> list[HarnessEvent]:
        """Every event until the stream ends, each waited for up to `timeout` (or `self.timeout`)."""
        saved = self.timeout
        if timeout is not None:
            self.timeout = timeout
        try:
            return list(self)
        finally:
            self.timeout = saved


def error_event(message: str, run_id: str = "") -> HarnessEvent:
    """The `session.error` event a failure arrives as on a stream."""
    return HarnessEvent(SESSION_ERROR, run_id, "", {"message": message})
