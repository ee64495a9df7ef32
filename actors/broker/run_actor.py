"""The broker's run actor: a run's folded state, kept while the run is in use.

Every command on a run goes through the writer (`writer.RunWriter`); the actor answers reads
(`GetState`) and folds what other processes wrote (`Refresh`, from the follower). It shares
its run's latest state with the writer (`known.KnownRuns`): it publishes every state it
reaches, and adopts a later one the writer published instead of reading the log for it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventlog import Clock, EventLog, Record

from .._aggregate import AggregateActor
from .known import KnownRuns
from .run_decider import (
    RUNS,
    TOKEN_CHANGES,
    RunState,
)


class RunActor(AggregateActor[RunState]):
    """A run's actor; `known` holds the state it reached, for the writer and the follower to read.

    `waited_on(id)` says whether something in this process waits for the run (a long poll):
    such an actor is not idle, so passivation spares it.
    """

    def __init__(
        self,
        log: EventLog,
        clock: Clock,
        id: str,
        on_queued: Callable[[str], object],
        known: KnownRuns,
        on_asked: Callable[[str], object] | None = None,
        waited_on: Callable[[str], bool] = lambda id: False,
    ) -> None:
        super().__init__(log, clock, RUNS, id)
        self._on_queued = on_queued
        self._on_asked = on_asked
        self._known = known
        self._waited_on = waited_on

    def on_start(self) -> None:
        self._adopt()
        super().on_start()  # folds whatever the known state has not seen

    def on_receive(self, message: Any) -> Any:
        self._adopt()
        return super().on_receive(message)

    def _adopt(self) -> None:
        """Take the writer's later state of the run, if it published one (no read needed)."""
        known = self._known.get(self.id)
        if known is not None and known.fresh and known.version > self.version:
            self.state, self.version, self.loaded = known.state, known.version, True

    def on_changed(self, records: list[Record]) -> None:
        self._known.publish(self.id, self.state, self.version)
        # A waiting poll takes what was queued, or shows its token again after it changed.
        if any(r.type == "ControlQueued" or r.type in TOKEN_CHANGES for r in records):
            self._on_queued(self.id)
        if self._on_asked is not None and any(r.type.startswith("Ask") for r in records):
            self._on_asked(self.id)

    def is_idle(self) -> bool:
        return not self._waited_on(self.id)  # a long poll waiting keeps the actor
