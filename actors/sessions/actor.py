"""The session aggregate's shell: one actor per `session-<id>` stream."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from eventlog import Clock, Event, EventLog, Record

from .._aggregate import AggregateActor, Decision, Execute
from .decider import Archive, Ensure, SessionCommand, SessionState, decide, evolve


class SessionAggregate:
    category = "session"

    def initial(self, id: str) -> SessionState:
        return SessionState(id)

    def decide(self, state: SessionState, command: SessionCommand, now: datetime) -> Decision:
        return decide(state, command, now)

    def evolve(self, state: SessionState, event: Event) -> SessionState:
        return evolve(state, event)


SESSIONS = SessionAggregate()


class SessionActor(AggregateActor[SessionState]):
    # Most sessions are created under a fresh id: deciding on the initial state saves reading an
    # empty stream, and an append to a stream that exists after all refolds and decides again.
    lazy_start = True

    def __init__(self, log: EventLog, clock: Clock, id: str) -> None:
        super().__init__(log, clock, SESSIONS, id)

    def creates(self, message: Any) -> bool:
        return isinstance(message, Execute)

    def execute(self, command: Any, meta: dict[str, Any] | None = None) -> tuple[SessionState, list[Record]]:
        # A resolution or an archival may record nothing, so it is decided on the latest state:
        # a cache behind another process would otherwise resume an archived session, or miss
        # one created meanwhile. Turn commands append, and a stale cache turns into a conflict.
        if self.loaded and isinstance(command, Ensure | Archive):
            self.refresh()
        return super().execute(command, meta)
