"""One permission request's decision, waited for by its request id; and its withdrawal.

The log is the truth: a request's state is its approval's row (`Views.approval`), so a run
that restarts, or waits on another server, reads a decision made while it was away. Whichever
process decides, the decision reaches the run's stream (`PermissionDecided` and its control
notice, `Broker.approval_decided`), and that commit wakes this process's waiters of the run
(`Broker.on_control`): each reads its own request again. Waiting takes nothing off the run's
control queue, so parallel waiters of one run never take each other's answers.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from eventlog import EventLog
from projections import ApprovalRow, Views

from .._broker_errors import PermissionNotFoundError, RunNotFoundError
from .._errors import ApprovalNotPendingError
from ..approvals import ApprovalQueue, approval_actor_state
from .broker import Broker
from .permissions import BEHAVIOR, permission_approval_id

MAX_REASON = 1000  # characters of a withdrawal's reason that are kept
OPEN = ("recording", "pending")


@dataclass(frozen=True, slots=True)
class GateStatus:
    """A permission request as its run sees it: pending, or decided (how, by whom, why)."""

    request_id: str
    approval_id: str
    decision: str = ""  # "" while pending; else approve, reject, expired or withdrawn
    decided_by: str = ""
    reason: str = ""
    decided_at: datetime | None = None

    @property
    def pending(self) -> bool:
        return not self.decision

    @property
    def behavior(self) -> str:
        """`allow` or `deny` once decided ("" while pending): only an approval allows."""
        return BEHAVIOR.get(self.decision, "deny") if self.decision else ""

    def to_json(self) -> dict[str, Any]:
        """The wire's answer: `{"request_id","status":"pending"}`, or the decision."""
        if self.pending:
            return {"request_id": self.request_id, "status": "pending"}
        return {
            "request_id": self.request_id,
            "status": "decided",
            "behavior": self.behavior,
            "decision": self.decision,
            "decided_by": self.decided_by,
            "reason": self.reason,
            "approval_id": self.approval_id,
        }


class Gates:
    """Permission requests by request id, over the broker's runs and the approval gate."""

    def __init__(self, broker: Broker, approvals: ApprovalQueue, views: Views, log: EventLog) -> None:
        self.broker = broker
        self.approvals = approvals
        self.views = views
        self.log = log

    def status(self, run_id: str, request_id: str) -> GateStatus:
        """The request's state as the log has it now.

        RunNotFoundError for an unknown run; PermissionNotFoundError for a request it never filed.
        """
        approval_id, row = self._row(run_id, request_id)
        if row.status in OPEN:
            return GateStatus(request_id, approval_id)
        decision = row.decision or row.status
        return GateStatus(
            request_id, approval_id, decision, row.actor, self._reason(row, decision), row.decided_at
        )

    def withdraw(self, run_id: str, request_id: str, reason: str = "") -> GateStatus:
        """Give the run's request up (recorded as its outcome `withdrawn`); its state afterwards.

        A request already decided keeps its decision: withdrawing never changes an outcome.
        """
        approval_id, row = self._row(run_id, request_id)
        if row.status in OPEN:
            # Decided meanwhile: that outcome stands, and is the answer.
            with contextlib.suppress(ApprovalNotPendingError):
                self.approvals.withdraw(approval_id, f"run:{run_id}", reason[:MAX_REASON])
        return self.status(run_id, request_id)

    def watch(self, run_id: str, fn: Callable[[], object]) -> Callable[[], None]:
        """Call `fn()` (from another thread) when one of the run's requests may have been decided."""
        return self.broker.on_control(run_id, fn)

    def wait(self, run_id: str, request_id: str, timeout: float) -> GateStatus:
        """The request's state once decided, or still pending after `timeout` seconds."""
        woke = threading.Event()
        unsubscribe = self.watch(run_id, woke.set)
        try:
            deadline = time.monotonic() + timeout
            status = self.status(run_id, request_id)
            while status.pending and (left := deadline - time.monotonic()) > 0:
                woke.wait(left)
                woke.clear()
                status = self.status(run_id, request_id)
            return status
        finally:
            unsubscribe()

    def _row(self, run_id: str, request_id: str) -> tuple[str, ApprovalRow]:
        if not self.broker.exists(run_id):
            raise RunNotFoundError(run_id)
        approval_id = permission_approval_id(run_id, request_id)
        row = self.views.approval(approval_id)
        if row is None:  # a request filed before approval ids were derived from request ids
            state = self.broker.run_state(run_id)
            older = next((a for r, a in reversed(state.permissions) if r == request_id), "")
            row = self.views.approval(older) if older else None
            approval_id = older
        if row is None or row.kind != "permission" or row.run_id != run_id:
            raise PermissionNotFoundError(run_id, request_id)
        return approval_id, row

    def _reason(self, row: ApprovalRow, decision: str) -> str:
        if decision in ("approve", "reject"):
            # The operator's own words, when they gave any, reach the run (and its model).
            given = self._given(row)
            said = f"{'approved' if decision == 'approve' else 'rejected'} by {row.actor}"
            return f"{said}: {given}" if given else said
        if decision == "expired":
            if row.actor == approval_actor_state().timeout:
                return "no decision before the request's deadline"
            return f"expired ({row.actor})"
        if decision == "withdrawn":
            return self._given(row) or "withdrawn by the run"
        return decision

    def _given(self, row: ApprovalRow) -> str:
        """The reason recorded with the approval's decision ("" if none was given)."""
        given = ""
        for record in self.log.approval_records(row.id):
            if record.type == "ApprovalDecided":
                given = str((record.meta or {}).get("reason", ""))
        return given
