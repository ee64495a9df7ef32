"""Two server processes on one database act as one broker and one gate: two `flightlog serve`
on one PostgreSQL database, and the two workers of one `flightlog serve --workers 2` on one
SQLite file (each test's `a` and `b` are then the workers, every request pinned to its worker).

A run registered through one server works through the other; an approval requested through
A and decided through B reaches the agent long-polling A; decisions racing through both
servers resolve each approval exactly once; both servers' views converge on the same log.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from eventlog import Record, open_log

from .conftest import OPERATOR, OPERATOR_TOKEN, bearer, operator_token
from .server import ServerProcess, Worker, enrol

pytestmark = pytest.mark.slow

TIMEOUT = 30.0
RACES = 12


@pytest.fixture
def serve(pg_database: str) -> Iterator[Callable[..., ServerProcess]]:
    """Starts `flightlog serve` processes on the PostgreSQL database (`options` are added to its URL)."""
    started: list[ServerProcess] = []

    def start(options: str = "") -> ServerProcess:
        server = ServerProcess(pg_database + options, OPERATOR_TOKEN)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


@pytest.fixture(params=[pytest.param("postgres", marks=pytest.mark.postgres), "sqlite-workers"])
def database(request: pytest.FixtureRequest, tmp_path) -> str:
    """The database both servers share: a PostgreSQL one, or a SQLite file for `--workers 2`."""
    if request.param == "postgres":
        return str(request.getfixturevalue("pg_database"))
    return str(tmp_path / "workers.db")


@pytest.fixture
def people(database: str) -> dict[str, tuple[dict[str, str], str]]:
    """alice and bob, approvers each with their own token, enrolled on the database before
    either server starts: name -> (their token's headers, their credential id)."""
    return {name: (bearer(operator_token(name)), enrol(database, name)) for name in ("alice", "bob")}


@pytest.fixture
def servers(database: str) -> Iterator[tuple[ServerProcess | Worker, ServerProcess | Worker]]:
    """Two servers on `database`: two processes on PostgreSQL, the two workers of one on SQLite."""
    if database.startswith("postgresql"):
        pair: tuple[ServerProcess | Worker, ServerProcess | Worker] = (
            ServerProcess(database, OPERATOR_TOKEN),
            ServerProcess(database, OPERATOR_TOKEN),
        )
    else:
        process = ServerProcess(database, OPERATOR_TOKEN, ("--workers", "2"))
        pair = (Worker(process, 0), Worker(process, 1))
    yield pair
    for server in pair:
        server.close()


def records(url: str) -> list[Record]:
    with open_log(url) as log:
        return list(log.read_all())


def wait_until(condition: Callable[[], bool], what: str) -> None:
    """Re-check `condition` (each check is a round trip to a server or the database) until it holds."""
    deadline = time.monotonic() + TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting until {what}"


def register(server: ServerProcess, run_id: str) -> str:
    response = server.client.post("/register", json={"run_id": run_id})
    assert response.status_code == 200, response.text
    return str(response.json()["token"])


def ask_permission(server: ServerProcess, run_id: str, token: str, request_id: str) -> None:
    body = {
        "run_id": run_id,
        "token": token,
        "request_id": request_id,
        "tool_name": "bash",
        "description": f"run {request_id}",
    }
    response = server.client.post("/permission_request", json=body)
    assert response.json() == {"ok": True}


def approval_ids(server: ServerProcess, run_id: str) -> dict[str, str]:
    """request id -> approval id, from the run as the server reads it from the log."""
    detail = operator_get(server, f"/api/v1/runs/{run_id}")
    return {p["request_id"]: p["approval_id"] for p in detail["permission_requests"]}


def operator_get(server: ServerProcess, path: str) -> Any:
    response = server.client.get(path, headers=OPERATOR)
    assert response.status_code == 200, response.text
    return response.json()


def decide(server: ServerProcess, approval_id: str, decision: str, headers: dict[str, str]) -> httpx.Response:
    """A decision with the credential of `headers`; the server records whose it is."""
    return server.client.post(f"/api/v1/approvals/{approval_id}/{decision}", headers=headers)


def poll_until(server: ServerProcess, run_id: str, token: str, kind: str) -> list[dict[str, Any]]:
    """An agent's loop: long-poll /poll-control (the server holds each poll up to 2 s) until a
    message of `kind` arrives; return everything received."""
    received: list[dict[str, Any]] = []
    deadline = time.monotonic() + TIMEOUT
    while time.monotonic() < deadline:
        response = server.client.post("/poll-control", json={"run_id": run_id, "token": token})
        assert response.status_code == 200, response.text
        received += response.json()
        if any(m["type"] == kind for m in received):
            return received
    raise AssertionError(f"no {kind} message within {TIMEOUT} s; got {received}")


def test_a_run_registered_on_one_server_works_through_the_other(servers, database):
    a, b = servers
    alpha = register(a, "alpha")
    beta = register(b, "beta")
    report = {"run_id": "alpha", "token": alpha, "state": "working"}
    assert b.client.post("/report", json=report).json() == {"ok": True}
    # B checks A's run's token: the wrong one, or another run's, is refused.
    assert b.client.post("/report", json={**report, "token": "not-the-token"}).status_code == 401
    assert b.client.post("/report", json={**report, "token": beta}).status_code == 401
    assert b.client.post("/heartbeat", json={"run_id": "alpha", "token": alpha}).text == "ok"
    # The id is taken on both servers; its own token re-registers it on either.
    assert b.client.post("/register", json={"run_id": "alpha"}).status_code == 409
    assert b.client.post("/register", json={"run_id": "alpha", "token": alpha}).json()["token"] == alpha
    finish = {"run_id": "beta", "token": beta, "status": "done", "summary": "ok"}
    assert a.client.post("/finish", json=finish).json() == {"ok": True}

    assert operator_get(a, "/api/v1/runs/alpha")["reports"] == [{"run_id": "alpha", "state": "working"}]
    assert operator_get(b, "/api/v1/runs/beta")["last_finish_status"] == "done"

    # The run registry is a view each server follows from the log: both come to list both runs.
    def listed(server: ServerProcess) -> list[str]:
        return [r["run_id"] for r in operator_get(server, "/api/v1/runs")["runs"]]

    wait_until(lambda: listed(a) == listed(b) == ["alpha", "beta"], "both servers list both runs")
    assert operator_get(a, "/api/v1/runs") == operator_get(b, "/api/v1/runs")
    types = [r.type for r in records(database) if r.stream == "run-alpha"]
    assert types == ["RunRegistered", "RunReported", "RunHeartbeat", "RunRegistrationRefreshed"]


def test_an_approval_asked_on_a_and_decided_on_b_reaches_the_agent_polling_a(people, servers, database):
    a, b = servers
    token = register(a, "agent")
    with ThreadPoolExecutor(1) as pool:
        # The agent waits on A, as it would for its answer, from before the request is made.
        waiter = pool.submit(poll_until, a, "agent", token, "permission_decision")
        ask_permission(a, "agent", token, "q1")
        approval_id = approval_ids(a, "agent")["q1"]
        # B's pending list is a view it builds from A's commits, woken by NOTIFY.
        wait_until(
            lambda: [p["id"] for p in operator_get(b, "/api/v1/approvals")["approvals"]] == [approval_id],
            "B lists the approval requested on A",
        )
        bob, bob_id = people["bob"]
        decided = decide(b, approval_id, "approve", bob)
        assert decided.status_code == 200, decided.text
        assert (decided.json()["decision"], decided.json()["actor"]) == ("approve", "bob")
        assert decided.json()["identity"] == bob_id
        messages = waiter.result(timeout=TIMEOUT + 5)
    notices = [m for m in messages if m["type"] == "permission_decision"]
    assert [(m["id"], m["payload"]) for m in notices] == [
        (approval_id, {"request_id": "q1", "behavior": "allow"})
    ]

    wait_until(lambda: operator_get(a, "/api/v1/approvals")["approvals"] == [], "A no longer lists it")
    for server in (a, b):
        detail = operator_get(server, "/api/v1/runs/agent")
        assert [p["behavior"] for p in detail["permission_requests"]] == ["allow"]
    log = records(database)
    assert [r.data["decision"] for r in log if r.type == "ApprovalDecided"] == ["approve"]
    # Both servers' followers saw the decision; the run recorded it (and told the agent) once.
    assert [r.type for r in log if r.stream == "run-agent" and r.type.startswith("Permission")] == [
        "PermissionRequested",
        "PermissionDecided",
    ]


def test_decisions_racing_through_both_servers_resolve_each_approval_once(people, servers, database):
    a, b = servers
    token = register(a, "racer")
    for i in range(RACES):
        ask_permission((a, b)[i % 2], "racer", token, f"race-{i}")
    ids = list(approval_ids(b, "racer").values())
    assert len(ids) == RACES

    # Every approval is approved through A and rejected through B at the same moment: all
    # 2 x RACES requests leave together. Whichever way each race goes (and whether or not
    # the two actually overlapped), exactly one decision may count and the other must be refused.
    gate = threading.Barrier(2 * RACES)

    def race(server: ServerProcess, approval_id: str, decision: str, actor: str) -> httpx.Response:
        headers, _ = people[actor]
        gate.wait(TIMEOUT)
        return decide(server, approval_id, decision, headers)

    with ThreadPoolExecutor(2 * RACES) as pool:
        on_a = {i: pool.submit(race, a, i, "approve", "alice") for i in ids}
        on_b = {i: pool.submit(race, b, i, "reject", "bob") for i in ids}
        answers = {i: (on_a[i].result(TIMEOUT), on_b[i].result(TIMEOUT)) for i in ids}

    winners: dict[str, tuple[str, str]] = {}
    for approval_id, (via_a, via_b) in answers.items():
        statuses = sorted([via_a.status_code, via_b.status_code])
        assert statuses in ([200, 404], [200, 409]), (via_a.text, via_b.text)
        won = via_a if via_a.status_code == 200 else via_b
        winners[approval_id] = (won.json()["decision"], won.json()["actor"])
        assert winners[approval_id] in (("approve", "alice"), ("reject", "bob"))

    # Each server's views follow the log: wait until both show every outcome, then compare.
    def settled(server: ServerProcess) -> bool:
        rows = operator_get(server, "/api/v1/approvals/history")["approvals"]
        run = operator_get(server, "/api/v1/runs/racer")
        return (
            sorted(r["id"] for r in rows if r["decision"]) == sorted(ids)
            and all(len(r["refused"]) == 1 for r in rows)
            and all(p["behavior"] for p in run["permission_requests"])
        )

    wait_until(lambda: settled(a) and settled(b), "both servers show every outcome")
    history = operator_get(a, "/api/v1/approvals/history")
    assert history == operator_get(b, "/api/v1/approvals/history")
    runs = operator_get(a, "/api/v1/runs")
    assert runs == operator_get(b, "/api/v1/runs")
    assert [(r["run_id"], r["permission_request_count"]) for r in runs["runs"]] == [("racer", RACES)]
    rows = {r["id"]: r for r in history["approvals"]}
    assert {i: (rows[i]["decision"], rows[i]["actor"]) for i in ids} == winners

    for server in (a, b):
        assert server.stop() == 0
    log = records(database)
    decided = {
        r.data["approval_id"]: (r.data["decision"], r.data["actor"])
        for r in log
        if r.type == "ApprovalDecided"
    }
    # Each decision and each refused attempt names the credential it was made with.
    credentials = {name: credential for name, (_, credential) in people.items()}
    for r in log:
        if r.type in ("ApprovalDecided", "ApprovalDecisionRefused"):
            assert r.data["identity"] == credentials[r.data["actor"]], r.data
    assert Counter(r.data["approval_id"] for r in log if r.type == "ApprovalDecided") == Counter(ids)
    assert decided == winners
    refused = Counter(r.data["approval_id"] for r in log if r.type == "ApprovalDecisionRefused")
    assert refused == Counter(ids)  # each loser's attempt is in the audit trail, refused
    behaviors = {"approve": "allow", "reject": "deny"}
    told = Counter((r.data["approval_id"], r.data["behavior"]) for r in log if r.type == "PermissionDecided")
    assert told == Counter((i, behaviors[winners[i][0]]) for i in ids)
    with open_log(database) as verified:
        assert verified.verify().ok


@pytest.mark.postgres
def test_a_server_whose_connections_the_database_dropped_keeps_serving_and_following(serve, pg_database):
    name = f"flightlog_a_{uuid.uuid4().hex[:12]}"
    import psycopg

    a, b = serve(f"&application_name={name}"), serve()
    token = register(b, "agent")
    assert a.client.post("/heartbeat", json={"run_id": "agent", "token": token}).text == "ok"
    with psycopg.connect(pg_database, autocommit=True) as admin:
        ours = "SELECT pid, query LIKE 'LISTEN%%' FROM pg_stat_activity WHERE application_name = %s"
        wait_until(
            lambda: any(listens for _, listens in admin.execute(ours, (name,)).fetchall()), "A listens"
        )
        backends = admin.execute(ours, (name,)).fetchall()
        assert len(backends) >= 3  # A's writer, a reader, the listener
        # As a pg_database restart would: every connection of A goes, the listener last; each
        # call returns once that backend has exited.
        for pid, _ in sorted(backends, key=lambda row: row[1]):
            assert admin.execute("SELECT pg_terminate_backend(%s, 10000)", (pid,)).fetchone() == (True,)

    message = {"id": "m1", "type": "steer", "run_id": "agent", "payload": {"n": 1}}
    assert b.client.post("/push-control", json=message, headers=OPERATOR).json() == {"queued": True}
    # Only A's follower can tell A's actor of B's commit; taking it appends through A's writer.
    received = poll_until(a, "agent", token, "steer")
    assert [(m["id"], m["payload"]) for m in received] == [("m1", {"n": 1})]
    assert [r["run_id"] for r in operator_get(a, "/api/v1/runs")["runs"]] == ["agent"]
    assert operator_get(a, "/api/v1/verify")["ok"] is True


# -- asks between runs ----------------------------------------------------------------------


def test_a_reply_through_one_server_wakes_the_asker_waiting_on_the_other(servers):
    a, b = servers
    asker, target = f"asker-{uuid.uuid4().hex[:8]}", f"target-{uuid.uuid4().hex[:8]}"
    asker_token, target_token = register(a, asker), register(b, target)
    ask = {"run_id": asker, "token": asker_token, "from_run_id": asker, "to_run_id": target}
    ask |= {"type": "agent_message", "payload": {"id": "q-1", "message": "ready?", "expects_reply": True}}
    assert a.client.post("/send", json=ask).json() == {
        "expects_reply": True,
        "message_id": "q-1",
        "queued": True,
    }
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(
            a.client.post, "/wait_reply", json={"run_id": asker, "token": asker_token, "waiting_for": "q-1"}
        )
        [question] = [
            m for m in poll_until(b, target, target_token, "agent_message") if m["type"] == "agent_message"
        ]
        assert question["payload"]["id"] == "q-1"
        # The asker's stream was written by server A; server B routes the reply into it.
        reply = {"run_id": target, "token": target_token, "from_run_id": target, "to_run_id": asker}
        reply |= {"type": "agent_message", "payload": {"reply_to": "q-1", "message": "yes"}}
        assert b.client.post("/send", json=reply).json() == {"queued": True, "reply_to": "q-1"}
        got = waiting.result(TIMEOUT)
    assert got.status_code == 200, got.text
    assert got.json() == {
        "from_run_id": target,
        "message_id": "q-1",
        "payload": {"reply_to": "q-1", "message": "yes"},
    }
    # The mutual guard holds across servers: once the target asks back through B, A refuses the reverse.
    back = {"run_id": target, "token": target_token, "from_run_id": target, "to_run_id": asker}
    back |= {"type": "agent_message", "payload": {"id": "q-2", "expects_reply": True}}
    assert b.client.post("/send", json=back).status_code == 200
    again = ask | {"payload": {"id": "q-3", "expects_reply": True}}
    assert a.client.post("/send", json=again).json() == {"error": "mutual ask refused"}
