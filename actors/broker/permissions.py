"""The broker's permission relay: a run's permission request through the approval gate, and back.

A request becomes an approval (risk from the tool's name); the operator's decision reaches the
run as a `permission_decision` message. A run's own answer decides only a request that needs no
operator (`operator_decides`); on one that does, it is kept as a refused attempt.

A request id names one request of its run forever: its approval's id is derived from the run
and request ids, so filing it again finds that approval (the same content: nothing new; other
content: refused), and an answer finds it however many requests came since.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable
from datetime import datetime

from projections import RECENT_PERMISSIONS, ApprovalRow, Views

from .._broker_errors import (
    OperatorOnlyError,
    PermissionConflictError,
    PermissionNotFoundError,
    RunNotFoundError,
    TooManyError,
)
from .._errors import (
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ApprovalValidationError,
    QuorumPendingError,
)
from ..approvals import ApprovalQueue, ApprovalRequest, needs_operator, payload_digest
from .quotas import Quotas
from .run_decider import RecordPermissionDecision, RequestPermission, RunState

BEHAVIOR = {"approve": "allow", "reject": "deny", "expired": "deny", "withdrawn": "deny"}
_PERMISSIONS = uuid.UUID("6a1f6f0e-6b0c-4d7e-9a53-2f1c0b8d4e71")  # the namespace of their approval ids


def permission_approval_id(run_id: str, request_id: str) -> str:
    """The id of the approval of a run's permission request: the same for the same two ids, forever."""
    return str(uuid.uuid5(_PERMISSIONS, f"{run_id}\n{request_id}"))


class PermissionRelay:
    """A run's permission requests through the approval gate, and back (a part of `Broker`).

    It reads and writes runs through the broker's `exists`, `state` (the run's decision state)
    and `execute` (a run command through the run writer); `quotas()` are the broker's bounds.
    """

    def __init__(
        self,
        approvals: ApprovalQueue,
        views: Views,
        quotas: Callable[[], Quotas],
        exists: Callable[[str], bool],
        state: Callable[[str], RunState],
        execute: Callable[[str, object], object],
        operator_decides: str = "high",
    ) -> None:
        needs_operator("high", operator_decides)  # refuses an unknown policy
        self.approvals = approvals
        self.views = views
        self._quotas = quotas
        self.exists = exists
        self._state = state
        self._exec = execute
        # Which relayed permission requests only an operator decides (approvals.OPERATOR_DECIDES).
        self.operator_decides = operator_decides

    def permission_request(
        self,
        run_id: str,
        request_id: str,
        tool_name: str,
        description: str,
        input_preview: str,
        *,
        file: bool = True,
        risk: str = "",
    ) -> str:
        """Relay a run's permission request to the approval gate; return the approval id.

        PermissionConflictError if the run filed this request id before with other content.
        `file=False` records only the approval (for an answer to a request never filed).
        `risk` may raise the risk the tool's name implies (`tool_risk`), never lower it: a run
        cannot talk its way out of an operator's decision.
        """
        if not self.exists(run_id):
            raise RunNotFoundError(run_id)
        approval_id = permission_approval_id(run_id, request_id)
        request = ApprovalRequest(
            kind="permission",
            title=(description.splitlines()[0][:120] if description else f"Use {tool_name or 'a tool'}"),
            detail=description or input_preview or tool_name or request_id or "permission request",
            risk=higher_risk(tool_risk(tool_name), risk),
            run_id=run_id,
            tool_call_id=request_id,
            payload={"tool_name": tool_name, "description": description, "input_preview": input_preview},
        )
        if self._filed_before(run_id, request_id, approval_id, request):
            return approval_id
        if file:
            self._check_open(run_id)
        try:
            self.approvals.submit(request, requested_by=f"run:{run_id}", approval_id=approval_id)
        except ApprovalValidationError:
            # Filed meanwhile by another call (or process): the same content is the same request.
            if self._filed_before(run_id, request_id, approval_id, request):
                return approval_id
            raise
        if file:
            self._exec(
                run_id, RequestPermission(request_id, tool_name, description, input_preview, approval_id)
            )
        return approval_id

    def open_permissions(self, run_id: str) -> int:
        """How many of the run's permission requests wait for a decision now."""

        def count(live: dict[str, dict[str, ApprovalRow]]) -> int:
            rows = live["pending_approvals"].values()
            return sum(1 for row in rows if row.run_id == run_id and row.kind == "permission")

        return self.views.runner.read_states(count)[1]

    def _check_open(self, run_id: str) -> None:
        """TooManyError if the run has as many requests waiting as it may (nothing is filed)."""
        bound = self._quotas().open_permissions
        if bound and self.open_permissions(run_id) >= bound:
            raise TooManyError(
                f"run {run_id} has {bound} permission requests waiting for a decision, as many as it "
                "may: wait for a decision, or withdraw one"
            )

    def _filed_before(self, run_id: str, request_id: str, approval_id: str, request: ApprovalRequest) -> bool:
        """Whether this request id was filed already with this content (PermissionConflictError
        if with other content): a re-filed request changes nothing and gets no second answer."""
        row = self.views.approval(approval_id)
        if row is None:
            return False
        if row.payload_sha256 != payload_digest(request.payload) or row.risk != request.risk:
            raise PermissionConflictError(run_id, request_id)
        return True

    def permission_decision(self, run_id: str, request_id: str, behavior: str, actor: str = "") -> None:
        """HTTP /permission: the run's answer to its own request (allow → approve, else reject).

        On a request that needs an operator (`operator_decides`) the answer decides nothing: it
        is recorded on the approval as a refused attempt, the approval stays pending, and
        OperatorOnlyError is raised. Otherwise it decides the linked approval and is recorded.
        """
        state = self._state(run_id)
        if not state.exists:
            raise RunNotFoundError(run_id)
        approval_id = permission_approval_id(run_id, request_id)
        row = self.views.approval(approval_id)
        if row is None:  # a request filed before approval ids were derived from request ids
            approval_id = next((a for r, a in reversed(state.permissions) if r == request_id), "")
            row = self.views.approval(approval_id) if approval_id else None
        if row is None:
            # An answer to a request never filed (the seed records it as given). It claims the
            # request id, so that filing it afterwards with a tool is a conflict, never a way
            # to have `allow` queued before the operator saw the request.
            approval_id = permission_approval_id(run_id, request_id)
            self.permission_request(run_id, request_id, "", "", "", file=False)
            row = self.views.approval(approval_id)
            if row is None:
                raise PermissionNotFoundError(run_id, request_id)
        actor = actor or f"run:{run_id}"
        decision = "approve" if behavior == "allow" else "reject"
        if needs_operator(row.risk, self.operator_decides) or row.requires_fleet_quorum:
            policy = self.operator_decides
            reason = f"only an operator decides a {row.risk}-risk request (operator-decides {policy})"
            asked = f"{reason}; the run asked {behavior!r}"
            self.approvals.refuse_attempt(approval_id, decision, actor, asked)
            outcome = self._approval_behavior(approval_id)
            if outcome is not None:  # the operator has spoken: make sure the run has heard it
                told, by, at = outcome
                self._tell(run_id, RecordPermissionDecision(request_id, told, approval_id, by, at))
            raise OperatorOnlyError(f"{reason}: the answer is recorded as a refused attempt")
        # Decided before, or past its deadline: the approval's recorded outcome is the answer
        # (this attempt stays in its history as refused), not the behaviour asked.
        with contextlib.suppress(ApprovalNotPendingError, ApprovalExpiredError):
            try:
                self.approvals.resolve(approval_id, decision, actor)
            except QuorumPendingError:
                return  # one vote of several: recorded once the quorum is reached
        outcome = self._approval_behavior(approval_id)
        if outcome is not None:
            behavior, actor, at = outcome
            self._tell(run_id, RecordPermissionDecision(request_id, behavior, approval_id, actor, at))

    def approval_decided(self, approval_id: str) -> None:
        """Propagate a permission approval's outcome to its run (idempotent; any process may call)."""
        row = self.views.approval(approval_id)
        if row is None or row.kind != "permission" or not row.run_id or not row.decision:
            return
        if not self.exists(row.run_id):
            return
        assert row.decided_at is not None
        self._tell(
            row.run_id,
            RecordPermissionDecision(
                row.tool_call_id, BEHAVIOR[row.decision], approval_id, row.actor, row.decided_at
            ),
        )

    def _tell(self, run_id: str, command: RecordPermissionDecision) -> None:
        """Tell the run a decision, once.

        The run's state knows its latest RECENT_PERMISSIONS requests and decisions. A decision
        of an older request (a fork decides every copied request again, newest first; every
        follower relays every decision) is looked for in the run's stream, whether it heard it
        already: only then is a stream read, and only that run's. A new decision's request is
        among the latest, and costs no read.
        """
        state = self._state(run_id)
        if (
            command.approval_id not in state.decided
            and len(state.decided) >= RECENT_PERMISSIONS
            and all(request != command.request_id for request, _ in state.permissions)
            and self._heard(run_id, command.approval_id)
        ):
            return
        self._exec(run_id, command)

    def _heard(self, run_id: str, approval_id: str) -> bool:
        return any(
            r.type == "PermissionDecided" and r.data.get("approval_id") == approval_id
            for r in self.views.log.read(f"run-{run_id}")
        )

    def _approval_behavior(self, approval_id: str) -> tuple[str, str, datetime] | None:
        row = self.views.approval(approval_id)
        if row is None or not row.decision or row.decided_at is None:
            return None
        return BEHAVIOR[row.decision], row.actor, row.decided_at


def higher_risk(derived: str, asked: str) -> str:
    """The higher of the risk a tool's name implies and the one its run asked for ("": none)."""
    if asked not in _RANK:
        raise ApprovalValidationError("approval risk must be low, medium, or high")
    return max(derived, asked, key=_RANK.__getitem__)


_RANK = {"": -1, "low": 0, "medium": 1, "high": 2}


def tool_risk(tool_name: str) -> str:
    """Risk of a tool by name: shell high; writes and URLs medium; reads low; unknown medium."""
    name = tool_name.lower()
    if any(k in name for k in ("bash", "shell", "exec", "run", "command")):
        return "high"
    if any(k in name for k in ("read", "glob", "grep", "list", "view", "search")):
        return "low"
    return "medium"
