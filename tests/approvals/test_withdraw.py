"""The approval decider: a requester withdraws its open request (given/when/then)."""

from __future__ import annotations

from actors import ApprovalNotPendingError
from actors.approvals.decider import DECIDED, DecideApproval, WithdrawApproval
from eventlog.events import ApprovalDecided, ApprovalDecisionRefused

from .gwt import given
from .test_decider import APPROVED, EXPIRES, ID, LATER, PENDING_ONE, requested


def test_withdraw_a_pending_request():
    t = given(PENDING_ONE).when(WithdrawApproval("run:run-1"), LATER)
    t.then([ApprovalDecided(ID, "withdrawn", "run:run-1", "", LATER)])
    assert t.after.status == DECIDED


def test_withdraw_a_recording_request():
    given([requested()]).when(WithdrawApproval("run:run-1"), LATER).then(
        [ApprovalDecided(ID, "withdrawn", "run:run-1", "", LATER)]
    )


def test_a_request_past_its_deadline_expires_rather_than_withdraws():
    given(PENDING_ONE).when(WithdrawApproval("run:run-1"), EXPIRES).then(
        [ApprovalDecided(ID, "expired", "timeout", "", EXPIRES)]
    )


def test_a_decided_or_unknown_request_cannot_be_withdrawn():
    given([*PENDING_ONE, APPROVED]).when(WithdrawApproval("run:run-1"), LATER).then(ApprovalNotPendingError)
    given([]).when(WithdrawApproval("run:run-1"), LATER).then(ApprovalNotPendingError)


def test_a_decision_after_the_withdrawal_is_refused_and_kept():
    withdrawn = ApprovalDecided(ID, "withdrawn", "run:run-1", "", LATER)
    refused = ApprovalDecisionRefused(ID, "approve", "alice", "", "already withdrawn by 'run:run-1'", LATER)
    given([*PENDING_ONE, withdrawn]).when(DecideApproval("approve", "alice"), LATER).then(
        [refused], ApprovalNotPendingError
    )
