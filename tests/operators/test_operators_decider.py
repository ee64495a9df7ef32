"""The operators aggregate: enrol, change a role, revoke, as pure decisions over its events."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from actors import OperatorExistsError, OperatorNotFoundError, OperatorValidationError, System
from actors.operators import ADMIN, APPROVER, VIEWER, allows, token_digest
from actors.operators.decider import (
    ChangeRole,
    EnrolOperator,
    OperatorsState,
    RevokeOperator,
    decide,
    evolve,
)
from eventlog.events import OperatorEnrolled, OperatorRevoked, OperatorRoleChanged

T0 = datetime(2026, 1, 1, tzinfo=UTC)
ALICE = OperatorEnrolled("alice", "c1", APPROVER, "d" * 64, "local:root", "", T0)


def fold(*events: object) -> OperatorsState:
    state = OperatorsState()
    for e in events:
        state = evolve(state, e)  # type: ignore[arg-type]
    return state


def test_enrol_records_only_the_digest():
    decision = decide(
        OperatorsState(), EnrolOperator("alice", APPROVER, "d" * 64, "c1", "local:root", ""), T0
    )
    assert list(decision.events) == [ALICE]


def test_an_active_name_cannot_be_enrolled_twice_but_a_revoked_one_can():
    state = fold(ALICE)
    with pytest.raises(OperatorExistsError):
        decide(state, EnrolOperator("alice", ADMIN, "e" * 64, "c2", "x", ""), T0)
    state = fold(ALICE, OperatorRevoked("alice", "c1", "left", "bob", "c9", T0))
    [again] = decide(state, EnrolOperator("alice", ADMIN, "e" * 64, "c2", "x", ""), T0).events
    assert isinstance(again, OperatorEnrolled)
    assert again.credential_id == "c2"


def test_a_revoked_token_is_never_reused_and_not_authenticated():
    state = fold(ALICE, OperatorRevoked("alice", "c1", "", "bob", "c9", T0))
    assert "d" * 64 not in state.by_digest
    with pytest.raises(OperatorValidationError):
        decide(state, EnrolOperator("carol", VIEWER, "d" * 64, "c3", "x", ""), T0)


@pytest.mark.parametrize("name", ["", "bootstrap", "a b", "x" * 65, "../etc", "é"])
def test_bad_names_are_refused(name):
    with pytest.raises(OperatorValidationError):
        decide(OperatorsState(), EnrolOperator(name, VIEWER, "d" * 64, "c1", "x", ""), T0)


def test_role_change_and_revoke_need_an_active_operator():
    with pytest.raises(OperatorNotFoundError):
        decide(OperatorsState(), ChangeRole("alice", ADMIN, "x", ""), T0)
    with pytest.raises(OperatorNotFoundError):
        decide(OperatorsState(), RevokeOperator("alice", "", "x", ""), T0)
    state = fold(ALICE)
    [changed] = decide(state, ChangeRole("alice", ADMIN, "bob", "c9"), T0).events
    assert changed == OperatorRoleChanged("alice", "c1", ADMIN, "bob", "c9", T0)
    assert fold(ALICE, changed).by_digest["d" * 64].role == ADMIN
    with pytest.raises(OperatorValidationError):
        decide(state, ChangeRole("alice", "root", "bob", "c9"), T0)


def test_roles_allow_what_the_design_says():
    assert allows("viewer", "read")
    assert not allows("viewer", "decide")
    assert allows("approver", "decide")
    assert not allows("approver", "control")
    assert all(allows("admin", a) for a in ("read", "decide", "control", "manage", "enrol"))
    assert allows("enroller", "enrol")
    assert not allows("enroller", "read")


def test_the_registry_sees_another_writers_revocation_at_once(tmp_path):
    # Two Systems on one file stand for two processes: a revocation appended by one is
    # refused by the other on its very next authentication, with no follower in between.
    path = tmp_path / "fl.db"
    with System.open(path, scheduler=False) as a, System.open(path, scheduler=False) as b:
        credential, token = a.operators.enrol("alice", APPROVER, by="local:test")
        assert credential.token_sha256 == token_digest(token)
        assert b.operators.authenticate(token) == credential
        b.operators.revoke("alice", by="local:test")
        assert a.operators.authenticate(token) is None
        assert [c.name for c in a.operators.list()] == ["alice"]
