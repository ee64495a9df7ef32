"""`flightlog serve --workers N`: N processes on one SQLite file and one port act as one server.

Each worker is reached on its own (`Worker`: every request of its client is answered by that
worker, as the `Flightlog-Worker` header proves). A console login holds on every worker and
a logout ends it on every worker; twenty operators deciding one approval at once through both
workers give exactly one outcome; a worker that dies is replaced while the others serve; the
parent stops them all. The suite of two servers on one database also runs against two
workers (tests/http/test_two_servers.py), as do avenor's client flows (test_ask_process.py).
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from click.testing import CliRunner

from eventlog import open_log
from tests.identity_helpers import CSRF_HEADER, enrol, new_db, strong_token
from tools.cli import cli

from .server import ServerProcess, Worker

pytestmark = pytest.mark.slow

DECIDERS = 20
TIMEOUT = 30.0


@pytest.fixture
def workers(tmp_path):
    """A `serve --workers 2` over a new log, with twenty approvers enrolled; (worker 0, worker 1,
    the bootstrap token, the approvers' tokens)."""
    db = new_db(tmp_path / "workers.db")
    tokens = [enrol(db, f"approver{i}", "approver") for i in range(DECIDERS)]
    bootstrap = strong_token()
    process = ServerProcess(db, bootstrap, ("--workers", "2"))
    first, second = Worker(process, 0), Worker(process, 1)
    yield first, second, bootstrap, tokens
    first.close()
    second.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def login(worker: Worker, token: str) -> tuple[str, str]:
    """Log in through `worker`: (the Cookie header the browser would send, the CSRF secret)."""
    response = worker.client.post("/ui/login", json={"token": token})
    assert response.status_code == 200, response.text
    [(name, value)] = response.cookies.items()
    return f"{name}={value}", response.json()["csrf"]


def test_each_worker_answers_and_both_say_the_same(workers):
    first, second, bootstrap, _ = workers
    registered = first.client.post("/register", json={"run_id": "agent"})
    assert registered.status_code == 200, registered.text
    token = registered.json()["token"]
    report = {"run_id": "agent", "token": token, "state": "working"}
    assert second.client.post("/report", json=report).json() == {"ok": True}
    for worker in (first, second):
        detail = worker.client.get("/api/v1/runs/agent", headers=bearer(bootstrap))
        assert detail.status_code == 200, detail.text
        assert detail.json()["reports"] == [{"run_id": "agent", "state": "working"}]
    # One "listening" line from the parent, once both workers accept connections.
    assert first.output().count("flightlog: listening on") == 1


def test_a_console_login_holds_on_every_worker_and_a_logout_ends_it_on_every_worker(workers):
    first, second, _, tokens = workers
    cookie, csrf = login(first, tokens[0])
    session = {"Cookie": cookie, CSRF_HEADER: csrf}
    for worker in (first, second):
        me = worker.client.get("/api/v1/console/me", headers=session)
        assert me.status_code == 200, me.text
        assert me.json()["name"] == "approver0"
        # The cookie without its CSRF secret is refused by either worker.
        assert worker.client.get("/api/v1/console/me", headers={"Cookie": cookie}).status_code == 401
    out = second.client.post("/ui/logout", headers=session)
    assert out.status_code in (200, 204), out.text
    for worker in (first, second):
        me = worker.client.get("/api/v1/console/me", headers=session)
        assert me.status_code == 401, me.text


def test_twenty_operators_deciding_one_approval_through_both_workers_give_one_outcome(workers):
    first, second, bootstrap, tokens = workers
    token = first.client.post("/register", json={"run_id": "deployer"}).json()["token"]
    asked = {
        "run_id": "deployer",
        "token": token,
        "request_id": "deploy-1",
        "tool_name": "bash",
        "description": "deploy to prod",
    }
    assert second.client.post("/permission_request", json=asked).json() == {"ok": True}
    detail = first.client.get("/api/v1/runs/deployer", headers=bearer(bootstrap)).json()
    [approval_id] = [p["approval_id"] for p in detail["permission_requests"]]

    gate = threading.Barrier(DECIDERS)

    def decide(i: int) -> httpx.Response:
        worker = (first, second)[i % 2]
        decision = ("approve", "reject")[(i // 2) % 2]
        worker.client.get("/health")  # the connection is made (and pinned) before the race starts
        gate.wait(TIMEOUT)
        return worker.client.post(f"/api/v1/approvals/{approval_id}/{decision}", headers=bearer(tokens[i]))

    with ThreadPoolExecutor(DECIDERS) as pool:
        answers = list(pool.map(decide, range(DECIDERS)))
    statuses = Counter(a.status_code for a in answers)
    assert statuses[200] == 1, [(a.status_code, a.text) for a in answers]
    assert set(statuses) <= {200, 404, 409}, [(a.status_code, a.text) for a in answers]
    [won] = [i for i, a in enumerate(answers) if a.status_code == 200]
    assert first.stop() == 0

    with open_log(first.db) as log:
        records = list(log.read_all())
        assert log.verify().ok
    decided = [r for r in records if r.type == "ApprovalDecided" and r.data["approval_id"] == approval_id]
    assert len(decided) == 1
    assert decided[0].data["actor"] == f"approver{won}"
    told = [r for r in records if r.type == "PermissionDecided" and r.data["approval_id"] == approval_id]
    assert len(told) == 1  # the agent hears one answer


def test_a_worker_that_dies_is_replaced_and_the_server_keeps_answering(workers):
    first, second, bootstrap, _ = workers
    parent = first.process.proc.pid
    pids = _worker_pids(parent)
    assert len(pids) == 2
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
        # Each check is a round trip to the server: whichever worker is alive answers it.
        deadline = time.monotonic() + TIMEOUT
        while pid in _worker_pids(parent) or len(_worker_pids(parent)) < 2:
            assert time.monotonic() < deadline, first.output()
            assert httpx.get(f"{first.url}/health", timeout=TIMEOUT).status_code == 200
    assert first.output().count("ended (exit -9); starting another") == 2
    first.client.close()
    second.client.close()
    for worker in (first, second):  # both numbers serve again
        assert worker.client.get("/api/v1/me", headers=bearer(bootstrap)).status_code == 200
    assert first.stop() == 0
    assert _worker_pids(parent) == []


def _worker_pids(parent: int) -> list[int]:
    """The live child processes of `parent` (Linux's /proc)."""
    try:
        with open(f"/proc/{parent}/task/{parent}/children") as children:
            return [int(p) for p in children.read().split()]
    except FileNotFoundError:
        return []


@pytest.mark.parametrize("given", ["0", "-1", "many", "65"])
def test_a_worker_count_that_is_not_one_gets_one_line_and_exit_2(tmp_path, given):
    result = CliRunner().invoke(cli, ["serve", "--db", str(tmp_path / "x.db"), "--workers", given])
    assert result.exit_code == 2
    assert "--workers" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "x.db").exists()
