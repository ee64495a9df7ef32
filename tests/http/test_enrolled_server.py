"""The squatter attack, revocation and re-keying through real `flightlog serve` processes.

The attack: a stranger `/register`s `{"run_id": "deployer", "token": ...}` before the real
agent does, gets 409 for the agent forever after, receives the operator's control messages
and finishes as the deployer. `flightlog serve` takes enrolled runs only by default: the
stranger's registration creates nothing, the operator creates the run and its agent
registers with the token it was given. A token that leaks anyway is revoked or re-keyed,
and refused at once — also by a second server on the same PostgreSQL pg_database.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest

from eventlog import open_log
from tools.cli.serve import serve_cmd

from .conftest import OPERATOR, OPERATOR_TOKEN
from .server import ServerProcess

pytestmark = pytest.mark.slow

SQUATTER_TOKEN = "squatter-chosen-token-0123456789"
WAIT = 30.0


def post(server: ServerProcess, path: str, run_id: str, token: str, **fields: Any) -> httpx.Response:
    return server.client.post(path, json={"run_id": run_id, "token": token, **fields})


def report(server: ServerProcess, run_id: str, token: str) -> int:
    return post(server, "/report", run_id, token, state="working", payload={"step": 1}).status_code


def poll(server: ServerProcess, run_id: str, token: str) -> httpx.Response:
    return post(server, "/poll-control", run_id, token)


def ask(server: ServerProcess, run_id: str, token: str, request_id: str) -> int:
    fields = {"request_id": request_id, "tool_name": "bash", "description": "Run: make deploy"}
    return post(server, "/permission_request", run_id, token, **fields).status_code


def timeline(server: ServerProcess, run_id: str) -> list[dict[str, Any]]:
    response = server.client.get(f"/api/v1/runs/{run_id}/timeline", headers=OPERATOR)
    assert response.status_code == 200, response.text
    return list(response.json()["entries"])


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Re-check `condition` (each check is a round trip to a server) until it holds."""
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"


def test_serve_takes_enrolled_runs_by_default():
    [option] = [p for p in serve_cmd.params if p.name == "registration"]
    assert option.default == "enrolled"


@pytest.fixture
def enrolled(tmp_path) -> Iterator[ServerProcess]:
    served = ServerProcess(tmp_path / "enrolled.db", OPERATOR_TOKEN, registration="enrolled")
    yield served
    served.close()


def test_the_squatter_is_refused_and_the_real_agent_works(enrolled):
    # The stranger comes first, with a token of its choosing: nothing is created.
    squat = enrolled.client.post("/register", json={"run_id": "deployer", "token": SQUATTER_TOKEN})
    assert squat.status_code == 403
    assert "POST /api/v1/runs" in squat.text
    assert enrolled.client.get("/api/v1/runs/deployer", headers=OPERATOR).status_code == 404
    # The operator creates the run; its agent registers with the token it was handed.
    token = enrolled.create_run("deployer")
    registered = enrolled.client.post("/register", json={"run_id": "deployer", "token": token})
    assert registered.status_code == 200
    assert registered.json() == {"run_id": "deployer", "token": token}
    assert report(enrolled, "deployer", token) == 200
    # The operator's control message reaches the agent, and only it.
    push = {"type": "steer", "payload": {"text": "deploy v2"}}
    control = enrolled.client.post("/api/v1/runs/deployer/control", json=push, headers=OPERATOR)
    assert control.status_code == 200
    again = enrolled.client.post("/register", json={"run_id": "deployer", "token": SQUATTER_TOKEN})
    assert again.status_code == 409
    assert poll(enrolled, "deployer", SQUATTER_TOKEN).status_code == 401
    [message] = poll(enrolled, "deployer", token).json()
    assert message["payload"] == {"text": "deploy v2"}
    finish = post(enrolled, "/finish", "deployer", SQUATTER_TOKEN, status="done", summary="x")
    assert finish.status_code == 401
    # The timeline says who created the run.
    first = timeline(enrolled, "deployer")[0]
    assert first["text"] == "Run deployer created by operator bootstrap"
    assert first["name"] == "bootstrap (bootstrap)"


def test_an_open_server_records_who_registered_a_run(tmp_path):
    served = ServerProcess(tmp_path / "open.db", OPERATOR_TOKEN, registration="open")
    try:
        registered = served.client.post("/register", json={"run_id": "mine"})
        assert registered.status_code == 200
        token = registered.json()["token"]
        assert report(served, "mine", token) == 200
        detail = served.client.get("/api/v1/runs/mine", headers=OPERATOR).json()
        assert (detail["origin"], detail["created_by"], detail["created_by_credential"]) == (
            "self",
            "127.0.0.1",
            "",
        )
        assert timeline(served, "mine")[0]["text"] == "Run mine registered itself from 127.0.0.1"
    finally:
        served.close()
    with open_log(tmp_path / "open.db") as log:
        [created] = [r for r in log.read("run-mine") if r.type == "RunRegistered"]
    assert created.data["by"] == "127.0.0.1"
    assert token not in str(created.data)


def test_a_revoked_token_is_refused_at_once_and_a_rekey_revives_the_run(enrolled):
    token = enrolled.create_run("leaky")
    assert report(enrolled, "leaky", token) == 200
    assert poll(enrolled, "leaky", token).status_code == 200
    revoked = enrolled.client.post("/api/v1/runs/leaky/revoke", json={"reason": "leaked"}, headers=OPERATOR)
    assert revoked.status_code == 200, revoked.text
    # The very next requests, with no wait in between.
    assert report(enrolled, "leaky", token) == 401
    assert poll(enrolled, "leaky", token).status_code == 401
    assert ask(enrolled, "leaky", token, "after-revoke") == 401
    assert enrolled.client.post("/register", json={"run_id": "leaky", "token": token}).status_code == 409
    rekeyed = enrolled.client.post("/api/v1/runs/leaky/rekey", headers=OPERATOR)
    assert rekeyed.status_code == 200, rekeyed.text
    new = rekeyed.json()["token"]
    assert report(enrolled, "leaky", token) == 401
    assert enrolled.client.post("/register", json={"run_id": "leaky", "token": new}).status_code == 200
    assert report(enrolled, "leaky", new) == 200
    assert poll(enrolled, "leaky", new).status_code == 200
    said = [(e["status"], e.get("name", "")) for e in timeline(enrolled, "leaky") if e["kind"] == "notice"]
    assert said == [
        ("registered", "bootstrap (bootstrap)"),
        ("revoked", "bootstrap (bootstrap)"),
        ("rekeyed", "bootstrap (bootstrap)"),
    ]
    enrolled.kill()
    with open_log(enrolled.db) as log:
        stored = str([(r.data, r.meta) for r in log.read_all()])
    assert token not in stored  # digests only
    assert new not in stored


# -- two servers on one PostgreSQL pg_database -------------------------------------------------------


@pytest.mark.postgres
def test_a_revocation_through_one_server_is_refused_by_the_other_at_once(pg_database):
    a = ServerProcess(pg_database, OPERATOR_TOKEN, registration="enrolled")
    b = ServerProcess(pg_database, OPERATOR_TOKEN, registration="enrolled")
    try:
        token = a.create_run("shared")
        # b knows the run and its token: its writer holds a fresh state of it.
        assert report(b, "shared", token) == 200
        assert poll(b, "shared", token).status_code == 200
        assert ask(b, "shared", token, "before") == 200
        # A poll waiting on b when a revokes: b's follower wakes it, and it is refused.
        waiting: list[httpx.Response] = []
        poller = threading.Thread(target=lambda: waiting.append(poll(b, "shared", token)))
        poller.start()
        revoked = a.client.post("/api/v1/runs/shared/revoke", headers=OPERATOR)
        assert revoked.status_code == 200, revoked.text
        # At once through b, without waiting for b's follower: a write decided on b's state
        # meets the log's version check; an authenticated route folds the run first.
        assert report(b, "shared", token) == 401
        assert ask(b, "shared", token, "after") == 401
        assert post(b, "/heartbeat", "shared", token).status_code == 401
        # A poll ends refused: at once, or woken by b's follower within its 2 s wait.
        assert poll(b, "shared", token).status_code == 401
        poller.join(WAIT)
        assert not poller.is_alive()
        assert waiting[0].status_code == 401
        # A re-key through b: the new token works through b at once, the old one nowhere; a
        # takes the new one once its follower read the re-key (until then it refuses it,
        # recording nothing: a stale state errs on the side of refusing).
        new = b.client.post("/api/v1/runs/shared/rekey", headers=OPERATOR).json()["token"]
        assert report(b, "shared", new) == 200
        assert report(a, "shared", token) == 401
        wait_until(lambda: report(a, "shared", new) == 200, "a took the re-keyed token")
    finally:
        b.close()
        a.close()
    with open_log(pg_database) as log:
        types = [r.type for r in log.read("run-shared")]
    assert types.count("RunTokenRevoked") == 1
    assert types.count("PermissionRequested") == 1  # "after" was refused: nothing recorded
