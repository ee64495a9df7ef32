"""The directory: starts aggregate actors on demand and stops idle ones (passivation)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pykka

from eventlog import Clock, SystemClock

from ._aggregate import Passivate

# How long one ask may take before the caller hears about it; an actor that takes longer
# is stuck (an append cannot take minutes), so failing loudly beats hanging forever.
ASK_TIMEOUT = 120.0
# Entries of actors that stopped by themselves (an approval once decided) are dropped when
# the directory holds twice as many as the last time it looked, and at least this many: a
# stopped actor's ref (its inbox, its locks) is not kept for the idle period.
PRUNE_FROM = 64


class Directory:
    """Actors by id, started on first use; a log with a million streams keeps only the live ones.

    Each use (`ref`, `ask`) notes the time on `clock`. `passivate(idle_since)` stops every
    actor unused since then that says it is idle (all of them without `idle_since`); the
    next use starts it again, and it refolds its stream: the log is the state, the actor a
    cache. The stop requests are made outside the directory's lock, so a sweep of many
    actors never holds up a request for another.
    """

    def __init__(self, start: Callable[[str], pykka.ActorRef[Any]], clock: Clock | None = None) -> None:
        self._start = start
        self._clock: Clock = clock or SystemClock()
        self._refs: dict[str, pykka.ActorRef[Any]] = {}
        self._used: dict[str, datetime] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._prune_at = PRUNE_FROM

    def ref(self, id: str) -> pykka.ActorRef[Any]:
        now = self._clock.now()
        with self._lock:
            if self._closed:
                raise RuntimeError("the directory is closed")
            ref = self._refs.get(id)
            if ref is None or not ref.is_alive():
                ref = self._start(id)
                self._refs[id] = ref
                if len(self._refs) >= self._prune_at:
                    self._drop_stopped()
            self._used[id] = now
            return ref

    def _drop_stopped(self) -> None:
        """Forget every actor that has stopped (under the lock); amortised over the starts."""
        for id in [id for id, ref in self._refs.items() if not ref.is_alive()]:
            del self._refs[id]
            self._used.pop(id, None)
        self._prune_at = max(PRUNE_FROM, 2 * len(self._refs))

    def peek(self, id: str) -> pykka.ActorRef[Any] | None:
        """The running actor for `id`, or None; starts nothing and does not count as a use."""
        with self._lock:
            ref = self._refs.get(id)
            return ref if ref is not None and ref.is_alive() else None

    def forget(self, id: str, ref: pykka.ActorRef[Any]) -> None:
        """Drop `ref` (an actor that refused a message: it is stopping) unless `id` moved on."""
        with self._lock:
            if self._refs.get(id) is ref:
                del self._refs[id]
                self._used.pop(id, None)

    def ask(self, id: str, message: object) -> Any:
        """Ask the actor for `id`, starting it if needed (and again if it was just passivated)."""
        for _ in range(3):
            ref = self.ref(id)
            try:
                return ref.ask(message, timeout=ASK_TIMEOUT)
            except pykka.ActorDeadError:
                self.forget(id, ref)
        return self.ref(id).ask(message, timeout=ASK_TIMEOUT)

    def tell_if_running(self, id: str, message: object) -> None:
        ref = self.peek(id)
        if ref is not None:
            try:
                ref.tell(message)
            except pykka.ActorDeadError:
                return  # passivated meanwhile: it refolds from the log when next started

    def __len__(self) -> int:
        with self._lock:
            return len(self._refs)

    def ids(self) -> list[str]:
        with self._lock:
            return list(self._refs)

    def passivate(self, idle_since: datetime | None = None) -> int:
        """Stop every idle actor (unused since `idle_since`, if given); return how many stopped."""
        with self._lock:
            candidates = [
                (id, ref)
                for id, ref in self._refs.items()
                if idle_since is None or self._used.get(id, idle_since) <= idle_since
            ]
        asked: list[tuple[str, pykka.ActorRef[Any], pykka.Future[Any] | None]] = []
        for id, ref in candidates:
            try:
                asked.append((id, ref, ref.ask(Passivate(), block=False)))
            except pykka.ActorDeadError:
                asked.append((id, ref, None))
        stopped = 0
        for id, ref, future in asked:
            try:
                gone = True if future is None else future.get(timeout=ASK_TIMEOUT)
            except pykka.ActorDeadError:
                gone = True
            if gone:
                self.forget(id, ref)
                stopped += 1
        return stopped

    def close(self) -> None:
        with self._lock:
            self._closed = True
            refs, self._refs = list(self._refs.values()), {}
            self._used.clear()
        for ref in refs:
            try:
                ref.stop(timeout=ASK_TIMEOUT)
            except pykka.ActorDeadError:
                continue
