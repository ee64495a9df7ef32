"""SEED-BEHAVIOUR §2.1 `Resolve`, `Pending`, `Get` and the actor keys."""

from __future__ import annotations

from datetime import timedelta

import pytest

from actors import (
    ApprovalActorKeys,
    ApprovalExpiredError,
    ApprovalHookError,
    ApprovalNotPendingError,
    ApprovalResolvingError,
    ApprovalValidationError,
    approval_actor_state,
)

from .helpers import WAIT, Gate, in_thread, make_request, start_request, types_in


def test_actor_keys():
    keys = approval_actor_state()
    assert isinstance(keys, ApprovalActorKeys)
    assert (keys.operator, keys.runtime, keys.timeout, keys.abort, keys.web_operator) == (
        "operator",
        "runtime",
        "timeout",
        "abort",
        "web-operator",
    )


@pytest.mark.parametrize("decision", ["expired", "", "Approve", "allow"])
def test_decision_must_be_approve_or_reject(system, decision):
    future, row = start_request(system)
    head = system.log.head().seq
    with pytest.raises(ApprovalValidationError, match=r"^decision must be approve or reject$"):
        system.approvals.resolve(row.id, decision, "alice")
    assert system.log.head().seq == head
    assert system.approvals.get(row.id) is not None
    system.approvals.resolve(row.id, "reject")
    future.result(WAIT)


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_resolve_reports_the_outcome_to_everyone(system, clock, decision):
    resolved = []
    system.approvals.on_resolved = resolved.append
    future, row = start_request(system)
    clock.advance(12.5)
    resolution = system.approvals.resolve(row.id, decision, "alice")
    assert (resolution.decision, resolution.actor, resolution.at) == (decision, "alice", clock.now())
    assert (resolution.approval.id, resolution.approval.payload_sha256) == (row.id, row.payload_sha256)
    assert future.result(WAIT) == resolution
    assert resolved == [resolution]
    assert system.approvals.pending() == []
    assert system.approvals.get(row.id) is None


def test_empty_actor_is_operator(system):
    future, row = start_request(system)
    assert system.approvals.resolve(row.id, "approve").actor == "operator"
    assert future.result(WAIT).actor == "operator"


@pytest.mark.parametrize("id", ["no-such-approval", "", "x" * 600, 'quote"d'])
def test_unknown_id_is_not_pending(system, id):
    with pytest.raises(ApprovalNotPendingError) as err:
        system.approvals.resolve(id, "approve")
    assert err.value.id == id
    assert str(err.value) == f"approval {_go_quote(id)} is not pending"
    assert isinstance(err.value, LookupError)
    assert system.log.head().seq == 0


def _go_quote(text):
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def test_resolving_twice_first_answer_wins(system):
    resolved = []
    system.approvals.on_resolved = resolved.append
    future, row = start_request(system)
    first = system.approvals.resolve(row.id, "approve", "alice")
    with pytest.raises(ApprovalNotPendingError) as err:
        system.approvals.resolve(row.id, "reject", "bob")
    assert str(err.value) == f'approval "{row.id}" is not pending'
    assert err.value.id == row.id
    assert future.result(WAIT) == first
    assert resolved == [first]
    after = system.views.approval(row.id)
    assert (after.status, after.actor) == ("approve", "alice")


def test_concurrent_resolver_while_on_resolved_runs(system):
    system.approvals.on_resolved = gate = Gate()
    future, row = start_request(system)
    first = in_thread(system.approvals.resolve, row.id, "approve", "alice")
    gate.wait_entered()
    # alice's hook is blocked on the gate: her resolution is in progress for this whole block.
    with pytest.raises(ApprovalResolvingError) as err:
        system.approvals.resolve(row.id, "reject", "bob")
    assert str(err.value).startswith("approval resolution is already in progress")
    assert row.id in str(err.value)
    assert system.approvals.get(row.id) is None
    assert system.approvals.pending() == []
    assert not future.done()
    gate.release.set()
    assert first.result(WAIT).actor == "alice"
    assert future.result(WAIT).actor == "alice"
    with pytest.raises(ApprovalNotPendingError):
        system.approvals.resolve(row.id, "reject", "bob")


@pytest.mark.parametrize(
    ("timeout_s", "expires"), [(300, "2026-01-01T00:05:00Z"), (0.5, "2026-01-01T00:00:00.5Z")]
)
@pytest.mark.parametrize("late_by", [0, 0.000001, 3600])
def test_decision_at_or_after_the_deadline_is_an_expiry(log, clock, timeout_s, expires, late_by):
    from actors import System

    with System.open(log, clock=clock, scheduler=False, approval_timeout=timeout_s) as system:
        resolved = []
        system.approvals.on_resolved = resolved.append
        future, row = start_request(system)
        clock.advance(timeout_s + late_by)  # no tick(): the deadline is checked on the decision
        with pytest.raises(ApprovalExpiredError) as err:
            system.approvals.resolve(row.id, "approve", "alice")
        resolution = err.value.resolution
        assert (resolution.decision, resolution.actor) == ("expired", "timeout")
        assert resolution.approval.id == row.id
        message = str(err.value)
        assert message.startswith("approval expired")
        assert f'"{row.id}"' in message
        assert expires in message
        assert 'before "alice" could submit "approve"' in message
        assert future.result(WAIT) == resolution
        assert resolved == [resolution]
        with pytest.raises(ApprovalNotPendingError):
            system.approvals.resolve(row.id, "approve", "alice")


def test_late_decision_with_failing_on_resolved_joins_both_errors(system, clock):
    system.approvals.on_resolved = Gate(error=OSError("audit store down"))
    system.approvals.on_resolved.release.set()
    future, row = start_request(system)
    clock.advance(301)
    with pytest.raises(ApprovalExpiredError) as err:
        system.approvals.resolve(row.id, "reject", "bob")
    assert any("audit store down" in note for note in err.value.__notes__)
    with pytest.raises(ApprovalHookError) as waited:
        future.result(WAIT)
    assert waited.value.resolution == err.value.resolution


def test_on_resolved_failure_fails_closed_on_both_sides(system):
    system.approvals.on_resolved = hook = Gate(error=OSError("audit store down"))
    hook.release.set()
    future, row = start_request(system)
    with pytest.raises(ApprovalHookError) as resolver:
        system.approvals.resolve(row.id, "approve", "alice")
    with pytest.raises(ApprovalHookError) as waiter:
        future.result(WAIT)
    for err in (resolver.value, waiter.value):
        assert (err.resolution.decision, err.resolution.actor) == ("approve", "alice")
        assert isinstance(err.__cause__, OSError)
        assert "audit store down" in str(err)
    assert len(hook.calls) == 1
    assert system.approvals.pending() == []
    assert system.approvals.get(row.id) is None
    with pytest.raises(ApprovalNotPendingError):
        system.approvals.resolve(row.id, "approve", "alice")
    assert types_in(system.log, row.id).count("ApprovalDecided") == 1


def test_pending_is_oldest_first(system, clock):
    started = []
    for n in range(4):
        started.append(start_request(system, make_request(run_id=f"run-{n % 2}")))
        clock.advance(1)
    ids = [row.id for _, row in started]
    assert [a.id for a in system.approvals.pending()] == ids
    system.approvals.resolve(ids[1], "reject")
    assert [a.id for a in system.approvals.pending()] == [ids[0], *ids[2:]]
    for future, row in started:
        if row.id != ids[1]:
            system.approvals.resolve(row.id, "approve")
        future.result(WAIT)
    assert system.approvals.pending() == []


def test_get(system, clock):
    future, row = start_request(system)
    approval = system.approvals.get(row.id)
    assert approval == system.approvals.pending()[0]
    assert (approval.id, approval.expires_at) == (row.id, row.expires_at)
    assert system.approvals.get("no-such-approval") is None
    clock.advance(timedelta(minutes=5).total_seconds())
    assert system.approvals.get(row.id) is None  # at its deadline it can no longer be decided
    assert system.approvals.pending() == []
    system.tick()
    assert future.result(WAIT).decision == "expired"
    assert system.approvals.get(row.id) is None


def test_a_failing_subscriber_neither_undoes_a_decision_nor_silences_the_others(system, caplog):
    # A subscriber runs on the thread that made the change: its own failure must not reach the
    # operator deciding (whose decision is recorded), nor keep the next subscriber uninformed.
    told = []

    def broken() -> None:
        raise RuntimeError("a subscriber's bug")

    system.approvals.subscribe(broken)
    system.approvals.subscribe(lambda: told.append(True))
    future, row = start_request(system)
    told.clear()
    resolution = system.approvals.resolve(row.id, "approve", "alice")
    assert resolution.decision == "approve"
    assert future.result(WAIT) == resolution
    assert told  # the next subscriber heard of it all the same
    assert "ApprovalDecided" in types_in(system.log, row.id)
    assert any("a subscriber's bug" in str(r.exc_info[1]) for r in caplog.records if r.exc_info)
