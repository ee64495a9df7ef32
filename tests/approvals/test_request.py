"""SEED-BEHAVIOUR §2.1 `Request`: validation, the payload digest, expiry, recording, cancellation."""

from __future__ import annotations

import hashlib
import re
import threading
import uuid
from datetime import datetime, timedelta

import pytest

from actors import (
    ApprovalCancelledError,
    ApprovalHookError,
    ApprovalNotPendingError,
    ApprovalRecordingError,
    ApprovalRequestError,
    ApprovalValidationError,
    payload_digest,
)

from .helpers import WAIT, Gate, in_thread, make_request, start_request, types_in, wait_for_row

# -- 1. validation: no side effects, no hooks ----------------------------------------------


def _assert_untouched(system, calls):
    assert system.log.head().seq == 0
    assert calls == []
    assert system.approvals.pending() == []


def _record_hooks(system):
    calls = []
    system.approvals.on_requested = calls.append
    system.approvals.on_resolved = calls.append
    return calls


@pytest.mark.parametrize("missing", ["kind", "title", "detail"])
def test_kind_title_and_detail_are_required(system, missing):
    calls = _record_hooks(system)
    with pytest.raises(ApprovalValidationError, match=r"^approval kind, title, and detail are required$"):
        system.approvals.request(make_request(**{missing: ""}))
    _assert_untouched(system, calls)


@pytest.mark.parametrize("risk", ["", "LOW", "critical", " low"])
def test_risk_must_be_low_medium_or_high(system, risk):
    calls = _record_hooks(system)
    with pytest.raises(ApprovalValidationError, match=r"^approval risk must be low, medium, or high$"):
        system.approvals.request(make_request(risk=risk))
    _assert_untouched(system, calls)


@pytest.mark.parametrize(
    "payload",
    [object(), {"when": threading.Event()}, {"x": float("nan")}, [1.0, float("inf")]],
    ids=["object", "nested-object", "nan", "infinity"],
)
def test_unencodable_payload_is_refused(system, payload):
    calls = _record_hooks(system)
    with pytest.raises(ApprovalValidationError) as err:
        system.approvals.request(make_request(payload=payload))
    assert isinstance(err.value, ValueError)  # a stdlib mix-in for callers that expect it
    _assert_untouched(system, calls)


def test_naive_deadline_is_refused(system):
    calls = _record_hooks(system)
    with pytest.raises(ApprovalValidationError):
        system.approvals.request(make_request(), deadline=datetime(2026, 1, 1))
    _assert_untouched(system, calls)


# -- 2. the payload is hashed, not stored --------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "encoded"),
    [
        ({"b": 1, "a": [1, 2], "c": {"z": None, "y": "é"}}, '{"a":[1,2],"b":1,"c":{"y":"é","z":null}}'),
        ("rm -rf /", '"rm -rf /"'),
        (None, "null"),
        ([], "[]"),
        (42, "42"),
        (True, "true"),
    ],
    ids=["object-sorted-compact", "bare-string-quoted", "none-is-null", "empty-list", "int", "bool"],
)
def test_payload_digest_is_sha256_of_canonical_json(system, payload, encoded):
    expected = hashlib.sha256(encoded.encode()).hexdigest()
    assert payload_digest(payload) == expected
    future, row = start_request(system, make_request(payload=payload))
    assert row.payload_sha256 == expected
    assert re.fullmatch("[0-9a-f]{64}", row.payload_sha256)
    assert system.approvals.get(row.id).payload_sha256 == expected
    system.approvals.resolve(row.id, "approve")
    assert future.result(WAIT).approval.payload_sha256 == expected


def test_equal_payloads_in_any_key_order_share_a_digest():
    assert payload_digest({"a": 1, "b": 2}) == payload_digest({"b": 2, "a": 1})
    assert payload_digest({"x": None}) != payload_digest({"x": 0})


# -- 3. the approval: fields copied, expiry = min(now + timeout, deadline) -----------------


def test_approval_copies_the_request(system, clock):
    system.approvals.on_requested = gate = Gate()
    gate.release.set()
    request = make_request(run_id="run-9", tool_call_id="call-9", requires_fleet_quorum=False)
    future = in_thread(system.approvals.request, request)
    approval = gate.wait_entered()
    assert uuid.UUID(approval.id).version == 4
    assert (approval.run_id, approval.tool_call_id) == ("run-9", "call-9")
    assert (approval.kind, approval.title, approval.detail, approval.risk) == (
        "shell",
        "Run a command",
        "rm -rf build",
        "medium",
    )
    assert approval.requested_at == clock.now()
    assert approval.expires_at == clock.now() + timedelta(seconds=300)
    wait_for_row(system, "call-9", "pending", future)
    assert system.approvals.get(approval.id) == approval
    system.approvals.resolve(approval.id, "reject")
    assert future.result(WAIT).approval == approval


@pytest.mark.parametrize(
    ("deadline_in", "expected_in"),
    [(10, 10), (299.5, 299.5), (300, 300), (301, 300), (3600, 300)],
)
def test_expiry_is_capped_at_an_earlier_deadline(system, clock, deadline_in, expected_in):
    future, row = start_request(system, deadline=clock.now() + timedelta(seconds=deadline_in))
    assert row.expires_at == clock.now() + timedelta(seconds=expected_in)
    system.approvals.resolve(row.id, "approve")
    future.result(WAIT)


# -- 4. the recording state ----------------------------------------------------------------


def test_while_recording_it_is_invisible_and_unresolvable(system):
    system.approvals.on_requested = gate = Gate()
    request = make_request()
    future = in_thread(system.approvals.request, request)
    approval = gate.wait_entered()
    # The hook is blocked on the gate, so the approval is recording for the whole block.
    assert system.approvals.pending() == []
    assert system.approvals.get(approval.id) is None
    with pytest.raises(ApprovalRecordingError) as err:
        system.approvals.resolve(approval.id, "approve", "alice")
    assert str(err.value) == f'approval request is still being recorded: "{approval.id}"'
    assert types_in(system.log, approval.id) == ["ApprovalRequested"]
    gate.release.set()
    wait_for_row(system, request.tool_call_id, "pending", future)
    assert [a.id for a in system.approvals.pending()] == [approval.id]
    assert system.approvals.resolve(approval.id, "approve", "alice").decision == "approve"
    assert future.result(WAIT).actor == "alice"


def test_hook_failure_discards_the_request(system):
    resolved = []
    system.approvals.on_requested = Gate(error=OSError("disk full"))
    system.approvals.on_requested.release.set()
    system.approvals.on_resolved = resolved.append
    with pytest.raises(ApprovalRequestError) as err:
        system.approvals.request(make_request())
    assert str(err.value) == "recording approval request: disk full"
    approval = system.approvals.on_requested.calls[0]
    assert resolved == []
    assert system.approvals.pending() == []
    assert system.approvals.get(approval.id) is None
    assert types_in(system.log, approval.id) == ["ApprovalRequested", "ApprovalDiscarded"]
    assert system.views.approval(approval.id).status == "discarded"
    with pytest.raises(ApprovalNotPendingError):
        system.approvals.resolve(approval.id, "approve")
    assert resolved == []


# -- 5. expire_run or cancellation during recording ----------------------------------------


@pytest.mark.parametrize(("actors", "expected"), [(["bob", "carol"], "bob"), ([""], "abort")])
def test_expire_run_during_recording_expires_it_after_recording(system, actors, expected):
    system.approvals.on_requested = gate = Gate()
    resolved = []
    system.approvals.on_resolved = resolved.append
    future = in_thread(system.approvals.request, make_request(run_id="run-7"))
    approval = gate.wait_entered()
    for actor in actors:  # the first invalidating actor wins
        system.approvals.expire_run("run-7", actor)
    assert not future.done()  # still recording: the expiry waits for the hook
    gate.release.set()
    resolution = future.result(WAIT)
    assert (resolution.decision, resolution.actor) == ("expired", expected)
    assert resolved == [resolution]
    assert types_in(system.log, approval.id) == ["ApprovalRequested", "ApprovalDecided"]
    assert system.approvals.pending() == []


def test_expire_run_during_recording_with_failing_on_resolved(system):
    system.approvals.on_requested = gate = Gate()
    system.approvals.on_resolved = Gate(error=OSError("audit store down"))
    system.approvals.on_resolved.release.set()
    future = in_thread(system.approvals.request, make_request(run_id="run-7"))
    gate.wait_entered()
    system.approvals.expire_run("run-7", "bob")
    gate.release.set()
    with pytest.raises(ApprovalHookError) as err:
        future.result(WAIT)
    assert (err.value.resolution.decision, err.value.resolution.actor) == ("expired", "bob")
    assert "audit store down" in str(err.value)


def test_cancel_during_recording_expires_by_runtime(system):
    system.approvals.on_requested = gate = Gate()
    resolved = []
    system.approvals.on_resolved = resolved.append
    cancel = threading.Event()
    future = in_thread(system.approvals.request, make_request(), cancel=cancel)
    approval = gate.wait_entered()
    cancel.set()
    gate.release.set()
    with pytest.raises(ApprovalCancelledError):
        future.result(WAIT)
    assert [(r.decision, r.actor) for r in resolved] == [("expired", "runtime")]
    assert types_in(system.log, approval.id) == ["ApprovalRequested", "ApprovalDecided"]


def test_already_cancelled_request_is_never_published(system):
    resolved = []
    system.approvals.on_resolved = resolved.append
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(ApprovalCancelledError):
        system.approvals.request(make_request(), cancel=cancel)
    (row,) = system.views.approval_history()
    assert (row.status, row.actor) == ("expired", "runtime")
    assert types_in(system.log, row.id) == ["ApprovalRequested", "ApprovalDecided"]
    assert [(r.decision, r.actor) for r in resolved] == [("expired", "runtime")]


# -- 6. waiting: cancellation, the timer ---------------------------------------------------


def test_cancel_while_waiting_expires_by_runtime(system):
    resolved = []
    system.approvals.on_resolved = resolved.append
    cancel = threading.Event()
    future, row = start_request(system, cancel=cancel)
    cancel.set()
    with pytest.raises(ApprovalCancelledError) as err:
        future.result(WAIT)
    assert err.value.id == row.id
    after = system.views.approval(row.id)
    assert (after.status, after.actor) == ("expired", "runtime")
    assert [(r.decision, r.actor) for r in resolved] == [("expired", "runtime")]
    with pytest.raises(ApprovalNotPendingError):
        system.approvals.resolve(row.id, "approve")


def test_cancel_with_failing_on_resolved_reports_both(system):
    system.approvals.on_resolved = Gate(error=OSError("audit store down"))
    system.approvals.on_resolved.release.set()
    cancel = threading.Event()
    future, row = start_request(system, cancel=cancel)
    cancel.set()
    with pytest.raises(ApprovalCancelledError) as err:
        future.result(WAIT)
    assert isinstance(err.value.__cause__, ApprovalHookError)
    assert "audit store down" in str(err.value.__cause__)
    assert system.views.approval(row.id).actor == "runtime"


def test_timer_expires_with_actor_timeout(system, clock):
    resolved = []
    system.approvals.on_resolved = resolved.append
    future, row = start_request(system)
    clock.advance(299.999)
    assert system.tick() == 0
    clock.advance(0.001)
    assert system.tick() == 1
    resolution = future.result(WAIT)
    assert (resolution.decision, resolution.actor, resolution.at) == ("expired", "timeout", row.expires_at)
    assert resolved == [resolution]
    assert system.tick() == 0


def test_timer_waits_for_a_writer_mid_resolution(system, clock):
    system.approvals.on_resolved = gate = Gate()
    future, row = start_request(system)
    resolver = in_thread(system.approvals.resolve, row.id, "approve", "alice")
    gate.wait_entered()
    clock.advance(600)
    assert system.tick() == 0  # alice's decision is recorded; its hook is still running
    assert not future.done()  # the waiter hears nothing before the writer's hook finished
    gate.release.set()
    assert resolver.result(WAIT).actor == "alice"
    resolution = future.result(WAIT)
    assert (resolution.decision, resolution.actor) == ("approve", "alice")
