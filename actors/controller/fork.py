"""Forking a controller run: a new run whose history starts as the origin's, up to a seq.

The fork's stream, `controller-fork-<id>`, opens with a ForkedFrom event (origin run and
stream, position, actor, reason), followed by copies of the origin run's own events up to
and including that seq, re-addressed to the new run id. The origin is only read. Earlier
runs of the origin's session are not copied: the fork's timeline holds the origin run's own
entries. A fork is re-driven by a controller opened on `fork-<id>` (`System.fork_controller`).

A fork at an approval (`fork_run_at_approval`) copies the history before the approval's
permission request; its ForkedFrom names the approval and the decision the fork takes there,
and who takes it. The re-drive asks that request again and decides it so.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from eventlog import NO_STREAM, EventLog, NewEvent, Record, decode, encode
from eventlog.events import ForkedFrom
from projections import ApprovalRow, Views

from .._errors import ForkError, ForkNotFoundError, NotAForkError
from ..harnesses import PERMISSION_REQUEST

# The controller-stream events that belong to one run (they carry its run_id).
RUN_EVENT_TYPES = frozenset(
    {
        "AgentRunStarted",
        "PromptDelivered",
        "AgentRunStatusChanged",
        "HarnessEventRecorded",
        "ReconcilePrepared",
        "ReconcileApprovalGranted",
        "ReconcileApprovalDropped",
        "ReconcileDispatched",
    }
)


@dataclass(frozen=True, slots=True)
class Fork:
    """A fork that was recorded: its run and stream, where it came from, and how many events it copied."""

    run_id: str
    stream: str
    origin_run_id: str
    origin_stream: str
    at_seq: int
    copied: int
    seq: int  # the seq of its ForkedFrom event
    approval_id: str = ""  # a fork at an approval: the origin's approval whose decision it changes
    decision: str = ""  # ... and the decision it takes there

    @property
    def controller_id(self) -> str:
        """The id of the controller that re-drives it (its stream is `controller-<controller_id>`)."""
        return fork_controller_id(self.run_id)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "stream": self.stream,
            "origin_run_id": self.origin_run_id,
            "origin_stream": self.origin_stream,
            "at_seq": self.at_seq,
            "copied": self.copied,
            "seq": self.seq,
            "approval_id": self.approval_id,
            "decision": self.decision,
        }


def fork_controller_id(run_id: str) -> str:
    """The controller id of the fork whose run is `run_id`."""
    return f"fork-{run_id}"


def fork_run(
    log: EventLog,
    run_id: str,
    at_seq: int,
    *,
    actor: str,
    reason: str = "",
    new_id: str | None = None,
    views: Views | None = None,
    changed: tuple[str, str, str, str] = ("", "", "", ""),
) -> Fork:
    """Record a fork of controller run `run_id` as of `at_seq`; the origin stays as it is.

    `changed` is, for a fork at an approval, (approval id, decision, decided by, identity).
    """
    views = views or Views(log)
    head = log.head().seq
    if at_seq < 1 or at_seq > head:
        raise ForkError(f"seq {at_seq} is not in the log, which holds seqs 1 to {head}")
    origin = views.agent_run(run_id, at=head)
    if origin is None:
        broker = " (a broker run is forked at one of its approvals)" if views.run(run_id) is not None else ""
        raise ForkError(f"no agent run {run_id!r} in this log{broker}")
    if origin.first_seq > at_seq:
        raise ForkError(f"run {run_id} starts at seq {origin.first_seq}, after {at_seq}")
    new_id = new_id or str(uuid.uuid4())
    controller_id = fork_controller_id(new_id)
    stream = f"controller-{controller_id}"
    copies = [_copy(r, new_id, controller_id) for r in _run_records(log, origin.stream, run_id, at_seq)]
    opening = ForkedFrom(new_id, run_id, origin.stream, at_seq, actor, reason, log.clock.now(), *changed)
    first = encode(opening, meta={"actor": actor})
    records = log.append(stream, [first, *copies], expect=NO_STREAM)
    approval_id, decision = changed[:2]
    return Fork(
        new_id, stream, run_id, origin.stream, at_seq, len(copies), records[0].seq, approval_id, decision
    )


def fork_run_at_approval(
    log: EventLog,
    approval: ApprovalRow,
    decision: str,
    *,
    decided_by: str,
    identity: str,
    actor: str,
    reason: str = "",
    new_id: str | None = None,
    views: Views | None = None,
) -> Fork:
    """Fork controller run `approval.run_id` just before `approval` was asked, to decide it `decision`.

    The fork copies the history before the approval's permission request; its re-drive asks
    that request again, and `decided_by` (credential `identity`) decides it so.
    """
    views = views or Views(log)
    origin = views.agent_run(approval.run_id, at=log.head().seq)
    if origin is None:
        raise ForkError(f"no agent run {approval.run_id!r} in this log")
    request = approval_request(log, origin.stream, approval)
    if request is None:
        raise ForkError(
            f"approval {approval.id} was not asked by a permission request of run {approval.run_id}: "
            "there is no point of its history to fork at"
        )
    changed = (approval.id, decision, decided_by, identity)
    return fork_run(
        log, approval.run_id, request.seq - 1, actor=actor, reason=reason, new_id=new_id, views=views,
        changed=changed,
    )  # fmt: skip


def approval_request(log: EventLog, stream: str, approval: ApprovalRow) -> Record | None:
    """The harness's permission request (in `stream`) that asked `approval`: the last of its
    tool call before the approval was requested."""
    found = None
    for r in log.read(stream):
        if r.seq >= approval.requested_seq:
            break
        d = r.data
        if (
            r.type == "HarnessEventRecorded"
            and d.get("run_id") == approval.run_id
            and d["type"] == PERMISSION_REQUEST
            and str(d["data"].get("tool_call_id") or "") == approval.tool_call_id
        ):
            found = r
    return found


def fork_origin(log: EventLog, run_id: str, views: Views | None = None) -> ForkedFrom:
    """The ForkedFrom event that opens fork `run_id`'s stream.

    Raises NotAForkError when `run_id` names an agent run that is not a fork (or its stream
    does not open with ForkedFrom), ForkNotFoundError when it names nothing at all.
    """
    stream = f"controller-{fork_controller_id(run_id)}"
    first = next(log.read(stream, to_version=1), None)
    if first is None:
        views = views or Views(log)
        if views.agent_run(run_id, at=log.head().seq) is not None:
            raise NotAForkError(f"run {run_id!r} is not a fork")
        raise ForkNotFoundError(f"no fork {run_id!r} in this log")
    opening = decode(first)
    if not isinstance(opening, ForkedFrom):
        raise NotAForkError(f"{stream} is not a fork: it opens with {first.type}, not ForkedFrom")
    return opening


def _run_records(log: EventLog, stream: str, run_id: str, at_seq: int) -> list[Record]:
    out = []
    for record in log.read(stream):
        if record.seq > at_seq:
            break
        if record.type in RUN_EVENT_TYPES and record.data.get("run_id") == run_id:
            out.append(record)
    return out


def _copy(record: Record, new_id: str, controller_id: str) -> NewEvent:
    data = dict(record.data)
    data["run_id"] = new_id
    if record.type == "AgentRunStarted":
        data["controller_id"] = controller_id
    meta = {**record.meta, "copied_from": {"seq": record.seq, "event_id": record.event_id}}
    return NewEvent(record.type, data, meta, schema=record.schema)
