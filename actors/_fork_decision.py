"""Forks that change a decision: from any approval in a run's history, the run as it would have
gone had that approval been decided otherwise.

One door for both kinds of run. An agent (controller) run is forked just before the
approval's permission request (`fork_run_at_approval`): its re-drive asks that request again
and decides it as the fork says, then serves the rest of the recording while the outcome is
the recorded one, or goes on with a live harness once it differs. A broker run is forked into
a new run whose approval is decided at once (`fork_broker_run`); its own agent goes on from
there. Either way the decision is recorded as taken by the operator who asked for the fork,
never by a name typed in.

The decision may be left out: the fork then takes the other one (approve for a recorded
reject, reject for an approve). It may also be the recorded one: that fork replays the same
choice, and its provenance says so (`recorded`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from projections import ApprovalRow

from ._errors import ApprovalNotInRunError, ApprovalStillPendingError, ForkError
from .broker import fork_broker_run
from .controller import fork_run_at_approval

if TYPE_CHECKING:
    from ._system import System

DECISIONS = ("approve", "reject")
OTHER = {"approve": "reject", "reject": "approve"}
AGENT, BROKER = "agent", "broker"


@dataclass(frozen=True, slots=True)
class ApprovalFork:
    """A fork at an approval: the new run, where it came from, and the decision it takes.

    `fork_approval_id` is the fork's own approval of the request: for a broker run, filed and
    decided now; for an agent run "", as its re-drive asks it. `token` is a broker fork's run token, for
    its agent: only its digest is kept, and `to_dict` leaves it out.
    """

    kind: str  # AGENT or BROKER
    run_id: str
    stream: str
    origin_run_id: str
    origin_stream: str
    at_seq: int
    copied: int
    seq: int
    approval_id: str
    decision: str
    recorded: str
    decided_by: str
    fork_approval_id: str = ""
    request_id: str = ""
    token: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "run_id": self.run_id,
            "stream": self.stream,
            "origin_run_id": self.origin_run_id,
            "origin_stream": self.origin_stream,
            "at_seq": self.at_seq,
            "copied": self.copied,
            "seq": self.seq,
            "approval_id": self.approval_id,
            "decision": self.decision,
            "recorded": self.recorded,
            "decided_by": self.decided_by,
            "fork_approval_id": self.fork_approval_id,
            "request_id": self.request_id,
        }


def approval_to_change(
    system: System, run_id: str, approval_id: str, decision: str | None
) -> tuple[ApprovalRow, str]:
    """The approval of run `run_id` a fork changes, and the decision it takes there.

    ApprovalNotInRunError when the approval is not one of the run's, ApprovalStillPendingError
    while it has no outcome, ForkError for a decision other than approve or reject, or none
    given where the recorded outcome (expired, withdrawn) has no other.
    """
    row = system.views.approval(approval_id)
    if row is None or row.run_id != run_id:
        raise ApprovalNotInRunError(f"approval {approval_id!r} is not one of run {run_id!r}'s")
    if not row.terminal:
        raise ApprovalStillPendingError(
            f"approval {approval_id} is still {row.status}: decide it (or fork at a seq); a fork "
            "changes a decision that was made"
        )
    if decision is None:
        other = OTHER.get(row.status)
        if other is None:
            raise ForkError(
                f"approval {approval_id} ended {row.status!r}: say which decision the fork takes "
                "(approve or reject)"
            )
        return row, other
    if decision not in DECISIONS:
        raise ForkError(f"a fork decides approve or reject, not {decision!r}")
    return row, decision


def fork_at_approval(
    system: System,
    run_id: str,
    approval_id: str,
    decision: str | None = None,
    *,
    decided_by: str,
    identity: str,
    actor: str,
    origin: str,
    by_credential: str = "",
    reason: str = "",
    new_id: str | None = None,
) -> ApprovalFork:
    """Fork run `run_id` at its approval `approval_id`, which the fork decides `decision`.

    `decided_by` and `identity` (the credential) are the operator who asks for the fork, who
    takes the decision; `actor` is who forks as the log's meta says it. A broker fork is a
    new run created with `origin`, `decided_by` and `by_credential` (RunRegistered's).
    """
    row, decision = approval_to_change(system, run_id, approval_id, decision)
    if not decided_by:
        raise ForkError("a fork's decision needs the operator who takes it")
    if system.views.agent_run(run_id, at=system.log.head().seq) is not None:
        fork = fork_run_at_approval(
            system.log, row, decision, decided_by=decided_by, identity=identity, actor=actor,
            reason=reason, new_id=new_id, views=system.views,
        )  # fmt: skip
        return ApprovalFork(
            AGENT, fork.run_id, fork.stream, run_id, fork.origin_stream, fork.at_seq, fork.copied, fork.seq,
            row.id, decision, row.status, decided_by, request_id=row.tool_call_id,
        )  # fmt: skip
    if not system.broker.exists(run_id):
        raise ApprovalNotInRunError(f"no run {run_id!r} in this log")
    b = fork_broker_run(
        system.broker, row, decision, decided_by=decided_by, identity=identity, actor=actor, origin=origin,
        by_credential=by_credential, reason=reason, new_id=new_id,
    )  # fmt: skip
    return ApprovalFork(
        BROKER, b.run_id, f"run-{b.run_id}", run_id, f"run-{run_id}", b.at_seq, b.copied, b.seq, row.id,
        decision, row.status, decided_by, b.fork_approval_id, b.request_id, b.token,
    )  # fmt: skip
