"""A message to a run's actor answered by a callback instead of a waiting thread.

The HTTP server records a run's reports, finishes, replies and heartbeats this way: the
token check and the write are one message to the run's actor, and the answer wakes the
server's event loop directly, so no thread waits for it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pykka

from .._directory import Directory

# A passivated actor refuses messages; a write is tried this many times on fresh ones.
ATTEMPTS = 4


@dataclass(frozen=True, slots=True)
class AsRun:
    """Message: handle `message` if `token_sha256` is the run's token digest.

    The reply is `(True, the reply to message)`, or `(False, None)` when the token is not
    the run's or the run does not exist.
    """

    token_sha256: str
    message: Any


class NotifyingFuture(pykka.ThreadingFuture[Any]):
    """A pykka future that also calls back, once, when it gets its value or its error."""

    def __init__(self) -> None:
        super().__init__()
        self._guard = threading.Lock()
        self._callbacks: list[Callable[[], object]] | None = []

    def set(self, value: Any | None = None) -> None:
        super().set(value)
        self._fire()

    def set_exception(self, exc_info: Any = None) -> None:
        super().set_exception(exc_info)
        self._fire()

    def when_done(self, fn: Callable[[], object]) -> None:
        """Call `fn()` once the future is set: now if it already is, else from the setter's thread."""
        with self._guard:
            if self._callbacks is not None:
                self._callbacks.append(fn)
                return
        fn()

    def _fire(self) -> None:
        with self._guard:
            callbacks, self._callbacks = self._callbacks or [], None
        for fn in callbacks:
            fn()


class RunCall:
    """One message on its way to a run's actor; `done()` is called once it is answered.

    `done` runs exactly once, on the thread that answers (the actor's), or on the caller's
    when there is nothing to send (`message` None: the answer is `value`). `result()` then
    gives the actor's reply, or raises its error as a blocking ask would.
    """

    def __init__(
        self,
        directory: Directory,
        run_id: str,
        message: object | None,
        done: Callable[[], object],
        value: Any = None,
    ) -> None:
        self._dir = directory
        self._run_id = run_id
        self._message = message
        self._done = done
        self._value = value
        self._attempts = 0
        self._ref: pykka.ActorRef[Any] | None = None
        self._future: NotifyingFuture | None = None
        if message is None:
            done()
        else:
            self._send()

    def _send(self) -> None:
        self._attempts += 1
        try:
            self._ref = self._dir.ref(self._run_id)
            future = self._ref.ask(self._message, block=False)
        except Exception as e:  # noqa: BLE001 - the caller hears it from result()
            future = NotifyingFuture()
            future.set_exception((type(e), e, e.__traceback__))
        assert isinstance(future, NotifyingFuture), "run actors create NotifyingFutures"
        self._future = future
        future.when_done(self._answered)

    def _answered(self) -> None:
        assert self._future is not None
        if self._attempts < ATTEMPTS:
            try:
                self._future.get(timeout=0)
            except pykka.ActorDeadError:
                # Passivated meanwhile: a fresh actor refolds the stream.
                if self._ref is not None:
                    self._dir.forget(self._run_id, self._ref)
                self._send()
                return
            except Exception:  # noqa: BLE001, S110 - result() raises it
                pass
        self._done()

    def result(self) -> Any:
        """The actor's reply; call it once `done` was called."""
        if self._future is None:
            return self._value
        return self._future.get(timeout=0)
