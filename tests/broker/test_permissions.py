"""The permission relay: a run's permission request is an approval; either path decides it once."""

from __future__ import annotations

import orjson
import pytest

from actors import (
    ApprovalNotPendingError,
    Broker,
    ControlMessage,
    OperatorOnlyError,
    RunNotFoundError,
    System,
)
from eventlog import ManualClock
from projections import RECENT_PERMISSIONS

from .conftest import WAIT, queued_signal


def ask(broker: Broker, run_id: str = "r1", request_id: str = "req-1", tool: str = "Read") -> str:
    # Read is a low-risk tool: the run's own answer decides it (a high-risk one needs an operator).
    return broker.permission_request(run_id, request_id, tool, "list the files", "ls -la")


def decisions_in_log(system: System, run_id: str = "r1") -> list[dict]:
    return [r.data for r in system.log.read(f"run-{run_id}") if r.type == "PermissionDecided"]


def notices(broker: Broker, run_id: str = "r1") -> list[ControlMessage]:
    view = broker.get_run(run_id)
    assert view is not None
    return [m for m in view.control_queue if m.type == "permission_decision"]


def test_a_permission_request_is_a_pending_approval(system: System, clock: ManualClock) -> None:
    system.broker.create_run("r1")
    approval_id = ask(system.broker)
    (pending,) = system.approvals.pending()
    assert pending.id == approval_id
    assert (pending.kind, pending.run_id, pending.tool_call_id) == ("permission", "r1", "req-1")
    assert pending.title  # the wording is the gate's to choose; the seed has no approval title
    assert pending.detail == "list the files"
    (row,) = system.views.pending_approvals()
    assert (row.id, row.kind, row.requested_by) == (approval_id, "permission", "run:r1")
    view = system.broker.get_run("r1")
    assert view is not None
    state = view.permission_requests["req-1"]
    assert (state.request_id, state.tool_name, state.desc, state.preview) == (
        "req-1",
        "Read",
        "list the files",
        "ls -la",
    )
    assert (state.created_at, state.approval_id) == (clock.now(), approval_id)
    assert view.permission_decisions == {}


def test_a_permission_request_for_an_unknown_run_is_an_error(system: System) -> None:
    with pytest.raises(RunNotFoundError, match=r"^run not found: ghost$"):
        ask(system.broker, "ghost")
    assert system.approvals.pending() == []


@pytest.mark.parametrize(("behavior", "decision"), [("allow", "approve"), ("deny", "reject")])
def test_deciding_through_the_broker(system: System, behavior: str, decision: str) -> None:
    broker = system.broker
    broker.create_run("r1")
    approval_id = ask(broker)
    broker.permission_decision("r1", "req-1", behavior)
    assert broker.get_run("r1").permission_decisions == {"req-1": behavior}  # type: ignore[union-attr]
    row = system.views.approval(approval_id)
    assert row is not None
    assert (row.decision, row.actor) == (decision, "run:r1")
    assert system.approvals.pending() == []
    (notice,) = notices(broker)
    assert orjson.loads(notice.payload or "") == {"request_id": "req-1", "behavior": behavior}
    (decided,) = decisions_in_log(system)
    assert (decided["behavior"], decided["approval_id"], decided["actor"]) == (
        behavior,
        approval_id,
        "run:r1",
    )


@pytest.mark.parametrize(("decision", "behavior"), [("approve", "allow"), ("reject", "deny")])
def test_deciding_through_the_approval_gate(system: System, decision: str, behavior: str) -> None:
    broker = system.broker
    broker.create_run("r1")
    approval_id = ask(broker)
    signal, unsubscribe = queued_signal(broker, "r1")
    try:
        system.approvals.resolve(approval_id, decision, "alice")
        # The follower carries the outcome to the run; its notice is a queued control message.
        assert signal.wait(WAIT)
    finally:
        unsubscribe()
    assert broker.get_run("r1").permission_decisions == {"req-1": behavior}  # type: ignore[union-attr]
    (decided,) = decisions_in_log(system)
    assert (decided["behavior"], decided["approval_id"], decided["actor"]) == (behavior, approval_id, "alice")
    (notice,) = notices(broker)
    assert notice.id == approval_id
    assert orjson.loads(notice.payload or "") == {"request_id": "req-1", "behavior": behavior}


def test_both_paths_record_the_same_decision(system: System) -> None:
    broker = system.broker
    broker.create_run("r1")
    via_gate = ask(broker, request_id="g")
    via_broker = ask(broker, request_id="b")
    signal, unsubscribe = queued_signal(broker, "r1")
    try:
        system.approvals.resolve(via_gate, "approve", "run:r1")
        assert signal.wait(WAIT)
    finally:
        unsubscribe()
    broker.permission_decision("r1", "b", "allow")
    gate, brk = decisions_in_log(system)
    assert {k: v for k, v in gate.items() if k not in ("request_id", "approval_id", "at")} == {
        k: v for k, v in brk.items() if k not in ("request_id", "approval_id", "at")
    }
    assert (gate["approval_id"], brk["approval_id"]) == (via_gate, via_broker)
    assert broker.get_run("r1").permission_decisions == {"g": "allow", "b": "allow"}  # type: ignore[union-attr]
    n = notices(broker)
    assert [orjson.loads(m.payload or "") for m in n] == [
        {"request_id": "g", "behavior": "allow"},
        {"request_id": "b", "behavior": "allow"},
    ]


def test_a_second_decision_through_the_broker_changes_nothing(system: System) -> None:
    broker = system.broker
    broker.create_run("r1")
    approval_id = ask(broker)
    broker.permission_decision("r1", "req-1", "allow")
    broker.permission_decision("r1", "req-1", "deny")
    assert broker.get_run("r1").permission_decisions == {"req-1": "allow"}  # type: ignore[union-attr]
    assert len(decisions_in_log(system)) == 1
    assert len(notices(broker)) == 1
    assert system.views.approval(approval_id).decision == "approve"  # type: ignore[union-attr]
    with pytest.raises(ApprovalNotPendingError):
        system.approvals.resolve(approval_id, "reject", "alice")


def test_the_broker_after_the_gate_hears_the_gates_answer(system: System) -> None:
    broker = system.broker
    broker.create_run("r1")
    approval_id = ask(broker)
    system.approvals.resolve(approval_id, "reject", "alice")
    # Whether or not the follower got there first, the run records the gate's answer once.
    broker.permission_decision("r1", "req-1", "allow")
    assert broker.get_run("r1").permission_decisions == {"req-1": "deny"}  # type: ignore[union-attr]
    (decided,) = decisions_in_log(system)
    assert (decided["behavior"], decided["actor"]) == ("deny", "alice")
    assert len(notices(broker)) == 1


def test_an_expired_permission_is_denied(system: System, clock: ManualClock) -> None:
    broker = system.broker
    broker.create_run("r1")
    approval_id = ask(broker)
    signal, unsubscribe = queued_signal(broker, "r1")
    try:
        clock.advance(system.approvals.timeout + 1)
        assert system.tick() == 1
        assert signal.wait(WAIT)
    finally:
        unsubscribe()
    assert broker.get_run("r1").permission_decisions == {"req-1": "deny"}  # type: ignore[union-attr]
    assert system.views.approval(approval_id).decision == "expired"  # type: ignore[union-attr]
    broker.permission_decision("r1", "req-1", "allow")  # too late: the expiry stands
    assert broker.get_run("r1").permission_decisions == {"req-1": "deny"}  # type: ignore[union-attr]
    assert len(notices(broker)) == 1


def test_a_decision_without_a_request_is_recorded_as_given(system: System) -> None:
    broker = system.broker
    broker.create_run("r1")
    broker.permission_decision("r1", "unknown-req", "deny")
    assert broker.get_run("r1").permission_decisions == {"unknown-req": "deny"}  # type: ignore[union-attr]
    (notice,) = notices(broker)
    assert orjson.loads(notice.payload or "") == {"request_id": "unknown-req", "behavior": "deny"}


def test_a_decision_for_an_unknown_run_is_an_error(system: System) -> None:
    with pytest.raises(RunNotFoundError, match=r"^run not found: ghost$"):
        system.broker.permission_decision("ghost", "req-1", "allow")


# -- who decides ----------------------------------------------------------------------------


def test_a_runs_answer_to_its_high_risk_request_is_a_refused_attempt(
    system: System, clock: ManualClock
) -> None:
    broker = system.broker
    broker.create_run("r1")
    approval_id = ask(broker, tool="Bash")
    with pytest.raises(OperatorOnlyError, match="only an operator decides a high-risk request"):
        broker.permission_decision("r1", "req-1", "allow")
    row = system.views.approval(approval_id)
    assert row is not None
    assert (row.status, row.decision, row.actor) == ("pending", "", "")
    (attempt,) = row.refused
    assert (attempt.decision, attempt.actor, attempt.identity, attempt.at, attempt.agent_reported) == (
        "approve",
        "run:r1",
        "",
        clock.now(),
        True,
    )
    assert "'allow'" in attempt.reason
    # Nothing reached the run: no decision recorded, no notice queued.
    assert broker.get_run("r1").permission_decisions == {}  # type: ignore[union-attr]
    assert notices(broker) == []
    # The operator still decides, and the run hears the operator's answer.
    signal, unsubscribe = queued_signal(broker, "r1")
    try:
        system.approvals.resolve(approval_id, "reject", "alice", identity="operator-token")
        assert signal.wait(WAIT)
    finally:
        unsubscribe()
    assert broker.get_run("r1").permission_decisions == {"req-1": "deny"}  # type: ignore[union-attr]
    (decided,) = decisions_in_log(system)
    assert (decided["behavior"], decided["actor"]) == ("deny", "alice")


def test_operator_decides_all_covers_low_risk_requests_too(system: System) -> None:
    broker = system.broker
    broker.operator_decides = "all"
    broker.create_run("r1")
    approval_id = ask(broker, tool="Read")
    with pytest.raises(OperatorOnlyError, match="low-risk request"):
        broker.permission_decision("r1", "req-1", "deny")
    assert system.views.approval(approval_id).status == "pending"  # type: ignore[union-attr]


def test_an_unknown_policy_is_refused(system: System) -> None:
    with pytest.raises(ValueError, match="operator-decides policy"):
        Broker(system.log, system.clock, system.approvals, system.views, operator_decides="none")


def test_a_long_lived_run_keeps_a_bounded_memory_of_its_permission_requests(system: System) -> None:
    # A run that lives for months asks thousands of times: its state and registry row keep a
    # window of recent requests and a count, not every request id it ever made.
    system.broker.create_run("r1")
    approvals = []
    for i in range(RECENT_PERMISSIONS + 40):  # each answered before the next: few open at once
        approvals.append(ask(system.broker, request_id=f"req-{i}"))
        system.broker.permission_decision("r1", f"req-{i}", "allow")
    ask(system.broker, request_id=f"req-{RECENT_PERMISSIONS + 39}")  # a retry of a recent request
    system.views.catch_up()
    row = system.views.run("r1")
    assert row is not None
    assert row.permission_request_count == RECENT_PERMISSIONS + 40
    assert len(row.recent_permission_requests) <= RECENT_PERMISSIONS
    state = system.broker.run_state("r1", fresh=True)
    assert len(state.permissions) <= RECENT_PERMISSIONS
    assert len(state.decided) <= RECENT_PERMISSIONS
    # A recent decision is still recognised: the operator's outcome reaches the run once.
    system.broker.approval_decided(approvals[-1])
    assert len(decisions_in_log(system)) == RECENT_PERMISSIONS + 40
