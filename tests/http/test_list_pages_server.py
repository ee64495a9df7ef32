"""Paged lists through a real `flightlog serve`: /sessions, and the operator API's approvals.

Without paging parameters a client gets a bounded first page, and `next` says whether more
follow; passing `next` back as `after` walks the whole list once, in order.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from actors import ApprovalRequest, System
from projections import LIST_PAGE

from .conftest import OPERATOR, OPERATOR_TOKEN
from .server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def server(tmp_path):
    s = ServerProcess(tmp_path / "lists.db", OPERATOR_TOKEN)
    yield s
    s.close()


def walk(get, limit):
    """Every item of a paged answer, following `next`; and the page sizes."""
    items, sizes, after = [], [], None
    while True:
        params = {"limit": str(limit), **({"after": str(after)} if after is not None else {})}
        body = get(params)
        key = "sessions" if "sessions" in body else "approvals"
        items.extend(body[key])
        sizes.append(len(body[key]))
        after = body["next"]
        if after is None:
            return items, sizes


def cli_json(url, *args):
    """`flightlog ARGS --server URL --json` in a process of its own, with the operator token."""
    env = {**os.environ, "FLIGHTLOG_OPERATOR_TOKEN": OPERATOR_TOKEN}
    argv = [sys.executable, "-c", "from tools.cli import main; main()", *args, "--server", url, "--json"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_sessions_pages(server):
    tokens = {}
    for n in range(5):
        run_id = f"peer-{n}"
        answer = server.client.post("/register", json={"run_id": run_id, "label": f"L{n}"})
        assert answer.status_code == 200, answer.text
        tokens[run_id] = answer.json()["token"]
    me = {"Authorization": f"Bearer {tokens['peer-0']}", "X-Run-Id": "peer-0"}
    # No paging parameters: the seed's answer, every run (a small fleet fits one page).
    whole = server.client.get("/sessions", headers=me).json()
    assert [s["run_id"] for s in whole["sessions"]] == [f"peer-{n}" for n in range(5)]
    assert whole["next"] is None

    def get(params):
        response = server.client.get("/sessions", headers=me, params=params)
        assert response.status_code == 200, response.text
        return response.json()

    listed, sizes = walk(get, 2)
    assert listed == whole["sessions"]
    assert sizes == [2, 2, 1]
    # POST takes the credentials in the body and the cursor in the query, as GET does.
    creds = {"run_id": "peer-1", "token": tokens["peer-1"]}
    first = server.client.post("/sessions", json=creds, params={"limit": "3"}).json()
    assert [s["run_id"] for s in first["sessions"]] == ["peer-0", "peer-1", "peer-2"]
    rest = server.client.post("/sessions", json=creds, params={"after": str(first["next"])}).json()
    assert [s["run_id"] for s in rest["sessions"]] == ["peer-3", "peer-4"]
    for bad in ({"after": "-1"}, {"after": "x"}, {"limit": "0"}, {"limit": "many"}):
        refused = server.client.get("/sessions", headers=me, params=bad)
        assert refused.status_code == 400, bad
        assert "after" in refused.text or "limit" in refused.text
    # A limit past the most a page holds is read as that most, not refused.
    assert server.client.get("/sessions", headers=me, params={"limit": "100000"}).status_code == 200
    assert server.client.get("/sessions", params={"limit": "2"}).status_code == 401


def test_approvals_pages_and_the_cli_following_them(tmp_path):
    db = tmp_path / "approvals.db"
    many = LIST_PAGE + 5  # more than one page of the CLI's
    with System.open(db, scheduler=False) as system:
        ids = [
            system.approvals.submit(ApprovalRequest(kind="shell", title=f"t{n}", detail="ls", risk="low")).id
            for n in range(many)
        ]
        system.approvals.resolve(ids[1], "reject", "alice")
    server = ServerProcess(db, OPERATOR_TOKEN)
    try:

        def get(path):
            def fetch(params):
                response = server.client.get(path, headers=OPERATOR, params=params)
                assert response.status_code == 200, response.text
                return response.json()

            return fetch

        first = get("/api/v1/approvals")({})
        assert len(first["approvals"]) == LIST_PAGE  # a bounded default page, and more to come
        assert first["next"] == first["approvals"][-1]["requested_seq"]
        pending, sizes = walk(get("/api/v1/approvals"), 90)
        assert [a["id"] for a in pending] == [i for i in ids if i != ids[1]]
        assert sizes == [90, 90, 24]
        assert "run_id" not in pending[0]  # the seed's shape: an empty run is left out
        history, sizes = walk(get("/api/v1/approvals/history"), 100)
        assert [a["id"] for a in history] == ids
        assert history[1]["decision"] == "reject"
        for bad in ({"after": "x"}, {"limit": "0"}, {"after": "999999"}):
            refused = server.client.get("/api/v1/approvals", headers=OPERATOR, params=bad)
            assert refused.status_code == 400, bad
            assert "after" in refused.json()["error"] or "limit" in refused.json()["error"]
        # The CLI follows the cursor: more approvals than one of its pages, each listed once.
        assert [r["id"] for r in cli_json(server.url, "approvals")] == [a["id"] for a in pending]
        assert [r["id"] for r in cli_json(server.url, "approvals", "--all")] == ids
    finally:
        server.close()
