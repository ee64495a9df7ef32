"""Beyond the seed: approvals outlive a System, and one outcome wins across Systems and processes."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import pytest

from actors import ApprovalError, ApprovalExpiredError, ApprovalNotPendingError

from .helpers import WAIT, in_thread, make_request, start_request, types_in


def test_pending_approvals_survive_a_restart(open_system, clock):
    first = open_system()
    started = [start_request(first, make_request(run_id=f"run-{n}", payload={"n": n})) for n in range(3)]
    clock.advance(7)
    decided = first.approvals.resolve(started[0][1].id, "approve", "alice")
    before = first.approvals.pending()
    assert len(before) == 2
    first.close()
    for future, _ in started[1:]:
        # The process that was waiting is gone; its waiters hear so instead of hanging.
        with pytest.raises(ApprovalError, match="closed while waiting"):
            future.result(WAIT)
    assert started[0][0].result(WAIT) == decided

    second = open_system()
    after = second.approvals.pending()
    assert after == before  # ids, digests, deadlines, every field
    assert [a.payload_sha256 for a in after] == [r.payload_sha256 for _, r in started[1:]]
    with pytest.raises(ApprovalNotPendingError):
        second.approvals.resolve(decided.approval.id, "reject")
    resolution = second.approvals.resolve(after[0].id, "reject", "bob")
    assert (resolution.decision, resolution.approval) == ("reject", after[0])
    clock.advance(300)
    assert second.tick() == 1
    row = second.views.approval(after[1].id)
    assert (row.status, row.actor) == ("expired", "timeout")


def test_deadline_passed_while_closed_expires_on_reopen(open_system, clock):
    first = open_system()
    started = [start_request(first) for _ in range(2)]
    first.close()
    clock.advance(300)
    second = open_system()  # no tick() here: opening fires what fell due while closed
    for _, row in started:
        after = second.views.approval(row.id)
        assert (after.status, after.actor, after.decided_at) == ("expired", "timeout", clock.now())
    assert second.approvals.pending() == []
    with pytest.raises(ApprovalNotPendingError):
        second.approvals.resolve(started[0][1].id, "approve")


def test_no_approval_after_its_deadline_across_a_restart(open_system, clock):
    first = open_system()
    _, row = start_request(first)
    first.close()
    second = open_system()
    clock.advance(300)  # due now, but nothing has ticked since the reopen
    with pytest.raises(ApprovalExpiredError) as err:
        second.approvals.resolve(row.id, "approve", "alice")
    assert err.value.resolution.decision == "expired"
    assert second.views.approval(row.id).status == "expired"


def test_second_system_loses_to_the_first(open_system):
    a, b = open_system(), open_system()
    future, row = start_request(a)
    assert b.approvals.get(row.id) is not None
    won = a.approvals.resolve(row.id, "approve", "alice")
    with pytest.raises(ApprovalNotPendingError):
        b.approvals.resolve(row.id, "reject", "bob")
    assert future.result(WAIT) == won
    assert types_in(a.log, row.id).count("ApprovalDecided") == 1


@pytest.mark.parametrize("round_", range(8))
def test_two_systems_racing_on_one_approval(open_system, round_):
    a, b = open_system(), open_system()
    future, row = start_request(a)
    barrier = threading.Barrier(2, timeout=WAIT)

    def resolve(system, decision, actor):
        barrier.wait()  # both start together; which append commits first is up to SQLite
        try:
            return system.approvals.resolve(row.id, decision, actor)
        except ApprovalNotPendingError as e:
            return e

    results = [in_thread(resolve, a, "approve", "alice"), in_thread(resolve, b, "reject", "bob")]
    outcomes = [r.result(WAIT) for r in results]
    winners = [o for o in outcomes if not isinstance(o, Exception)]
    losers = [o for o in outcomes if isinstance(o, ApprovalNotPendingError)]
    assert (len(winners), len(losers)) == (1, 1)
    assert future.result(WAIT) == winners[0]
    history = b.views.approval(row.id)
    assert (history.status, history.actor) == (winners[0].decision, winners[0].actor)
    assert [r.actor for r in history.refused] == [{"alice": "bob", "bob": "alice"}[winners[0].actor]]
    assert types_in(a.log, row.id).count("ApprovalDecided") == 1


def test_waiter_woken_by_another_system(open_system):
    a, b = open_system(), open_system()
    future, row = start_request(a)
    resolution = b.approvals.resolve(row.id, "reject", "bob", identity="bob@example.com")
    # Only a's follower can deliver this: b's actors never talk to a's.
    assert future.result(WAIT) == resolution
    assert a.approvals.pending() == []


RESOLVER = textwrap.dedent(
    """
    import sys
    from datetime import datetime
    from actors import System
    from eventlog import ManualClock

    path, now, id = sys.argv[1:]
    with System.open(path, clock=ManualClock(datetime.fromisoformat(now)), scheduler=False) as s:
        r = s.approvals.resolve(id, "approve", "cli", identity="ops@example.com")
        print(r.decision, r.actor, r.identity)
    """
)


def test_waiter_woken_by_another_process(open_system, db_path, clock):
    a = open_system()
    future, row = start_request(a)
    # The other process runs on the same manual time: on the wall clock this approval would
    # already be past its deadline, and opening a System fires deadlines.
    done = subprocess.run(
        [sys.executable, "-c", RESOLVER, str(db_path), clock.now().isoformat(), row.id],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["approve", "cli", "ops@example.com"]
    resolution = future.result(WAIT)
    assert (resolution.decision, resolution.actor) == ("approve", "cli")
    assert resolution.identity == "ops@example.com"
    with pytest.raises(ApprovalNotPendingError):
        a.approvals.resolve(row.id, "reject")


def test_passivation_then_continued_use(open_system):
    a, b = open_system(), open_system()
    waiting, row = start_request(a)
    decided = [start_request(a) for _ in range(3)]
    for future, r in decided:
        a.approvals.resolve(r.id, "approve")
        future.result(WAIT)
    elsewhere, other = start_request(b)  # a has no actor for this one
    assert a.passivate() == 3  # the decided ones; the one with a waiter stays
    assert a.passivate() == 0
    for _, r in decided:  # a fresh actor refolds the stream and knows it is decided
        with pytest.raises(ApprovalNotPendingError):
            a.approvals.resolve(r.id, "reject")
    assert a.passivate() == 3
    resolution = a.approvals.resolve(row.id, "reject", "alice")
    assert waiting.result(WAIT) == resolution
    assert a.approvals.resolve(other.id, "approve").decision == "approve"
    assert elsewhere.result(WAIT).decision == "approve"
    again, row2 = start_request(a)
    assert a.passivate() >= 1
    b.approvals.resolve(row2.id, "approve", "bob")
    assert again.result(WAIT).actor == "bob"
