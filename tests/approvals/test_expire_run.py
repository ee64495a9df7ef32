"""SEED-BEHAVIOUR §2.1 `ExpireRun`: scope, actor, order and the joined problems."""

from __future__ import annotations

import pytest

from actors import ApprovalExpireRunError, ApprovalHookError

from .helpers import WAIT, Gate, in_thread, make_request, start_request


def _start(system, runs):
    return [start_request(system, make_request(run_id=run)) for run in runs]


def test_empty_run_id_is_a_no_op(system):
    ((future, row),) = _start(system, [""])
    head = system.log.head().seq
    assert system.approvals.expire_run("") is None
    assert system.approvals.expire_run("", "bob") is None
    assert system.log.head().seq == head
    assert system.approvals.get(row.id) is not None
    system.approvals.resolve(row.id, "approve")
    future.result(WAIT)


@pytest.mark.parametrize(("actor", "expected"), [("", "abort"), ("supervisor", "supervisor")])
def test_expires_only_that_runs_approvals(system, actor, expected):
    started = _start(system, ["run-a", "run-b", "run-a", "run-ab"])
    system.approvals.expire_run("run-a", actor)
    for future, row in started:
        if row.run_id == "run-a":
            resolution = future.result(WAIT)
            assert (resolution.decision, resolution.actor) == ("expired", expected)
            assert system.views.approval(row.id).actor == expected
        else:
            assert system.approvals.get(row.id) is not None
    assert sorted(a.run_id for a in system.approvals.pending()) == ["run-ab", "run-b"]
    assert system.approvals.expire_run("run-a") is None  # nothing left: no problems either
    for future, row in started:
        if row.run_id != "run-a":
            system.approvals.resolve(row.id, "reject")
            assert future.result(WAIT).decision == "reject"


def test_expires_in_ascending_id_order(system):
    order = []
    system.approvals.on_resolved = lambda r: order.append(r.approval.id)
    started = _start(system, ["run-1"] * 6)
    system.approvals.expire_run("run-1")
    assert order == sorted(row.id for _, row in started)
    for future, _ in started:
        assert future.result(WAIT).actor == "abort"


def test_hook_failures_are_joined(system):
    system.approvals.on_resolved = Gate(error=OSError("audit store down"))
    system.approvals.on_resolved.release.set()
    started = _start(system, ["run-1", "run-1", "run-2"])
    with pytest.raises(ApprovalExpireRunError) as err:
        system.approvals.expire_run("run-1")
    ids = sorted(row.id for _, row in started if row.run_id == "run-1")
    assert err.value.errors == [f'expiring approval "{id}": audit store down' for id in ids]
    assert str(err.value) == "; ".join(err.value.errors)
    for future, row in started:
        if row.run_id == "run-1":
            with pytest.raises(ApprovalHookError) as waited:  # the expiry stands; the waiter hears the error
                future.result(WAIT)
            assert waited.value.resolution.actor == "abort"
            assert system.views.approval(row.id).status == "expired"
    assert [a.run_id for a in system.approvals.pending()] == ["run-2"]


def test_approval_decided_meanwhile_is_no_longer_pending(system):
    started = _start(system, ["run-1", "run-1"])
    first, second = sorted(row.id for _, row in started)

    def on_resolved(resolution):
        # Expiring `first` (ids go in order) decides `second` before expire_run reaches it.
        if resolution.approval.id == first:
            system.approvals.resolve(second, "approve", "alice")

    system.approvals.on_resolved = on_resolved
    with pytest.raises(ApprovalExpireRunError) as err:
        system.approvals.expire_run("run-1", "bob")
    assert err.value.errors == [f'expiring approval "{second}": approval is no longer pending']
    outcomes = {row.id: (row.status, row.actor) for row in system.views.approval_history()}
    assert outcomes == {first: ("expired", "bob"), second: ("approve", "alice")}
    for future, _ in started:
        future.result(WAIT)


def test_resolution_in_progress_is_reported(system):
    started = _start(system, ["run-1", "run-1"])
    first, second = sorted(row.id for _, row in started)
    second_hook = Gate()
    resolver = []

    def on_resolved(resolution):
        if resolution.approval.id == first:
            # Expiring `first`: start alice's decision on `second` and hold it in its hook,
            # so expire_run meets a resolution in progress (not yet a decided approval).
            resolver.append(in_thread(system.approvals.resolve, second, "approve", "alice"))
            second_hook.wait_entered()
        elif resolution.approval.id == second:
            second_hook(resolution)

    system.approvals.on_resolved = on_resolved
    with pytest.raises(ApprovalExpireRunError) as err:
        system.approvals.expire_run("run-1")
    assert err.value.errors == [f'expiring approval "{second}": resolution already in progress']
    second_hook.release.set()
    assert resolver[0].result(WAIT).actor == "alice"
    results = {row.id: future.result(WAIT) for future, row in started}
    assert (results[first].decision, results[first].actor) == ("expired", "abort")
    assert (results[second].decision, results[second].actor) == ("approve", "alice")
