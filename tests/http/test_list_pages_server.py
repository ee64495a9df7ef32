"""Paged lists through a real `flightlog serve`: /sessions, and the operator API's approvals.

Without paging parameters a client gets a bounded first page, and `next` says whether more
follow; passing `next` back as `after` walks the whole list once, in order.
"""

from __future__ import annotations

import pytest

from .conftest import OPERATOR_TOKEN
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
