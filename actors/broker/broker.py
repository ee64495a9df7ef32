"""Broker: the seed's run broker over event-sourced run actors.

Every run is a stream `run-<id>` and an actor; the broker validates, hashes tokens, and asks
the run's actor, which replies only after its append committed. Tokens are kept as SHA-256
digests; a raw token exists only in the process that issued it, for `ensure_run`.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from eventlog import Clock, EventLog, Record
from eventlog.events import BrokerReset
from projections import Views

from .._aggregate import GetState, Refresh
from .._broker_errors import BrokerError, OperatorOnlyError, RunNotFoundError
from .._directory import Directory
from ..approvals import ApprovalQueue, needs_operator
from .asks import AskOutcome
from .conversation import DEFAULT_ASK_TIMEOUT, Conversations
from .details import RunDetails
from .hot import MAX_RUN_ID_LENGTH, HotPath, Pending
from .known import KnownRuns
from .listeners import RunListeners
from .model import (
    FINISH_KINDS,
    ORIGIN_LOCAL,
    ControlMessage,
    Finish,
    Reply,
    Report,
    RunView,
    make_token,
    operator_only,
    raw_json,
    token_digest,
)
from .parking import Parked, Parking
from .permissions import PermissionRelay
from .quotas import Buckets, Quotas
from .run_actor import RunActor
from .run_decider import (
    TOKEN_CHANGES,
    DeleteRun,
    Heartbeat,
    QueueControl,
    RecordFinish,
    RecordReply,
    RecordReport,
    RegisterRun,
    Rekey,
    RevokeToken,
    RunState,
    TakeControl,
)
from .view import RunPage, fold_run_view
from .writer import Reply as Answer
from .writer import RunWriter, queued_message, state_after, taken_queue

# Undelivered control messages a run may hold before pushes are refused (HTTP 429).
DEFAULT_QUEUE_LIMIT = 1000


class Broker:
    """Runs, their control queues, reports, finishes, replies and permission requests.

    Built of parts: every run command goes through one `RunWriter`; `hot` starts the HTTP
    server's calls on it without blocking; `permissions` relays permission requests through the
    approval gate; `conversations` holds asks between runs. The parts' calls are the broker's
    too (bound in `__init__`, documented on the parts).
    """

    # PermissionRelay's
    permission_request: Callable[..., str]
    permission_decision: Callable[..., None]
    approval_decided: Callable[[str], None]
    open_permissions: Callable[[str], int]
    # Conversations': asks between runs and their replies, and peer discovery
    ask: Callable[[str, str, str, Any], None]
    answer: Callable[[str, str, str, Any], str]  # "" when routed to the asker, else the note
    wait_reply: Callable[..., AskOutcome | None]
    cancel_message: Callable[[str, str], None]
    sessions: Callable[[], list[dict[str, Any]]]
    update_session_info: Callable[..., None]
    tick: Callable[[], int]  # times out the asks past their deadline; how many
    # RunListeners': who waits for a run's control messages
    on_control: Callable[[str, Callable[[], object]], Callable[[], None]]
    has_waiters: Callable[[str], bool]
    _signal: Callable[[str], None]
    # HotPath's: the HTTP server's non-blocking calls
    call_as_run: Callable[[str, str, Report | Finish | Reply | None, Callable[[], object]], Pending]
    call_take_as_run: Callable[[str, str, Callable[[], object]], Pending]
    queue_control: Callable[[str, ControlMessage, Callable[[], object]], Pending]
    register_soon: Callable[..., Pending]
    park: Callable[[str, Callable[[], object], str], Parked]
    leave: Callable[[Parked, Callable[[], object]], Parked]

    def __init__(
        self,
        log: EventLog,
        clock: Clock,
        approvals: ApprovalQueue,
        views: Views,
        *,
        queue_limit: int = DEFAULT_QUEUE_LIMIT,
        ask_timeout: float = DEFAULT_ASK_TIMEOUT,
        operator_decides: str = "high",
        quotas: Quotas | None = None,
    ) -> None:
        self.log = log
        self.views = views
        self.clock = clock
        self.approvals = approvals
        self.queue_limit = queue_limit
        self.set_quotas(quotas or Quotas())
        self.permissions = PermissionRelay(
            approvals,
            views,
            lambda: self.quotas,
            self.exists,
            self._state,
            self.run_command,
            operator_decides,
        )
        # The states the run actors and the writer have reached (their own appends included):
        # the writer decides on them, and the follower tells an actor to refresh only about
        # records it has not seen. An entry is only ever behind the log, never ahead.
        self._known = KnownRuns()
        self.details = RunDetails(log)  # runs' details a page at a time, from folds kept per run
        listeners = RunListeners()
        self.on_control, self.has_waiters, self._signal = (
            listeners.on_control,
            listeners.has_waiters,
            listeners.signal,
        )
        self.conversations = Conversations(self, ask_timeout)
        asked = self._asked = self.conversations.subscribers.signal
        self._dir = Directory(
            lambda id: RunActor.start(
                log, clock, id, self._signal, self._known, on_asked=asked, waited_on=self.has_waiters
            ),
            clock,
        )
        self._parking = Parking()
        self._writer = RunWriter(
            log, clock, self._known, self._written, self._parking, admit=self.admit_write
        )
        self.hot = HotPath(self._writer, self._known, self._parking, self.admits, self.queue_bound)
        relay, hot, talk = self.permissions, self.hot, self.conversations
        self.permission_request = relay.permission_request
        self.permission_decision = relay.permission_decision
        self.approval_decided, self.open_permissions = relay.approval_decided, relay.open_permissions
        self.call_as_run, self.call_take_as_run = hot.call_as_run, hot.call_take_as_run
        self.queue_control, self.register_soon = hot.queue_control, hot.register_soon
        self.park, self.leave = hot.park, hot.leave
        self.ask, self.answer, self.wait_reply = talk.ask, talk.reply, talk.wait_reply
        self.cancel_message, self.sessions, self.tick = talk.cancel, talk.sessions, talk.tick
        self.update_session_info = talk.update_info
        self._issued: dict[str, str] = {}  # run id -> raw token, for tokens issued here
        self._lock = threading.Lock()

    @property
    def operator_decides(self) -> str:
        """Which relayed permission requests only an operator decides (approvals.OPERATOR_DECIDES)."""
        return self.permissions.operator_decides

    @operator_decides.setter
    def operator_decides(self, policy: str) -> None:
        needs_operator("high", policy)  # refuses an unknown policy
        self.permissions.operator_decides = policy

    def _written(self, run_id: str, records: list[Record]) -> None:
        """After a commit of the writer (or records of another process it folded): wake the
        run's waiters."""
        types = {r.type for r in records}  # one pass: this runs after every hot write
        if "ControlQueued" in types or not types.isdisjoint(TOKEN_CHANGES):
            self._signal(run_id)  # a waiting poll takes, or shows its token again
        if any(t.startswith("Ask") for t in types):
            self._asked(run_id)

    # -- registry --------------------------------------------------------------------------

    def create_run(
        self, run_id: str, *, origin: str = ORIGIN_LOCAL, by: str = "", by_credential: str = ""
    ) -> str:
        """Register a new run and return its token; RunAlreadyRegisteredError if it exists.

        `origin`, `by` and `by_credential` say who created it (see `RunRegistered`): in
        process by default; the operator API passes the operator's name and credential.
        """
        token = make_token()
        command = RegisterRun(token_digest(token), False, True, origin, by, by_credential)
        self._exec(run_id, command, actor=by)
        with self._lock:
            self._issued[run_id] = token
        return token

    def ensure_run(
        self, run_id: str, *, origin: str = ORIGIN_LOCAL, by: str = "", by_credential: str = ""
    ) -> tuple[str | None, bool]:
        """(token, created): a new run's token, or an existing run's if this process issued it."""
        token = make_token()
        command = RegisterRun(token_digest(token), False, False, origin, by, by_credential)
        _, records = self._exec(run_id, command, actor=by)
        with self._lock:
            if records:
                self._issued[run_id] = token
                return token, True
            return self._issued.get(run_id), False

    def register(
        self, run_id: str, token: str = "", *, origin: str = ORIGIN_LOCAL, by: str = "", create: bool = True
    ) -> str:
        """HTTP /register: a new run (with the caller's token, or a fresh one), or a re-register.

        The id must be 1 to MAX_REGISTERED_RUN_ID printable characters: it is shown to operators.
        Without `create`, only a run that exists registers again (RunNotEnrolledError otherwise).
        """
        token = token or make_token()
        done = threading.Event()
        call = self.register_soon(run_id, token, done.set, origin=origin, by=by, create=create)
        done.wait()
        call.result()
        return token

    def revoke_run(self, run_id: str, *, by: str, by_credential: str, reason: str = "") -> None:
        """Stop the run's token at once: every route refuses it, a waiting poll ends with it.

        Nothing authenticates as the run until `rekey_run`; revoking a revoked run records
        nothing. `by` and `by_credential` name the operator (RunTokenRevoked records them).
        RunNotFoundError if there is no such run.
        """
        self._exec(run_id, RevokeToken(reason, by, by_credential), actor=by)
        with self._lock:
            self._issued.pop(run_id, None)

    def rekey_run(self, run_id: str, *, by: str, by_credential: str) -> str:
        """Give the run a new token and return it (its digest is recorded; show it once).

        The old token, revoked or not, stops working at once. RunNotFoundError if absent.
        """
        token = make_token()
        self._exec(run_id, Rekey(token_digest(token), by, by_credential), actor=by)
        with self._lock:
            self._issued[run_id] = token
        return token

    def admits(self, run_id: str, *, catch_up: bool = True) -> bool:
        """Whether `run_id` may name a registered run, so that asking its actor is worth starting one.

        True when its actor is running or the live run registry holds it; otherwise, unless
        `catch_up` is False, after the registry caught up with the log (a run another process
        registered is found). A refused or unknown id thus starts no actor.
        """
        if not _storable(run_id):
            return False
        known = self._known.get(run_id)
        if (known is not None and known.state.exists) or self._dir.peek(run_id) is not None:
            return True
        if self.views.runner.read_state("run_registry", lambda rows: run_id in rows):
            return True
        return catch_up and self.views.run(run_id) is not None

    def authenticate(self, run_id: str, token: str) -> bool:
        """Whether `token` is the run's token now (digest to digest, in constant time).

        The run's state is first folded to whatever any process committed: a token another
        server revoked or re-keyed a moment ago is refused here too, before its follower says so.
        """
        if not token:
            return False
        state = self.run_state(run_id, fresh=True)
        return state.exists and hmac.compare_digest(token_digest(token), state.token_sha256)

    def delete_run(self, run_id: str) -> None:
        """Remove a run (a RunDeleted event; its history stays); no-op when absent."""
        self._exec(run_id, DeleteRun("deleted"))
        with self._lock:
            self._issued.pop(run_id, None)

    def get_run(self, run_id: str) -> RunView | None:
        """The run as the broker knows it, or None."""
        if not _storable(run_id):
            return None
        return fold_run_view(self.log.read(f"run-{run_id}"))

    def get_run_page(self, run_id: str, limit: int, before: int | None = None) -> RunPage | None:
        """The run with one page of its history: the newest `limit` reports, finishes, replies
        and permission requests recorded before seq `before` (see `RunPage`); None if absent."""
        if not _storable(run_id):
            return None
        return self.details.page(run_id, limit, before)

    def exists(self, run_id: str) -> bool:
        state = self._state(run_id)
        return state.exists

    def run_ids(self) -> list[str]:
        """Ids of the registered runs, in registration order (from the run registry view)."""
        return [row.run_id for row in self.views.runs()]

    def run_count(self) -> int:
        return len(self.run_ids())

    def reset(self) -> None:
        """Drop every run: a BrokerReset event, then a RunDeleted for each run."""
        ids = self.run_ids()
        now = self.clock.now()
        self.log.append("broker-main", [BrokerReset(tuple(ids), now)])
        for run_id in ids:
            self._exec(run_id, DeleteRun("reset"))
        with self._lock:
            self._issued.clear()

    def heartbeat(self, run_id: str) -> None:
        self._exec(run_id, Heartbeat())

    def finish_count(self, run_id: str) -> int:
        state = self._state(run_id)
        return state.finish_count if state.exists else 0

    def last_finish_status(self, run_id: str) -> str:
        state = self._state(run_id)
        return state.last_finish_status if state.exists else ""

    # -- quotas ----------------------------------------------------------------------------

    def set_quotas(self, quotas: Quotas) -> None:
        """Bound each run's traffic by `quotas` from now on (its write rate starts afresh)."""
        self.quotas = quotas
        self.buckets = Buckets(quotas.events_per_second, quotas.burst)

    def charge(
        self, run_id: str, what: str, texts: tuple[tuple[str, str], ...] = (), payload: str | None = None
    ) -> None:
        """Admit one write of an authenticated run: its fields within their sizes (TooLargeError),
        then a token of its bucket (TooManyError)."""
        self.quotas.check_payload(what, payload)
        self.quotas.check_texts(what, texts)
        self.buckets.take(run_id)

    def admit_write(self, run_id: str, command: object) -> None:
        """`charge` for a write of the hot path (a report, finish, reply or heartbeat)."""
        if isinstance(command, RecordReport):
            self.charge(run_id, "report", (("state", command.state),), command.payload)
        elif isinstance(command, RecordFinish):
            files = "\n".join(command.files_changed)
            texts = (("status", command.status), ("summary", command.summary), ("files_changed", files))
            self.charge(run_id, "finish", texts, command.payload)
        elif isinstance(command, RecordReply):
            self.charge(run_id, "reply", (("to", command.to),), command.payload)
        elif isinstance(command, Heartbeat):
            self.charge(run_id, "heartbeat")

    def queue_bound(self, message: ControlMessage) -> QueueControl:
        """The command queuing `message`, with the bounds of messages between runs."""
        quotas = self.quotas
        return QueueControl(message, self.queue_limit, quotas.share_of(self.queue_limit), quotas.queue_bytes)

    # -- control messages ------------------------------------------------------------------

    def push_control(self, run_id: str, message: ControlMessage) -> ControlMessage:
        """Queue a control message for a run (its created_at becomes now).

        A message from a run (`from_run_id`, no operator) is bounded by `queue_limit` and
        the sender's share of it; operator control and the system's notices never are.
        """
        queued: ControlMessage | None = self._exec(run_id, self.queue_bound(message), reply=queued_message)
        return queued or message

    def send(self, run_id: str, kind: str, payload: Any, correlation_id: str = "") -> None:
        msg = ControlMessage(correlation_id or make_token(), kind, run_id, "", raw_json(payload))
        self.push_control(run_id, msg)

    def send_to(
        self, from_run_id: str, to_run_id: str, kind: str, payload: Any, correlation_id: str = ""
    ) -> None:
        """Queue a message from one run to another (only the target must exist).

        Raises OperatorOnlyError for a control type only the operator side may send.
        """
        if operator_only(kind):
            raise OperatorOnlyError(f"a run may not send {kind!r}: only an operator sends it")
        msg = ControlMessage(correlation_id or make_token(), kind, to_run_id, from_run_id, raw_json(payload))
        self.push_control(to_run_id, msg)

    def take_control(self, run_id: str) -> list[ControlMessage]:
        """Drain the run's whole queue, oldest first (a ControlDelivered event records it)."""
        if not self.admits(run_id):
            raise RunNotFoundError(run_id)
        taken: list[ControlMessage] = self._writer.call(run_id, TakeControl(), taken_queue)
        return taken

    def queue_depth(self, run_id: str) -> int:
        state = self._state(run_id)
        return len(state.queue)

    def wait_control(
        self, run_id: str, timeout: float, stop: threading.Event | None = None
    ) -> list[ControlMessage]:
        """Long-poll: drain the queue, waiting up to `timeout` seconds for a message if empty."""
        woke = threading.Event()
        unsubscribe = self.on_control(run_id, woke.set)
        try:
            messages = self.take_control(run_id)
            if messages or (stop is not None and stop.is_set()):
                return messages
            woke.wait(timeout)
            return self.take_control(run_id)
        finally:
            unsubscribe()

    # -- ingestion -------------------------------------------------------------------------

    def ingest(self, run_id: str, kind: str, payload: Any) -> None:
        """Route an agent message: done/failed/blocked become finishes, anything else a report."""
        if payload is None:
            raise BrokerError("payload must not be nil")
        raw = raw_json(payload)
        if kind in FINISH_KINDS:
            self._exec(run_id, RecordFinish(kind, "", (), raw))
        else:
            self._exec(run_id, RecordReport(kind, raw))

    def report(self, report: Report) -> None:
        self._exec(report.run_id, RecordReport(report.state, report.payload))

    def finish(self, finish: Finish) -> None:
        self._exec(
            finish.run_id, RecordFinish(finish.status, finish.summary, finish.files_changed, finish.payload)
        )

    def reply(self, reply: Reply) -> None:
        self._exec(reply.run_id, RecordReply(reply.to, reply.payload))

    # -- plumbing --------------------------------------------------------------------------

    def run_state(self, run_id: str, *, fresh: bool = False) -> RunState:
        """The run's decision state; `fresh` folds whatever any process committed first."""
        if fresh and _storable(run_id) and self.exists(run_id):
            self._dir.ask(run_id, Refresh())
        return self._state(run_id)

    def run_command(self, run_id: str, command: object, *, actor: str = "") -> tuple[RunState, list[Record]]:
        """Decide and record a command of the run's aggregate (RunNotFoundError if it is absent);
        `actor` (default: the run) goes in the meta."""
        done: tuple[RunState, list[Record]] = self._exec(run_id, command, actor)
        return done

    def _state(self, run_id: str) -> RunState:
        known = self._known.get(run_id)
        if known is not None and known.fresh:
            return known.state  # as new as the actor's: it publishes every state it reaches
        if not self.admits(run_id):
            return RunState(run_id)
        state: RunState = self._dir.ask(run_id, GetState())
        return state

    def _exec(self, run_id: str, command: object, actor: str = "", reply: Answer = state_after) -> Any:
        """Decide and record `command` through the run writer; `actor` (default: the run) goes in
        the meta. The answer is `reply(state before, state after, records)`: by default the state
        after and the records."""
        if not _storable(run_id):
            # Its actor could not even start (the stream name is invalid): answer as the
            # decider would for a run that does not exist.
            if isinstance(command, RegisterRun):
                raise BrokerError(f"invalid run id: at most {MAX_RUN_ID_LENGTH} characters")
            if isinstance(command, DeleteRun):
                return RunState(run_id), []
            raise RunNotFoundError(run_id)
        if not isinstance(command, RegisterRun) and not self.admits(run_id):
            # No such run: answer as its decider would, without starting an actor for it.
            if isinstance(command, DeleteRun):
                return RunState(run_id), []
            raise RunNotFoundError(run_id)
        return self._writer.call(run_id, command, reply, actor=actor)

    def on_record(self, record: Record) -> None:
        """Follower hook: another writer appended to a run stream."""
        if self._known.version(record.stream_id) < record.version:
            # Not written here: no known state may answer before folding it.
            self._known.stale(record.stream_id)
            self._dir.tell_if_running(record.stream_id, Refresh(record.version))
        if record.type == "ControlQueued" or record.type in TOKEN_CHANGES:
            self._signal(record.stream_id)  # a waiting poll takes, or shows its token again
        elif record.type.startswith("Ask"):
            self.conversations.subscribers.signal(record.stream_id)

    def passivate(self, idle_since: datetime | None = None) -> int:
        """Stop the idle run actors (unused since `idle_since`, if given); return how many.

        The known states of runs unused as long are dropped too, unless something waits on them.
        """
        self._known.expire(idle_since, self.has_waiters)
        return self._dir.passivate(idle_since)

    def close(self) -> None:
        self._writer.close()
        self._dir.close()


def _storable(run_id: str) -> bool:
    return len(run_id) <= MAX_RUN_ID_LENGTH
