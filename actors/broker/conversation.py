"""Conversations between runs: asks, their replies, waits, cancels and timeouts.

An ask lives in the asking run's stream, so everything about it is decided by that run's
actor, recorded in the log, and seen by every process that follows the log: a reply that
arrives through one server wakes an asker waiting on another, and a restart loses nothing.
The mutual-ask guard spans two runs; within a process a lock makes it exact, and across
processes an ask that finds the reverse ask recorded after its own is withdrawn (so two
mutual asks can never both stand; in a true race both may be refused).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import timedelta
from typing import Any, Protocol

from eventlog import Clock, Record
from projections import LIST_PAGE, MAX_LIST_PAGE, Views

from .._broker_errors import AskConflictError, AskNotFoundError, NotAskPartyError, RunNotFoundError
from .asks import (
    CANCELLED,
    REPLIED,
    TIMEOUT,
    AnswerAsk,
    AskEdge,
    AskOutcome,
    CancelAsk,
    ExpireAsk,
    OpenAsk,
    TakeReply,
    WithdrawAsk,
    closure,
    find,
)
from .model import raw_json
from .quotas import Quotas
from .run_decider import RunState, UpdateInfo


class RunActors(Protocol):
    """What conversations need of the broker: its clock and views, and its run actors."""

    clock: Clock
    views: Views
    quotas: Quotas

    def exists(self, run_id: str) -> bool: ...

    def send_to(self, from_run_id: str, to_run_id: str, kind: str, payload: Any) -> None: ...

    def run_state(self, run_id: str, *, fresh: bool = False) -> RunState: ...

    def run_command(self, run_id: str, command: object) -> tuple[RunState, list[Record]]: ...


DEFAULT_ASK_TIMEOUT = 600.0  # seconds an ask waits for its reply, as the seed's 10 minutes
# A waiter looks again at least this often (seconds), so a deadline passes on time even
# without a scheduler; any change to the asker's stream wakes it at once.
RECHECK = 1.0
FIRE_AND_FORGET = "reply_to edge not found, delivered as fire-and-forget"


class Subscribers:
    """Callbacks per run id, called when something about that run changes."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fns: dict[str, set[Callable[[], object]]] = {}

    def add(self, run_id: str, fn: Callable[[], object]) -> Callable[[], None]:
        with self._lock:
            self._fns.setdefault(run_id, set()).add(fn)

        def remove() -> None:
            with self._lock:
                fns = self._fns.get(run_id)
                if fns is not None:
                    fns.discard(fn)
                    if not fns:
                        del self._fns[run_id]

        return remove

    def signal(self, run_id: str) -> None:
        with self._lock:
            fns = list(self._fns.get(run_id, ()))
        for fn in fns:
            fn()


class Conversations:
    """Asks, replies, waits and cancels over a broker's run actors."""

    def __init__(self, broker: RunActors, ask_timeout: float = DEFAULT_ASK_TIMEOUT) -> None:
        self.broker = broker
        self.ask_timeout = ask_timeout
        self.subscribers = Subscribers()
        self._lock = threading.Lock()

    # -- asking and replying ---------------------------------------------------------------

    def ask(self, from_run_id: str, to_run_id: str, message_id: str, payload: Any) -> None:
        """Open an ask (from_run_id, message_id) and deliver it to the target's queue."""
        b = self.broker
        raw = raw_json(payload)
        if not message_id:
            b.run_command(from_run_id, OpenAsk("", to_run_id, raw, b.clock.now()))  # raises AskInvalidError
        if not b.exists(to_run_id):
            raise RunNotFoundError(to_run_id)
        deadline = b.clock.now() + timedelta(seconds=self.ask_timeout)
        with self._lock:
            # A cached state may still hold an ask another process has closed: confirm from the log.
            if self._asks_me(to_run_id, from_run_id, fresh=False) and self._asks_me(
                to_run_id, from_run_id, fresh=True
            ):
                raise AskConflictError("mutual ask refused")
            limit = b.quotas.open_asks
            state, _ = b.run_command(from_run_id, OpenAsk(message_id, to_run_id, raw, deadline, limit))
            edge = find(state.asks, message_id)
            assert edge is not None
            # Another process may have recorded the reverse ask meanwhile: look at the log.
            if self._asks_me(to_run_id, from_run_id, fresh=True):
                b.run_command(from_run_id, WithdrawAsk(message_id, edge.sent_at, "mutual ask refused"))
                raise AskConflictError("mutual ask refused")
        try:
            b.send_to(from_run_id, to_run_id, "agent_message", raw)
        except RunNotFoundError:
            b.run_command(from_run_id, WithdrawAsk(message_id, edge.sent_at, "target vanished"))
            raise

    def reply(self, from_run_id: str, to_run_id: str, reply_to: str, payload: Any) -> str:
        """Answer `to_run_id`'s ask `reply_to`; returns "" when answered, else the fire-and-forget note.

        With no such ask (never sent, expired, cancelled, collected) the reply is delivered to
        the asker's queue as a plain message. NotAskPartyError if another run was asked.
        """
        raw = raw_json(payload)
        edge = self._edge(to_run_id, reply_to)
        if edge is not None:
            if edge.to_run_id != from_run_id:
                raise NotAskPartyError("not the target of this ask")
            try:
                self.broker.run_command(to_run_id, AnswerAsk(reply_to, from_run_id, raw))
                return ""
            except AskNotFoundError:
                pass  # closed meanwhile: delivered as any message
        self.broker.send_to(from_run_id, to_run_id, "agent_message", raw)
        return FIRE_AND_FORGET

    def cancel(self, run_id: str, message_id: str) -> None:
        """Cancel the run's ask; AskNotFoundError if it has none open with that id."""
        if self._edge(run_id, message_id) is None:
            raise AskNotFoundError(message_id)
        self.broker.run_command(run_id, CancelAsk(message_id))

    # -- waiting ---------------------------------------------------------------------------

    def wait_step(self, run_id: str, message_id: str, waiting: AskEdge | None) -> AskOutcome | AskEdge:
        """One look at the ask: its outcome if it ended, else the edge to keep waiting on.

        `waiting` is the edge a previous step returned (None at first: an ask that is not
        open then is AskNotFoundError). A reply is collected here (`AskReplyTaken`), and an
        ask past its deadline is timed out here, so a wait ends on time by itself.
        """
        b = self.broker
        while True:
            state = b.run_state(run_id)
            edge = find(state.asks, message_id)
            if waiting is None and edge is None:
                edge = self._edge(run_id, message_id)
                if edge is None:
                    raise AskNotFoundError(message_id)
            if edge is not None and (waiting is None or edge.sent_at == waiting.sent_at):
                if edge.answered:
                    try:
                        b.run_command(run_id, TakeReply(message_id, edge.sent_at))
                    except AskNotFoundError:
                        waiting = edge
                        continue  # taken or closed meanwhile: see how it ended
                    return AskOutcome(REPLIED, message_id, edge.reply_from, edge.reply_payload)
                if b.clock.now() >= edge.deadline:
                    _, expired = b.run_command(run_id, ExpireAsk(message_id, edge.sent_at))
                    if expired:
                        return AskOutcome(TIMEOUT, message_id)
                    waiting = edge
                    continue
                return edge
            assert waiting is not None
            how = closure(self._fresh(run_id).closed, message_id, waiting.sent_at)
            if how in (CANCELLED, TIMEOUT):
                return AskOutcome(how, message_id)
            raise AskNotFoundError(message_id)

    def wait_reply(
        self, run_id: str, message_id: str, timeout: float | None = None, stop: threading.Event | None = None
    ) -> AskOutcome | None:
        """Block until the run's ask is answered, cancelled or timed out (None: `timeout` or `stop` first)."""
        woke = threading.Event()
        unsubscribe = self.subscribers.add(run_id, woke.set)
        try:
            step = self.wait_step(run_id, message_id, None)
            left = timeout
            while isinstance(step, AskEdge):
                if (stop is not None and stop.is_set()) or (left is not None and left <= 0):
                    return None
                wait = RECHECK if left is None else min(RECHECK, left)
                woke.wait(wait)
                woke.clear()
                left = None if left is None else left - wait
                step = self.wait_step(run_id, message_id, step)
            return step
        finally:
            unsubscribe()

    def tick(self) -> int:
        """Time out every open ask past its deadline; return how many."""
        now = self.broker.clock.now()
        fired = 0
        for row in self.broker.views.open_asks():
            if row.deadline <= now:
                try:
                    _, records = self.broker.run_command(row.run_id, ExpireAsk(row.message_id, row.sent_at))
                except RunNotFoundError:
                    continue
                fired += bool(records)
        return fired

    # -- peers -----------------------------------------------------------------------------

    def update_info(self, run_id: str, **info: str) -> None:
        fields = {k: info.get(k, "") for k in ("label", "backend", "model", "dir", "status")}
        self.broker.run_command(run_id, UpdateInfo(**fields))

    def sessions(self) -> list[dict[str, Any]]:
        """Every registered run for peer discovery, in registration order (the seed's field order)."""
        out: list[dict[str, Any]] = []
        after: int | None = None
        while True:
            page, after = self.sessions_page(after, MAX_LIST_PAGE)
            out.extend(page)
            if after is None:
                return out

    def sessions_page(
        self, after: int | None = None, limit: int = LIST_PAGE
    ) -> tuple[list[dict[str, Any]], int | None]:
        """Registered runs in registration order after the cursor `after`, and the cursor of the
        next page (None: this is the last). A cursor is the seq that registered a run."""
        page = self.broker.views.lists.runs(after, limit)
        out = []
        for row, info in page.rows:
            entry: dict[str, Any] = {"run_id": row.run_id}
            for key in ("label", "backend", "model", "dir"):
                if info is not None and getattr(info, key):
                    entry[key] = getattr(info, key)
            status = (info.status if info is not None else "") or row.last_state
            if status:
                entry["status"] = status
            entry["last_seen"] = int(row.last_seen.timestamp())
            out.append(entry)
        return out, page.next

    # -- plumbing --------------------------------------------------------------------------

    def _fresh(self, run_id: str) -> RunState:
        """The run's state with everything committed so far folded in (any process's)."""
        return self.broker.run_state(run_id, fresh=True)

    def _edge(self, run_id: str, message_id: str) -> AskEdge | None:
        """The run's open ask `message_id`, looking at the log itself before saying there is none."""
        edge = find(self.broker.run_state(run_id).asks, message_id)
        return edge if edge is not None else find(self._fresh(run_id).asks, message_id)

    def _asks_me(self, asker: str, me: str, *, fresh: bool) -> bool:
        state = self._fresh(asker) if fresh else self.broker.run_state(asker)
        return any(a.to_run_id == me for a in state.asks)
