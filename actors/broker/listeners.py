"""Who in this process waits for a run's control messages: callbacks by run, and the wake-up."""

from __future__ import annotations

import threading
from collections.abc import Callable


class RunListeners:
    """Callbacks to call when a message is queued for a run (or its token changes). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, set[Callable[[], object]]] = {}

    def on_control(self, run_id: str, fn: Callable[[], object]) -> Callable[[], None]:
        """Call `fn()` whenever a control message is queued for the run; returns unsubscribe.

        A run with such a listener (a long poll waiting) keeps its actor: it is not passivated.
        """
        with self._lock:
            self._listeners.setdefault(run_id, set()).add(fn)

        def unsubscribe() -> None:
            with self._lock:
                fns = self._listeners.get(run_id)
                if fns is not None:
                    fns.discard(fn)
                    if not fns:
                        del self._listeners[run_id]

        return unsubscribe

    def has_waiters(self, run_id: str) -> bool:
        """Whether anything in this process waits for the run's control messages."""
        return run_id in self._listeners

    def signal(self, run_id: str) -> None:
        """Call every listener of the run (outside the lock)."""
        with self._lock:
            fns = list(self._listeners.get(run_id, ()))
        for fn in fns:
            fn()
