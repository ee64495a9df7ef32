"""The reconcile gate: prepare, quorum approval, one-time approval, dispatch (SEED-BEHAVIOUR §2.2)."""

from __future__ import annotations

import copy
import itertools
from concurrent.futures import Future
from typing import Any

import orjson
import pytest

from actors import (
    Approval,
    ApprovalQueue,
    ApprovalResolution,
    Controller,
    DuplicateVoteError,
    HarnessEvent,
    QuorumPendingError,
    ReconcileError,
    System,
    intent_digest,
)
from eventlog.events import ReconcileApprovalDropped, ReconcileDispatched

from .helpers import WAIT, ManualHarness, in_thread, recorded, wait_pending

INTENT = {"service": "web", "replicas": 3, "labels": {"tier": "front"}}
EVENT_IDS = itertools.count(1)


class Reconciler:
    """Records what it is given, and scribbles on it to prove it was given copies."""

    def __init__(self) -> None:
        self.prepared: list[dict[str, Any]] = []
        self.applied: list[tuple[dict[str, Any], dict[str, Any]]] = []
        self.evidence: dict[str, Any] | None = {"applied": True, "pods": ["web-1"]}
        self.error: Exception | None = None

    def prepare(self, intent):
        self.prepared.append(copy.deepcopy(intent))
        revision = {"generation": 7, "replicas": intent["replicas"]}
        intent["replicas"] = -1
        return revision

    def reconcile_approved(self, intent, revision):
        self.applied.append((copy.deepcopy(intent), copy.deepcopy(revision)))
        intent["replicas"] = -2
        revision["generation"] = -2
        if self.error is not None:
            raise self.error
        return self.evidence


@pytest.fixture
def reconciler() -> Reconciler:
    return Reconciler()


@pytest.fixture
def gated(system, reconciler):
    """A started controller with a reconciler, and its harness."""
    harness = ManualHarness()
    ctrl = system.controller(harness, reconciler, controller_id="gated")
    ctrl.start()
    return ctrl, harness


def ask(
    ctrl: Controller,
    harness: ManualHarness,
    intent: dict[str, Any] | None = None,
    tool_call_id: str = "call-1",
    **extra: Any,
) -> tuple[Future[Any], dict[str, Any]]:
    """Publish a reconcile permission request from a harness thread; returns (future, data)."""
    run_id = ctrl.run().id or ctrl.send("reconcile the fleet")
    data = {"requires_fleet_quorum": True, "tool_call_id": tool_call_id, "input": intent or INTENT, **extra}
    assert harness.publish is not None
    return in_thread(
        harness.publish, HarnessEvent("permission.request", run_id, f"p-{next(EVENT_IDS)}", data)
    ), data


def approve_by_quorum(queue: ApprovalQueue, approval_id: str) -> ApprovalResolution:
    with pytest.raises(QuorumPendingError):
        queue.resolve(approval_id, "approve", "alice")
    with pytest.raises(DuplicateVoteError):
        queue.resolve(approval_id, "approve", "alice")
    return queue.resolve(approval_id, "approve", "bob")


def granted(
    ctrl: Controller, harness: ManualHarness, system: System, **kw: Any
) -> tuple[Approval, dict[str, Any]]:
    waiting, data = ask(ctrl, harness, **kw)
    [approval] = wait_pending(ctrl)
    approve_by_quorum(system.approvals, approval.id)
    assert waiting.result(WAIT).decision == "approve"
    return approval, data


def test_an_approved_reconcile_dispatches_once(gated, system, reconciler):
    ctrl, harness = gated
    waiting, _ = ask(ctrl, harness)
    [approval] = wait_pending(ctrl)
    assert reconciler.prepared == [INTENT]
    assert (approval.kind, approval.risk, approval.tool_call_id) == ("reconcile", "high", "call-1")
    assert approval.requires_fleet_quorum
    assert orjson.loads(approval.detail) == {"input": INTENT, "revision": {"generation": 7, "replicas": 3}}
    assert approval.payload_sha256 == intent_digest(INTENT)
    resolution = approve_by_quorum(system.approvals, approval.id)
    assert waiting.result(WAIT) == resolution
    evidence = ctrl.reconcile_approved(copy.deepcopy(INTENT), "call-1")
    assert evidence == {"applied": True, "pods": ["web-1"]}
    assert reconciler.applied == [(INTENT, {"generation": 7, "replicas": 3})]
    with pytest.raises(ReconcileError, match=r"^reconcile dispatch has no matching one-time approval$"):
        ctrl.reconcile_approved(INTENT, "call-1")
    assert len(reconciler.applied) == 1
    outcomes = recorded(system, ReconcileDispatched, "controller-gated")
    assert [(o.tool_call_id, o.outcome) for o in outcomes] == [
        ("call-1", "dispatched"),
        ("call-1", "refused"),
    ]


def test_the_quorum_can_be_reached_through_the_controllers_queue(gated):
    ctrl, harness = gated
    waiting, _ = ask(ctrl, harness)
    [approval] = wait_pending(ctrl)
    approve_by_quorum(ctrl.approval_queue(), approval.id)
    assert waiting.result(WAIT).decision == "approve"
    assert ctrl.reconcile_approved(INTENT, "call-1")["applied"] is True


def test_a_tool_call_id_is_required(gated, reconciler):
    ctrl, harness = gated
    waiting, _ = ask(ctrl, harness, tool_call_id="")
    with pytest.raises(ReconcileError, match=r"^reconcile approval requires a tool call ID$"):
        waiting.result(WAIT)
    assert reconciler.prepared == []
    assert ctrl.approval_queue().pending() == []


def test_a_reconciler_is_required(system):
    harness = ManualHarness()
    ctrl = system.controller(harness)
    ctrl.start()
    waiting, _ = ask(ctrl, harness)
    with pytest.raises(ReconcileError, match=r"^reconciler is unavailable$"):
        waiting.result(WAIT)
    assert ctrl.approval_queue().pending() == []


def test_a_plain_permission_does_not_go_through_the_gate(gated, reconciler, system):
    ctrl, harness = gated
    run_id = ctrl.send("hello")
    waiting = in_thread(
        harness.emit, "permission.request", run_id, tool_call_id="c", title="Run: ls", payload="ls"
    )
    [approval] = wait_pending(ctrl)
    assert not approval.requires_fleet_quorum
    assert system.approvals.resolve(approval.id, "approve", "alice").decision == "approve"
    assert waiting.result(WAIT).decision == "approve"
    assert reconciler.prepared == []
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved({}, "c")


def test_prepare_gets_a_copy(gated, system, reconciler):
    ctrl, harness = gated
    approval, _ = granted(ctrl, harness, system)
    assert orjson.loads(approval.detail)["input"] == INTENT  # prepare's scribbling did not leak
    assert ctrl.reconcile_approved(INTENT, "call-1")


def test_the_approval_is_consumed_before_the_input_check(gated, system, reconciler):
    ctrl, harness = gated
    granted(ctrl, harness, system)
    changed = {**INTENT, "replicas": 30}
    with pytest.raises(ReconcileError, match=r"^reconcile input changed after approval$"):
        ctrl.reconcile_approved(changed, "call-1")
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved(INTENT, "call-1")
    assert len(reconciler.prepared) == 1
    assert reconciler.applied == []


def test_an_approval_past_its_expiry_is_refused(gated, system, reconciler, clock):
    ctrl, harness = gated
    approval, _ = granted(ctrl, harness, system)
    clock.set(approval.expires_at)
    with pytest.raises(ReconcileError, match=r"^reconcile approval expired before dispatch$"):
        ctrl.reconcile_approved(INTENT, "call-1")
    assert reconciler.applied == []
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved(INTENT, "call-1")


def test_dispatch_needs_a_tool_call_id(gated):
    ctrl, _ = gated
    with pytest.raises(ReconcileError, match=r"^reconcile dispatch requires a tool call ID$"):
        ctrl.reconcile_approved(INTENT, "")


def test_no_evidence_is_a_failure(gated, system, reconciler):
    ctrl, harness = gated
    granted(ctrl, harness, system)
    reconciler.evidence = None
    with pytest.raises(ReconcileError, match=r"^reconciler returned no evidence$"):
        ctrl.reconcile_approved(INTENT, "call-1")
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved(INTENT, "call-1")


def test_a_reconciler_error_is_reported(gated, system, reconciler):
    ctrl, harness = gated
    granted(ctrl, harness, system)
    reconciler.error = RuntimeError("api down")
    with pytest.raises(ReconcileError, match="api down"):
        ctrl.reconcile_approved(INTENT, "call-1")


def test_a_rejected_reconcile_grants_nothing(gated, system):
    ctrl, harness = gated
    waiting, _ = ask(ctrl, harness)
    [approval] = wait_pending(ctrl)
    system.approvals.resolve(approval.id, "reject", "alice")
    assert waiting.result(WAIT).decision == "reject"
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved(INTENT, "call-1")


def test_the_caller_mutating_its_request_afterwards_changes_nothing(gated, system, reconciler):
    ctrl, harness = gated
    waiting, data = ask(ctrl, harness, intent=copy.deepcopy(INTENT))
    [approval] = wait_pending(ctrl)
    data["input"]["replicas"] = 99
    data["input"]["labels"]["tier"] = "back"
    approve_by_quorum(system.approvals, approval.id)
    waiting.result(WAIT)
    assert orjson.loads(approval.detail)["input"] == INTENT
    assert ctrl.reconcile_approved(INTENT, "call-1")
    assert reconciler.applied == [(INTENT, {"generation": 7, "replicas": 3})]


def test_a_new_request_for_the_same_call_discards_the_earlier_approval(gated, system):
    ctrl, harness = gated
    granted(ctrl, harness, system)
    waiting, _ = ask(ctrl, harness)
    [approval] = wait_pending(ctrl)
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved(INTENT, "call-1")
    system.approvals.resolve(approval.id, "reject", "alice")
    waiting.result(WAIT)


@pytest.mark.parametrize("how", ["abort", "close", "start"])
def test_abort_close_and_start_drop_one_time_approvals(gated, system, reconciler, how):
    ctrl, harness = gated
    granted(ctrl, harness, system)
    getattr(ctrl, how)()
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved(INTENT, "call-1")
    assert reconciler.applied == []
    dropped = recorded(system, ReconcileApprovalDropped, "controller-gated")
    assert [(d.tool_call_ids, d.reason) for d in dropped] == [(("call-1",), how)]


@pytest.mark.parametrize("how", ["close", "start"])
def test_an_approval_arriving_after_the_lifecycle_ended_is_invalidated(gated, system, how):
    ctrl, harness = gated
    waiting, _ = ask(ctrl, harness)
    [approval] = wait_pending(ctrl)
    with pytest.raises(QuorumPendingError):
        system.approvals.resolve(approval.id, "approve", "alice")
    # The deciding vote's hook runs before the waiting request hears the decision.
    system.approvals.on_resolved = lambda resolution: getattr(ctrl, how)()
    assert system.approvals.resolve(approval.id, "approve", "bob").decision == "approve"
    with pytest.raises(ReconcileError, match=r"^reconcile approval was invalidated before dispatch$"):
        waiting.result(WAIT)
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved(INTENT, "call-1")


def test_an_intent_that_is_not_an_object_is_refused(gated, reconciler):
    ctrl, harness = gated
    waiting, _ = ask(ctrl, harness, intent=["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(ReconcileError, match="reconcile intent must be a JSON object"):
        waiting.result(WAIT)
    assert reconciler.prepared == []
    with pytest.raises(ReconcileError, match="reconcile intent must be a JSON object"):
        ctrl.reconcile_approved("replicas=3", "call-1")


def test_a_revision_that_is_not_an_object_is_refused(gated, reconciler):
    ctrl, harness = gated
    reconciler.prepare = lambda intent: "v7"
    waiting, _ = ask(ctrl, harness)
    with pytest.raises(ReconcileError, match="reconcile revision must be a JSON object"):
        waiting.result(WAIT)
    assert ctrl.approval_queue().pending() == []


def test_evidence_that_is_not_an_object_is_refused(gated, system, reconciler):
    ctrl, harness = gated
    granted(ctrl, harness, system)
    reconciler.evidence = ["done"]
    with pytest.raises(ReconcileError, match="reconcile evidence must be a JSON object"):
        ctrl.reconcile_approved(INTENT, "call-1")


def test_an_approval_that_times_out_grants_nothing(gated, system, clock):
    ctrl, harness = gated
    waiting, _ = ask(ctrl, harness)
    [approval] = wait_pending(ctrl)
    clock.set(approval.expires_at)
    assert system.tick() == 1
    resolution = waiting.result(WAIT)
    assert (resolution.decision, resolution.actor) == ("expired", "timeout")
    with pytest.raises(ReconcileError, match="no matching one-time approval"):
        ctrl.reconcile_approved(INTENT, "call-1")
