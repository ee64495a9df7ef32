"""Through a real `flightlog serve`: a run cannot talk its way to `allow` on its own request."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import orjson
import pytest

from projections import RECENT_PERMISSIONS

from .server import ServerProcess


@pytest.fixture
def server(tmp_path) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path / "fl.db", secrets.token_hex(16), ("--operator-decides", "all"))
    try:
        yield s
    finally:
        s.close()


def told(server: ServerProcess, creds: dict[str, str]) -> list[dict]:
    """The permission decisions the run's agent hears on its control queue."""
    response = server.client.post("/poll-control", json=creds)
    assert response.status_code == 200, response.text
    return [orjson.loads(m["payload"]) if isinstance(m["payload"], str) else m["payload"]
            for m in response.json() or [] if m["type"] == "permission_decision"]  # fmt: skip


def ask(server: ServerProcess, creds: dict[str, str], request_id: str, tool: str, what: str) -> int:
    body = {**creds, "request_id": request_id, "tool_name": tool, "description": what, "input_preview": what}
    return server.client.post("/permission_request", json=body).status_code


def test_a_refiled_request_id_cannot_turn_into_allow(server):
    creds = {"run_id": "victim", "token": server.create_run("victim")}
    assert ask(server, creds, "R", "bash", "rm -rf /srv/prod") == 200
    # Filed again as something harmless: refused, and nothing changes.
    assert ask(server, creds, "R", "read_file", "cat README") == 409
    answer = server.client.post("/permission", json={**creds, "request_id": "R", "behavior": "allow"})
    assert answer.status_code == 403
    assert told(server, creds) == []
    pending = server.client.get(
        "/api/v1/approvals", headers={"Authorization": f"Bearer {server.operator_token}"}
    )
    (approval,) = pending.json()["approvals"]
    assert approval["detail"] == "rm -rf /srv/prod"


def test_a_request_pushed_out_of_the_window_still_waits_for_its_operator(server):
    creds = {"run_id": "victim", "token": server.create_run("victim")}
    assert ask(server, creds, "R-old", "read_file", "cat README") == 200
    for i in range(RECENT_PERMISSIONS):
        assert ask(server, creds, f"filler-{i}", "read_file", "filler") == 200
    answer = server.client.post("/permission", json={**creds, "request_id": "R-old", "behavior": "allow"})
    assert answer.status_code == 403
    assert told(server, creds) == []
