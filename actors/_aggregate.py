"""The generic aggregate shell: a pykka actor around a pure decider.

An aggregate is three pure functions over one stream: `initial(id)`, `decide(state,
command, now) -> Decision` and `evolve(state, event) -> state`. The actor folds its stream on
start; for each command it decides, appends with `expect=` the version it folded, evolves
and replies. When another process appended first, the append raises ConcurrencyError: the
actor folds the new events and decides again, so every decision is made on the latest state.

A record of the stream that does not fit the event catalogue (or that `evolve` fails on) is
skipped: the state stays as it was, the version moves past it, and it is noted (and logged
once) in UNREADABLE. An actor never dies folding its stream.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Generic, Protocol, TypeVar

import pykka

from eventlog import (
    NO_STREAM,
    RECORD_ERRORS,
    Clock,
    ConcurrencyError,
    Event,
    EventLog,
    Record,
    Unreadable,
    decode,
    encode,
    fit_record,
)

from ._errors import ContentionError

S = TypeVar("S")

# Retries after a ConcurrencyError before giving up: each retry means another writer won a
# race on this very stream, so a handful is already extreme contention.
MAX_ATTEMPTS = 16
# The records the actors of this process skipped while folding their streams, each logged once.
UNREADABLE = Unreadable(logged=True)


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
    """Message: fold whatever other writers appended to the stream.

    `version` is that of the record that prompted it, when known: an actor already at or past
    it (its own append, or an earlier refresh) has nothing to read.
    """

    version: int = 0


@dataclass(frozen=True, slots=True)
class GetState:
    """Message: reply with the current state."""


@dataclass(frozen=True, slots=True)
class Passivate:
    """Message: stop if idle and reply whether it did; later messages go to a fresh actor."""


class AggregateActor(pykka.ThreadingActor, Generic[S]):
    """The thin shell: one actor per stream, replying only after the append committed.

    With `lazy_start`, the stream is folded on the first message rather than at start, and a
    message for which `creates()` holds is decided on the initial state without reading at
    all: its events are appended with NO_STREAM, so a stream that exists after all turns into
    a ConcurrencyError, a fold, and a decision on the real state.
    """

    lazy_start = False

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
        self.loaded = False  # whether the stream was folded (or created by us)

    def on_start(self) -> None:
        if not self.lazy_start:
            self.refresh()

    def creates(self, message: Any) -> bool:
        """Whether `message` may be decided on a stream not folded yet (see `lazy_start`)."""
        return False

    def refresh(self) -> list[Record]:
        """Fold the records appended after our version; return them."""
        records = list(self.log.read(self.stream, from_version=self.version + 1))
        self.loaded = True
        for record in records:
            self.state = folded(self.state, record, self.aggregate.evolve)
            self.version = record.version
        if records:
            self.on_changed(records)
        return records

    def execute(self, command: Any, meta: dict[str, Any] | None = None) -> tuple[S, list[Record]]:
        self.last_appended = []
        for _ in range(MAX_ATTEMPTS):
            decision = self.aggregate.decide(self.state, command, self.clock.now())
            if not decision.events and not self.loaded:
                self.refresh()  # nothing to record on the initial state: decide on the log's
                continue
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
            self.loaded = True
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
        if isinstance(message, Refresh):
            if self.loaded and 0 < message.version <= self.version:
                return []
            return self.refresh()
        if not self.loaded and not self.creates(message):
            self.refresh()
        if isinstance(message, Execute):
            return self.execute(message.command, message.meta)
        if isinstance(message, GetState):
            return self.state
        return self.handle(message)

    def handle(self, message: Any) -> Any:
        """Hook for subclasses: messages other than Execute, Refresh and GetState."""
        raise TypeError(f"{type(self).__name__} does not understand {type(message).__name__}")


def folded(state: S, record: Record, evolve: Callable[[S, Event], S]) -> S:
    """`evolve(state, the event in record)`, or `state` as it was if the record cannot be read
    (it does not fit the catalogue, or evolving fails on it): then it is noted in UNREADABLE."""
    try:
        return evolve(state, decode(fit_record(record)))
    except RECORD_ERRORS as e:
        UNREADABLE.note(record, e)
        return state
