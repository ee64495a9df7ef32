"""Sessions: the agent seed's Service over event-sourced sessions, each one an actor with its stream.

The registry rules (resume, exact-id creation, new time-ordered ids, kinds, ownership) are
the session decider's; this module maps each entry point onto them and runs the turn.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime

from eventlog import Clock, EventLog
from projections.sessions import SessionTurn, session_history

from .._aggregate import Execute, folded
from .._directory import Directory
from .._errors import GroupCompactionUnsupportedError, SessionError, SessionNotFoundError
from ..approvals import ApprovalQueue
from .actor import SESSIONS, SessionActor
from .decider import (
    TURN_SUCCEEDED,
    Archive,
    Compact,
    Ensure,
    SessionInfo,
    SessionRequest,
    SessionState,
    evolve,
)
from .keys import (
    SESSION_CHANNEL_TASK,
    SESSION_KIND_DELEGATE,
    SESSION_KIND_SCHEDULER,
    SESSION_KIND_TASK,
    CompactionConfig,
    new_session_id,
)
from .requests import (
    COMPACT_PROMPT,
    ENTRY_CHAT,
    ENTRY_COMPACTION,
    ENTRY_DELEGATE,
    ENTRY_GOAL_DECOMPOSITION,
    ENTRY_SCHEDULER,
    ENTRY_TASK,
    ChatRequest,
    DelegateRequest,
    DelegateResult,
    SchedulerChatRequest,
    TaskChatRequest,
)
from .stream import EventStream
from .turns import HarnessSource, Turns, TurnSpec


class Sessions:
    """Agent sessions: resolve (the registry's Ensure), chat, delegate, archive, compact, watch.

    `harness` runs the turns: one Harness shared by every session (events are routed by the
    turn id they carry as run id), or a factory called with a HarnessRequest, whose harness
    is kept per session — except for turns with per-run options, which get a fresh one,
    closed when the turn ends. Turns of one session run one at a time, each in its own thread.
    A permission request published during a turn waits in `approvals`, when given.
    """

    def __init__(
        self,
        log: EventLog,
        clock: Clock,
        *,
        harness: HarnessSource | None = None,
        approvals: ApprovalQueue | None = None,
        compaction: CompactionConfig | None = None,
    ) -> None:
        self._log = log
        self._clock = clock
        self.actors = Directory(lambda id: SessionActor.start(log, clock, id), clock)
        self._turns = Turns(self.actors, clock, harness, approvals)
        self.compaction = (compaction or CompactionConfig()).with_defaults()

    @property
    def harness(self) -> HarnessSource | None:
        return self._turns.source

    @harness.setter
    def harness(self, source: HarnessSource | None) -> None:
        """Set the harness (or factory) for turns started from now on."""
        self._turns.source = source

    # -- the registry ----------------------------------------------------------------------

    def ensure(self, request: SessionRequest) -> SessionInfo:
        """Resolve `request`: resume the session it names, create it, or raise why not.

        An empty id creates a session under a new time-ordered id when `create_if_missing`.
        """
        request.validate()
        if not request.session_id:
            if not request.create_if_missing:
                raise SessionNotFoundError()
            fresh = new_session_id(self._clock)
            request = dataclasses.replace(request, session_id=fresh, allow_exact_id_create=True)
        state: SessionState = self.actors.ask(request.session_id, Execute(Ensure(request)))[0]
        assert state.info is not None
        return state.info

    def get(self, session_id: str) -> SessionInfo | None:
        """The session as its stream says now (None when it does not exist)."""
        return self._load(session_id).info

    def _load(self, session_id: str) -> SessionState:
        state = SESSIONS.initial(session_id)
        for record in self._log.read(f"{SESSIONS.category}-{session_id}"):
            state = folded(state, record, evolve)
        return state

    # -- turns -----------------------------------------------------------------------------

    def chat(self, request: ChatRequest) -> EventStream:
        """Run a chat turn; resolution failures arrive as one `session.error` event on the stream."""
        r = request
        resolve = SessionRequest(
            session_id=r.session_id,
            user_id=r.user_id,
            agent_id=r.agent_id,
            kind=r.kind,
            channel=r.channel,
            require_kind=r.kind,
            group_id=r.group_id,
            project_id=r.project_id,
            create_if_missing=not r.session_id,  # a named session is only ever resumed
        )
        return self._stream(resolve, ENTRY_CHAT, r.message, (), r.excluded_tools, r.system_prompt)

    def delegate(self, request: DelegateRequest, *, timeout: float | None = None) -> DelegateResult:
        """Run a delegate turn on a child session and wait for its output.

        A named session is only resumed (a model-supplied id never reserves one) and must be a
        delegate session; resolution errors are raised.
        """
        r = request
        info = self.ensure(
            SessionRequest(
                session_id=r.session_id,
                user_id=r.user_id,
                agent_id=r.agent_id,
                kind=SESSION_KIND_DELEGATE,
                require_kind=SESSION_KIND_DELEGATE,
                project_id=r.project_id,
                parent_id=r.parent_session_id,
                create_if_missing=not r.session_id,
            )
        )
        spec = TurnSpec(info, ENTRY_DELEGATE, r.task, excluded_tools=r.excluded_tools, system_prompt=r.system)
        turn = self._turns.begin(spec)
        result = turn.wait(timeout)
        if turn.stream.error is not None:
            raise turn.stream.error
        return DelegateResult(info.id, result.output, result.status == TURN_SUCCEEDED, result.error)

    def chat_for_scheduler(self, request: SchedulerChatRequest) -> EventStream:
        """Run a scheduler turn; its trusted id may create the session, which must be `scheduler`."""
        r = request
        resolve = SessionRequest(
            session_id=r.session_id,
            user_id=r.user_id,
            agent_id=r.agent_id,
            kind=SESSION_KIND_SCHEDULER,
            require_kind=SESSION_KIND_SCHEDULER,
            allow_exact_id_create=True,
            create_if_missing=True,
        )
        return self._stream(resolve, ENTRY_SCHEDULER, r.message)

    def chat_for_task(self, request: TaskChatRequest) -> EventStream:
        """Run a task turn; its trusted id may create the session, which must be `task`."""
        r = request
        resolve = SessionRequest(
            session_id=r.session_id,
            user_id=r.user_id,
            agent_id=r.agent_id,
            kind=SESSION_KIND_TASK,
            require_kind=SESSION_KIND_TASK,
            project_id=r.project_id,
            allow_exact_id_create=True,
            create_if_missing=True,
        )
        return self._stream(resolve, ENTRY_TASK, r.message, r.extra_tools, r.excluded_tools)

    def chat_for_goal_decomposition(self, request: TaskChatRequest) -> EventStream:
        """Run a turn on a goal's planning session: resume-only, and it must be a delegate session."""
        r = request
        resolve = SessionRequest(
            session_id=r.session_id,
            user_id=r.user_id,
            agent_id=r.agent_id,
            require_kind=SESSION_KIND_DELEGATE,
        )
        return self._stream(resolve, ENTRY_GOAL_DECOMPOSITION, r.message, r.extra_tools, r.excluded_tools)

    def _stream(
        self,
        resolve: SessionRequest,
        entry: str,
        message: str,
        extra_tools: tuple[str, ...] = (),
        excluded_tools: tuple[str, ...] = (),
        system_prompt: str = "",
    ) -> EventStream:
        """Resolve the session, then run the turn; a resolution failure is the stream's one event."""
        try:
            info = self.ensure(resolve)
        except Exception as e:  # noqa: BLE001 - the seed delivers it as the stream's error event
            return EventStream.failed(e, "resolve session", resolve.session_id)
        spec = TurnSpec(info, entry, message, extra_tools, excluded_tools, system_prompt)
        return self._turns.begin(spec).stream

    # -- session lifecycle -----------------------------------------------------------------

    def new_session(
        self, user_id: str, agent_id: str, project_id: str = "", kind: str = "", channel: str = ""
    ) -> SessionInfo:
        """Create a session under a new time-ordered id (never resumes one)."""
        request = SessionRequest(
            user_id=user_id,
            agent_id=agent_id,
            kind=kind,
            channel=channel,
            project_id=project_id,
            create_if_missing=True,
        )
        return self.ensure(request)

    def mint_task_session(self, user_id: str, agent_id: str, project_id: str = "") -> SessionInfo:
        """Create a new task worker session (kind and channel `task`)."""
        return self.new_session(user_id, agent_id, project_id, SESSION_KIND_TASK, SESSION_CHANNEL_TASK)

    def archive_session(self, user_id: str, agent_id: str, session_id: str) -> None:
        """Archive an owned session: it can no longer be resumed; its history stays."""
        SessionRequest(user_id=user_id, agent_id=agent_id).validate()
        self.actors.ask(session_id, Execute(Archive(user_id, agent_id)))

    def history(self, session_id: str) -> list[SessionTurn]:
        """The session's turns, each with every event it recorded (folded from its stream)."""
        records = list(self._log.read(f"{SESSIONS.category}-{session_id}"))
        if not records:
            raise SessionNotFoundError(session_id)
        return session_history(records)

    def compact_session(
        self, session_id: str, *, user_id: str, agent_id: str, timeout: float | None = None
    ) -> str:
        """Run a compaction turn and record the harness's summary; return the summary.

        A group session is refused with GroupCompactionUnsupportedError before any harness runs.
        """
        info = self.ensure(SessionRequest(session_id=session_id, user_id=user_id, agent_id=agent_id))
        if info.is_group:
            raise GroupCompactionUnsupportedError()
        turn = self._turns.begin(TurnSpec(info, ENTRY_COMPACTION, COMPACT_PROMPT))
        result = turn.wait(timeout)
        if turn.stream.error is not None:
            raise turn.stream.error
        if result.status != TURN_SUCCEEDED:
            raise SessionError(f"compact session: {result.error or result.status}")
        summary = result.summary or result.output
        if not summary:
            raise SessionError("compact session: the harness returned no summary")
        command = Compact(turn.id, summary, self.compaction.keep_tail)
        self.actors.ask(session_id, Execute(command, {"actor": "sessions", "correlation_id": turn.id}))
        return summary

    # -- watching --------------------------------------------------------------------------

    def session_live(self, session_id: str) -> bool:
        """Whether a turn is in flight on the session in this process."""
        return self._turns.live(session_id)

    def subscribe_session(self, session_id: str) -> tuple[EventStream, Callable[[], None]]:
        """A stream of every live event of the session's turns, whoever started them; and unsubscribe."""
        return self._turns.subscribe(session_id)

    def wait_in_flight(self, timeout: float | None = None) -> None:
        """Block until no turn is in flight in this process (TimeoutError after `timeout`)."""
        self._turns.wait_in_flight(timeout)

    def passivate(self, idle_since: datetime | None = None) -> int:
        """Stop idle session actors and close the harnesses kept for idle sessions.

        With `idle_since`, only the actors unused since then stop, and kept harnesses stay
        (a harness is reused by the session's next turn).
        """
        if idle_since is None:
            self._turns.evict_idle()
        return self.actors.passivate(idle_since)

    def close(self) -> None:
        """Interrupt the turns in flight (recorded as such), close the harnesses, stop the actors."""
        self._turns.close()
        self.actors.close()
