"""System: the composition root that opens the log, the views and the actors, and closes them."""

from __future__ import annotations

import os
import threading
from datetime import datetime, timedelta
from types import TracebackType
from typing import Any

from eventlog import (
    Clock,
    EventLog,
    EventLogError,
    OffCatalogueError,
    Record,
    SystemClock,
    fit_record,
    open_log,
)
from projections import Views

from ._aggregate import UNREADABLE, Refresh
from ._directory import Directory
from ._errors import ForkError
from .approvals import ApprovalActor, ApprovalQueue
from .broker import DEFAULT_ASK_TIMEOUT, Broker, Gates
from .controller import (
    Controller,
    Reconciler,
    RecordedHarness,
    RecordedReconciler,
    fork_controller_id,
    fork_origin,
)
from .harnesses import Harness
from .operators import Operators
from .sessions import HarnessSource, Projects, Sessions, StrPath, ToolOverrides

# The scheduler wakes at least this often, so deadlines are fired even when the clock is
# moved by hand (tests call tick() themselves) or jumps.
SCHEDULER_MAX_WAIT = 1.0
# Seconds the follower waits before reading again after the database failed a read.
FOLLOW_RETRY = 0.2
# Seconds between the follower's looks at the log's head while it waits for another
# process's commit (PostgreSQL's notifications wake it sooner); `flightlog serve --workers N`
# looks more often, so that a push through one worker reaches a poll parked on another at once.
FOLLOW_POLL = 0.05
FOLLOW_POLL_WORKERS = 0.005
# Seconds of commits the follower reads at a time while the log is busy.
FOLLOW_BATCH = 0.01
# Seconds an actor may go unused before it is passivated (its thread stopped), by default.
IDLE_TIMEOUT = 60.0
# Idle actors are looked for this many times per idle period: one is stopped after between
# 1 and 1 + 1/IDLE_SWEEPS idle periods unused.
IDLE_SWEEPS = 4


class System:
    """The live system over one log.

    Threads: one follower (reads every commit, from this process or another, into the views
    and the actors that cache the affected streams) and one scheduler (fires deadlines with
    `tick()`); plus one thread per live actor. `close()` stops them in reverse order.

    Actors start on demand and are passivated by `tick()` once unused for `idle_timeout`
    seconds of `clock` time (None: never), unless something in this process waits on them
    (a long poll, a blocking approval request); the next use refolds the stream.
    """

    def __init__(
        self,
        log: EventLog,
        *,
        clock: Clock | None = None,
        approval_timeout: float = 300.0,
        quorum: int = 2,
        scheduler: bool = True,
        owns_log: bool = False,
        session_harness: HarnessSource | None = None,
        workspace: StrPath | None = None,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
        idle_timeout: float | None = IDLE_TIMEOUT,
        follow_poll: float = FOLLOW_POLL,
    ) -> None:
        if idle_timeout is not None and not idle_timeout > 0:
            raise ValueError(
                f"idle_timeout must be a positive number of seconds or None, not {idle_timeout!r}"
            )
        self.log = log
        self.clock: Clock = clock or log.clock or SystemClock()
        self._owns_log = owns_log
        self._closed = threading.Event()
        self.views = Views(log, clock=self.clock)
        self._approval_actors = Directory(lambda id: ApprovalActor.start(log, self.clock, id), self.clock)
        self.idle_timeout = idle_timeout
        self._follow_poll = follow_poll
        self._next_sweep = self.clock.now()
        self.approvals = ApprovalQueue(
            self._approval_actors, self.views, self.clock, timeout=approval_timeout, quorum=quorum
        )
        self.broker = Broker(log, self.clock, self.approvals, self.views, ask_timeout=ask_timeout)
        # One permission request's decision by request id, and its withdrawal (`/permission_wait`).
        self.gates = Gates(self.broker, self.approvals, self.views, log)
        self.sessions = Sessions(log, self.clock, harness=session_harness, approvals=self.approvals)
        self.projects = Projects(log, self.clock, self.views, workspace=workspace)
        self.tool_overrides = ToolOverrides(log, self.clock)
        self.operators = Operators(log, self.clock)
        self._directories = {
            "session": self.sessions.actors,
            "project": self.projects.actors,
            "tooloverrides": self.tool_overrides.actors,
        }
        self._wake = threading.Event()
        self._controllers: list[Controller] = []
        self.approvals.subscribe(self._wake.set)
        start = self.views.catch_up()
        # Deadlines that passed while nothing was running fire now, before anyone reads.
        self.tick()
        self._threads: list[threading.Thread] = []
        self._spawn("flightlog-follower", self._follow, start)
        if scheduler:
            self._spawn("flightlog-scheduler", self._schedule)

    @classmethod
    def open(
        cls,
        target: str | os.PathLike[str] | EventLog,
        *,
        clock: Clock | None = None,
        approval_timeout: float = 300.0,
        quorum: int = 2,
        scheduler: bool = True,
        session_harness: HarnessSource | None = None,
        workspace: StrPath | None = None,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
        idle_timeout: float | None = IDLE_TIMEOUT,
        follow_poll: float = FOLLOW_POLL,
        **log_options: Any,
    ) -> System:
        """Open a System on a database path, ":memory:", a "postgresql://" URL, or an open log.

        `session_harness` runs the turns of `system.sessions` (a Harness, or a factory of one
        per session); `workspace` is the directory under which projects live; `ask_timeout`
        is how many seconds an ask between runs waits for its reply; `idle_timeout` is how
        long an unused actor keeps its thread (seconds, None: until closed).
        """
        if isinstance(target, EventLog):
            return cls(
                target,
                clock=clock,
                approval_timeout=approval_timeout,
                quorum=quorum,
                scheduler=scheduler,
                session_harness=session_harness,
                workspace=workspace,
                ask_timeout=ask_timeout,
                idle_timeout=idle_timeout,
                follow_poll=follow_poll,
            )
        log = open_log(target, clock=clock, **log_options)
        try:
            return cls(
                log,
                clock=clock,
                approval_timeout=approval_timeout,
                quorum=quorum,
                scheduler=scheduler,
                owns_log=True,
                session_harness=session_harness,
                workspace=workspace,
                ask_timeout=ask_timeout,
                idle_timeout=idle_timeout,
                follow_poll=follow_poll,
            )
        except BaseException:
            log.close()
            raise

    # -- background work -------------------------------------------------------------------

    def _spawn(self, name: str, target: Any, *args: Any) -> None:
        thread = threading.Thread(target=target, args=args, name=name, daemon=True)
        thread.start()
        self._threads.append(thread)

    def _follow(self, after: int) -> None:
        self._followed = after
        while True:
            try:
                self._follow_on()
                return
            except EventLogError:
                if self.log.closed:
                    return
            # The database was away for a moment (PostgreSQL restarting, a dropped connection):
            # follow again from the last record routed, so nothing committed meanwhile is missed.
            # Without this thread, no commit of another process would reach this one's actors.
            if self._closed.wait(FOLLOW_RETRY):
                return

    def _follow_on(self) -> None:
        """Route every record after `_followed` until closed, moving `_followed` on as it goes.

        Idle, it waits for the next commit as the log's `follow` does (at once for a commit of
        this process, a poll or PostgreSQL's notification for another's). Busy, it reads what
        was committed in the last FOLLOW_BATCH seconds at a time rather than once per commit:
        a server taking thousands of writes a second would otherwise spend more on waking up
        to follow them than on writing them.
        """
        while not self._closed.is_set():
            caught_up = True
            for record in self.log.read_all(after_seq=self._followed):
                self._route(record)
                self._followed = record.seq
                caught_up = False
            if not caught_up:
                self._closed.wait(FOLLOW_BATCH)
                continue
            for record in self.log.follow(
                after_seq=self._followed, stop=self._closed, poll_interval=self._follow_poll
            ):
                self._route(record)
                self._followed = record.seq
                break  # busy again: read in batches

    def _route(self, record: Record) -> None:
        category = record.category
        if category == "approval":
            self._approval_actors.tell_if_running(record.stream_id, Refresh(record.version))
            self._wake.set()
            if record.type == "ApprovalDecided":
                try:
                    approval_id = fit_record(record).data["approval_id"]
                except OffCatalogueError as e:  # written behind flightlog's back: no answer to pass on
                    UNREADABLE.note(record, e)
                else:
                    self.broker.approval_decided(approval_id)
        elif category == "run":
            self.broker.on_record(record)
        elif category in self._directories:
            self._directories[category].tell_if_running(record.stream_id, Refresh(record.version))

    def _schedule(self) -> None:
        while not self._closed.is_set():
            self.tick()
            deadline = self.approvals.next_deadline()
            wait = SCHEDULER_MAX_WAIT
            if deadline is not None:
                wait = max(0.0, min(wait, (deadline - self.clock.now()).total_seconds()))
            self._wake.wait(wait)
            self._wake.clear()

    def controller(
        self,
        harness: Harness,
        reconciler: Reconciler | None = None,
        *,
        controller_id: str = "default",
        recover: bool = True,
    ) -> Controller:
        """A Controller for one harness session, recorded in `controller-<controller_id>`.

        Opening a controller whose log says a run was still running (the process died during
        it) marks that run failed, with a `stopped` notice in its timeline (unless `recover`
        is False: then closing it records nothing unless it was started, or re-drove its
        fork, here). A fork awaiting its re-drive is never taken for such a run.
        """
        queue = ApprovalQueue(
            self._approval_actors,
            self.views,
            self.clock,
            timeout=self.approvals.timeout,
            quorum=self.approvals.quorum,
        )
        queue.subscribe(self._wake.set)
        ctrl = Controller(
            self.log,
            self.clock,
            self.views,
            queue,
            harness,
            reconciler=reconciler,
            controller_id=controller_id,
            recover=recover,
        )
        self._controllers.append(ctrl)
        return ctrl

    def fork_controller(
        self, fork_run_id: str, harness: Harness, reconciler: Reconciler | None = None
    ) -> Controller:
        """The controller of fork `fork_run_id` (`fork-<id>`), ready for `redrive()`.

        It folds the fork's stream without crash recovery, and closes without a record unless
        it re-drove the fork itself, so neither opening nor closing it touches a run that
        another controller (or process) is re-driving. With a RecordedHarness, reconciles are
        served from the recording too: the reconciler defaults to a RecordedReconciler of the
        same turn (a live one is refused), and the harness dispatches through this controller.
        Raises ForkNotFoundError for an unknown id, NotAForkError for a run or stream that is
        not a fork.
        """
        fork_origin(self.log, fork_run_id, self.views)
        recording = harness if isinstance(harness, RecordedHarness) else None
        if recording is not None:
            if reconciler is None:
                reconciler = RecordedReconciler(recording.turn)
            elif not isinstance(reconciler, RecordedReconciler):
                raise ForkError("a re-drive from the recording takes no live reconciler")
        ctrl = self.controller(
            harness, reconciler, controller_id=fork_controller_id(fork_run_id), recover=False
        )
        if recording is not None:
            recording.dispatch = ctrl.reconcile_approved
        return ctrl

    def tick(self) -> int:
        """Fire whatever is due now (approval deadlines), passivate actors idle for long enough.

        Returns how many deadlines fired.
        """
        if self._closed.is_set():
            return 0
        fired = self.approvals.tick() + self.broker.tick()
        if self.idle_timeout is not None:
            now = self.clock.now()
            if now >= self._next_sweep:
                self._next_sweep = now + timedelta(seconds=self.idle_timeout / IDLE_SWEEPS)
                self.passivate(now - timedelta(seconds=self.idle_timeout))
        return fired

    def passivate(self, idle_since: datetime | None = None) -> int:
        """Stop every idle actor (unused since `idle_since`, if given); return how many.

        They refold from the log when next used.
        """
        stopped = self.sessions.passivate(idle_since) + self.projects.passivate(idle_since)
        stopped += self.tool_overrides.passivate(idle_since) + self._approval_actors.passivate(idle_since)
        return stopped + self.broker.passivate(idle_since)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Stop the scheduler, the follower and every actor, then close the log if we opened it."""
        if self._closed.is_set():
            return
        self._closed.set()
        self._wake.set()
        for thread in reversed(self._threads):
            thread.join(timeout=10)
        for ctrl in self._controllers:
            ctrl.close_quietly()
        self.sessions.close()
        self.projects.close()
        self.tool_overrides.close()
        self.operators.close()
        self.broker.close()
        self._approval_actors.close()
        if self._owns_log:
            self.log.close()

    def __enter__(self) -> System:
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
