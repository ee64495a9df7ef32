"""A broker run's fork at an approval, through a real `flightlog serve`, as its hostile agent sees it.

The fork's history copies the origin's permission requests from before the approval. Its token
must not turn any of them into an `allow` the origin's operators never gave: not one still
waiting for an operator at the fork point, not one an operator rejected, not one its run asked
to be treated as high-risk. Each copied request has the fork's own approval, in the state it was
in at the fork point, and nothing the fork's token does reaches the origin's approvals.
"""

from __future__ import annotations

import pytest

from eventlog import open_log
from projections import Views
from tests.identity_helpers import bearer, enrol, new_db, strong_token

from .server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def served(tmp_path):
    """A served log with approver bob enrolled: (the server, the bootstrap token, bob's token)."""
    db = new_db(tmp_path / "x.db")
    bob = enrol(db, "bob", "approver")
    bootstrap = strong_token()
    server = ServerProcess(db, bootstrap)
    yield server, bootstrap, bob
    server.close()


def ask(server: ServerProcess, run_id: str, token: str, request_id: str, tool: str = "bash", **more):
    body = {"run_id": run_id, "token": token, "request_id": request_id, "tool_name": tool,
            "description": f"{tool} {request_id}", "input_preview": "{}", **more}  # fmt: skip
    return server.client.post("/permission_request", json=body)


def answer(server: ServerProcess, run_id: str, token: str, request_id: str, behavior: str = "allow"):
    body = {"run_id": run_id, "token": token, "request_id": request_id, "behavior": behavior}
    return server.client.post("/permission", json=body)


def waited(server: ServerProcess, run_id: str, token: str, request_id: str) -> dict:
    body = {"run_id": run_id, "token": token, "request_id": request_id, "timeout": 0}
    response = server.client.post("/permission_wait", json=body)
    assert response.status_code == 200, response.text
    return dict(response.json())


def approval_of(server: ServerProcess, headers: dict[str, str], run_id: str, request_id: str) -> str:
    detail = server.client.get(f"/api/v1/runs/{run_id}", headers=headers)
    assert detail.status_code == 200, detail.text
    [found] = [
        p["approval_id"] for p in detail.json()["permission_requests"] if p["request_id"] == request_id
    ]
    return str(found)


def decide(server: ServerProcess, token: str, approval_id: str, decision: str) -> None:
    response = server.client.post(f"/api/v1/approvals/{approval_id}/{decision}", headers=bearer(token))
    assert response.status_code == 200, response.text


def test_a_forks_token_cannot_allow_a_request_it_copied_from_the_origin(served):
    server, bootstrap, bob = served
    admin = bearer(bootstrap)
    token = server.create_run("origin")
    assert ask(server, "origin", token, "waiting").status_code == 200  # still open at the fork point
    assert ask(server, "origin", token, "refused").status_code == 200
    decide(server, bob, approval_of(server, admin, "origin", "refused"), "reject")
    # A tool whose name implies medium risk, filed as high: only an operator decides it.
    assert ask(server, "origin", token, "raised", tool="deploy", risk="high").status_code == 200
    assert ask(server, "origin", token, "forked-at").status_code == 200
    at = approval_of(server, admin, "origin", "forked-at")
    decide(server, bob, at, "reject")
    origin_waiting = approval_of(server, admin, "origin", "waiting")

    forked = server.client.post("/api/v1/runs/origin/fork", json={"at_approval": at}, headers=admin)
    assert forked.status_code == 201, forked.text
    fork, fork_token = forked.json()["fork"]["run_id"], forked.json()["token"]

    for request_id in ("waiting", "refused", "raised"):
        refused = answer(server, fork, fork_token, request_id)
        assert refused.status_code == 403, (request_id, refused.text)
    assert waited(server, fork, fork_token, "waiting")["status"] == "pending"
    assert waited(server, fork, fork_token, "raised")["status"] == "pending"
    recorded = waited(server, fork, fork_token, "refused")
    assert (recorded["behavior"], recorded["decided_by"]) == ("deny", "bob (recorded)")
    # Resuming, the fork's agent files its waiting requests again: the same requests, which an
    # operator decides in the fork (and only in the fork).
    assert ask(server, fork, fork_token, "waiting").status_code == 200
    assert ask(server, fork, fork_token, "refused").status_code == 200
    decide(server, bob, approval_of(server, admin, fork, "waiting"), "approve")
    allowed = waited(server, fork, fork_token, "waiting")
    assert (allowed["behavior"], allowed["decided_by"]) == ("allow", "bob")
    assert waited(server, fork, fork_token, "refused")["behavior"] == "deny"
    assert waited(server, "origin", token, "waiting")["status"] == "pending"
    # The fork's token is the fork's alone, and never shown again.
    assert answer(server, "origin", fork_token, "waiting").status_code == 401
    assert server.stop() == 0
    assert fork_token not in server.output()
    with open(server.db, "rb") as raw:
        assert fork_token.encode() not in raw.read()
    with open_log(server.db) as log:
        row = Views(log).approval(origin_waiting)
        assert row is not None
        assert (row.status, row.refused) == ("pending", ())  # nothing the fork did reached it
