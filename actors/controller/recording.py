"""What a run's harness published after a point in the log, read back to be served again.

The steps are the origin run's HarnessEventRecorded events after the fork point, in order,
each with the id and data it was recorded with. A permission request the origin had asked
by then but that was not decided by then is asked again first: in the fork it goes through
the approval gate anew. So is a reconcile request approved by then but dispatched after:
its one-time approval stays with the origin. Each permission request carries how the
origin's ended (`approve`, `reject`, `expired`, `error` when the request itself failed, or
"" when it never ended) and the votes that ended it, in order. Between them, in the
origin's order, a DISPATCH step stands for each reconcile dispatch the origin's gate
recorded after the fork point (its input, found among the run's recorded inputs by digest,
and how it ended). `prepared` holds the revisions the origin prepared for the reconcile
requests the steps ask. If the origin was aborted after the fork point, the steps stop where
its abort began: what its harness published after that was its answer to an operator's
abort, not a result.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from eventlog import EventLog, Record
from projections import ApprovalRow, Views

from .._errors import ForkError
from ..approvals import APPROVE
from ..harnesses import PERMISSION_REQUEST
from .actor import CONSUMED
from .decider import ABORTING
from .reconcile import DISPATCHED, intent_digest

DECIDED = frozenset({"approve", "reject", "expired"})
DISCARDED = "discarded"  # the request's recording hook failed: the harness heard an error
ERROR = "error"  # how a permission request ends when publishing it raised
DISPATCH = "reconcile.dispatch"  # a step that is no harness event: the origin's reconcile dispatch
INPUT_KEYS = ("input", "arguments")  # where a harness event carries a reconcile intent


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One recorded harness event (for a permission request, how the origin's ended), or a dispatch.

    `votes` are the (actor, decision) pairs that ended the origin's request, in order. A
    DISPATCH step's id is its tool call id and its data holds `tool_call_id`, `input_sha256`,
    `outcome`, `detail`, the `input` when the recording holds it, and the `evidence` the run
    reported for it (in a later harness event of that tool call), if it did.
    """

    type: str
    id: str
    data: dict[str, Any] = field(default_factory=dict)
    decision: str = ""
    votes: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """The rest of a recorded run after `at_seq`: its session, prompt and harness events."""

    origin_run_id: str
    origin_stream: str
    at_seq: int
    session_id: str
    prompt: str
    steps: tuple[RecordedStep, ...]
    reasked: int = 0  # the first `reasked` steps are permission requests asked again first
    aborted_seq: int = 0  # where the origin's abort began after `at_seq` (0: it was not aborted then)
    prepared: tuple[tuple[str, dict[str, Any]], ...] = ()  # (input digest, revision), request order


def recorded_turn(
    log: EventLog, origin_run_id: str, origin_stream: str, at_seq: int, *, views: Views | None = None
) -> RecordedTurn:
    """Read the rest of run `origin_run_id` (recorded in `origin_stream`) after `at_seq`."""
    records = [r for r in log.read(origin_stream) if r.data.get("run_id") == origin_run_id]
    started = next((r for r in records if r.type == "AgentRunStarted"), None)
    if started is None:
        raise ForkError(f"no agent run {origin_run_id!r} in {origin_stream}")
    views = views or Views(log)
    outcomes = _Outcomes(views.approval_history(at=log.head().seq), origin_run_id)
    reasked: list[RecordedStep] = []
    rest: list[RecordedStep] = []
    prepared: list[tuple[str, dict[str, Any]]] = []
    asking: dict[str, bool] = {}  # reconcile requests awaiting their prepare: replayed or not
    regrant = _granted_not_dispatched(records, at_seq)
    inputs: dict[str, dict[str, Any]] = {}  # the run's recorded inputs, by digest
    aborted_seq = 0
    for i, r in enumerate(records):
        d = r.data
        if r.seq > at_seq and r.type == "AgentRunStatusChanged" and d["status"] == ABORTING:
            aborted_seq = r.seq
            break
        if r.type == "ReconcilePrepared" and asking.pop(d["tool_call_id"], False):
            prepared.append((d["input_sha256"], dict(d["revision"])))
        if r.type == "ReconcileDispatched" and r.seq > at_seq:
            rest.append(_dispatch(d, inputs, records[i + 1 :]))
        if r.type != "HarnessEventRecorded":
            continue
        _collect_inputs(d["data"], inputs)
        step = RecordedStep(d["type"], d["event_id"], dict(d["data"]))
        if d["type"] == PERMISSION_REQUEST:
            decision, decided_seq, votes = outcomes.of(d["data"], r.seq)
            step = RecordedStep(d["type"], d["event_id"], dict(d["data"]), decision, votes)
            call_id = str(d["data"].get("tool_call_id") or "")
            undecided = not (decided_seq and decided_seq <= at_seq)
            replayed = r.seq > at_seq or undecided or regrant.get(call_id) == r.seq
            if d["data"].get("requires_fleet_quorum"):
                asking[call_id] = replayed
            if r.seq <= at_seq and replayed:
                reasked.append(step)  # not decided (or not dispatched) by the fork point: asked again
        if r.seq > at_seq:
            rest.append(step)
    return RecordedTurn(
        origin_run_id,
        origin_stream,
        at_seq,
        started.data["session_id"],
        started.data["prompt"],
        (*reasked, *rest),
        len(reasked),
        aborted_seq,
        tuple(prepared),
    )


def _granted_not_dispatched(records: list[Record], at_seq: int) -> dict[str, int]:
    """Reconciles granted by `at_seq` and dispatched after it: tool call id -> the seq of its request.

    Their one-time approvals stay with the origin (a fork never holds one), so the fork asks
    for them again.
    """
    requests: dict[str, int] = {}
    granted: dict[str, int] = {}
    out: dict[str, int] = {}
    for r in records:
        d, before = r.data, r.seq <= at_seq
        if not before and r.type == "AgentRunStatusChanged" and d["status"] == ABORTING:
            break
        if before and r.type == "HarnessEventRecorded" and d["type"] == PERMISSION_REQUEST:
            requests[str(d["data"].get("tool_call_id") or "")] = r.seq
        elif before and r.type == "ReconcileApprovalGranted" and d["tool_call_id"] in requests:
            granted[d["tool_call_id"]] = requests[d["tool_call_id"]]
        elif before and r.type == "ReconcileApprovalDropped" and d["reason"] != CONSUMED:
            for call_id in d["tool_call_ids"]:
                granted.pop(call_id, None)
        elif r.type == "ReconcileDispatched" and d["tool_call_id"] in granted:
            seq = granted.pop(d["tool_call_id"])
            if not before:
                out[d["tool_call_id"]] = seq
    return out


def _collect_inputs(data: dict[str, Any], inputs: dict[str, dict[str, Any]]) -> None:
    for key in INPUT_KEYS:
        value = data.get(key)
        if isinstance(value, dict):
            inputs[intent_digest(value)] = value


def _dispatch(d: dict[str, Any], inputs: dict[str, dict[str, Any]], later: list[Record]) -> RecordedStep:
    """The DISPATCH step of one ReconcileDispatched record (`later`: the run's records after it)."""
    call_id, digest = d["tool_call_id"], d["input_sha256"]
    data: dict[str, Any] = {
        "tool_call_id": call_id,
        "input_sha256": digest,
        "outcome": d["outcome"],
        "detail": d["detail"],
    }
    if digest in inputs:
        data["input"] = inputs[digest]
    if d["outcome"] == DISPATCHED:
        for r in later:  # the evidence is the caller's to report: the first report of it is kept
            reported = r.data.get("data") if r.type == "HarnessEventRecorded" else None
            if not isinstance(reported, dict) or reported.get("tool_call_id") != call_id:
                continue
            if isinstance(reported.get("evidence"), dict):
                data["evidence"] = reported["evidence"]
                break
    return RecordedStep(DISPATCH, call_id, data)


class _Outcomes:
    """The origin run's approvals, handed out in request order per tool call id."""

    def __init__(self, history: list[ApprovalRow], run_id: str) -> None:
        self._rows: dict[str, deque[ApprovalRow]] = {}
        for row in history:  # request order
            if row.run_id == run_id:
                self._rows.setdefault(row.tool_call_id, deque()).append(row)

    def of(self, data: dict[str, Any], seq: int) -> tuple[str, int, tuple[tuple[str, str], ...]]:
        """How the next permission request (recorded at `seq`) ended, the seq where it did, and its votes."""
        rows = self._rows.get(str(data.get("tool_call_id") or ""))
        if not rows:
            return ERROR, seq, ()  # no approval was recorded for it: asking failed right away
        row = rows.popleft()
        if row.status in DECIDED:
            return row.status, row.decided_seq, _votes(row)
        if row.status == DISCARDED:
            return ERROR, row.decided_seq, ()
        return "", 0, ()  # still open, or never decided: the origin's process stopped first


def _votes(row: ApprovalRow) -> tuple[tuple[str, str], ...]:
    """The votes that decided `row`, in order: each counted approval, then the deciding one."""
    votes = [(actor, APPROVE) for actor in row.votes]
    if not (row.status == APPROVE and row.votes and row.votes[-1] == row.actor):
        votes.append((row.actor, row.status))  # a quorum's last vote is its deciding one
    return tuple(votes)
