"""Forking a broker run at one of its approvals: a new run that takes the other decision there.

A broker run is driven by its own agent process (the SDK, a framework adapter), so a fork is
not re-driven here: it is a new run, with its own token, whose history starts as the
origin's before the approval's request (reports, replies, finishes, permission requests
and their answers, copied in order and re-addressed), opened by RunForked. The approval's
request is then filed again in the new run, with the same content, and decided as the fork
says by the operator who asked for it. The agent, started on the new run and resuming from
its own checkpoint, files that request id again and hears the fork's decision at once (one
request id names one request of a run forever); everything after it happens live.

Each copied permission request gets the fork's own approval, in the state it was in at the
fork point: one that was waiting waits again, for an operator; one that was decided carries
that outcome, cast as `<who decided> (recorded)` on behalf of the operator forking (a run's
request has one approval, and the fork's agent must find it: otherwise its own answer to a
copied request would decide it as an unknown tool's, and an operator-gated or rejected request
could come back allowed). The copied events name those approvals, never the origin's: the
origin's approvals stay the origin's, and nothing the fork's token does reaches them.
"""

from __future__ import annotations

import dataclasses
import uuid
from dataclasses import dataclass
from typing import Any

from eventlog import Event, Record, decode
from eventlog.events import PermissionDecided, PermissionRequested, RunForked
from projections import ApprovalRow

from .._errors import ForkError
from .broker import Broker
from .permissions import permission_approval_id
from .run_decider import RecordFork

# The origin's records that a fork copies: its history as its agent made it. Registration,
# tokens, heartbeats, control messages and asks belong to the origin's process and peers.
COPIED = frozenset(
    {"RunReported", "RunReplied", "RunFinished", "RunInfoUpdated", "PermissionRequested", "PermissionDecided"}
)
_PERMISSION_EVENTS = frozenset({"PermissionRequested", "PermissionDecided"})
_DECISION = {"allow": "approve", "deny": "reject"}  # a copied answer's behaviour, as a decision


@dataclass(frozen=True, slots=True)
class BrokerFork:
    """A broker run forked at an approval: the new run, its approval, and its token (shown once)."""

    run_id: str
    origin_run_id: str
    at_seq: int  # the last seq copied: the origin's history before the approval's request
    copied: int
    seq: int  # the seq of its RunForked event
    request_id: str
    fork_approval_id: str  # decided already: a run's permission request takes one decision, never a quorum
    token: str

    def to_dict(self) -> dict[str, Any]:
        """Everything but the token, which the caller hands out once, as it sees fit."""
        return {
            "run_id": self.run_id,
            "stream": f"run-{self.run_id}",
            "origin_run_id": self.origin_run_id,
            "origin_stream": f"run-{self.origin_run_id}",
            "at_seq": self.at_seq,
            "copied": self.copied,
            "seq": self.seq,
            "request_id": self.request_id,
            "fork_approval_id": self.fork_approval_id,
        }


def fork_broker_run(
    broker: Broker,
    approval: ApprovalRow,
    decision: str,
    *,
    decided_by: str,
    identity: str,
    actor: str,
    origin: str,
    by_credential: str = "",
    reason: str = "",
    new_id: str | None = None,
) -> BrokerFork:
    """Fork broker run `approval.run_id` at `approval` (decided there) with `decision` instead.

    `decided_by` and `identity` are who decides it in the fork (the operator asking for it);
    `actor` who forks, `origin` and `by_credential` how the new run was created (RunRegistered).
    """
    run_id = approval.run_id
    records = list(broker.log.read(f"run-{run_id}"))
    request = _request(records, approval)
    if request is None:
        raise ForkError(
            f"approval {approval.id} was never filed as a permission request of run {run_id}: "
            "there is no point of its history to fork at"
        )
    copies = _copies(records, request.seq, new_id := new_id or str(uuid.uuid4()))
    d = request.data
    opening = RunForked(
        new_id, run_id, request.stream, request.seq - 1, approval.id, d["request_id"], decision,
        approval.status, decided_by, identity, actor, reason, broker.clock.now(),
    )  # fmt: skip
    token = broker.create_run(new_id, origin=origin, by=decided_by, by_credential=by_credential)
    _, written = broker.run_command(new_id, RecordFork(opening, tuple(copies)), actor=actor)
    fork_approval = broker.permission_request(
        new_id, d["request_id"], d["tool_name"], d["description"], d["input_preview"], risk=approval.risk
    )
    broker.approvals.resolve(fork_approval, decision, decided_by, identity=identity, reason=_why(opening))
    broker.approval_decided(fork_approval)  # the new run hears it now, not when the follower gets there
    _file_copied(
        broker, new_id, records, copies, request.seq, identity, f"as in run {run_id} before the fork"
    )
    # Read as decided from the token's first use: a decided approval reads as pending until the
    # views have folded its decision.
    broker.views.catch_up()
    return BrokerFork(
        new_id, run_id, opening.at_seq, len(copies), written[0].seq, d["request_id"], fork_approval, token
    )  # fmt: skip


def _request(records: list[Record], approval: ApprovalRow) -> Record | None:
    """The origin's PermissionRequested that filed `approval`."""
    for r in records:
        d = r.data
        if r.type == "PermissionRequested" and d["approval_id"] == approval.id:
            return r
    return None


def _copies(records: list[Record], before_seq: int, new_id: str) -> list[Event]:
    """The origin's own events since its last registration before `before_seq`, re-addressed."""
    start = 0
    for i, r in enumerate(records):
        if r.seq >= before_seq:
            break
        if r.type == "RunRegistered":
            start = i + 1
    out: list[Event] = []
    for r in records[start:]:
        if r.seq >= before_seq:
            break
        if r.type not in COPIED:
            continue
        event = dataclasses.replace(decode(r), run_id=new_id)  # type: ignore[type-var]
        if isinstance(event, PermissionRequested | PermissionDecided):
            event = dataclasses.replace(event, approval_id=permission_approval_id(new_id, event.request_id))
        out.append(event)
    return out


def _file_copied(
    broker: Broker,
    new_id: str,
    records: list[Record],
    copies: list[Event],
    fork_seq: int,
    identity: str,
    why: str,
) -> None:
    """File in the fork's gate the approval of each copied permission request (the copies name
    it already), with the origin's content and risk, and conclude it as it had ended before the
    fork point (`fork_seq`): the origin's outcome, cast as `<who> (recorded)` on behalf of
    `identity`. An approval decided before the fork point counts as decided there even when
    the run heard of it after (its PermissionDecided is written by a follower, later)."""
    origin: dict[str, str] = {}  # request id -> the origin's approval of it
    for r in records:
        if r.type in _PERMISSION_EVENTS and r.data["approval_id"]:
            origin.setdefault(r.data["request_id"], r.data["approval_id"])
    asked: dict[str, PermissionRequested] = {}
    told: dict[str, PermissionDecided] = {}
    for event in copies:
        if isinstance(event, PermissionRequested):
            asked.setdefault(event.request_id, event)
        elif isinstance(event, PermissionDecided):
            told[event.request_id] = event
    concluded = []
    for request_id in dict.fromkeys([*asked, *told]):
        request, answer = asked.get(request_id), told.get(request_id)
        was = broker.views.approval(origin[request_id]) if request_id in origin else None
        content = (request.tool_name, request.description, request.input_preview) if request else ("", "", "")
        approval_id = broker.permission_request(
            new_id, request_id, *content, file=False, risk=was.risk if was is not None else ""
        )
        if answer is None and was is not None and was.terminal and 0 < was.decided_seq < fork_seq:
            concluded.append((approval_id, was.status, f"{was.actor or was.status} (recorded)"))
        elif answer is not None:  # else it was waiting at the fork point: it waits again, for an operator
            told_as = _DECISION.get(answer.behavior, "reject")
            status = was.status if was is not None and was.terminal else told_as
            who = f"{(was.actor if was is not None else '') or answer.actor or status} (recorded)"
            concluded.append((approval_id, status, who))
    # Newest first: each decision's follower finds the fork's run already told of it (the copies
    # say so), and a run remembers its latest answers, not all of them.
    for approval_id, status, who in reversed(concluded):
        if status in ("approve", "reject"):
            broker.approvals.resolve(approval_id, status, who, identity=f"{identity} replaying", reason=why)
        else:  # expired or withdrawn there: no one decided it
            broker.approvals.withdraw(approval_id, who, f"{why} ({status} there)")


def _why(opening: RunForked) -> str:
    """The reason the fork's decision records: where it comes from."""
    why = f"fork of run {opening.origin_run_id} at approval {opening.approval_id} (there: {opening.recorded})"
    return f"{why}: {opening.reason}" if opening.reason else why
