"""A recorded quorum reconcile, as the demo's controller runs one, and what to compare in its forks."""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

from actors import CommandHarness, Harness, QuorumPendingError, ScriptedHarness, System
from eventlog import EventLog, Record
from tests.controller.helpers import WAIT, wait_pending, wait_until
from tools.demo.command import DemoReconciler, ReconcilingHarness

INTENT = {"service": "web", "replicas": 3}
DEMO_AGENT = [sys.executable, "-m", "tools.demo.agent", "--harness"]
PROMPT = "Scale the web service to 3 replicas and tell me when it is done"
# The demo agent's turn, scripted: a reconcile that needs a quorum, then (if approved) the tool call.
SCRIPT = [
    {"type": "assistant.delta", "data": {"delta": "Planning the change… "}},
    {
        "type": "permission.request",
        "id": "ask-1",
        "data": {
            "tool_call_id": "reconcile-1",
            "requires_fleet_quorum": True,
            "title": "Scale web to 3 replicas",
            "risk": "high",
            "input": INTENT,
        },
    },
    {
        "type": "tool.start",
        "if": "approve",
        "data": {"tool_call_id": "reconcile-1", "tool_name": "reconcile", "arguments": INTENT},
    },
    {"type": "assistant.message", "if": "approve", "content": "Scaled web to 3 replicas."},
    {"type": "assistant.message", "if": ["reject", "expired", "error"], "content": "Nothing was changed."},
    {"type": "session.idle"},
]
GATE_FIELDS = ("tool_call_id", "tool_call_ids", "input_sha256", "revision", "outcome", "detail", "reason")


class CountingReconciler(DemoReconciler):
    """The demo's reconciler, counting its calls: a re-drive from the recording must make none."""

    def __init__(self) -> None:
        self.prepared = 0
        self.applied = 0

    def prepare(self, intent: dict[str, Any]) -> dict[str, Any]:
        self.prepared += 1
        return super().prepare(intent)

    def reconcile_approved(self, intent: dict[str, Any], revision: dict[str, Any]) -> dict[str, Any]:
        self.applied += 1
        return super().reconcile_approved(intent, revision)


@dataclass(frozen=True, slots=True)
class ReconcileOrigin:
    """A recorded run with one quorum reconcile, the seqs of its moments, and its live reconciler."""

    run_id: str
    stream: str
    points: dict[str, int]
    reconciler: CountingReconciler


def record_reconcile_origin(
    system: System,
    votes: tuple[tuple[str, str], ...] = (("alice", "approve"), ("bob", "approve")),
    *,
    demo_agent: bool = True,
) -> ReconcileOrigin:
    """Run the demo's controller part (its agent program, or SCRIPT) with `votes` cast in order."""
    inner: Harness = CommandHarness(DEMO_AGENT) if demo_agent else ScriptedHarness(SCRIPT, echo=False)
    harness = ReconcilingHarness(inner)  # type: ignore[arg-type]  # any harness does
    reconciler = CountingReconciler()
    ctrl = system.controller(harness, reconciler, controller_id="demo")
    harness.controller = ctrl
    ctrl.start()
    run_id = ctrl.send(PROMPT)
    [approval] = wait_pending(ctrl)
    for voter, decision in votes:
        try:
            system.approvals.resolve(approval.id, decision, voter)
        except QuorumPendingError:
            continue
    wait_until(ctrl, lambda: ctrl.status() == "idle")
    ctrl.close()
    if isinstance(inner, ScriptedHarness):
        assert inner.join(WAIT)
    stream = "controller-demo"
    return ReconcileOrigin(run_id, stream, _points(system.log, stream, approval.id), reconciler)


def _points(log: EventLog, stream: str, approval_id: str) -> dict[str, int]:
    records = list(log.read(stream))
    harness = [r for r in records if r.type == "HarnessEventRecorded"]
    request = next(r.seq for r in harness if r.data["type"] == "permission.request")
    points = {
        "before_permission": max(r.seq for r in harness if r.seq < request),
        "permission": request,  # recorded; nothing prepared yet
    }
    for name, type_ in (("pending", "ApprovalPublished"), ("one_vote", "ApprovalVoted")):
        points[name] = next((r.seq for r in log.read(f"approval-{approval_id}") if r.type == type_), 0)
    gate = {r.type: r.seq for r in records if r.type.startswith("Reconcile")}
    tool_start = [r.seq for r in harness if r.data["type"] == "tool.start"]
    points.update(
        granted=gate.get("ReconcileApprovalGranted", 0),
        tool_started=tool_start[0] if tool_start else 0,
        consumed=gate.get("ReconcileApprovalDropped", 0),  # mid-dispatch: its result is not recorded yet
        dispatched=gate.get("ReconcileDispatched", 0),
        finished=log.head().seq,
    )
    return {name: seq for name, seq in points.items() if seq}


def gate_records(log: EventLog, stream: str, after_seq: int = 0) -> list[Record]:
    """The reconcile gate's records of a stream after a seq."""
    return [r for r in log.read(stream) if r.type.startswith("Reconcile") and r.seq > after_seq]


def gate_steps(records: list[Record]) -> list[tuple[str, dict[str, Any]]]:
    """What the gate recorded, without run ids, approval ids and times."""
    return [(r.type, {k: r.data[k] for k in GATE_FIELDS if k in r.data}) for r in records]
