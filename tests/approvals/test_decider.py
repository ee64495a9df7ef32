"""The approval decider, command by command and branch by branch (pure: no log, no clock)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from actors import (
    Approval,
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ApprovalRecordingError,
    ApprovalResolution,
    ApprovalValidationError,
    DuplicateVoteError,
)
from actors.approvals.decider import (
    DECIDED,
    DISCARDED,
    PENDING,
    RECORDING,
    DecideApproval,
    DiscardApproval,
    ExpireApproval,
    PublishApproval,
    RecordApproval,
)
from eventlog.events import (
    ApprovalDecided,
    ApprovalDecisionRefused,
    ApprovalDiscarded,
    ApprovalPublished,
    ApprovalRequested,
    ApprovalVoted,
)

from .gwt import given

T0 = datetime(2026, 1, 1, tzinfo=UTC)
EXPIRES = T0 + timedelta(minutes=5)
LATER = T0 + timedelta(seconds=30)
ID = "ap-1"
APPROVAL = Approval(ID, "run-1", "call-1", "shell", "Run", "rm -rf x", "high", "ab" * 32, False, T0, EXPIRES)
QUORUM_APPROVAL = Approval(ID, "run-1", "call-1", "shell", "Run", "go", "high", "cd" * 32, True, T0, EXPIRES)


def requested(quorum: int = 1) -> ApprovalRequested:
    a = QUORUM_APPROVAL if quorum > 1 else APPROVAL
    return ApprovalRequested(
        ID, a.run_id, a.tool_call_id, a.kind, a.title, a.detail, a.risk, a.payload_sha256,
        a.requires_fleet_quorum, quorum, a.requested_at, a.expires_at, "harness",
    )  # fmt: skip


PUBLISHED = ApprovalPublished(ID, T0)
PENDING_ONE = [requested(), PUBLISHED]
PENDING_TWO = [requested(2), PUBLISHED]
APPROVED = ApprovalDecided(ID, "approve", "alice", "alice@example.com", LATER)


# -- RecordApproval ------------------------------------------------------------------------


def test_record_without_hook_publishes_in_the_same_decision():
    t = given([]).when(RecordApproval(APPROVAL, 1, "harness", publish=True), T0)
    t.then([requested(), ApprovalPublished(ID, T0)])
    assert t.after.status == PENDING
    assert t.after.approval == APPROVAL


def test_record_with_hook_stays_recording():
    t = given([]).when(RecordApproval(APPROVAL, 1, "harness", publish=False), T0)
    t.then([requested()])
    assert t.after.status == RECORDING
    assert t.after.approval == APPROVAL


def test_record_keeps_the_quorum():
    t = given([]).when(RecordApproval(QUORUM_APPROVAL, 2, "harness", publish=True), T0)
    t.then([requested(2), PUBLISHED])
    assert t.after.quorum == 2


@pytest.mark.parametrize("history", [[requested()], PENDING_ONE, [*PENDING_ONE, APPROVED]])
def test_record_twice_is_refused(history):
    given(history).when(RecordApproval(APPROVAL, 1, "harness", publish=True), T0).then(
        ApprovalValidationError
    )


# -- PublishApproval and DiscardApproval --------------------------------------------------


def test_publish_a_recording_request():
    t = given([requested()]).when(PublishApproval(), T0)
    t.then([PUBLISHED])
    assert t.after.status == PENDING


@pytest.mark.parametrize("history", [[], PENDING_ONE, [*PENDING_ONE, APPROVED]])
def test_publish_is_a_no_op_unless_recording(history):
    given(history).when(PublishApproval(), T0).then([])


def test_discard_a_recording_request():
    t = given([requested()]).when(DiscardApproval("on_requested failed: boom"), T0)
    t.then([ApprovalDiscarded(ID, "on_requested failed: boom", T0)])
    assert t.after.status == DISCARDED
    assert not t.after.open


@pytest.mark.parametrize("history", [[], PENDING_ONE, [*PENDING_ONE, APPROVED]])
def test_discard_is_a_no_op_unless_recording(history):
    given(history).when(DiscardApproval("late"), T0).then([])


# -- ExpireApproval ------------------------------------------------------------------------


@pytest.mark.parametrize("history", [[requested()], PENDING_ONE], ids=["recording", "pending"])
def test_expire_an_open_approval(history):
    t = given(history).when(ExpireApproval("abort"), LATER)
    t.then([ApprovalDecided(ID, "expired", "abort", "", LATER)])
    assert t.after.status == DECIDED
    assert t.after.resolution == ApprovalResolution(APPROVAL, "expired", "abort", LATER)


@pytest.mark.parametrize(
    "history",
    [[], [*PENDING_ONE, APPROVED], [requested(), ApprovalDiscarded(ID, "boom", T0)]],
    ids=["unknown", "decided", "discarded"],
)
def test_expire_a_finished_approval_is_not_pending(history):
    error = given(history).when(ExpireApproval("timeout"), LATER).then(ApprovalNotPendingError)
    assert isinstance(error, ApprovalNotPendingError)
    assert error.id == ID


# -- DecideApproval ------------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["expired", "", "APPROVE", "maybe"])
@pytest.mark.parametrize("history", [[], PENDING_ONE])
def test_only_approve_or_reject_can_be_decided(history, decision):
    error = given(history).when(DecideApproval(decision, "alice"), LATER).then(ApprovalValidationError)
    assert str(error) == "decision must be approve or reject"


def test_decide_unknown_is_not_pending():
    given([]).when(DecideApproval("approve", "alice"), LATER).then(ApprovalNotPendingError)


def test_decide_while_recording():
    error = given([requested()]).when(DecideApproval("approve", "alice"), LATER).then(ApprovalRecordingError)
    assert str(error) == f'approval request is still being recorded: "{ID}"'


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_decide_a_pending_approval(decision):
    t = given(PENDING_ONE).when(DecideApproval(decision, "alice", "alice@example.com"), LATER)
    t.then([ApprovalDecided(ID, decision, "alice", "alice@example.com", LATER)])
    assert t.after.resolution == ApprovalResolution(APPROVAL, decision, "alice", LATER, "alice@example.com")


def test_second_decision_is_refused_and_kept():
    t = given([*PENDING_ONE, APPROVED]).when(DecideApproval("reject", "bob", "bob@x"), LATER)
    t.then(
        [ApprovalDecisionRefused(ID, "reject", "bob", "bob@x", "already approve by 'alice'", LATER)],
        ApprovalNotPendingError,
    )
    assert t.after.resolution == t.before.resolution  # a terminal outcome never changes


def test_decision_on_a_discarded_request_is_refused():
    history = [requested(), ApprovalDiscarded(ID, "boom", T0)]
    given(history).when(DecideApproval("approve", "bob"), LATER).then(
        [ApprovalDecisionRefused(ID, "approve", "bob", "", "the request was discarded", LATER)],
        ApprovalNotPendingError,
    )


@pytest.mark.parametrize("now", [EXPIRES, EXPIRES + timedelta(microseconds=1), EXPIRES + timedelta(days=1)])
@pytest.mark.parametrize("quorum", [1, 2])
def test_decision_at_or_after_the_deadline_becomes_an_expiry(now, quorum):
    t = given([requested(quorum), PUBLISHED]).when(DecideApproval("approve", "alice"), now)
    error = t.then(
        [
            ApprovalDecided(ID, "expired", "timeout", "", now),
            ApprovalDecisionRefused(ID, "approve", "alice", "", "the approval had expired", now),
        ],
        ApprovalExpiredError,
    )
    assert isinstance(error, ApprovalExpiredError)
    assert (error.resolution.decision, error.resolution.actor) == ("expired", "timeout")
    assert t.after.resolution == error.resolution


def test_just_before_the_deadline_still_counts():
    now = EXPIRES - timedelta(microseconds=1)
    given(PENDING_ONE).when(DecideApproval("approve", "alice"), now).then(
        [ApprovalDecided(ID, "approve", "alice", "", now)]
    )


# -- quorum --------------------------------------------------------------------------------


def test_first_approval_of_a_quorum_is_a_vote():
    t = given(PENDING_TWO).when(DecideApproval("approve", "alice", "a@x"), LATER)
    t.then([ApprovalVoted(ID, "alice", "a@x", LATER)])
    assert t.after.status == PENDING
    assert t.after.votes == ("alice",)


def test_quorum_is_reached_by_a_distinct_approver():
    history = [*PENDING_TWO, ApprovalVoted(ID, "alice", "", T0)]
    t = given(history).when(DecideApproval("approve", "bob", "b@x"), LATER)
    t.then([ApprovalVoted(ID, "bob", "b@x", LATER), ApprovalDecided(ID, "approve", "bob", "b@x", LATER)])
    assert t.after.votes == ("alice", "bob")
    assert t.after.status == DECIDED


def test_duplicate_vote_is_refused_and_kept():
    history = [*PENDING_TWO, ApprovalVoted(ID, "alice", "", T0)]
    why = "'alice' has already approved; a quorum needs distinct operators, each with their own credential"
    error = (
        given(history)
        .when(DecideApproval("approve", "alice"), LATER)
        .then([ApprovalDecisionRefused(ID, "approve", "alice", "", why, LATER)], DuplicateVoteError)
    )
    assert isinstance(error, DuplicateVoteError)
    assert error.actor == "alice"


def test_the_same_credential_cannot_vote_twice_under_another_name():
    # One token used to cast both votes of a two-person approval; the credential id, not the
    # name typed, is what makes two votes two people.
    history = [*PENDING_TWO, ApprovalVoted(ID, "alice", "c-alice", T0)]
    why = (
        "credential 'c-alice' has already approved; "
        "a quorum needs distinct operators, each with their own credential"
    )
    error = (
        given(history)
        .when(DecideApproval("approve", "bob", "c-alice"), LATER)
        .then([ApprovalDecisionRefused(ID, "approve", "bob", "c-alice", why, LATER)], DuplicateVoteError)
    )
    assert isinstance(error, DuplicateVoteError)


def test_two_credentials_complete_a_quorum():
    history = [*PENDING_TWO, ApprovalVoted(ID, "alice", "c-alice", T0)]
    given(history).when(DecideApproval("approve", "bob", "c-bob"), LATER).then(
        [ApprovalVoted(ID, "bob", "c-bob", LATER), ApprovalDecided(ID, "approve", "bob", "c-bob", LATER)]
    )


def test_any_reject_rejects_a_quorum_approval():
    history = [*PENDING_TWO, ApprovalVoted(ID, "alice", "", T0)]
    given(history).when(DecideApproval("reject", "alice"), LATER).then(
        [ApprovalDecided(ID, "reject", "alice", "", LATER)]
    )


def test_a_larger_quorum_needs_every_vote():
    history = [requested(3), PUBLISHED, ApprovalVoted(ID, "alice", "", T0)]
    t = given(history).when(DecideApproval("approve", "bob"), LATER)
    t.then([ApprovalVoted(ID, "bob", "", LATER)])
    t = given([*history, ApprovalVoted(ID, "bob", "", LATER)]).when(DecideApproval("approve", "carol"), LATER)
    t.then([ApprovalVoted(ID, "carol", "", LATER), ApprovalDecided(ID, "approve", "carol", "", LATER)])


# -- evolve --------------------------------------------------------------------------------


def test_quorum_below_one_folds_as_one():
    assert given([requested(0)]).state.quorum == 1


def test_terminal_states_ignore_later_outcomes():
    decided = given([*PENDING_ONE, APPROVED]).state
    for event in (
        PUBLISHED,
        ApprovalDiscarded(ID, "late", LATER),
        ApprovalDecided(ID, "reject", "bob", "", LATER),
        ApprovalDecisionRefused(ID, "reject", "bob", "", "late", LATER),
    ):
        assert given([*PENDING_ONE, APPROVED, event]).state == decided
    discarded = [requested(), ApprovalDiscarded(ID, "boom", T0)]
    assert given([*discarded, PUBLISHED]).state.status == DISCARDED
    assert given([*discarded, ApprovalDecided(ID, "approve", "a", "", T0)]).state.status == DISCARDED


def test_publish_before_request_is_ignored():
    assert given([PUBLISHED]).state.status == "none"
