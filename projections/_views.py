"""Views: the front door to every read model, live or as of any past moment."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from datetime import datetime
from typing import Any

from eventlog import Clock, EventLog, Record, SnapshotStore, SystemClock, Unreadable, from_micros, readable

from ._bulk import bulk
from ._diff import Diff, diff_items, diffable
from ._fold import fold_records
from ._runner import (
    CHECKPOINT_BUDGET,
    CHECKPOINT_EVERY,
    SNAPSHOT_BYTES_PER_EVENT,
    SNAPSHOT_EVERY,
    ViewRunner,
)
from ._snapshots import AUTO
from ._view import View, state_digest
from .agent_fold import agent_moments
from .agent_pages import AgentPages
from .agent_runs import AgentRun, AgentRunsView, agent_run_order
from .approvals import (
    ApprovalActorsView,
    ApprovalHistoryView,
    ApprovalRow,
    PendingApprovalsView,
    history_order,
    pending_order,
)
from .asks import AskRow, OpenAsksView, PeerInfo, PeersView, ask_order
from .broker_timeline import broker_moments, broker_timeline
from .lists import Lists
from .projects import Project, ProjectsView, project_order
from .run_pages import PAGE, RunPage, RunPages
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
from .timeline import RunMoment, TimelineEntry, TimelineView, render

At = int | datetime | None

# Views not kept live: each is folded from an index of the log when asked for, so a server's
# memory does not grow with the history. The approval history holds every approval ever
# requested (about 0.9 KiB each); it is read from the log's approval records, indexed by seq.
ON_DEMAND = frozenset({"approval_history"})

# The views whose state is a dict of frozen rows: a copy shares the rows, so the runner keeps
# in-memory checkpoints of them for fast time travel. The timeline is travelled per stream.
GLOBAL_VIEWS = (
    "pending_approvals",
    "run_registry",
    "finish_status",
    "agent_runs",
    "sessions",
    "projects",
    "open_asks",
    "peers",
)


def default_views() -> list[View]:
    """Every built-in view, in a fixed order."""
    return [
        PendingApprovalsView(),
        ApprovalHistoryView(),
        ApprovalActorsView(),
        RunRegistryView(),
        FinishStatusView(),
        AgentRunsView(),
        TimelineView(),
        SessionsView(),
        AgentActivityView(),
        ProjectsView(),
        OpenAsksView(),
        PeersView(),
    ]


class Views:
    """Every view over one log: current (`at=None`) or as of a seq or an aware datetime.

    Time travel is read-only: it folds the log up to the point asked for and never runs
    anything. `clock` decides which pending approvals are past their deadline right now.
    Snapshot and checkpoint settings are passed to the `ViewRunner`, which keeps every view
    live except those in `ON_DEMAND`: they are folded from the log's index when read.
    Records that do not fit the event catalogue are left out of every view and counted in
    `unreadable`, so that whoever shows a view can say so.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        clock: Clock | None = None,
        views: Sequence[View] | None = None,
        snapshots: SnapshotStore | None = AUTO,
        snapshot_every: int = SNAPSHOT_EVERY,
        snapshot_bytes_per_event: int = SNAPSHOT_BYTES_PER_EVENT,
        keep_snapshots: int | None = None,
        checkpoint_every: int = CHECKPOINT_EVERY,
        checkpoint_budget: int = CHECKPOINT_BUDGET,
        checkpoint_views: Iterable[str] = GLOBAL_VIEWS,
    ) -> None:
        self.log = log
        self.clock = clock or log.clock or SystemClock()
        chosen = list(views if views is not None else default_views())
        self._names = [v.name for v in chosen]
        self._on_demand = {v.name: v for v in chosen if v.name in ON_DEMAND}
        self.runner = ViewRunner(
            log,
            [v for v in chosen if v.name not in ON_DEMAND],
            snapshots=snapshots,
            snapshot_every=snapshot_every,
            snapshot_bytes_per_event=snapshot_bytes_per_event,
            keep_snapshots=keep_snapshots,
            checkpoint_every=checkpoint_every,
            checkpoint_budget=checkpoint_budget,
            checkpoint_views=checkpoint_views,
        )
        self.pages = RunPages(log, self.runner.store, self.runner.unreadable)
        self.agent_pages = AgentPages(log, self.runner.store, self.runner.unreadable)
        self.lists = Lists(log, self.runner, self.clock, self.approval)  # the live lists, a page at a time

    @property
    def names(self) -> list[str]:
        return list(self._names)

    @property
    def unreadable(self) -> Unreadable:
        """The records any view here skipped: they do not fit the catalogue, or could not be applied."""
        return self.runner.unreadable

    def view(self, name: str) -> View:
        """The named view (live or folded when read)."""
        return self._on_demand.get(name) or self.runner.views[name]

    def catch_up(self) -> int:
        return self.runner.catch_up()

    # -- time travel helpers ---------------------------------------------------------------

    def resolve_at(self, at: At) -> int | None:
        """The seq that `at` names: a seq as is, a datetime as the last seq recorded at or before it."""
        if at is None:
            return None
        if isinstance(at, datetime):
            if at.tzinfo is None:
                raise ValueError("at: a naive datetime is ambiguous; pass an aware one")
            return self.log.seq_at(at)
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
        if name in self._on_demand:
            if seq is None:
                return self._fold_on_demand(name, self.runner.catch_up()), self.clock.now()
            return self._fold_on_demand(name, seq), (self.moment(seq) if seq else None)
        if seq is None:
            return self.runner.read(name, self.runner.views[name].copy), self.clock.now()
        states = self.runner.fold_until(seq, [name])
        return states[name], (self.moment(seq) if seq else None)

    def _fold_on_demand(self, name: str, seq: int, records: Iterable[Any] | None = None) -> Any:
        """View `name` folded from its records (by default every one of its types) up to `seq`."""
        view = self._on_demand[name]
        if records is None:
            records = self.log.read_all(to_seq=seq, types=view.types)
        with bulk():
            return fold_records([view], records, {name: view.initial()}, self.unreadable)[name]

    def state(self, name: str, at: At = None) -> Any:
        """A private copy of the named view's raw state, now or as of `at`."""
        return self._state(name, at)[0]

    def dump(self, name: str, at: At = None) -> Any:
        """The named view's canonical dump (what digests and snapshots are made of)."""
        return self.view(name).dump(self.state(name, at))

    def digest(self, name: str, at: At = None) -> str:
        """SHA-256 of the canonical JSON of the named view's dump."""
        return state_digest(self.view(name), self.state(name, at))

    def digests(self, at: At = None) -> dict[str, str]:
        """Every view's digest, now or as of `at` (one fold for all the live ones)."""
        seq = self.resolve_at(at)
        if seq is None:
            views = self.runner.views
            seq, states = self.runner.read_states(lambda live: {n: v.copy(live[n]) for n, v in views.items()})
        else:
            states = self.runner.fold_until(seq)
        states.update({n: self._fold_on_demand(n, seq) for n in self._on_demand})
        return {n: state_digest(self.view(n), states[n]) for n in self._names}

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
        """One approval and its outcome, now or as of `at`: an open one from the live view, any
        other folded from its own records (an indexed read of a few rows)."""
        seq = self.resolve_at(at)
        if seq is None:
            seq, found = self.runner.read_states(
                lambda live: live.get("pending_approvals", {}).get(approval_id)
            )
            if found is not None:
                return found  # type: ignore[no-any-return]
        if "approval_history" not in self._on_demand:
            return None
        records = self.log.approval_records(approval_id, to_seq=seq)
        row: ApprovalRow | None = self._fold_on_demand("approval_history", seq, records).get(approval_id)
        return row

    def approval_actors(self, run_id: str) -> list[str]:
        """Everyone who voted on or decided one of the run's approvals, sorted."""
        return list(self.runner.read("approval_actors", lambda s: s.actors.get(run_id, ())))

    # -- runs (the broker's registry) ------------------------------------------------------

    def runs(self, at: At = None) -> list[RunRow]:
        """Registered runs in registration order."""
        state, _ = self._state("run_registry", at)
        return registry_order(state)

    def run(self, run_id: str, at: At = None) -> RunRow | None:
        if at is None:
            found: RunRow | None = self.runner.read("run_registry", lambda s: s.get(run_id))
            return found
        state, _ = self._state("run_registry", at)
        row: RunRow | None = state.get(run_id)
        return row

    def finish_status(self, run_id: str, at: At = None) -> FinishStatus | None:
        """The run's finish count, last status and summary (None if not registered)."""
        if at is None:
            found: FinishStatus | None = self.runner.read("finish_status", lambda s: s.get(run_id))
            return found
        state, _ = self._state("finish_status", at)
        row: FinishStatus | None = state.get(run_id)
        return row

    def open_asks(self, at: At = None) -> list[AskRow]:
        """Asks between runs not closed yet (answered ones too, until collected), oldest first."""
        state, _ = self._state("open_asks", at)
        return ask_order(state)

    def peers(self, at: At = None) -> dict[str, PeerInfo]:
        """Run id -> what the run says about itself (label, backend, model, dir, status)."""
        state, _ = self._state("peers", at)
        return dict(state)

    # -- the operator's runs and their timelines -------------------------------------------

    def agent_runs(self, at: At = None) -> list[AgentRun]:
        """Controller runs (forks too), in the order they started."""
        state, _ = self._state("agent_runs", at)
        return agent_run_order(state)

    def agent_run(self, run_id: str, at: At = None) -> AgentRun | None:
        if at is None:
            found: AgentRun | None = self.runner.read("agent_runs", lambda s: s.get(run_id))
            return found
        state, _ = self._state("agent_runs", at)
        row: AgentRun | None = state.get(run_id)
        return row

    def timeline(self, run_id: str, at: At = None) -> list[TimelineEntry]:
        """A run's timeline: a controller run's (its session's conversation up to and including
        it), or a broker run's (its reports, finishes, replies, permissions and control messages).

        As of a past moment it is folded from the run's own stream alone, so it costs the
        length of that stream, not of the log.
        """
        seq = self.resolve_at(at)
        if seq is None:
            live: list[TimelineEntry] | None = self.runner.read(
                "timeline", lambda state: render(state, run_id) if run_id in state.runs else None
            )
            return live if live is not None else broker_timeline(self._readable(f"run-{run_id}"))
        row = self._current_agent_run(run_id)
        if row is None:
            records = self._readable(f"run-{run_id}")
            return broker_timeline(itertools.takewhile(lambda r: r.seq <= seq, records))
        if row.first_seq > seq:
            return []
        view = self.runner.views["timeline"]
        records = itertools.takewhile(lambda r: r.seq <= seq, self.log.read(row.stream))
        state = fold_records([view], records, {view.name: view.initial()}, self.unreadable)[view.name]
        return render(state, run_id)

    def run_page(
        self, run_id: str, at: At = None, before: int | None = None, limit: int = PAGE
    ) -> RunPage | None:
        """A page of a run's timeline as of `at`: the `limit` entries before position `before`
        (default: the newest), with the run's status then and how many entries it had.

        Either is folded from the per-run checkpoint nearest below it (`RunPages`, `AgentPages`),
        so it costs the page and that distance, not the run's length. A controller run's
        positions are its session's slots (a page may show fewer entries than its limit: see
        `projections.agent_pages`). None if the run had no record by then; ValueError for a
        bad cursor or limit.
        """
        seq = self.resolve_at(at)
        row = self._current_agent_run(run_id)
        if row is None:
            return self.pages.page(run_id, seq, before, limit)
        # Following the log, the run's row says when its status last changed (not otherwise).
        settled = row.updated_seq if self.runner.started else None
        return self.agent_pages.page(row, seq, before, limit, settled)

    def timeline_at_each_event(self, run_id: str) -> list[RunMoment]:
        """The run right after each of its events: status and timeline, in seq order (one fold
        of its stream; each moment's entries are built only where its record changed them)."""
        row = self._current_agent_run(run_id)
        if row is None:
            return broker_moments(self._readable(f"run-{run_id}"))
        return agent_moments(self._readable(row.stream), run_id)

    def _current_agent_run(self, run_id: str) -> AgentRun | None:
        """The run as the log knows it now, for its stream and first seq (run ids are never
        reused, so this locates its stream).

        Not following the log yet, it folds only the records that start this run (an indexed
        lookup): the stream and first seq are all they decide, so the status is left out.
        """
        if self.runner.started:
            return self.agent_run(run_id)
        view = self.runner.views["agent_runs"]
        state = fold_records(
            [view], self.log.run_starts(run_id), {view.name: view.initial()}, self.unreadable
        )
        row: AgentRun | None = state[view.name].get(run_id)
        return row

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
        records = self._readable(f"session-{session_id}")
        if seq is not None:
            records = itertools.takewhile(lambda r: r.seq <= seq, records)
        return session_history(records)

    def _readable(self, stream: str) -> Iterator[Record]:
        """A stream's records that fit the catalogue, for the folds that read one stream directly."""
        return readable(self.log.read(stream), self.unreadable)

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

    # -- diffs -----------------------------------------------------------------------------

    def diff(self, view: str, *args: str, a: At, b: At) -> Diff:
        """What changed in a view between two moments: added, removed and changed items.

        `view` is one of "timeline" (args: run_id), "runs" (or "run_registry"),
        "finish_status", "pending_approvals", "approval_history", "agent_runs",
        "sessions", "projects".
        """
        items, key = diffable(self, view, args)
        sa, sb = self.resolve_at(a), self.resolve_at(b)
        if sa is None or sb is None:
            raise ValueError("diff needs two moments: a and b")
        return diff_items(view, sa, sb, items(sa), items(sb), key)
