"""Who in this process waits for a run's control messages: callbacks by run, and the wake-up.

A callback is called on the thread that saw the change: the run writer's, right after its
commit, or the log follower's. So it only wakes someone (sets an event, posts to a loop); a
failure of its own, such as a write it attempts there (the writer's thread cannot wait for a
write), is logged as the callback's and reaches neither the commit's callers, whose records
are in, nor the follower, which goes on following.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

logger = logging.getLogger("flightlog.broker")


class RunListeners:
    """Callbacks to call when a message is queued for a run (or its token changes). Thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._listeners: dict[str, set[Callable[[], object]]] = {}

    def on_control(self, run_id: str, fn: Callable[[], object]) -> Callable[[], None]:
        """Call `fn()` whenever a control message is queued for the run; returns unsubscribe.

        A run with such a listener (a long poll waiting) keeps its actor: it is not passivated.
        `fn` runs on the writer's or the follower's thread (see the module): it must not write.
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
        """Call every listener of the run (outside the lock); one that fails is logged, and the
        others are called all the same."""
        with self._lock:
            fns = list(self._listeners.get(run_id, ()))
        for fn in fns:
            try:
                fn()
            except Exception:  # the listener's own failure: never the writer's nor the follower's
                logger.exception("a listener of run %s failed (it must only wake, never write)", run_id)
