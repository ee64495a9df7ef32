"""The directory: starts aggregate actors on demand and stops idle ones (passivation)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pykka

from ._aggregate import Passivate

# How long one ask may take before the caller hears about it; an actor that takes longer
# is stuck (an append cannot take minutes), so failing loudly beats hanging forever.
ASK_TIMEOUT = 120.0


class Directory:
    """Actors by id, started on first use; a log with a million streams keeps only the live ones.

    `passivate()` stops every actor that says it is idle; the next use
    starts it again, and it refolds its stream: the log is the state, the actor a cache.
    """

    def __init__(self, start: Callable[[str], pykka.ActorRef[Any]]) -> None:
        self._start = start
        self._refs: dict[str, pykka.ActorRef[Any]] = {}
        self._lock = threading.Lock()
        self._closed = False

    def ref(self, id: str) -> pykka.ActorRef[Any]:
        with self._lock:
            if self._closed:
                raise RuntimeError("the directory is closed")
            ref = self._refs.get(id)
            if ref is None or not ref.is_alive():
                ref = self._start(id)
                self._refs[id] = ref
            return ref

    def peek(self, id: str) -> pykka.ActorRef[Any] | None:
        with self._lock:
            ref = self._refs.get(id)
            return ref if ref is not None and ref.is_alive() else None

    def ask(self, id: str, message: object) -> Any:
        """Ask the actor for `id`, starting it if needed (and again if it was just passivated)."""
        for _ in range(3):
            ref = self.ref(id)
            try:
                return ref.ask(message, timeout=ASK_TIMEOUT)
            except pykka.ActorDeadError:
                continue
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

    def passivate(self) -> int:
        """Stop every idle actor; return how many were stopped."""
        stopped = 0
        with self._lock:
            for id, ref in list(self._refs.items()):
                try:
                    gone = ref.ask(Passivate(), timeout=ASK_TIMEOUT)
                except pykka.ActorDeadError:
                    gone = True
                if gone:
                    del self._refs[id]
                    stopped += 1
        return stopped

    def close(self) -> None:
        with self._lock:
            self._closed = True
            refs, self._refs = list(self._refs.values()), {}
        for ref in refs:
            try:
                ref.stop(timeout=ASK_TIMEOUT)
            except pykka.ActorDeadError:
                continue
