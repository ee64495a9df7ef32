"""Cursors, limits and seqs a hostile client makes up, on every paged list of a real `flightlog serve`.

A forged cursor or limit gets a 400 with a message, never a 500 and never an unbounded page:
not a digit such as `²` that `str.isdigit()` admits and `int()` refuses, nor more digits than
`int()` reads (4300), nor a number past SQLite's 64-bit integers.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.identity_helpers import bearer, new_db, strong_token

from .server import ServerProcess

pytestmark = pytest.mark.slow

UNREADABLE = ("²", "9" * 5000)  # isdigit() says yes; int() refuses both
PAST_SQLITE = str(2**63)  # a whole number no seq, offset or step reaches


class Served:
    """A server with one broker run (reports and a waiting permission request), for reads only."""

    def __init__(self, server: ServerProcess, bootstrap: str, run_token: str) -> None:
        self.server = server
        self.operator = bearer(bootstrap)
        self.run = {"Authorization": f"Bearer {run_token}", "X-Run-Id": "r1"}

    def get(self, path: str, params: dict[str, str], as_run: bool = False) -> httpx.Response:
        headers = self.run if as_run else self.operator
        with httpx.Client(base_url=self.server.url, timeout=30) as client:  # a 500 may close the connection
            return client.get(path, params=params, headers=headers)


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    db = new_db(tmp_path_factory.mktemp("paging") / "x.db")
    bootstrap = strong_token()
    server = ServerProcess(db, bootstrap)
    token = server.create_run("r1")
    for state in ("planning", "working"):
        assert (
            server.client.post("/report", json={"run_id": "r1", "token": token, "state": state}).status_code
            == 200
        )
    asked = {"run_id": "r1", "token": token, "request_id": "q1", "tool_name": "bash", "description": "ls"}
    assert server.client.post("/permission_request", json=asked).status_code == 200
    yield Served(server, bootstrap, token)
    server.close()


PAGED = [
    ("/sessions", True),
    ("/api/v1/runs", False),
    ("/api/v1/approvals", False),
    ("/api/v1/approvals/history", False),
    ("/api/v1/console/overview", False),
    ("/api/v1/console/audit", False),
]


def refused(response: httpx.Response) -> bool:
    """A 400 that says which parameter is wrong."""
    return response.status_code == 400 and ("after" in response.text or "limit" in response.text)


def test_made_up_cursors_and_limits_that_read_as_numbers_are_refused_or_bounded(served):
    for path, as_run in PAGED:
        for params in ({"after": "-1"}, {"limit": "-5"}, {"limit": "0"}, {"after": "1.5"}, {"after": "0x10"}):
            assert refused(served.get(path, params, as_run)), (path, params)
        huge = served.get(path, {"limit": "9" * 4000}, as_run)  # read as the most a page holds
        assert huge.status_code == 200, (path, huge.text)
    events = served.get("/api/v1/console/runs/r1/events", {"limit": "-1"})
    assert events.status_code == 200, events.text
    assert len(events.json()["events"]) == 1  # a negative limit is a page of one, not the whole run
    assert served.get("/api/v1/console/runs/r1/travel", {"limit": "-1"}).status_code == 400


def test_a_cursor_or_limit_int_cannot_read_is_a_400_on_every_paged_list(served):
    for path, as_run in PAGED:
        for name in ("after", "limit"):
            for value in UNREADABLE:
                assert refused(served.get(path, {name: value}, as_run)), (path, name, value[:10])


def test_a_console_event_seq_no_log_has_is_a_4xx(served):
    for seq in ("²", PAST_SQLITE, "9" * 5000):
        response = served.get(f"/api/v1/console/events/{seq}", {})
        assert 400 <= response.status_code < 500, (seq[:10], response.status_code)


def test_a_run_events_offset_no_run_reaches_is_a_4xx(served):
    response = served.get("/api/v1/console/runs/r1/events", {"offset": PAST_SQLITE})
    assert 400 <= response.status_code < 500, response.status_code


def test_a_travel_step_no_run_reaches_is_a_4xx(served):
    response = served.get("/api/v1/console/runs/r1/travel", {"step": PAST_SQLITE})
    assert 400 <= response.status_code < 500, response.status_code


def test_a_console_runs_limit_int_cannot_read_is_a_400(served):
    for value in UNREADABLE:
        response = served.get("/api/v1/console/runs", {"limit": value})
        assert response.status_code == 400, (value[:10], response.status_code)
