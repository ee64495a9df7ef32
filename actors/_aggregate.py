"""The generic aggregate shell: a pykka actor around a pure decider.

An aggregate is three pure functions over one stream: `initial(id)`, `decide(state,
command, now) -> Decision` and `evolve(state, event) -> state`. The actor folds its stream on
start; for each command it decides, appends with `expect=` the version it folded, evolves
and replies. When another process appended first, the append raises ConcurrencyError: the
actor folds the new events and decides again, so every decision is made on the latest state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import pykka

from eventlog import NO_STREAM, Clock, ConcurrencyError, Event, EventLog, Record, decode, encode

from ._errors import ContentionError

S = TypeVar("S")

# Retries after a ConcurrencyError before giving up: each retry means another writer won a
# race on this very stream, so a handful is already extreme contention.
MAX_ATTEMPTS = 16


@dataclass(frozen=True, slots=True)
class Decision:
    """A decider's answer: events to record, then an error for the caller (if any)."""

    events: Sequence[Event] = ()
    error: Exception | None = None


class Aggregate(Protocol[S]):
    """The pure part of an aggregate."""

    category: str

    def initial(self, id: str) -> S: ...

    def decide(self, state: S, command: Any, now: datetime) -> Decision: ...

    def evolve(self, state: S, event: Event) -> S: ...


@dataclass(frozen=True, slots=True)
class Execute:
    """Message: decide `command`, record its events, reply with (state, records)."""

    command: Any
    meta: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Refresh:
    """Message: fold whatever other writers appended to the stream."""


@dataclass(frozen=True, slots=True)
class GetState:
    """Message: reply with the current state."""


@dataclass(frozen=True, slots=True)
class Passivate:
    """Message: stop if idle and reply whether it did; later messages go to a fresh actor."""


class AggregateActor(pykka.ThreadingActor, Generic[S]):
    """The thin shell: one actor per stream, replying only after the append committed."""

    def __init__(self, log: EventLog, clock: Clock, aggregate: Aggregate[S], id: str) -> None:
        super().__init__()
        self.log = log
        self.clock = clock
        self.aggregate = aggregate
        self.id = id
        self.stream = f"{aggregate.category}-{id}"
        self.state: S = aggregate.initial(id)
        self.version = 0
        self.last_appended: list[Record] = []  # what the last command recorded, even if it raised
        self.stopping = False

    def on_start(self) -> None:
        self.refresh()

    def refresh(self) -> list[Record]:
        """Fold the records appended after our version; return them."""
        records = list(self.log.read(self.stream, from_version=self.version + 1))
        for record in records:
            self.state = self.aggregate.evolve(self.state, decode(record))
            self.version = record.version
        if records:
            self.on_changed(records)
        return records

    def execute(self, command: Any, meta: dict[str, Any] | None = None) -> tuple[S, list[Record]]:
        self.last_appended = []
        for _ in range(MAX_ATTEMPTS):
            decision = self.aggregate.decide(self.state, command, self.clock.now())
            if not decision.events:
                if decision.error is not None:
                    raise decision.error
                return self.state, []
            new = [encode(e, meta=meta) for e in decision.events]
            try:
                records = self.log.append(self.stream, new, expect=self.version or NO_STREAM)
            except ConcurrencyError:
                self.refresh()
                continue
            self.last_appended = records
            for event, record in zip(decision.events, records, strict=True):
                self.state = self.aggregate.evolve(self.state, event)
                self.version = record.version
            self.on_changed(records)
            if decision.error is not None:
                raise decision.error
            return self.state, records
        raise ContentionError(self.stream, MAX_ATTEMPTS)

    def on_changed(self, records: list[Record]) -> None:
        """Hook for subclasses: the state just moved past `records`."""

    def is_idle(self) -> bool:
        """Whether nothing in this process needs the actor to stay up (subclasses refine)."""
        return True

    def on_receive(self, message: Any) -> Any:
        if self.stopping:
            # Passivated: the directory already forgot us, so the caller retries on a fresh
            # actor that refolds the stream. Nothing may be handled here any more.
            raise pykka.ActorDeadError(f"{self.stream} was passivated")
        if isinstance(message, Passivate):
            if self.is_idle():
                self.stopping = True
                self.stop()
            return self.stopping
        if isinstance(message, Execute):
            return self.execute(message.command, message.meta)
        if isinstance(message, Refresh):
            return self.refresh()
        if isinstance(message, GetState):
            return self.state
        return self.handle(message)

    def handle(self, message: Any) -> Any:
        """Hook for subclasses: messages other than Execute, Refresh and GetState."""
        raise TypeError(f"{type(self).__name__} does not understand {type(message).__name__}")
