"""Beyond the seed: the audit trail (who, which identity, refused attempts), quorum, payload privacy."""

from __future__ import annotations

import hashlib

import orjson
import pytest

from actors import (
    ApprovalExpiredError,
    ApprovalNotPendingError,
    DuplicateVoteError,
    QuorumPendingError,
    System,
)
from eventlog import decode
from projections import Views

from .helpers import WAIT, make_request, start_request


def test_decision_records_actor_and_identity(system):
    future, row = start_request(system, requested_by="agent-7")
    resolution = system.approvals.resolve(row.id, "approve", "alice", identity="alice@example.com")
    assert (resolution.actor, resolution.identity) == ("alice", "alice@example.com")
    assert future.result(WAIT) == resolution
    history = system.views.approval(row.id)
    assert (history.actor, history.identity) == ("alice", "alice@example.com")
    assert history.requested_by == "agent-7"
    assert history.latency_ms == 0.0
    records = list(system.log.read(f"approval-{row.id}"))
    assert records[0].meta["actor"] == "agent-7"
    decided = records[-1]
    assert decided.meta["actor"] == "alice"
    event = decode(decided)
    assert (event.decision, event.actor, event.identity) == ("approve", "alice", "alice@example.com")


def test_second_and_late_decisions_are_kept_as_refused_attempts(system, clock):
    f1, first = start_request(system)
    f2, late = start_request(system)
    system.approvals.resolve(first.id, "approve", "alice")
    with pytest.raises(ApprovalNotPendingError):
        system.approvals.resolve(first.id, "reject", "bob", identity="bob@example.com")
    clock.advance(301)
    with pytest.raises(ApprovalExpiredError):
        system.approvals.resolve(late.id, "approve", "carol")
    with pytest.raises(ApprovalNotPendingError):
        system.approvals.resolve(late.id, "approve", "dave")
    rows = {row.id: row for row in system.views.approval_history()}
    assert (rows[first.id].status, rows[first.id].actor) == ("approve", "alice")
    assert [(r.decision, r.actor, r.identity, r.reason) for r in rows[first.id].refused] == [
        ("reject", "bob", "bob@example.com", "already approve by 'alice'")
    ]
    assert (rows[late.id].status, rows[late.id].actor) == ("expired", "timeout")
    assert [(r.decision, r.actor, r.reason) for r in rows[late.id].refused] == [
        ("approve", "carol", "the approval had expired"),
        ("approve", "dave", "already expired by 'timeout'"),
    ]
    assert f1.result(WAIT).decision == "approve"
    assert f2.result(WAIT).decision == "expired"


# -- quorum --------------------------------------------------------------------------------


def _quorum_request(system, **kwargs):
    return start_request(system, make_request(requires_fleet_quorum=True, risk="high"), **kwargs)


def test_quorum_needs_two_distinct_approvers_by_default(system):
    future, row = _quorum_request(system)
    assert row.quorum == 2
    with pytest.raises(QuorumPendingError) as partial:
        system.approvals.resolve(row.id, "approve", "alice")
    assert (partial.value.votes, partial.value.needed) == (1, 2)
    # The vote is recorded and the approval still open; the waiter cannot have been woken,
    # since only an ApprovalDecided completes it and none is in the log.
    assert system.approvals.get(row.id) is not None
    assert "ApprovalDecided" not in [r.type for r in system.log.read(f"approval-{row.id}")]
    assert not future.done()
    with pytest.raises(DuplicateVoteError):
        system.approvals.resolve(row.id, "approve", "alice")
    resolution = system.approvals.resolve(row.id, "approve", "bob", identity="bob@example.com")
    assert (resolution.decision, resolution.actor) == ("approve", "bob")
    assert future.result(WAIT) == resolution
    history = system.views.approval(row.id)
    assert history.votes == ("alice", "bob")
    assert [(r.actor, r.decision) for r in history.refused] == [("alice", "approve")]


def test_any_reject_rejects_a_quorum_approval(system):
    future, row = _quorum_request(system)
    with pytest.raises(QuorumPendingError):
        system.approvals.resolve(row.id, "approve", "alice")
    resolution = system.approvals.resolve(row.id, "reject", "bob")
    assert (resolution.decision, resolution.actor) == ("reject", "bob")
    assert future.result(WAIT) == resolution


def test_a_configured_quorum_of_three(log, clock):
    with System.open(log, clock=clock, scheduler=False, quorum=3) as system:
        future, row = _quorum_request(system)
        for n, actor in enumerate(["alice", "bob"], start=1):
            with pytest.raises(QuorumPendingError) as partial:
                system.approvals.resolve(row.id, "approve", actor)
            assert (partial.value.votes, partial.value.needed) == (n, 3)
        assert system.approvals.resolve(row.id, "approve", "carol").decision == "approve"
        assert future.result(WAIT).actor == "carol"
        plain, plain_row = start_request(system)  # without the quorum flag one approver decides
        assert plain_row.quorum == 1
        assert system.approvals.resolve(plain_row.id, "approve", "alice").decision == "approve"
        plain.result(WAIT)


def test_partial_votes_never_beat_the_deadline(system, clock):
    future, row = _quorum_request(system)
    with pytest.raises(QuorumPendingError):
        system.approvals.resolve(row.id, "approve", "alice")
    clock.advance(300)
    with pytest.raises(ApprovalExpiredError):
        system.approvals.resolve(row.id, "approve", "bob")
    resolution = future.result(WAIT)
    assert (resolution.decision, resolution.actor) == ("expired", "timeout")


# -- the payload is never stored -----------------------------------------------------------

SECRET = "zebra-PAYLOAD-7f3a9c-never-stored"


def test_payload_never_reaches_the_database_file(open_system, db_path):
    system = open_system()
    payload = {"command": f"deploy --token {SECRET}", "args": [SECRET]}
    digest = hashlib.sha256(orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)).hexdigest()
    future, row = start_request(system, make_request(title="Deploy tooling", payload=payload))
    system.approvals.resolve(row.id, "approve", "alice")
    future.result(WAIT)
    assert row.payload_sha256 == digest

    def contents():
        return {p.name: p.read_bytes() for p in db_path.parent.iterdir() if p.name.startswith(db_path.name)}

    live = contents()
    assert db_path.name + "-wal" in live  # the commits so far sit in the WAL
    system.close()
    closed = contents()  # after the checkpoint on close
    for files in (live, closed):
        everything = b"".join(files.values())
        assert b"Deploy tooling" in everything  # the search does see what was stored
        assert digest.encode() in everything
        assert SECRET.encode() not in everything
        assert SECRET.encode("utf-16-le") not in everything


def test_the_history_holds_repeated_strings_once(system, log):
    # The history keeps every approval for good; what a fleet repeats from one approval to the
    # next is one object in memory, not one per row (read back from the log, the records'
    # strings are fresh objects each), and the view folds to the same state as a rebuild.
    rows = []
    for _ in range(2):
        approval = system.approvals.submit(make_request(), requested_by="agent-7")
        system.approvals.resolve(approval.id, "approve", "alice", identity="alice@example.com")
        rows.append(system.views.approval(approval.id))
    a, b = rows
    for field in ("run_id", "kind", "title", "risk", "requested_by", "decision", "actor", "identity"):
        assert getattr(a, field) is getattr(b, field), field
    assert a.tool_call_id != b.tool_call_id
    assert system.views.digests() == Views(log, snapshots=None).digests()
