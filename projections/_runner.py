"""The runner: folds records into a set of views, live from a checkpoint or up to any seq."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from eventlog import EventLog, Record

from ._view import View

T = TypeVar("T")


class ViewRunner:
    """Keeps a set of views current from the log; thread-safe.

    `catch_up()` reads everything after the checkpoint, so a view is current with respect to
    every commit that finished before the call, from this process or another. Readers use
    `read(name, fn)`, which runs `fn` on the state under the runner's lock (states are
    folded in place, so they are never handed out unguarded).
    """

    def __init__(self, log: EventLog, views: Sequence[View]) -> None:
        self.log = log
        self.views = {v.name: v for v in views}
        self._dispatch = dispatch_table(views)
        self._states: dict[str, Any] = {v.name: v.initial() for v in views}
        self._checkpoint = 0
        self._lock = threading.RLock()
        self._listeners: list[Callable[[Record], object]] = []

    @property
    def checkpoint(self) -> int:
        return self._checkpoint

    def add_listener(self, fn: Callable[[Record], object]) -> None:
        """Call `fn(record)` for each record the runner folds (under its lock, in seq order)."""
        with self._lock:
            self._listeners.append(fn)

    def catch_up(self) -> int:
        """Fold every record committed after the checkpoint; return the new checkpoint."""
        with self._lock:
            self.feed(self.log.read_all(after_seq=self._checkpoint))
            return self._checkpoint

    def feed(self, records: Iterable[Record]) -> None:
        """Fold records in seq order; records at or before the checkpoint are skipped."""
        with self._lock:
            for record in records:
                if record.seq <= self._checkpoint:
                    continue
                if record.seq != self._checkpoint + 1:
                    # A gap: someone handed us a later record first. Read the missing ones.
                    self.feed(self.log.read_all(after_seq=self._checkpoint, to_seq=record.seq - 1))
                fold_one(self._dispatch, self._states, record)
                self._checkpoint = record.seq
                for fn in self._listeners:
                    fn(record)

    def read(self, name: str, fn: Callable[[Any], T]) -> T:
        """`fn(state)` for the named view, computed under the lock after catching up."""
        with self._lock:
            self.catch_up()
            return fn(self._states[name])

    def fold_until(self, seq: int, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Fresh states of the named views as they were right after `seq`."""
        chosen = [self.views[n] for n in (names if names is not None else self.views)]
        return fold_range(self.log, chosen, seq)


def dispatch_table(views: Sequence[View]) -> dict[str, list[View]]:
    table: dict[str, list[View]] = {}
    for view in views:
        for type_name in view.types:
            table.setdefault(type_name, []).append(view)
    return table


def fold_one(dispatch: dict[str, list[View]], states: dict[str, Any], record: Record) -> None:
    for view in dispatch.get(record.type, ()):
        states[view.name] = view.apply(states[view.name], record)


def fold_range(
    log: EventLog,
    views: Sequence[View],
    to_seq: int,
    after_seq: int = 0,
    states: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Fold records (after_seq, to_seq] into `states` (fresh initial states when None)."""
    states = states if states is not None else {v.name: v.initial() for v in views}
    dispatch = dispatch_table(views)
    for record in log.read_all(after_seq=after_seq, to_seq=to_seq):
        fold_one(dispatch, states, record)
    return states
