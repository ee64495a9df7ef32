"""What a recorded reconciler holds no result for ends the re-drive clearly, and calls nothing live."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors import (
    ForkError,
    HarnessEvent,
    NoRecordedResultError,
    QuorumPendingError,
    RecordedHarness,
    RecordedReconciler,
    RecordedStep,
    System,
    fork_run,
    intent_digest,
)
from actors.controller.recording import DISPATCH
from eventlog import ManualClock
from tests.controller.helpers import WAIT, ManualHarness, in_thread, wait_pending, wait_until

from .reconciles import INTENT, CountingReconciler, ReconcileOrigin, gate_records, record_reconcile_origin

OTHER = {"service": "web", "replicas": 4}


@pytest.fixture
def system(tmp_path: Path) -> Iterator[System]:
    s = System.open(tmp_path / "demo.db", clock=ManualClock(), scheduler=False)
    yield s
    s.close()


@pytest.fixture
def origin(system: System) -> ReconcileOrigin:
    return record_reconcile_origin(system, demo_agent=False)


def fork_before(system: System, origin: ReconcileOrigin) -> str:
    return fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="carol").run_id


def altered(harness: RecordedHarness, change) -> RecordedHarness:
    """A harness for the same turn with `change` applied to each of its steps."""
    steps = tuple(change(step) for step in harness.turn.steps)
    return RecordedHarness(dataclasses.replace(harness.turn, steps=steps))


def play(system: System, ctrl, harness: RecordedHarness, *, approve: bool = True):
    """Re-drive to the end, approving the reconcile by quorum if it is asked."""
    ctrl.redrive()
    if approve:
        [approval] = wait_pending(ctrl)
        approve_by_quorum(system, approval)
    wait_until(ctrl, lambda: ctrl.status() == "idle")
    assert harness.join(WAIT)
    return ctrl.run()


def approve_by_quorum(system: System, approval) -> None:
    with pytest.raises(QuorumPendingError):
        system.approvals.resolve(approval.id, "approve", "alice")
    system.approvals.resolve(approval.id, "approve", "bob")


def test_an_intent_the_origin_did_not_prepare_or_dispatch_is_refused(system, origin):
    reconciler = RecordedReconciler.for_fork(system.log, fork_before(system, origin))
    with pytest.raises(NoRecordedResultError, match=r"prepared no reconcile of input [0-9a-f]{12}"):
        reconciler.prepare(dict(OTHER))
    with pytest.raises(NoRecordedResultError, match="dispatched no reconcile of input") as refused:
        reconciler.reconcile_approved(dict(OTHER), {})
    assert refused.value.outcome == "failed"
    revision = reconciler.prepare(dict(INTENT))
    assert revision == {"service": "web", "from_replicas": 2, "to_replicas": 3}
    evidence = reconciler.reconcile_approved(dict(INTENT), revision)
    assert evidence == {"applied": True, "service": "web", "replicas": 3, "revision": revision}
    # Each recorded answer is served once.
    with pytest.raises(NoRecordedResultError):
        reconciler.prepare(dict(INTENT))
    assert reconciler.prepared == reconciler.dispatched == [intent_digest(INTENT)]
    assert (origin.reconciler.prepared, origin.reconciler.applied) == (1, 1)


def test_a_request_for_another_intent_ends_the_run_before_any_approval(system, origin):
    fork_id = fork_before(system, origin)
    recorded = RecordedHarness.for_fork(system.log, fork_id)

    def ask_for_more(step: RecordedStep) -> RecordedStep:
        if step.type != "permission.request":
            return step
        return dataclasses.replace(step, data={**step.data, "input": OTHER})

    harness = altered(recorded, ask_for_more)
    ctrl = system.fork_controller(fork_id, harness)
    run = play(system, ctrl, harness, approve=False)
    assert run.status == "failed"
    assert harness.decisions == ["error"]
    assert isinstance(harness.errors[0], NoRecordedResultError)
    assert harness.diverged.startswith("no recorded result: run ")
    assert f"prepared no reconcile of input {intent_digest(OTHER)[:12]}" in harness.diverged
    assert run.entries[-1].text == harness.diverged
    assert system.approvals.pending() == []
    assert gate_records(system.log, f"controller-fork-{fork_id}") == []
    assert (origin.reconciler.prepared, origin.reconciler.applied) == (1, 1)


def test_a_dispatch_with_no_recorded_result_fails_in_the_gate_and_ends_the_run(system, origin):
    fork_id = fork_before(system, origin)
    harness = RecordedHarness.for_fork(system.log, fork_id)
    steps = tuple(s for s in harness.turn.steps if s.type != DISPATCH)
    without = dataclasses.replace(harness.turn, steps=steps)
    ctrl = system.fork_controller(fork_id, harness, RecordedReconciler(without))
    run = play(system, ctrl, harness)
    assert run.status == "failed"
    assert harness.dispatches == ["failed"]
    assert "dispatched no reconcile of input" in harness.diverged
    gate = gate_records(system.log, f"controller-fork-{fork_id}")
    [dispatched] = [r for r in gate if r.type == "ReconcileDispatched"]
    assert (dispatched.data["outcome"], dispatched.data["detail"]) == ("failed", harness.diverged)
    assert not any(e.kind == "tool" and e.status == "complete" for e in run.entries)
    assert (origin.reconciler.prepared, origin.reconciler.applied) == (1, 1)


def test_a_recorded_dispatch_whose_input_is_not_in_the_recording_is_not_made(system, origin):
    fork_id = fork_before(system, origin)

    def forget_input(step: RecordedStep) -> RecordedStep:
        if step.type != DISPATCH:
            return step
        return dataclasses.replace(step, data={k: v for k, v in step.data.items() if k != "input"})

    harness = altered(RecordedHarness.for_fork(system.log, fork_id), forget_input)
    ctrl = system.fork_controller(fork_id, harness)
    run = play(system, ctrl, harness)
    assert run.status == "failed"
    assert harness.dispatches == []
    assert f"recorded no input of digest {intent_digest(INTENT)[:12]}" in harness.diverged
    types = [r.type for r in gate_records(system.log, f"controller-fork-{fork_id}")]
    assert types == ["ReconcilePrepared", "ReconcileApprovalGranted"]  # no dispatch was made


def test_a_recorded_dispatch_needs_a_controller_to_dispatch_through(system, origin):
    fork_id = fork_before(system, origin)
    harness = RecordedHarness.for_fork(system.log, fork_id)
    # Opened as an ordinary controller, not with fork_controller: the harness is not bound to it.
    ctrl = system.controller(harness, RecordedReconciler(harness.turn), controller_id=f"fork-{fork_id}")
    run = play(system, ctrl, harness)
    assert run.status == "failed"
    assert "has no controller to dispatch through" in harness.diverged


def test_a_recorded_harness_takes_no_live_reconciler(system, origin):
    fork_id = fork_before(system, origin)
    head = system.log.head()
    live = CountingReconciler()
    with pytest.raises(ForkError, match="takes no live reconciler"):
        system.fork_controller(fork_id, RecordedHarness.for_fork(system.log, fork_id), live)
    assert system.log.head() == head


def test_a_live_harness_may_take_its_reconciles_from_the_recording(system, origin):
    fork_id = fork_before(system, origin)
    harness = ManualHarness()
    reconciler = RecordedReconciler.for_fork(system.log, fork_id)
    ctrl = system.fork_controller(fork_id, harness, reconciler)
    ctrl.redrive()
    data = {"requires_fleet_quorum": True, "tool_call_id": "reconcile-1", "input": OTHER}
    with pytest.raises(NoRecordedResultError, match="prepared no reconcile"):
        harness.emit("permission.request", fork_id, "ask-other", **data)
    request = HarnessEvent("permission.request", fork_id, "ask-1", {**data, "input": INTENT})
    assert harness.publish is not None
    asked = in_thread(harness.publish, request)
    [approval] = wait_pending(ctrl)
    approve_by_quorum(system, approval)
    assert asked.result(WAIT).decision == "approve"
    evidence = ctrl.reconcile_approved(dict(INTENT), "reconcile-1")
    assert evidence["applied"] is True  # the origin's evidence, served: nothing was applied now
    assert (origin.reconciler.prepared, origin.reconciler.applied) == (1, 1)
