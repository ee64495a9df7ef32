"""One request id, one approval, one answer: a run cannot talk its way to `allow`."""

from __future__ import annotations

import orjson
import pytest

from actors import OperatorOnlyError, PermissionConflictError, System
from projections import RECENT_PERMISSIONS

RUN = "r1"


def answers(system: System) -> list[dict]:
    """Every permission_decision the run's agent is told, in order."""
    view = system.broker.get_run(RUN)
    assert view is not None
    queued = [m for m in view.control_queue if m.type == "permission_decision"]
    return [orjson.loads(m.payload or "") for m in queued]


def test_a_refiled_request_id_with_other_content_is_refused_and_changes_nothing(system: System) -> None:
    # The attack: file R for `bash` (operator-only), then again for `read_file` and answer it.
    broker = system.broker
    broker.create_run(RUN)
    approval_id = broker.permission_request(RUN, "R", "bash", "rm -rf /srv/prod", "rm -rf /srv/prod")
    head = system.log.head().seq
    with pytest.raises(PermissionConflictError):
        broker.permission_request(RUN, "R", "read_file", "read a file", "cat README")
    assert system.log.head().seq == head  # nothing recorded
    with pytest.raises(OperatorOnlyError):
        broker.permission_decision(RUN, "R", "allow")
    assert answers(system) == []
    (pending,) = system.approvals.pending()
    assert (pending.id, pending.detail) == (approval_id, "rm -rf /srv/prod")
    system.approvals.resolve(approval_id, "reject", "alice")
    system.broker.approval_decided(approval_id)
    assert answers(system) == [{"request_id": "R", "behavior": "deny"}]  # one answer, the operator's


def test_refiling_the_same_content_is_idempotent(system: System) -> None:
    broker = system.broker
    broker.create_run(RUN)
    first = broker.permission_request(RUN, "R", "read_file", "read a file", "cat README")
    head = system.log.head().seq
    assert broker.permission_request(RUN, "R", "read_file", "read a file", "cat README") == first
    assert system.log.head().seq == head
    assert len(system.approvals.pending()) == 1


def test_a_request_pushed_out_of_the_window_still_needs_its_operator(system: System) -> None:
    # Under --operator-decides all: the run files R-old, then enough fillers to push it out of
    # the run's recent window, then answers R-old itself.
    broker = system.broker
    broker.operator_decides = "all"
    broker.create_run(RUN)
    old = broker.permission_request(RUN, "R-old", "read_file", "read a file", "cat README")
    for i in range(RECENT_PERMISSIONS + 1):
        broker.permission_request(RUN, f"filler-{i}", "read_file", "filler", "")
    with pytest.raises(OperatorOnlyError):
        broker.permission_decision(RUN, "R-old", "allow")
    assert answers(system) == []
    assert system.views.approval(old).status == "pending"  # type: ignore[union-attr]


def test_an_answer_before_the_request_claims_the_id(system: System) -> None:
    # Answering first and filing the operator-only request afterwards must not leave `allow`
    # queued for a request the operator never saw.
    broker = system.broker
    broker.create_run(RUN)
    broker.permission_decision(RUN, "R", "allow")  # the seed records an unfiled answer as given
    assert answers(system) == [{"request_id": "R", "behavior": "allow"}]
    with pytest.raises(PermissionConflictError):
        broker.permission_request(RUN, "R", "bash", "rm -rf /srv/prod", "rm -rf /srv/prod")
    assert system.approvals.pending() == []


def test_a_second_answer_changes_nothing(system: System) -> None:
    broker = system.broker
    broker.create_run(RUN)
    broker.permission_request(RUN, "R", "read_file", "read a file", "cat README")
    broker.permission_decision(RUN, "R", "allow")
    broker.permission_decision(RUN, "R", "deny")
    assert answers(system) == [{"request_id": "R", "behavior": "allow"}]
