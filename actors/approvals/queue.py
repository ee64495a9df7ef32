"""ApprovalQueue: the seed's approval gate over event-sourced approval actors.

Each approval is a stream `approval-<id>` and an actor; the queue is a thin coordinator that
validates, runs the durability hooks in the caller's thread (so they never block an actor),
and answers from the live views. Every decision is an append with an expected version, so
one outcome wins across threads, Systems and processes; losers hear ApprovalNotPendingError.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import threading
import uuid
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from datetime import datetime, timedelta
from typing import Any, NoReturn

from eventlog import Clock
from projections import LIST_PAGE, ApprovalRow, ListPage, Views
from projections.approvals import history_order

from .._directory import Directory
from .._errors import (
    ApprovalCancelledError,
    ApprovalExpiredError,
    ApprovalExpireRunError,
    ApprovalHookError,
    ApprovalNotPendingError,
    ApprovalRequestError,
    ApprovalResolvingError,
    ApprovalValidationError,
    QuorumPendingError,
    quoted,
)
from .actor import Act, Flags, HookDone, Invalidate, Outcome, SetRecording
from .decider import (
    DECIDED,
    RECORDING,
    ApprovalCommand,
    ApprovalState,
    DecideApproval,
    DiscardApproval,
    ExpireApproval,
    PublishApproval,
    RecordApproval,
    RefuseAttempt,
    WithdrawApproval,
)
from .model import (
    APPROVE,
    REJECT,
    RISKS,
    Approval,
    ApprovalRequest,
    ApprovalResolution,
    approval_actor_state,
    payload_digest,
    to_approval,
)

KEYS = approval_actor_state()
OPEN = (RECORDING, "pending")
# How often a request waiting with a `cancel` event looks at it.
CANCEL_POLL = 0.02
# The log's stream names are at most 512 characters, "approval-" included.
MAX_ID_LENGTH = 512 - len("approval-")

logger = logging.getLogger("flightlog.approvals")


class ApprovalQueue:
    """Pending approvals: each request resolves exactly once, by decision, timeout or abort.

    `on_requested(approval)` and `on_resolved(resolution)` are optional durability hooks with
    the seed's timing, called after the corresponding append; a hook that raises fails the
    operation closed (the request is discarded; the resolution stands but the caller hears
    the error).
    """

    def __init__(
        self, directory: Directory, views: Views, clock: Clock, *, timeout: float, quorum: int = 2
    ) -> None:
        if timeout <= 0:
            raise ValueError("approval timeout must be positive")
        if quorum < 1:
            raise ValueError("quorum must be at least 1")
        self._dir = directory
        self._views = views
        self._clock = clock
        self.timeout = timeout
        self.quorum = quorum
        self.on_requested: Callable[[Approval], object] | None = None
        self.on_resolved: Callable[[ApprovalResolution], object] | None = None
        self._listeners: list[Callable[[], object]] = []

    # -- requesting ------------------------------------------------------------------------

    def request(
        self,
        request: ApprovalRequest,
        *,
        deadline: datetime | None = None,
        cancel: threading.Event | None = None,
        requested_by: str = "",
    ) -> ApprovalResolution:
        """Record the request, publish it, and block until its one outcome; return it."""
        approval = self._new_approval(request, deadline)
        hook = self.on_requested
        if hook is None and cancel is not None and cancel.is_set():
            hook = _no_hook  # cancelled already: recorded, then expired, never published
        id = approval.id
        meta = {"actor": requested_by or "runtime", "correlation_id": approval.run_id}
        if hook is not None:
            self._dir.ask(id, SetRecording(True))
        record = RecordApproval(
            approval, self.quorum if request.requires_fleet_quorum else 1, requested_by, publish=hook is None
        )
        # The waiter rides on the recording command: one round trip to the actor, not two.
        waiter: Future[Outcome] = Future()
        self._dir.ask(id, Act(record, meta, claim=False, waiter=waiter))
        if hook is not None:
            try:
                early = self._finish_recording(approval, hook, meta, cancel)
            finally:
                self._dir.ask(id, SetRecording(False))
            if early is not None:
                return early
        self._changed()
        return self._await(approval, waiter, cancel)

    def submit(
        self,
        request: ApprovalRequest,
        *,
        deadline: datetime | None = None,
        requested_by: str = "",
        approval_id: str = "",
    ) -> Approval:
        """Record and publish a request without waiting for its outcome (no on_requested hook).

        For requesters that are not blocked in this process, such as an agent that asked
        over HTTP and will hear the answer on its control queue. `approval_id` names the
        approval (default: a fresh UUID); ApprovalValidationError if that approval exists.
        """
        approval = self._new_approval(request, deadline)
        if approval_id:
            approval = dataclasses.replace(approval, id=approval_id)
        meta = {"actor": requested_by or "runtime", "correlation_id": approval.run_id}
        quorum = self.quorum if request.requires_fleet_quorum else 1
        self._dir.ask(
            approval.id, Act(RecordApproval(approval, quorum, requested_by, publish=True), meta, claim=False)
        )
        self._changed()
        return approval

    def _new_approval(self, req: ApprovalRequest, deadline: datetime | None) -> Approval:
        if not (req.kind and req.title and req.detail):
            raise ApprovalValidationError("approval kind, title, and detail are required")
        if req.risk not in RISKS:
            raise ApprovalValidationError("approval risk must be low, medium, or high")
        try:
            digest = payload_digest(req.payload)
        except TypeError as e:
            raise ApprovalValidationError(f"approval payload cannot be encoded as JSON: {e}") from e
        now = self._clock.now()
        expires = now + timedelta(seconds=self.timeout)
        if deadline is not None:
            if deadline.tzinfo is None:
                raise ApprovalValidationError("deadline must be an aware datetime")
            expires = min(expires, deadline)
        return Approval(
            str(uuid.uuid4()),
            req.run_id,
            req.tool_call_id,
            req.kind,
            req.title,
            req.detail,
            req.risk,
            digest,
            req.requires_fleet_quorum,
            now,
            expires,
        )

    def _finish_recording(
        self,
        approval: Approval,
        hook: Callable[[Approval], object],
        meta: dict[str, Any],
        cancel: threading.Event | None,
    ) -> ApprovalResolution | None:
        """Run on_requested; then publish, or expire if invalidated or cancelled meanwhile."""
        id = approval.id
        try:
            hook(approval)
        except Exception as e:
            self._dir.ask(id, Act(DiscardApproval(f"on_requested failed: {e}"), meta, claim=False))
            raise ApprovalRequestError(f"recording approval request: {e}") from e
        state, _, _, invalidated_by = self._dir.ask(id, Flags())
        if state.status != RECORDING:
            # Another process expired it while our hook ran (its deadline passed there).
            resolution: ApprovalResolution | None = state.resolution
            if resolution is None:
                raise ApprovalNotPendingError(id)
            return resolution
        if invalidated_by is None and not (cancel and cancel.is_set()):
            self._dir.ask(id, Act(PublishApproval(), meta, claim=False))
            return None
        if invalidated_by is None:
            self._expire_cancelled(id, meta)
        return self._conclude(id, ExpireApproval(invalidated_by), meta)

    def _expire_cancelled(self, id: str, meta: dict[str, Any]) -> NoReturn:
        """Expire a cancelled request by `runtime`; the error chains on_resolved's, if it failed."""
        try:
            self._conclude(id, ExpireApproval(KEYS.runtime), meta)
        except ApprovalHookError as e:
            raise ApprovalCancelledError(id) from e
        raise ApprovalCancelledError(id)

    def _await(
        self, approval: Approval, waiter: Future[Outcome], cancel: threading.Event | None
    ) -> ApprovalResolution:
        while True:
            try:
                resolution, hook_error = waiter.result(timeout=CANCEL_POLL if cancel is not None else None)
                break
            except FutureTimeout:
                if cancel is not None and cancel.is_set():
                    try:
                        self._expire_cancelled(approval.id, {"actor": KEYS.runtime})
                    except (ApprovalNotPendingError, ApprovalResolvingError):
                        continue  # decided meanwhile: that outcome stands, and the waiter gets it
        if resolution is None:
            raise ApprovalNotPendingError(approval.id)
        if hook_error is not None:
            raise ApprovalHookError(resolution, hook_error) from hook_error
        return resolution

    # -- deciding --------------------------------------------------------------------------

    def resolve(
        self, id: str, decision: str, actor: str = "", *, identity: str = "", reason: str = ""
    ) -> ApprovalResolution:
        """Apply an operator's decision (its reason, if any, goes in the record's meta); return
        the outcome it produced."""
        if decision not in (APPROVE, REJECT):
            raise ApprovalValidationError("decision must be approve or reject")
        if not id or len(id) > MAX_ID_LENGTH:
            # Never recorded: such an id cannot even name a stream (its actor would not start).
            raise ApprovalNotPendingError(id)
        actor = actor or KEYS.operator
        meta = {"actor": actor, "reason": reason} if reason else {"actor": actor}
        state = self._conclude(id, DecideApproval(decision, actor, identity), meta)
        if state is None:
            st: ApprovalState = self._dir.ask(id, Flags())[0]
            raise QuorumPendingError(id, len(st.votes), st.quorum)
        return state

    def withdraw(self, id: str, actor: str, reason: str = "") -> ApprovalResolution:
        """Give an open approval up on its requester's behalf; return its outcome.

        The outcome is `withdrawn` by `actor` (the reason goes in the record's meta), or
        `expired` if its deadline passed first. ApprovalNotPendingError if it is already
        decided (its outcome stands) or was never requested.
        """
        if not id or len(id) > MAX_ID_LENGTH:
            raise ApprovalNotPendingError(id)
        meta = {"actor": actor, "reason": reason} if reason else {"actor": actor}
        resolution = self._conclude(id, WithdrawApproval(actor), meta)
        if resolution is None:
            raise ApprovalNotPendingError(id)
        return resolution

    def refuse_attempt(self, id: str, decision: str, actor: str, reason: str) -> None:
        """Record an answer from someone who may not decide `id` (e.g. a run's own); nothing changes.

        Raises ApprovalNotPendingError if no such approval was ever requested.
        """
        if not id or len(id) > MAX_ID_LENGTH:
            raise ApprovalNotPendingError(id)
        self._dir.ask(id, Act(RefuseAttempt(decision, actor, reason), {"actor": actor}, claim=False))
        self._changed()

    def _conclude(self, id: str, command: ApprovalCommand, meta: dict[str, Any]) -> ApprovalResolution | None:
        """Run a deciding command and, if it produced the outcome, this process's on_resolved hook."""
        hook = self.on_resolved
        try:
            # Without an on_resolved hook nothing runs between the outcome and its waiters:
            # the actor hands it over as soon as it is recorded, with no HookDone round trip.
            state: ApprovalState = self._dir.ask(id, Act(command, meta, claim=hook is not None))
        except ApprovalExpiredError as expired:
            error = self._run_resolved_hook(id, expired.resolution, hook)
            if error is not None:
                expired.add_note(f"on_resolved also failed: {error}")
            raise
        if state.status != DECIDED or state.resolution is None:
            return None
        error = self._run_resolved_hook(id, state.resolution, hook)
        if error is not None:
            raise ApprovalHookError(state.resolution, error) from error
        return state.resolution

    def _run_resolved_hook(
        self, id: str, resolution: ApprovalResolution, hook: Callable[[ApprovalResolution], object] | None
    ) -> BaseException | None:
        if hook is None:
            self._changed()
            return None
        error: BaseException | None = None
        try:
            hook(resolution)
        except Exception as e:  # noqa: BLE001 - handed to the waiter and raised to the caller
            error = e
        finally:
            self._dir.ask(id, HookDone(error))
            self._changed()
        return error

    def expire_run(self, run_id: str, actor: str = "") -> None:
        """Expire every open approval of one run (default actor `abort`), in id order."""
        if not run_id:
            return
        actor = actor or KEYS.abort
        problems: list[str] = []
        for row in sorted(self._open_rows(), key=lambda r: r.id):
            if row.run_id != run_id:
                continue
            if row.status == RECORDING:
                ref = self._dir.peek(row.id)
                if ref is not None and self._dir.ask(row.id, Flags())[1]:
                    self._dir.ask(row.id, Invalidate(actor))  # expires when its recording ends
                    continue
            try:
                self._conclude(row.id, ExpireApproval(actor), {"actor": actor})
            except ApprovalHookError as e:
                problems.append(f"expiring approval {quoted(row.id)}: {e.__cause__}")
            except ApprovalResolvingError:
                problems.append(f"expiring approval {quoted(row.id)}: resolution already in progress")
            except ApprovalNotPendingError:
                problems.append(f"expiring approval {quoted(row.id)}: approval is no longer pending")
        if problems:
            raise ApprovalExpireRunError(problems)

    def tick(self) -> int:
        """Expire every open approval whose deadline has passed; return how many."""
        now = self._clock.now()
        fired = 0
        for row in self._open_rows(due_by=now):
            if (
                row.status == RECORDING
                and self._dir.peek(row.id) is not None
                and self._dir.ask(row.id, Flags())[1]
            ):
                continue  # our own hook is still recording it; it is expired once recorded
            try:
                self._conclude(row.id, ExpireApproval(KEYS.timeout), {"actor": KEYS.timeout})
                fired += 1
            except (ApprovalNotPendingError, ApprovalResolvingError):
                continue  # decided meanwhile: that outcome stands
            except ApprovalHookError:
                fired += 1  # the expiry is recorded; the waiter hears the hook's error
        return fired

    def next_deadline(self) -> datetime | None:
        def earliest(state: dict[str, ApprovalRow]) -> datetime | None:
            return min((r.expires_at for r in state.values() if r.status in OPEN), default=None)

        return self._views.runner.read("pending_approvals", earliest)

    # -- reading ---------------------------------------------------------------------------

    def pending(self) -> list[Approval]:
        """Approvals awaiting a decision, oldest request first (past-deadline ones excluded)."""
        rows = self._views.pending_approvals()
        return [to_approval(r) for r in rows if not self._resolving_here(r.id)]

    def pending_page(self, after: int | None = None, limit: int = LIST_PAGE) -> ListPage[ApprovalRow]:
        """A page of `pending()` (their rows) after the cursor `after`; `next` is the next page's."""
        page = self._views.lists.pending(after, limit)
        return ListPage(tuple(r for r in page.rows if not self._resolving_here(r.id)), page.next)

    def get(self, id: str) -> Approval | None:
        """The approval if it is pending and not being resolved right now; else None."""
        row = self._views.approval(id)
        if row is None or row.status != "pending" or self._clock.now() >= row.expires_at:
            return None
        if self._resolving_here(id):
            return None
        return to_approval(row)

    def _resolving_here(self, id: str) -> bool:
        if self._dir.peek(id) is None:
            return False
        return bool(self._dir.ask(id, Flags())[2])

    def _open_rows(self, due_by: datetime | None = None) -> list[ApprovalRow]:
        """Open approvals in request order; with `due_by`, only those whose deadline has passed.

        Picked under the views' lock rather than from a copy of every open row: the scheduler
        asks after every change, and most of the time nothing is due.
        """

        def pick(state: dict[str, ApprovalRow]) -> list[ApprovalRow]:
            return history_order(
                {
                    id: r
                    for id, r in state.items()
                    if r.status in OPEN and (due_by is None or r.expires_at <= due_by)
                }
            )

        rows: list[ApprovalRow] = self._views.runner.read("pending_approvals", pick)
        return rows

    # -- change notification ---------------------------------------------------------------

    def subscribe(self, fn: Callable[[], object]) -> Callable[[], None]:
        """Call `fn()` after every change this queue makes; returns the unsubscribe function.

        `fn` runs on the thread that made the change, so it should only wake someone; if it
        fails, that is logged as its own failure, and neither the change (recorded already)
        nor the other subscribers are affected.
        """
        self._listeners.append(fn)

        def unsubscribe() -> None:
            if fn in self._listeners:
                self._listeners.remove(fn)

        return unsubscribe

    def _changed(self) -> None:
        for fn in list(self._listeners):
            try:
                fn()
            except Exception:  # the subscriber's own failure: never the caller's, whose change is in
                logger.exception("a subscriber of the approval queue failed (it should only wake someone)")


def _no_hook(approval: Approval) -> None:
    return None


def _quote(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)  # Go's %q, as in the seed's messages
