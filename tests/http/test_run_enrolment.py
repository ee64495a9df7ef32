"""Enrolled runs over HTTP, in process: who may create a run, and an operator's revoke and re-key.

The attack: a stranger `/register`s `{"run_id": "deployer", "token": ...}` before the real
agent does. On a server taking enrolled runs only, that creates nothing (403); the operator
creates the run and hands its agent the token. When a token leaks anyway, the operator
revokes it (every route refuses it at once, a waiting poll ends with 401) or re-keys it.
"""

from __future__ import annotations

import hashlib
import inspect
import threading
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from actors import System
from actors.operators import ADMIN, APPROVER, ENROLLER
from tools.http.app import create_app

from .conftest import OPERATOR, assert_json, head

WAIT = 20.0
SQUATTER_TOKEN = "squatter-chosen-token-0123456789"
AGENT_PATHS = [
    ("/heartbeat", {}),
    ("/report", {"state": "working", "payload": {"n": 1}}),
    ("/finish", {"status": "done", "summary": "s"}),
    ("/reply", {"to": "x", "payload": {}}),
    ("/poll-control", {}),
    ("/permission_request", {"request_id": "p1", "tool_name": "bash", "description": "ls"}),
    ("/permission", {"request_id": "p1", "behavior": "allow"}),
    ("/send", {"to_run_id": "peer", "type": "agent_message", "payload": {"message": "hi"}}),
    ("/wait_reply", {"waiting_for": "m1"}),
    ("/cancel_message", {"cancel_message_id": "m1"}),
    ("/sessions", {}),
]


def token_of(name: str) -> str:
    return hashlib.sha256(f"enrolment-test:{name}".encode()).hexdigest()


@pytest.fixture
def people(system: System) -> Callable[[str, str], dict[str, str]]:
    """Enrol operator `name` with `role`; the headers of their token."""

    def enrol(name: str, role: str) -> dict[str, str]:
        system.operators.enrol(name, role, by="tests", token=token_of(name))
        return {"Authorization": f"Bearer {token_of(name)}"}

    return enrol


@pytest.fixture
def enrolled(make_client) -> httpx.Client:
    return make_client(registration="enrolled")


def create(client: httpx.Client, run_id: str, headers: dict[str, str] = OPERATOR) -> str:
    response = client.post("/api/v1/runs", json={"run_id": run_id}, headers=headers)
    body = assert_json(response, 201)
    assert response.headers["cache-control"] == "no-store"
    assert list(body) == ["run_id", "token"]
    assert body["run_id"] == run_id
    return str(body["token"])


def as_run(client: httpx.Client, path: str, run_id: str, token: str, extra: dict[str, Any]) -> httpx.Response:
    body = {"run_id": run_id, "token": token, "from_run_id": run_id, **extra}
    return client.post(path, json=body)


# -- who may create a run --------------------------------------------------------------------


def test_a_stranger_cannot_take_a_run_id_on_an_enrolled_server(enrolled, system):
    before = head(system)
    response = enrolled.post("/register", json={"run_id": "deployer", "token": SQUATTER_TOKEN})
    assert response.status_code == 403
    assert "enrolled runs only" in response.text
    assert "POST /api/v1/runs" in response.text
    assert "flightlog runs create" in response.text
    assert SQUATTER_TOKEN not in response.text
    assert enrolled.post("/register", json={"run_id": "deployer"}).status_code == 403
    assert head(system) == before  # nothing recorded, no run
    assert system.broker.get_run("deployer") is None


def test_the_operator_creates_the_run_and_its_agent_registers_with_the_token(enrolled, system):
    token = create(enrolled, "deployer")
    # The agent registers with the token its orchestrator got, as avenor's sidecar does.
    registered = assert_json(enrolled.post("/register", json={"run_id": "deployer", "token": token}))
    assert registered == {"run_id": "deployer", "token": token}
    assert as_run(enrolled, "/report", "deployer", token, {"state": "working"}).status_code == 200
    # The stranger, now: the id exists and the token is not its token.
    squat = enrolled.post("/register", json={"run_id": "deployer", "token": SQUATTER_TOKEN})
    assert (squat.status_code, squat.text) == (409, "run already registered\n")
    detail = assert_json(enrolled.get("/api/v1/runs/deployer", headers=OPERATOR))
    assert (detail["origin"], detail["created_by"], detail["created_by_credential"]) == (
        "operator",
        "bootstrap",
        "bootstrap",
    )
    assert detail["token_revoked"] is False
    [created] = [r for r in system.log.read("run-deployer") if r.type == "RunRegistered"]
    assert token not in str(created.data)
    assert created.meta["actor"] == "bootstrap"


def test_an_open_server_records_a_self_registration_with_the_address(make_client, system):
    client = make_client(registration="open")
    token = assert_json(client.post("/register", json={"run_id": "mine"}))["token"]
    assert as_run(client, "/report", "mine", token, {"state": "working"}).status_code == 200
    [created] = [r for r in system.log.read("run-mine") if r.type == "RunRegistered"]
    who = (created.data["origin"], created.data["by"], created.data["by_credential"])
    assert who == ("self", "127.0.0.1", "")
    entries = assert_json(client.get("/api/v1/runs/mine/timeline", headers=OPERATOR))["entries"]
    assert entries[0]["text"] == "Run mine registered itself from 127.0.0.1"


def test_the_python_default_is_enrolled_as_serves():
    # The in-process tests of the seed's protocol ask for `open` (conftest); nothing else does.
    assert inspect.signature(create_app).parameters["registration"].default == "enrolled"


def test_an_enroller_creates_runs_and_does_nothing_else(enrolled, system, people):
    orchestrator = people("orchestrator", ENROLLER)
    token = create(enrolled, "worker-1", orchestrator)
    detail = assert_json(enrolled.get("/api/v1/runs/worker-1", headers=OPERATOR))
    assert (detail["origin"], detail["created_by"]) == ("enrolment", "orchestrator")
    assert enrolled.post("/api/v1/runs/worker-1/revoke", headers=orchestrator).status_code == 403
    assert enrolled.post("/api/v1/runs/worker-1/rekey", headers=orchestrator).status_code == 403
    assert enrolled.get("/api/v1/runs", headers=orchestrator).status_code == 403
    assert as_run(enrolled, "/report", "worker-1", token, {"state": "working"}).status_code == 200


@pytest.mark.parametrize("role", [APPROVER, "viewer"])
def test_who_may_not_enrol_cannot_create_a_run(enrolled, system, people, role):
    headers = people(f"someone-{role}", role)
    before = head(system)
    assert enrolled.post("/api/v1/runs", json={"run_id": "r"}, headers=headers).status_code == 403
    assert enrolled.post("/api/v1/runs", json={"run_id": "r"}).status_code == 401
    assert head(system) == before


def test_creating_a_run_that_exists_or_a_bad_id_is_refused(enrolled):
    create(enrolled, "r1")
    assert assert_json(enrolled.post("/api/v1/runs", json={"run_id": "r1"}, headers=OPERATOR), 409)
    for bad in ("", "a\nb", "x" * 201, 5):
        response = enrolled.post("/api/v1/runs", json={"run_id": bad}, headers=OPERATOR)
        assert "error" in assert_json(response, 400)


def test_the_runs_list_still_answers_get(enrolled):
    create(enrolled, "r1")
    runs = assert_json(enrolled.get("/api/v1/runs", headers=OPERATOR))["runs"]
    assert [r["run_id"] for r in runs] == ["r1"]
    assert enrolled.put("/api/v1/runs", headers=OPERATOR).status_code == 405


# -- revoke and re-key ---------------------------------------------------------------------


@pytest.mark.parametrize("how", ["revoke", "delete"])
def test_a_revoked_token_is_refused_on_every_route_at_once(enrolled, system, how):
    token = create(enrolled, "leaky")
    create(enrolled, "peer")
    assert enrolled.post("/register", json={"run_id": "leaky", "token": token}).status_code == 200
    assert as_run(enrolled, "/report", "leaky", token, {"state": "working"}).status_code == 200
    assert as_run(enrolled, "/poll-control", "leaky", token, {}).status_code == 200
    if how == "revoke":
        response = enrolled.post("/api/v1/runs/leaky/revoke", json={"reason": "leaked"}, headers=OPERATOR)
    else:
        response = enrolled.delete("/api/v1/runs/leaky", headers=OPERATOR)
    assert assert_json(response) == {"run_id": "leaky", "revoked": True}
    before = head(system)
    for path, extra in AGENT_PATHS:
        if path == "/sessions":
            refused = enrolled.get(path, headers={"Authorization": f"Bearer {token}", "X-Run-Id": "leaky"})
        else:
            refused = as_run(enrolled, path, "leaky", token, extra)
        assert refused.status_code == 401, (path, refused.text)
    again = enrolled.post("/register", json={"run_id": "leaky", "token": token})
    assert again.status_code == 409
    assert "revoked" in again.text
    assert head(system) == before  # nothing the old token asked was recorded
    detail = assert_json(enrolled.get("/api/v1/runs/leaky", headers=OPERATOR))
    assert detail["token_revoked"] is True
    entries = assert_json(enrolled.get("/api/v1/runs/leaky/timeline", headers=OPERATOR))["entries"]
    revoked = [e for e in entries if e.get("status") == "revoked"]
    assert revoked
    assert revoked[0]["name"] == "bootstrap (bootstrap)"


def test_a_rekey_stops_the_old_token_and_the_new_one_works(enrolled, system):
    old = create(enrolled, "r1")
    response = enrolled.post("/api/v1/runs/r1/rekey", headers=OPERATOR)
    body = assert_json(response)
    assert response.headers["cache-control"] == "no-store"
    new = body["token"]
    assert new != old
    assert body["run_id"] == "r1"
    assert as_run(enrolled, "/report", "r1", old, {"state": "working"}).status_code == 401
    assert as_run(enrolled, "/poll-control", "r1", old, {}).status_code == 401
    assert enrolled.post("/register", json={"run_id": "r1", "token": old}).status_code == 409
    assert enrolled.post("/register", json={"run_id": "r1", "token": new}).status_code == 200
    assert as_run(enrolled, "/report", "r1", new, {"state": "working"}).status_code == 200
    entries = assert_json(enrolled.get("/api/v1/runs/r1/timeline", headers=OPERATOR))["entries"]
    assert [e["status"] for e in entries if e.get("status") == "rekeyed"] == ["rekeyed"]
    assert all(new not in str(r.data) and old not in str(r.data) for r in system.log.read("run-r1"))


def test_revoke_then_rekey_revives_the_run(enrolled):
    create(enrolled, "r1")
    assert enrolled.post("/api/v1/runs/r1/revoke", headers=OPERATOR).status_code == 200
    new = assert_json(enrolled.post("/api/v1/runs/r1/rekey", headers=OPERATOR))["token"]
    assert as_run(enrolled, "/heartbeat", "r1", new, {}).status_code == 200


def test_revoking_or_rekeying_an_unknown_run_is_404(enrolled, system):
    before = head(system)
    assert assert_json(enrolled.post("/api/v1/runs/ghost/revoke", headers=OPERATOR), 404)
    assert assert_json(enrolled.post("/api/v1/runs/ghost/rekey", headers=OPERATOR), 404)
    assert assert_json(enrolled.delete("/api/v1/runs/ghost", headers=OPERATOR), 404)
    assert head(system) == before


def test_only_an_admin_revokes_or_rekeys(enrolled, people):
    create(enrolled, "r1")
    approver = people("approver", APPROVER)
    admin = people("admin", ADMIN)

    def revoke(headers: dict[str, str], reason: str = "") -> int:
        return enrolled.post("/api/v1/runs/r1/revoke", json={"reason": reason}, headers=headers).status_code

    assert revoke(approver) == 403
    assert revoke(admin, "a\x1bb") == 400
    assert revoke(admin, "x" * 501) == 400
    assert revoke(admin, "ok") == 200


def test_a_poll_waiting_when_the_token_is_revoked_ends_with_401(make_client, system, monkeypatch):
    client = make_client(registration="enrolled", poll_timeout=60.0)
    token = create(client, "r1")
    parked = threading.Event()
    park = system.broker.park

    def park_and_say(*args: Any) -> Any:
        found = park(*args)
        parked.set()
        return found

    monkeypatch.setattr(system.broker, "park", park_and_say)
    result: list[httpx.Response] = []
    poller = threading.Thread(target=lambda: result.append(as_run(client, "/poll-control", "r1", token, {})))
    poller.start()
    assert parked.wait(WAIT), "the poll never parked"
    assert client.post("/api/v1/runs/r1/revoke", headers=OPERATOR).status_code == 200
    # Within the poll's 60 s: only the revocation can end it this soon, and it ends refused.
    poller.join(WAIT)
    assert not poller.is_alive(), "the waiting poll did not end when its token was revoked"
    assert result[0].status_code == 401
