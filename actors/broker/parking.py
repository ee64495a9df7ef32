"""Long polls waiting on a run's empty queue, to which a push hands its message in one commit.

Without this, a message reaches a waiting poll in two commits: the push records it queued,
the poll wakes and records it delivered. A push the writer decides while a poll is parked
on the run claims that poll and appends both events (ControlQueued, ControlDelivered) in one
commit; once committed, the poll is handed the messages. If the append fails, the claim is
released (the poll is woken with nothing, and takes as usual); a retried push claims again.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable

from .model import ControlMessage


class Parked:
    """One waiting poll of a run; `wake()` is called when a push claims or leaves it.

    As the broker's other non-blocking calls, once `settled(done)` called `done()`, the
    `result()` is what was handed to the poll: the messages delivered to it (none if no
    delivery committed). `token_sha256` is the digest of the token the poll came with: only
    a push decided while that is the run's token hands it messages.
    """

    __slots__ = ("_done", "claimed", "left", "messages", "run_id", "token_sha256", "wake")

    def __init__(self, run_id: str, wake: Callable[[], object], token_sha256: str = "") -> None:
        self.run_id = run_id
        self.token_sha256 = token_sha256
        self.wake = wake
        self.messages: list[ControlMessage] | None = None
        self.claimed = False  # a push is appending a delivery to it
        self.left = False  # the poll no longer waits
        self._done: Callable[[], object] | None = None

    def result(self) -> list[ControlMessage]:
        return self.messages or []


class Parking:
    """The polls parked on each run; thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[str, list[Parked]] = {}

    def park(self, run_id: str, wake: Callable[[], object], token_sha256: str = "") -> Parked:
        parked = Parked(run_id, wake, token_sha256)
        with self._lock:
            self._waiting.setdefault(run_id, []).append(parked)
        return parked

    def leave(self, parked: Parked, done: Callable[[], object]) -> Parked:
        """The poll stops waiting; `done()` once no delivery to it is on its way any more."""
        with self._lock:
            parked.left = True
            waiting = self._waiting.get(parked.run_id)
            if waiting is not None and parked in waiting:
                waiting.remove(parked)
                if not waiting:
                    del self._waiting[parked.run_id]
            pending = parked.claimed and parked.messages is None
            if pending:
                parked._done = done
        if not pending:
            done()
        return parked

    def claim(self, run_id: str, token_sha256: str) -> Parked | None:
        """A poll parked on the run with this token digest that no push claimed yet, now claimed; or None.

        A poll that came with another token (one revoked or re-keyed since it parked) is never
        handed anything: woken, it shows its token again and is refused.
        """
        if not token_sha256:
            return None  # a revoked run: no token is its token
        with self._lock:
            for parked in self._waiting.get(run_id, ()):
                same = hmac.compare_digest(parked.token_sha256, token_sha256)
                if same and not parked.claimed and not parked.left:
                    parked.claimed = True
                    return parked
        return None

    def deliver(self, parked: Parked, messages: list[ControlMessage]) -> None:
        """The claiming push committed: the poll gets `messages`."""
        self._settle(parked, messages)

    def release(self, parked: Parked) -> None:
        """The claiming push did not commit its delivery: the poll may be claimed again."""
        self._settle(parked, None)

    def _settle(self, parked: Parked, messages: list[ControlMessage] | None) -> None:
        with self._lock:
            if messages is None:
                parked.claimed = False
            else:
                parked.messages = messages
            done, parked._done = parked._done, None
        parked.wake()
        if done is not None:
            done()

    def __len__(self) -> int:
        return sum(map(len, self._waiting.values()))
