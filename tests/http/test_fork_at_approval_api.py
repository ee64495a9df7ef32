"""`POST /api/v1/runs/{run_id}/fork` at an approval: who may, what is recorded, what is refused."""

from __future__ import annotations

import threading

import pytest

from actors.operators import ADMIN, VIEWER
from tests.controller.forks import broker_origin, record_origin

from .conftest import OPERATOR, assert_json, credential_id, head

WAIT = 10.0


def fork(client, run_id: str, headers=OPERATOR, **body):
    return client.post(f"/api/v1/runs/{run_id}/fork", json=body, headers=headers)


def origin_approval(system, run_id: str) -> str:
    [row] = [r for r in system.views.approval_history() if r.run_id == run_id]
    return row.id


def test_an_admin_forks_a_broker_run_at_an_approval_and_its_agent_hears_it(system, client, operator):
    approval = broker_origin(system)
    admin = operator("carol", ADMIN)

    response = fork(client, "lg-1", admin, at_approval=approval, reason="ship it after all")

    out = assert_json(response, 201)
    assert response.headers["cache-control"] == "no-store"  # it carries the new run's token
    f = out["fork"]
    assert (f["kind"], f["origin_run_id"], f["decision"], f["recorded"], f["decided_by"]) == (
        "broker", "lg-1", "approve", "reject", "carol"
    )  # fmt: skip
    assert (out["redrive"], f["request_id"]) == (None, "deploy-1")
    row = system.views.approval(f["fork_approval_id"])
    assert (row.actor, row.identity) == ("carol", credential_id(system, "carol"))
    # The fork's agent, with the token shown once, files the same request and is allowed at once.
    asked = {
        "run_id": f["run_id"], "token": out["token"], "request_id": "deploy-1", "tool_name": "deploy",
        "description": "Deploy web", "input_preview": '{"env": "prod"}',
    }  # fmt: skip
    assert client.post("/permission_request", json=asked).status_code == 200
    waited = {"run_id": f["run_id"], "token": out["token"], "request_id": "deploy-1", "timeout": 0}
    answer = assert_json(client.post("/permission_wait", json=waited))
    assert (answer["status"], answer["behavior"], answer["decided_by"]) == ("decided", "allow", "carol")
    # The origin's token is not the fork's, and the fork's not the origin's.
    assert client.post("/heartbeat", json={"run_id": "lg-1", "token": out["token"]}).status_code == 401


@pytest.mark.parametrize("role", [VIEWER, "approver"])
def test_only_an_operator_who_controls_runs_forks_them(system, client, operator, role):
    approval = broker_origin(system)
    headers = operator(f"op-{role}", role)
    before = head(system)
    response = fork(client, "lg-1", headers, at_approval=approval)
    assert response.status_code == 403, response.text
    assert head(system) == before  # nothing recorded


def test_the_decision_is_the_authenticated_operators_never_a_typed_name(system, client):
    approval = broker_origin(system)
    before = head(system)
    response = fork(client, "lg-1", at_approval=approval, actor="mallory")
    assert response.status_code == 403
    assert "not the authenticated operator" in response.json()["error"]
    assert head(system) == before
    out = assert_json(fork(client, "lg-1", at_approval=approval, actor="bootstrap"), 201)
    assert out["fork"]["decided_by"] == "bootstrap"


def test_what_cannot_be_forked_at_an_approval_is_refused_and_records_nothing(system, client):
    approval = broker_origin(system)
    system.broker.create_run("other")
    pending = system.broker.permission_request("other", "r-1", "deploy", "Deploy", "{}")
    before = head(system)
    cases = [
        ("lg-1", {"at_approval": "no-such-approval"}, 404, "is not one of run"),
        ("lg-1", {"at_approval": pending}, 404, "is not one of run"),
        ("other", {"at_approval": pending}, 409, "still pending"),
        ("lg-1", {"at_approval": approval, "decision": "maybe"}, 400, "decision must be approve or reject"),
        ("lg-1", {"at_approval": approval, "at": 3}, 400, "not both"),
        ("lg-1", {"at_approval": ""}, 400, "must name an approval"),
        ("lg-1", {"at_approval": 7}, 400, "must name an approval"),
        ("lg-1", {"at_approval": approval, "redrive": True}, 400, "broker run's fork is not re-driven"),
        ("lg-1", {"at_approval": approval, "reason": "\x1b[2J"}, 400, "printable"),
    ]
    for run_id, body, status, message in cases:
        response = fork(client, run_id, **body)
        assert response.status_code == status, (body, response.text)
        assert message in response.json()["error"], (body, response.text)
    assert head(system) == before


def test_an_agent_forks_changed_decision_is_not_redriven_here_but_its_recorded_one_is(system, client):
    origin = record_origin(system)  # approved by alice
    approval = origin_approval(system, origin.run_id)
    before = head(system)

    refused = fork(client, origin.run_id, at_approval=approval, redrive=True)  # reject: a live agent's
    assert refused.status_code == 400
    assert "--command" in refused.json()["error"]
    assert head(system) == before

    same = fork(client, origin.run_id, at_approval=approval, decision="approve", redrive=True)
    out = assert_json(same, 201)
    f = out["fork"]
    assert (f["kind"], f["decision"], f["recorded"]) == ("agent", "approve", "approve")
    assert out["redrive"] == "started"
    assert "token" not in out
    ended = wait_for_status(system, f["run_id"], {"succeeded", "failed", "aborted"})
    assert ended == "succeeded"
    [decided] = [r for r in system.views.approval_history() if r.run_id == f["run_id"]]
    assert (decided.status, decided.actor, decided.identity) == ("approve", "bootstrap", "bootstrap")


def wait_for_status(system, run_id: str, statuses: set[str]) -> str:
    """Follow the log until the agent run `run_id` has one of `statuses` (WAIT seconds at most)."""
    stop = threading.Event()
    timer = threading.Timer(WAIT, stop.set)
    timer.start()
    try:
        for _ in system.log.follow(after_seq=0, stop=stop):
            row = system.views.agent_run(run_id, at=system.log.head().seq)
            if row is not None and row.status in statuses:
                return row.status
    finally:
        timer.cancel()
    raise AssertionError(f"run {run_id} did not end within {WAIT} seconds")


def test_a_broker_run_forked_at_a_seq_is_told_to_fork_at_an_approval(system, client):
    broker_origin(system)
    response = fork(client, "lg-1", at=3)
    assert response.status_code == 404
    assert "a broker run is forked at one of its approvals" in response.json()["error"]
