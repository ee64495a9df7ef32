"""The approval gate cannot be forged, bypassed or faked: a run or a web page tries, in process.

Each test plays an attack over HTTP and checks that it is refused with a message, that nothing
reached the target run, and that the operator's own path still works.
"""

from __future__ import annotations

import threading

import pytest

from actors import OPERATOR_CONTROL_TYPES

from .conftest import OPERATOR, POST_ONLY, assert_json, credential_id, head

FORGED = {"request_id": "deployer-perm-2", "behavior": "allow"}


def poll(client, run_id: str, token: str) -> list[dict]:
    return list(client.post("/poll-control", json={"run_id": run_id, "token": token}).json() or [])


def refusal(response, status: int) -> str:
    """The message of a JSON refusal with `status`."""
    body = assert_json(response, status)
    assert isinstance(body["error"], str)
    assert body["error"]
    return str(body["error"])


# -- 1. a run forges an operator's control message to another run -----------------------------


@pytest.mark.parametrize("kind", [*sorted(OPERATOR_CONTROL_TYPES), "Permission_Decision"])
def test_a_run_cannot_send_an_operator_control_type(client, register, system, kind):
    mallory, deployer = register("mallory"), register("deployer")
    before = head(system)
    body = {"run_id": "mallory", "token": mallory, "from_run_id": "mallory", "to_run_id": "deployer",
            "type": kind, "payload": FORGED}  # fmt: skip
    assert "only an operator sends it" in refusal(client.post("/send", json=body), 403)
    assert head(system) == before
    assert poll(client, "deployer", deployer) == []


def test_runs_still_message_each_other_and_the_operator_still_pushes(client, register):
    mallory, deployer = register("mallory"), register("deployer")
    body = {"run_id": "mallory", "token": mallory, "from_run_id": "mallory", "to_run_id": "deployer",
            "type": "agent_message", "payload": {"message": "hi"}}  # fmt: skip
    assert assert_json(client.post("/send", json=body)) == {"queued": True}
    push = {"id": "op-1", "type": "cancel", "run_id": "deployer", "payload": {"why": "operator says"}}
    assert assert_json(client.post("/push-control", json=push, headers=OPERATOR)) == {"queued": True}
    control = {"type": "add_context", "payload": {"text": "from the API"}}
    assert client.post("/api/v1/runs/deployer/control", json=control, headers=OPERATOR).status_code == 200
    assert [(m["type"], m.get("from_run_id", "")) for m in poll(client, "deployer", deployer)] == [
        ("agent_message", "mallory"),
        ("cancel", ""),
        ("add_context", ""),
    ]


def test_push_control_without_the_operator_token_is_refused(client, register, system):
    mallory = register("mallory")
    register("deployer")
    before = head(system)
    body = {"id": "m", "type": "permission_decision", "run_id": "deployer", "token": mallory,
            "payload": FORGED}  # fmt: skip
    assert client.post("/push-control", json=body).status_code == 401
    assert head(system) == before


# -- 2. a web page drives the wire protocol blind ---------------------------------------------


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded", "multipart/form-data",
     None],
)  # fmt: skip
@pytest.mark.parametrize("path", POST_ONLY)
def test_a_body_that_is_not_json_is_415(client, system, path, content_type):
    before = head(system)
    headers = {"Content-Type": content_type} if content_type else {"Content-Type": ""}
    response = client.post(path, content=b'{"run_id": "evil"}', headers=headers)
    assert "application/json" in refusal(response, 415)
    assert head(system) == before


@pytest.mark.parametrize("content_type", ["application/json; charset=utf-8", "Application/JSON"])
def test_a_json_content_type_with_parameters_is_fine(client, content_type):
    response = client.post("/register", content=b'{"run_id": "a"}', headers={"Content-Type": content_type})
    assert response.status_code == 200


@pytest.mark.parametrize(
    "origin",
    ["http://evil.example", "null", "http://127.0.0.1:9", "http://flightlog.test", "https://127.0.0.1",
     "http://127.0.0.1.evil.example"],
)  # fmt: skip
@pytest.mark.parametrize("path", [*POST_ONLY, "/health"])
def test_a_cross_site_origin_is_403(client, system, path, origin):
    before = head(system)
    method = "GET" if path == "/health" else "POST"
    response = client.request(method, path, json={"run_id": "evil"}, headers={"Origin": origin})
    assert "cross-site" in refusal(response, 403)
    assert head(system) == before


def test_the_servers_own_loopback_origin_is_fine(client):
    # The test client's server is flightlog.test:80, so its loopback origins have no port.
    for i, origin in enumerate(("http://127.0.0.1", "http://localhost", "http://[::1]")):
        response = client.post("/register", json={"run_id": f"r{i}"}, headers={"Origin": origin})
        assert response.status_code == 200, response.text


def test_a_page_cannot_register_and_forge_as_the_issue_shows(client, register, system):
    """The attack of the issue, as a browser sends it: a simple request, text/plain, cross-site."""
    deployer = register("deployer")
    before = head(system)
    page = {"Content-Type": "text/plain;charset=UTF-8", "Origin": "http://evil.example"}
    assert client.post("/register", content=b'{"run_id": "page", "token": "0123456789abcdef"}',
                       headers=page).status_code == 403  # fmt: skip
    assert head(system) == before
    assert poll(client, "deployer", deployer) == []


# -- 3. a run approves its own high-risk request ------------------------------------------------


def ask(client, token: str, run_id: str, request_id: str, tool: str) -> str:
    body = {"run_id": run_id, "token": token, "request_id": request_id, "tool_name": tool,
            "description": "deploy", "input_preview": "make deploy"}  # fmt: skip
    assert client.post("/permission_request", json=body).status_code == 200
    (approval,) = [a for a in client.get("/api/v1/approvals", headers=OPERATOR).json()["approvals"]
                   if a["tool_call_id"] == request_id]  # fmt: skip
    return str(approval["id"])


def test_a_run_cannot_approve_its_own_high_risk_request(client, register, system, clock):
    token = register("deployer")
    approval_id = ask(client, token, "deployer", "deployer-perm-2", "bash")
    answer = {"run_id": "deployer", "token": token, "request_id": "deployer-perm-2", "behavior": "allow"}
    message = refusal(client.post("/permission", json=answer), 403)
    assert "only an operator decides a high-risk request" in message
    # Still pending for the operator; the attempt is in the audit trail, apart from decisions.
    pending = client.get("/api/v1/approvals", headers=OPERATOR).json()["approvals"]
    assert [a["id"] for a in pending] == [approval_id]
    (row,) = client.get("/api/v1/approvals/history", headers=OPERATOR).json()["approvals"]
    assert (row["status"], row["decision"], row["actor"]) == ("pending", "", "")
    (attempt,) = row["refused"]
    assert (attempt["actor"], attempt["decision"], attempt["agent_reported"]) == (
        "run:deployer",
        "approve",
        True,
    )
    assert attempt["at"] == clock.now().isoformat().replace("+00:00", "Z")
    assert poll(client, "deployer", token) == []  # the run heard no decision


def test_the_sidecar_flow_operator_approves_and_the_run_hears_it(client, register, system, operator):
    """permission request → the operator approves over the API → the run polls permission_decision."""
    alice = operator("alice")
    token = register("deployer")
    approval_id = ask(client, token, "deployer", "perm-1", "bash")
    told = threading.Event()
    unsubscribe = system.broker.on_control("deployer", told.set)
    try:
        response = client.post(f"/api/v1/approvals/{approval_id}/approve", json={}, headers=alice)
        decided = assert_json(response)
        assert (decided["actor"], decided["identity"]) == ("alice", credential_id(system, "alice"))
        assert told.wait(10)  # the follower carries the outcome to the run
    finally:
        unsubscribe()
    messages = poll(client, "deployer", token)
    assert [(m["type"], m["payload"]) for m in messages] == [
        ("permission_decision", {"request_id": "perm-1", "behavior": "allow"})
    ]


def test_a_low_risk_request_is_still_the_runs_to_answer(client, register, system):
    token = register("reader")
    approval_id = ask(client, token, "reader", "read-1", "read_file")
    answer = {"run_id": "reader", "token": token, "request_id": "read-1", "behavior": "allow"}
    assert assert_json(client.post("/permission", json=answer)) == {"ok": True}
    assert system.views.approval(approval_id).decision == "approve"


def test_operator_decides_all_takes_low_risk_requests_too(client, register, system):
    system.broker.operator_decides = "all"
    token = register("reader")
    ask(client, token, "reader", "read-1", "read_file")
    answer = {"run_id": "reader", "token": token, "request_id": "read-1", "behavior": "allow"}
    assert "low-risk request (operator-decides all)" in refusal(client.post("/permission", json=answer), 403)


# -- 5. run ids and tokens ----------------------------------------------------------------------


@pytest.mark.parametrize(
    "run_id",
    ["esc\u001b]0;PWNED\u0007\u001b[2J\r\nfake-line", "nul\u0000byte", "bell\u0007", "tab\there", "c1\u009b",
     "bidi\u202eevil", "x" * 201],
)  # fmt: skip
def test_register_refuses_an_unprintable_or_long_run_id(client, system, run_id):
    before = head(system)
    response = client.post("/register", json={"run_id": run_id})
    assert response.status_code == 400
    assert "invalid run_id: 1 to 200 printable characters" in response.text
    assert head(system) == before


def test_register_takes_a_printable_run_id_of_200(client):
    assert client.post("/register", json={"run_id": "é" * 200}).status_code == 200


@pytest.mark.parametrize("token", ["t", "x" * 15, "fifteen-chars!!"])
def test_register_refuses_a_short_chosen_token(client, system, token):
    before = head(system)
    response = client.post("/register", json={"run_id": "a", "token": token})
    assert response.status_code == 400
    assert "invalid token: 16 to 512" in response.text
    assert head(system) == before


# -- 6. methods -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "path", "allow"),
    [("GET", "/register", "POST"), ("PUT", "/send", "POST"), ("DELETE", "/api/v1/runs", "GET"),
     ("POST", "/openapi.json", "GET, HEAD"), ("POST", "/ui/", "GET, HEAD")],
)  # fmt: skip
def test_a_405_says_what_is_allowed(client, method, path, allow):
    response = client.request(method, path, headers=OPERATOR)
    assert response.status_code == 405
    assert response.headers["allow"] == allow
    assert response.text


@pytest.mark.parametrize("path", ["/health", "/register", "/api/v1/runs", "/ui/"])
def test_trace_is_refused_everywhere(client, path):
    response = client.request("TRACE", path, headers=OPERATOR)
    assert response.status_code == 405
    assert "TRACE" not in response.headers["allow"]
