"""Signal: a coalescing, payload-free change notification (the seed's buffered channel of one)."""

from __future__ import annotations

import threading


class Signal:
    """Many `notify()` calls coalesce into one pending signal; `wait()` consumes it."""

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._pending = False
        self._closed = False

    def notify(self) -> None:
        with self._cond:
            if not self._closed:
                self._pending = True
                self._cond.notify_all()

    def wait(self, timeout: float | None = None) -> bool:
        """Consume the pending signal, waiting up to `timeout`; False on timeout or when closed."""
        with self._cond:
            if not self._pending and not self._closed:
                self._cond.wait(timeout)
            fired = self._pending
            self._pending = False
            return fired

    def pending(self) -> bool:
        with self._cond:
            return self._pending

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._pending = False
            self._cond.notify_all()

    @property
    def closed(self) -> bool:
        return self._closed
