"""The operator API under /api/v1/ and the OpenAPI document, in process."""

from __future__ import annotations

import threading

import pytest
from openapi_spec_validator import validate

from actors import ApprovalRequest, ControlMessage

from .conftest import BOOTSTRAP, OPERATOR, credential_id, head

OPERATOR_PATHS = [
    ("GET", "/api/v1/runs"),
    ("GET", "/api/v1/runs/a"),
    ("POST", "/api/v1/runs/a/control"),
    ("GET", "/api/v1/approvals"),
    ("GET", "/api/v1/approvals/history"),
    ("POST", "/api/v1/approvals/some-id/approve"),
    ("POST", "/api/v1/approvals/some-id/reject"),
    ("GET", "/api/v1/verify"),
]


def ask_permission(client, token: str, run_id: str, request_id: str, tool: str = "bash") -> None:
    body = {"run_id": run_id, "token": token, "request_id": request_id, "tool_name": tool, "description": "d"}
    assert client.post("/permission_request", json=body).status_code == 200


def decide(client, approval_id: str, decision: str, headers: dict[str, str], body: object = None):
    """Decide with the credential of `headers`; the body names no actor unless given."""
    return client.post(f"/api/v1/approvals/{approval_id}/{decision}", json=body or {}, headers=headers)


# -- auth -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), OPERATOR_PATHS)
@pytest.mark.parametrize(
    "authorization",
    [None, "Bearer wrong", "bearer operator-0123456789abcdef-secret", "operator-0123456789abcdef-secret"],
)
def test_the_operator_api_needs_the_operator_token(client, register, system, method, path, authorization):
    register("a")
    before = head(system)
    headers = {} if authorization is None else {"Authorization": authorization}
    response = client.request(method, path, json={"type": "t", "actor": "x"}, headers=headers)
    assert response.status_code == 401
    assert response.json() == {"error": "unauthorized"}
    assert response.headers["www-authenticate"] == "Bearer"
    assert head(system) == before


@pytest.mark.parametrize(("method", "path"), OPERATOR_PATHS)
def test_without_a_configured_operator_token_the_api_is_closed(make_client, method, path):
    client = make_client(operator_token_sha256="")
    assert client.request(method, path, json={}, headers=OPERATOR).status_code == 401


@pytest.mark.parametrize(("method", "path"), OPERATOR_PATHS)
def test_wrong_method_on_the_operator_api_is_405(client, method, path):
    # POST /api/v1/runs creates a run (test_run_enrolment.py): PUT is a wrong method there.
    other = "PUT" if path == "/api/v1/runs" else "POST" if method == "GET" else "GET"
    response = client.request(other, path, headers=OPERATOR)
    assert response.status_code == 405
    assert response.json() == {"error": "method not allowed"}


# -- runs -----------------------------------------------------------------------------------


def test_runs_lists_registered_runs_with_counts(client, register, system):
    a, _ = register("a"), register("b")
    client.post("/report", json={"run_id": "a", "token": a, "state": "working"})
    client.post("/finish", json={"run_id": "a", "token": a, "status": "done", "summary": "s"})
    client.post("/reply", json={"run_id": "a", "token": a, "to": "u"})
    system.broker.push_control("a", ControlMessage("m", "t", "a"))
    runs = client.get("/api/v1/runs", headers=OPERATOR).json()["runs"]
    assert [r["run_id"] for r in runs] == ["a", "b"]
    first = runs[0]
    assert first["queue_depth"] == 1
    assert (first["report_count"], first["finish_count"], first["reply_count"]) == (1, 1, 1)
    assert first["last_finish_status"] == "done"
    assert first["registered_at"].endswith("Z")
    assert first["last_seen"].endswith("Z")
    assert "token" not in str(runs)


def test_a_deleted_run_is_not_listed(client, register, system):
    register("a"), register("b")
    system.broker.delete_run("a")
    assert [r["run_id"] for r in client.get("/api/v1/runs", headers=OPERATOR).json()["runs"]] == ["b"]


def test_run_detail(client, register, system):
    a = register("a")
    client.post("/report", json={"run_id": "a", "token": a, "state": "working", "payload": {"p": 1}})
    ask_permission(client, a, "a", "r1")
    detail = client.get("/api/v1/runs/a", headers=OPERATOR).json()
    assert detail["run_id"] == "a"
    assert detail["reports"] == [{"run_id": "a", "state": "working", "payload": {"p": 1}}]
    (permission,) = detail["permission_requests"]
    assert (permission["request_id"], permission["tool_name"], permission["behavior"]) == ("r1", "bash", "")
    assert permission["approval_id"] == system.approvals.pending()[0].id


def test_unknown_run_detail_is_404(client):
    response = client.get("/api/v1/runs/ghost", headers=OPERATOR)
    assert (response.status_code, response.json()) == (404, {"error": "run not found"})


def test_push_control_through_the_operator_api(client, register, system):
    a = register("a")
    response = client.post(
        "/api/v1/runs/a/control", json={"type": "steer", "payload": {"x": 1}}, headers=OPERATOR
    )
    body = response.json()
    assert response.status_code == 200
    assert body["queued"] is True
    assert (body["message"]["type"], body["message"]["run_id"], body["message"]["payload"]) == (
        "steer",
        "a",
        {"x": 1},
    )
    polled = client.post("/poll-control", json={"run_id": "a", "token": a}).json()
    assert [m["id"] for m in polled] == [body["message"]["id"]]


def test_operator_control_errors(client, register, system):
    register("a")
    assert client.post("/api/v1/runs/a/control", json={}, headers=OPERATOR).status_code == 400
    assert client.post("/api/v1/runs/a/control", content=b"{", headers=OPERATOR).status_code == 400
    missing = client.post("/api/v1/runs/ghost/control", json={"type": "t"}, headers=OPERATOR)
    assert (missing.status_code, missing.json()) == (404, {"error": "run not found"})
    system.broker.queue_limit = 1  # bounds messages between runs: the operator's lane is not bounded
    assert client.post("/api/v1/runs/a/control", json={"type": "t"}, headers=OPERATOR).status_code == 200
    assert client.post("/api/v1/runs/a/control", json={"type": "t"}, headers=OPERATOR).status_code == 200


# -- approvals ------------------------------------------------------------------------------


def test_pending_approvals_oldest_first_and_history(client, register, system, clock, operator):
    alice = operator("alice")
    a = register("a")
    ask_permission(client, a, "a", "r1")
    clock.advance(1)
    ask_permission(client, a, "a", "r2", tool="read_file")
    pending = client.get("/api/v1/approvals", headers=OPERATOR).json()["approvals"]
    assert [p["tool_call_id"] for p in pending] == ["r1", "r2"]
    assert [p["risk"] for p in pending] == ["high", "low"]
    assert decide(client, pending[0]["id"], "reject", alice).status_code == 200
    assert [
        p["tool_call_id"] for p in client.get("/api/v1/approvals", headers=OPERATOR).json()["approvals"]
    ] == ["r2"]
    history = client.get("/api/v1/approvals/history", headers=OPERATOR).json()["approvals"]
    assert [(h["tool_call_id"], h["status"]) for h in history] == [("r1", "reject"), ("r2", "pending")]
    assert (history[0]["actor"], history[0]["identity"]) == ("alice", credential_id(system, "alice"))


def test_approving_a_permission_tells_the_run(client, register, system, operator):
    alice = operator("alice")
    a = register("a")
    ask_permission(client, a, "a", "r1")
    told = threading.Event()
    unsubscribe = system.broker.on_control("a", told.set)
    (approval,) = system.approvals.pending()
    response = decide(client, approval.id, "approve", alice)
    body = response.json()
    assert response.status_code == 200
    assert (body["approval_id"], body["decision"], body["actor"], body["identity"]) == (
        approval.id,
        "approve",
        "alice",
        credential_id(system, "alice"),
    )
    assert body["at"].endswith("Z")
    # The follower carries the outcome to the run, which hears it on its control queue.
    assert told.wait(10)
    unsubscribe()
    messages = client.post("/poll-control", json={"run_id": "a", "token": a}).json()
    assert [(m["type"], m["payload"]["behavior"]) for m in messages] == [("permission_decision", "allow")]
    assert system.broker.get_run("a").permission_decisions == {"r1": "allow"}


def test_a_second_decision_is_409_with_the_outcome(client, register, system, operator):
    a = register("a")
    ask_permission(client, a, "a", "r1")
    (approval,) = system.approvals.pending()
    assert decide(client, approval.id, "reject", operator("alice")).status_code == 200
    response = decide(client, approval.id, "approve", operator("bob"))
    assert response.status_code == 409
    assert response.json()["decision"] == "reject"


def test_an_unknown_approval_is_404(client, operator):
    response = decide(client, "no-such-approval", "approve", operator("alice"))
    assert (response.status_code, response.json()) == (404, {"error": "approval not found"})


def test_an_unknown_decision_is_404(client, register, system, operator):
    a = register("a")
    ask_permission(client, a, "a", "r1")
    (approval,) = system.approvals.pending()
    assert decide(client, approval.id, "maybe", operator("alice")).status_code == 404
    assert system.approvals.pending() == [approval]


def test_a_decision_after_the_deadline_is_409_with_the_expiry(client, register, system, clock, operator):
    a = register("a")
    ask_permission(client, a, "a", "r1")
    (approval,) = system.approvals.pending()
    clock.advance(system.approvals.timeout + 1)
    response = decide(client, approval.id, "approve", operator("alice"))
    body = response.json()
    assert response.status_code == 409
    assert body["decision"] == "expired"
    assert body["expires_at"] == approval.expires_at.isoformat().replace("+00:00", "Z")


def quorum_approval(system):
    return system.approvals.submit(
        ApprovalRequest("deploy", "Deploy", "to prod", "high", requires_fleet_quorum=True), requested_by="ci"
    )


def test_a_quorum_approval_answers_202_until_the_quorum(client, system, operator):
    approval = quorum_approval(system)
    alice, bob = operator("alice"), operator("bob")
    first = decide(client, approval.id, "approve", alice)
    assert (first.status_code, first.json()["votes"], first.json()["needed"]) == (202, 1, 2)
    assert decide(client, approval.id, "approve", alice).status_code == 409  # the same credential again
    second = decide(client, approval.id, "approve", bob)
    assert (second.status_code, second.json()["decision"]) == (200, "approve")
    votes = [(e.data["actor"], e.data["identity"]) for e in _events(system, approval.id, "ApprovalVoted")]
    assert votes == [("alice", credential_id(system, "alice")), ("bob", credential_id(system, "bob"))]


def test_one_token_cannot_cast_both_votes_of_a_quorum_under_two_names(client, system, operator):
    approval = quorum_approval(system)
    alice = operator("alice")
    first = decide(client, approval.id, "approve", alice, {"actor": "alice"})  # naming oneself is fine
    assert first.status_code == 202
    before = head(system)
    # Alice's token cannot vote again as "bob": the body may only repeat the authenticated name...
    as_bob = decide(client, approval.id, "approve", alice, {"actor": "bob"})
    assert as_bob.status_code == 403
    assert "not the authenticated operator 'alice'" in as_bob.json()["error"]
    assert head(system) == before
    # ... and without a name it is alice's second vote, which a quorum refuses (and records).
    again = decide(client, approval.id, "approve", alice)
    assert again.status_code == 409
    assert system.approvals.pending() == [approval]
    (refused,) = _events(system, approval.id, "ApprovalDecisionRefused")
    assert (refused.data["actor"], refused.data["identity"]) == ("alice", credential_id(system, "alice"))


def test_the_bootstrap_token_decides_as_bootstrap_and_counts_once(client, system, operator):
    approval = quorum_approval(system)
    first = decide(client, approval.id, "approve", OPERATOR)
    assert first.status_code == 202
    # The bootstrap admin is one credential whatever name it types.
    impersonation = decide(client, approval.id, "approve", OPERATOR, {"actor": "alice"})
    assert impersonation.status_code == 403
    assert decide(client, approval.id, "approve", OPERATOR).status_code == 409
    second = decide(client, approval.id, "approve", operator("alice"))
    assert second.status_code == 200
    voted = _events(system, approval.id, "ApprovalVoted")
    assert [(e.data["actor"], e.data["identity"]) for e in voted] == [
        (BOOTSTRAP, BOOTSTRAP),
        ("alice", credential_id(system, "alice")),
    ]


def test_a_viewer_cannot_decide(client, register, system, operator):
    a = register("a")
    ask_permission(client, a, "a", "r1")
    (approval,) = system.approvals.pending()
    response = decide(client, approval.id, "approve", operator("vera", "viewer"))
    assert response.status_code == 403
    assert system.approvals.pending() == [approval]
    # The attempt is kept in the audit trail under the viewer's credential, apart from decisions.
    assert _events(system, approval.id, "ApprovalDecided") == []
    (attempt,) = _events(system, approval.id, "ApprovalAttemptRefused")
    assert attempt.data["actor"] == f"vera ({credential_id(system, 'vera')})"


@pytest.mark.parametrize("body", [None, {}, {"actor": ""}, {"actor": None}, {"actor": "alice"}])
def test_a_decision_is_the_authenticated_operators(client, register, system, operator, body):
    a = register("a")
    ask_permission(client, a, "a", "r1")
    (approval,) = system.approvals.pending()
    path = f"/api/v1/approvals/{approval.id}/approve"
    response = client.post(path, json=body, headers=operator("alice"))  # None: no body at all
    assert response.status_code == 200, response.text
    decided = response.json()
    assert (decided["actor"], decided["identity"]) == ("alice", credential_id(system, "alice"))


@pytest.mark.parametrize("actor", ["bob", "a\nb", "x" * 201, BOOTSTRAP])
def test_a_decision_naming_another_actor_is_403(client, register, system, operator, actor):
    a = register("a")
    ask_permission(client, a, "a", "r1")
    (approval,) = system.approvals.pending()
    alice = operator("alice")
    before = head(system)
    response = decide(client, approval.id, "approve", alice, {"actor": actor})
    assert response.status_code == 403
    assert head(system) == before
    assert system.approvals.pending() == [approval]


@pytest.mark.parametrize("body", [{"actor": 5}, {"actor": ["alice"]}, ["alice"]])
def test_a_malformed_decision_body_is_400(client, register, system, operator, body):
    a = register("a")
    ask_permission(client, a, "a", "r1")
    (approval,) = system.approvals.pending()
    alice = operator("alice")
    before = head(system)
    response = client.post(f"/api/v1/approvals/{approval.id}/approve", json=body, headers=alice)
    assert response.status_code == 400
    assert head(system) == before


def _events(system, approval_id: str, type_: str) -> list:
    return [r for r in system.log.read(f"approval-{approval_id}") if r.type == type_]


def test_an_unparsable_decision_body_is_400(client):
    assert client.post("/api/v1/approvals/x/approve", content=b"{", headers=OPERATOR).status_code == 400


# -- the log and the document ---------------------------------------------------------------


def test_verify(client, register, system):
    register("a")
    body = client.get("/api/v1/verify", headers=OPERATOR).json()
    assert body["ok"] is True
    assert body["checked"] == head(system)
    assert body["head"]["seq"] == head(system)
    assert body["first_bad_seq"] is None


def test_openapi_document_is_valid_and_complete(client):
    response = client.get("/openapi.json")  # no token needed to read the API's description
    assert response.status_code == 200
    document = response.json()
    validate(document)
    broker = {"/health", "/register", "/heartbeat", "/push-control", "/poll-control", "/report", "/finish"}
    broker |= {"/reply", "/permission_request", "/permission", "/send"}
    operator = {
        "/api/v1/runs",
        "/api/v1/runs/{run_id}",
        "/api/v1/runs/{run_id}/control",
        "/api/v1/approvals",
        "/api/v1/approvals/history",
        "/api/v1/approvals/{approval_id}/{decision}",
        "/api/v1/verify",
    }
    assert broker | operator <= set(document["paths"])
    for path in broker - {"/health"}:
        assert "post" in document["paths"][path]
    # §1.10's field names for the bodies.
    schemas = document["components"]["schemas"]
    assert set(schemas["ControlMessage"]["properties"]) == {
        "id",
        "type",
        "run_id",
        "from_run_id",
        "payload",
        "created_at",
    }
    assert set(schemas["Finish"]["properties"]) == {"run_id", "status", "summary", "files_changed", "payload"}
    assert set(schemas["Report"]["properties"]) == {"run_id", "state", "payload"}
    assert set(schemas["Reply"]["properties"]) == {"run_id", "to", "payload"}


def test_create_app_refuses_a_raw_token_for_a_digest(system):
    from tools.http.app import create_app

    with pytest.raises(ValueError, match="64 lower-case hex"):
        create_app(system, operator_token_sha256="operator-0123456789abcdef-secret")
