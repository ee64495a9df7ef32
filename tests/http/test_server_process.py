"""End to end: a real `flightlog serve` process on loopback, stopped, killed and restarted."""

from __future__ import annotations

import signal
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlsplit

import pytest

from .conftest import OPERATOR, OPERATOR_TOKEN
from .server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def db(tmp_path):
    return tmp_path / "served.db"


@pytest.fixture
def serve(db):
    started: list[ServerProcess] = []

    def start(operator_token: str | None = OPERATOR_TOKEN) -> ServerProcess:
        server = ServerProcess(db, operator_token)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def register(server: ServerProcess, run_id: str, token: str | None = None) -> str:
    body = {"run_id": run_id} if token is None else {"run_id": run_id, "token": token}
    response = server.client.post("/register", json=body)
    assert response.status_code == 200, response.text
    return str(response.json()["token"])


def push(server: ServerProcess, run_id: str, message_id: str, payload: object = None) -> None:
    body = {"id": message_id, "type": "steer", "run_id": run_id, "payload": payload}
    response = server.client.post("/push-control", json=body, headers=OPERATOR)
    assert response.json() == {"queued": True}


def poll(server: ServerProcess, run_id: str, token: str) -> list[dict[str, Any]]:
    response = server.client.post("/poll-control", json={"run_id": run_id, "token": token})
    assert response.status_code == 200, response.text
    return list(response.json() or [])


def events(server: ServerProcess) -> int:
    """How many events the log holds (the verified chain's length)."""
    body = server.client.get("/api/v1/verify", headers=OPERATOR).json()
    assert body["ok"] is True
    return int(body["checked"])


def raw_request(url: str, request: bytes) -> tuple[int, bytes]:
    """Send bytes as they are (what httpx would refuse to) and read the status and body."""
    parts = urlsplit(url)
    with socket.create_connection((parts.hostname, parts.port), timeout=30) as sock:
        sock.sendall(request)
        data = b""
        while chunk := sock.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), body


# -- lifecycle ------------------------------------------------------------------------------


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_serves_and_stops_cleanly(serve, sig):
    server = serve()
    assert server.client.get("/health").text == "ok"
    register(server, "a")
    assert server.stop(sig) == 0
    assert "flightlog: stopped" in server.output()


def test_restart_keeps_runs_tokens_and_queued_messages(serve):
    first = serve()
    a = register(first, "a")
    b = register(first, "b", "chosen-token-of-b")
    push(first, "a", "m1", {"n": 1})
    push(first, "a", "m2")
    assert first.client.post("/report", json={"run_id": "b", "token": b, "state": "working"}).json() == {
        "ok": True
    }
    assert first.stop() == 0

    second = serve()
    # Registered runs still authenticate with the tokens issued before the restart.
    assert second.client.post("/heartbeat", json={"run_id": "a", "token": a}).text == "ok"
    assert second.client.post("/heartbeat", json={"run_id": "b", "token": b}).text == "ok"
    assert second.client.post("/heartbeat", json={"run_id": "a", "token": b}).status_code == 401
    assert [(m["id"], m.get("payload")) for m in poll(second, "a", a)] == [("m1", {"n": 1}), ("m2", None)]
    detail = second.client.get("/api/v1/runs/b", headers=OPERATOR).json()
    assert detail["reports"] == [{"run_id": "b", "state": "working"}]
    # Re-registering with the old token still works; without it, the id stays taken.
    assert register(second, "a", a) == a
    assert second.client.post("/register", json={"run_id": "a"}).status_code == 409


def test_sigkill_right_after_acknowledged_writes_loses_nothing(serve):
    first = serve()
    a, b = register(first, "a"), register(first, "b")
    send = {"run_id": "b", "token": b, "from_run_id": "b", "to_run_id": "a", "type": "agent_message"}
    assert first.client.post("/send", json={**send, "payload": {"message": "hi"}}).json() == {"queued": True}
    finish = {"run_id": "b", "token": b, "status": "done", "summary": "ok"}
    assert first.client.post("/finish", json=finish).json() == {"ok": True}
    push(first, "a", "last-word")
    first.kill()  # the push was acknowledged a moment ago; no shutdown code runs

    second = serve()
    messages = poll(second, "a", a)
    assert [(m["type"], m.get("from_run_id"), m["id"]) for m in messages][1:] == [
        ("steer", None, "last-word")
    ]
    assert (messages[0]["type"], messages[0]["from_run_id"], messages[0]["payload"]) == (
        "agent_message",
        "b",
        {"message": "hi"},
    )
    runs = {r["run_id"]: r for r in second.client.get("/api/v1/runs", headers=OPERATOR).json()["runs"]}
    assert (runs["b"]["finish_count"], runs["b"]["last_finish_status"]) == (1, "done")
    assert second.client.get("/api/v1/verify", headers=OPERATOR).json()["ok"] is True


# -- isolation ------------------------------------------------------------------------------


def test_a_runs_token_acts_only_on_that_run(serve):
    server = serve()
    a, b = register(server, "a"), register(server, "b")
    push(server, "b", "for-b")
    before = events(server)
    as_b = {
        "run_id": "b",
        "token": a,
        "state": "s",
        "status": "done",
        "summary": "",
        "to": "x",
        "request_id": "r",
        "behavior": "allow",
        "from_run_id": "b",
        "to_run_id": "a",
        "type": "agent_message",
    }
    for path in (
        "/report",
        "/finish",
        "/heartbeat",
        "/poll-control",
        "/reply",
        "/send",
        "/permission_request",
        "/permission",
    ):
        response = server.client.post(path, json=as_b)
        assert (path, response.status_code, response.text) == (path, 401, "unauthorized\n")
        # a's own valid credentials do not let it send as b either.
        spoof = server.client.post("/send", json={**as_b, "run_id": "a"})
        assert spoof.status_code == 401
        anonymous = server.client.post(path, json={k: v for k, v in as_b.items() if k != "token"})
        assert (anonymous.status_code, anonymous.text) == (401, "unauthorized: missing run_id or token\n")
    assert events(server) == before  # nothing appended by any refused request
    assert [m["id"] for m in poll(server, "b", b)] == ["for-b"]  # still there for b


# -- secrets --------------------------------------------------------------------------------


def test_tokens_never_reach_the_database_or_the_output(serve, db):
    server = serve()
    issued = register(server, "a")
    chosen = register(server, "b", "b-chose-this-secret-token")
    for token, run_id in ((issued, "a"), (chosen, "b")):
        server.client.post("/report", json={"run_id": run_id, "token": token, "state": "working"})
        server.client.post("/heartbeat", json={"run_id": run_id, "token": token})
        server.client.post("/poll-control", json={"run_id": run_id, "token": token})
        server.client.post("/permission_request", json={"run_id": run_id, "token": token, "request_id": "r"})
        # A GET with credentials in its query: refused (405), and its query never logged.
        assert server.client.get("/report", params={"run_id": run_id, "token": token}).status_code == 405
    send = {"run_id": "a", "token": issued, "from_run_id": "a", "to_run_id": "b", "type": "t"}
    assert server.client.post("/send", json=send).status_code == 200
    wrong = "wrong-token-that-must-not-be-logged"
    assert server.client.post("/report", json={"run_id": "a", "token": wrong}).status_code == 401
    push(server, "a", "m")
    secrets = [issued, chosen, wrong, OPERATOR_TOKEN]

    def stored() -> bytes:
        files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
        return b"".join(f.read_bytes() for f in files if f.exists())

    while_running = stored()
    assert server.stop() == 0
    for secret in secrets:
        assert secret.encode() not in while_running
        assert secret.encode() not in stored()
        assert secret not in server.output()
    assert '"GET /report HTTP/1.1" 405' in server.output()  # logged, without its query


def test_a_generated_operator_token_is_kept_in_a_private_file_not_printed(serve, db):
    server = serve(operator_token=None)
    kept = db.with_name(db.name + ".operator-token")
    lines = [line for line in server.stderr if "operator token" in line]
    assert lines == [f"flightlog: operator token written to {kept} (only you can read it)\n"]
    token = kept.read_text().strip()
    assert len(token) == 32
    ok = server.client.get("/api/v1/runs", headers={"Authorization": f"Bearer {token}"})
    assert ok.status_code == 200
    assert server.stop() == 0
    assert token not in server.output()  # stderr is not a terminal here


def test_a_weak_operator_token_is_refused(db):
    with pytest.raises(AssertionError, match="FLIGHTLOG_OPERATOR_TOKEN must be"):
        ServerProcess(db, "short")


# -- hostile input --------------------------------------------------------------------------


def test_malformed_oversized_and_non_ascii_input_gets_4xx(serve):
    server = serve()
    a = register(server, "a")
    before = events(server)
    post = server.client.post
    assert (post("/report", content=b"{nope").status_code, post("/report", content=b"{nope").text) == (
        400,
        "bad request\n",
    )
    assert post("/report", content=b'{"run_id": "a", "token": "\xff"}').status_code == 400  # not UTF-8
    big = b'{"run_id": "a", "token": "%s", "state": "%s"}' % (a.encode(), b"x" * (1 << 20))
    assert post("/report", content=big).status_code == 413

    def chunks() -> Iterator[bytes]:
        yield from (big[: 1 << 19], big[1 << 19 :])

    assert post("/report", content=chunks()).status_code == 413  # chunked, no length declared
    assert post("/report", json={"run_id": "a", "token": "tökén"}).status_code == 401
    assert post("/register", json={"run_id": "x", "token": "tökén"}).status_code == 400
    host = urlsplit(server.url).netloc.encode()
    declared = (
        b"POST /report HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: application/json\r\n"
        b"Content-Length: 2097152\r\nConnection: close\r\n\r\n{}"
    )
    assert raw_request(server.url, declared) == (413, b"request body too large\n")
    message = b'{"id": "m", "type": "t", "run_id": "a"}'
    bearer = (
        b"POST /push-control HTTP/1.1\r\nHost: " + host + b"\r\nAuthorization: Bearer t\xc3\xb6k\xc3\xa9n\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s"
        % (len(message), message)
    )
    assert raw_request(server.url, bearer) == (401, b"unauthorized\n")
    assert events(server) == before


def test_long_poll_over_the_network(serve):
    server = serve()
    a = register(server, "a")
    started = time.monotonic()
    assert poll(server, "a", a) == []  # the seed's 2 s wait, then null (no messages)
    assert 2.0 <= time.monotonic() - started < 10
    results: list[list[dict[str, Any]]] = []
    poller = threading.Thread(target=lambda: results.append(poll(server, "a", a)))
    poller.start()
    push(server, "a", "wake")
    poller.join(30)
    # Whether the push came before the poll or woke it, the message arrives in one poll.
    assert [m["id"] for m in results[0]] == ["wake"]
