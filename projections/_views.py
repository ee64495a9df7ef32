"""Views: the front door to every read model, live or as of any past moment."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from eventlog import Clock, EventLog, SystemClock, from_micros, to_micros

from ._runner import ViewRunner
from ._view import View
from .approvals import (
    ApprovalHistoryView,
    ApprovalRow,
    PendingApprovalsView,
    history_order,
    pending_order,
)
from .projects import Project, ProjectsView, project_order
from .runs import FinishStatus, FinishStatusView, RunRegistryView, RunRow, registry_order
from .sessions import (
    AgentActivityView,
    SessionRow,
    SessionsView,
    SessionTurn,
    last_active,
    session_history,
    session_order,
)
from .timeline import TimelineEntry, TimelineView, render

At = int | datetime | None


def default_views() -> list[View]:
    return [
        PendingApprovalsView(),
        ApprovalHistoryView(),
        RunRegistryView(),
        FinishStatusView(),
        TimelineView(),
        SessionsView(),
        AgentActivityView(),
        ProjectsView(),
    ]


class Views:
    """Every view over one log: current (`at=None`) or as of a seq or an aware datetime.

    Time travel is read-only: it folds the log up to the point asked for and never runs
    anything. `clock` decides which pending approvals are past their deadline right now.
    """

    def __init__(
        self, log: EventLog, *, clock: Clock | None = None, views: Sequence[View] | None = None
    ) -> None:
        self.log = log
        self.clock = clock or log.clock or SystemClock()
        self.runner = ViewRunner(log, views if views is not None else default_views())

    def catch_up(self) -> int:
        return self.runner.catch_up()

    # -- time travel helpers ---------------------------------------------------------------

    def resolve_at(self, at: At) -> int | None:
        """The seq that `at` names: a seq as is, a datetime as the last seq recorded at or before it."""
        if at is None:
            return None
        if isinstance(at, datetime):
            micros = to_micros(at)
            last = 0
            for record in self.log.read_all():
                if record.recorded_us > micros:
                    break
                last = record.seq
            return last
        if isinstance(at, bool) or not isinstance(at, int) or at < 0:
            raise ValueError(f"at must be a seq >= 0 or an aware datetime, got {at!r}")
        return at

    def moment(self, seq: int) -> datetime | None:
        """When the record at `seq` was recorded (None for seq 0 or past the head)."""
        for record in self.log.read_all(after_seq=seq - 1, to_seq=seq):
            return from_micros(record.recorded_us)
        return None

    def _state(self, name: str, at: At) -> tuple[Any, datetime | None]:
        seq = self.resolve_at(at)
        if seq is None:
            return self.runner.read(name, self.runner.views[name].copy), self.clock.now()
        states = self.runner.fold_until(seq, [name])
        return states[name], (self.moment(seq) if seq else None)

    # -- approvals -------------------------------------------------------------------------

    def pending_approvals(self, at: At = None) -> list[ApprovalRow]:
        """Approvals awaiting a decision, oldest first; past-deadline ones are left out."""
        state, now = self._state("pending_approvals", at)
        return pending_order(state, now)

    def open_approvals(self, at: At = None) -> list[ApprovalRow]:
        """Approvals with no outcome yet: still recording, or pending (deadlines not applied)."""
        state, _ = self._state("pending_approvals", at)
        return history_order(state)

    def approval_history(self, at: At = None) -> list[ApprovalRow]:
        """Every approval and its outcome, in request order."""
        state, _ = self._state("approval_history", at)
        return history_order(state)

    def approval(self, approval_id: str, at: At = None) -> ApprovalRow | None:
        state, _ = self._state("approval_history", at)
        row: ApprovalRow | None = state.get(approval_id)
        return row

    # -- runs (the broker's registry) ------------------------------------------------------

    def runs(self, at: At = None) -> list[RunRow]:
        """Registered runs in registration order."""
        state, _ = self._state("run_registry", at)
        return registry_order(state)

    def run(self, run_id: str, at: At = None) -> RunRow | None:
        state, _ = self._state("run_registry", at)
        row: RunRow | None = state.get(run_id)
        return row

    def finish_status(self, run_id: str, at: At = None) -> FinishStatus | None:
        """The run's finish count, last status and summary (None if not registered)."""
        state, _ = self._state("finish_status", at)
        row: FinishStatus | None = state.get(run_id)
        return row

    # -- the operator timeline -------------------------------------------------------------

    def timeline(self, run_id: str, at: At = None) -> list[TimelineEntry]:
        """A controller run's timeline (its session's conversation up to and including it)."""
        seq = self.resolve_at(at)
        if seq is None:
            return self.runner.read("timeline", lambda state: render(state, run_id))
        return render(self.runner.fold_until(seq, ["timeline"])["timeline"], run_id)

    # -- agent sessions and projects -------------------------------------------------------

    def sessions(self, at: At = None) -> list[SessionRow]:
        """Every session (archived ones too), in the order they were created."""
        state, _ = self._state("sessions", at)
        return session_order(state)

    def session(self, session_id: str, at: At = None) -> SessionRow | None:
        if at is None:
            found: SessionRow | None = self.runner.read("sessions", lambda s: s.get(session_id))
            return found
        state, _ = self._state("sessions", at)
        row: SessionRow | None = state.get(session_id)
        return row

    def session_history(self, session_id: str, at: At = None) -> list[SessionTurn]:
        """A session's turns with every recorded event, folded from its own stream (up to `at`)."""
        seq = self.resolve_at(at)
        records = self.log.read(f"session-{session_id}")
        if seq is not None:
            records = itertools.takewhile(lambda r: r.seq <= seq, records)
        return session_history(records)

    def agent_activity(self, user_id: str, at: At = None) -> dict[str, datetime]:
        """Agent id -> when `user_id` last talked to it (agents never talked to are left out)."""
        if at is None:
            return self.runner.read("agent_activity", lambda s: last_active(s, user_id))
        state, _ = self._state("agent_activity", at)
        return last_active(state, user_id)

    def projects(self, at: At = None) -> list[Project]:
        """Every project not deleted, in the order they were created."""
        state, _ = self._state("projects", at)
        return project_order(state)
