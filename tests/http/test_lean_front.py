"""The lean front answers the hot wire routes exactly as the ASGI app does, through a real uvicorn.

`tools.http.lean` takes a POST to `/report`, `/heartbeat`, `/finish`, `/reply` or
`/poll-control` past ASGI. A path written %-escaped names the same route but is left to the
ASGI app, so each case here is sent both ways on one server and the two answers must be the
same bytes (but for `date`). Then what only the lean front could get wrong: a chunked body,
pipelined requests mixing both fronts, an unexpected error (500, logged, connection closed),
the access log line, and a client that leaves while its poll waits.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from tools.http.broker import BrokerRoutes
from tools.http.lean import LeanCycle

from .conftest import AGENT_HEADERS, OPERATOR, OPERATOR_TOKEN
from .server import ServerProcess, served_app

ESCAPED = {"/report": "/rep%6Frt", "/heartbeat": "/heart%62eat", "/finish": "/fini%73h",
           "/reply": "/rep%6Cy", "/poll-control": "/poll-contro%6C"}  # fmt: skip


Answer = tuple[bytes, list[tuple[bytes, bytes]], bytes]  # status line, headers, body


def exchange(port: int, data: bytes, answers: int = 1) -> list[Answer]:
    """Send `data` on a fresh connection; the first `answers` answers: (status line, headers, body)."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(data)
        reader = sock.makefile("rb")
        out = []
        for _ in range(answers):
            status = reader.readline().rstrip(b"\r\n")
            headers = []
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.rstrip(b"\r\n").partition(b": ")
                headers.append((name, value))
            length = int(dict(headers).get(b"content-length", b"0"))
            out.append((status, headers, reader.read(length)))
        return out


def request(path: str, body: bytes, headers: dict[str, str] | None = None) -> bytes:
    given = {
        "Host": "t",
        "Content-Type": "application/json",
        "Content-Length": str(len(body)),
        **(headers or {}),
    }
    head = "".join(f"{k}: {v}\r\n" for k, v in given.items())
    return f"POST {path} HTTP/1.1\r\n{head}\r\n".encode() + body


def without_date(answer: Answer) -> Answer:
    status, headers, body = answer
    return status, [(k, v) for k, v in headers if k != b"date"], body


@contextlib.contextmanager
def logged(name: str) -> Iterator[list[logging.LogRecord]]:
    """The records logger `name` emits meanwhile (uvicorn's loggers do not propagate)."""
    records: list[logging.LogRecord] = []
    handler = logging.Handler()
    handler.emit = records.append  # type: ignore[method-assign]
    logger = logging.getLogger(name)
    logger.addHandler(handler)
    try:
        yield records
    finally:
        logger.removeHandler(handler)


@pytest.fixture
def port(make_app):
    with served_app(make_app()) as port:
        yield port


def cases(token: str) -> list[tuple[str, bytes, dict[str, str]]]:
    me = {"run_id": "a", "token": token}
    return [
        ("/report", orjson.dumps({**me, "state": "working", "payload": {"n": 1}}), {}),
        ("/report", orjson.dumps({"run_id": "a", "token": "x" * 32, "state": "s"}), {}),
        ("/report", b"{not json", {}),
        ("/report", orjson.dumps({"state": "no credentials"}), {}),
        ("/report", orjson.dumps({**me, "state": 7}), {}),
        ("/report", orjson.dumps({**me, "payload": "x" * 70_000}), {}),  # over the payload quota
        ("/report", orjson.dumps(me), {"Origin": "http://evil.example"}),
        ("/report", orjson.dumps(me), {"Content-Type": "text/plain"}),
        ("/heartbeat", orjson.dumps(me), {}),
        ("/heartbeat", orjson.dumps({"run_id": "nobody", "token": token}), {}),
        ("/finish", orjson.dumps({**me, "status": "done", "summary": "ok"}), {}),
        ("/reply", orjson.dumps({**me, "to": "someone", "payload": {"a": 1}}), {}),
        ("/poll-control", orjson.dumps({"run_id": "nobody", "token": token}), {}),
    ]


def test_each_hot_route_answers_the_same_bytes_on_both_fronts(port, register, monkeypatch):
    token = register("a")
    taken: list[str] = []  # the requests the lean front took
    run = LeanCycle.run

    async def counted(self: LeanCycle, front: Any) -> None:
        taken.append(self.scope["path"])
        await run(self, front)

    monkeypatch.setattr(LeanCycle, "run", counted)
    for path, body, headers in cases(token):
        lean = exchange(port, request(path, body, headers))[0]
        asgi = exchange(port, request(ESCAPED[path], body, headers))[0]
        assert without_date(lean) == without_date(asgi), (path, body[:80], headers)
    assert taken == [path for path, _, _ in cases(token)]  # and none of the escaped ones


def test_a_declared_length_over_the_limit_is_refused_the_same_on_both_fronts(port, register):
    token = register("a")
    body = orjson.dumps({"run_id": "a", "token": token})
    over = {"Content-Length": str((1 << 20) + 1)}
    lean = exchange(port, request("/report", body, over))[0]
    asgi = exchange(port, request(ESCAPED["/report"], body, over))[0]
    assert lean[0] == b"HTTP/1.1 413 Request Entity Too Large"
    assert without_date(lean) == without_date(asgi)


def test_a_queued_message_is_polled_the_same_on_both_fronts(port, client, register):
    token = register("a")
    body = orjson.dumps({"run_id": "a", "token": token})
    answers = []
    for path in ("/poll-control", ESCAPED["/poll-control"]):
        pushed = client.post(
            "/push-control", json={"id": "m1", "type": "steer", "run_id": "a"}, headers=OPERATOR
        )
        assert pushed.status_code == 200
        status, headers, got = exchange(port, request(path, body))[0]
        [message] = orjson.loads(got)
        answers.append((status, [h for h in headers if h[0] != b"date"], message["id"], message["type"]))
    assert answers[0] == answers[1]
    assert answers[0][2:] == ("m1", "steer")


def test_a_chunked_body_is_read_whole(port, register, system):
    token = register("a")
    body = orjson.dumps({"run_id": "a", "token": token, "state": "chunked"})
    chunks = b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in (body[:10], body[10:])) + b"0\r\n\r\n"
    data = (
        b"POST /report HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Transfer-Encoding: chunked\r\n\r\n"
    )
    [(status, _, answer)] = exchange(port, data + chunks)
    assert (status, answer) == (b"HTTP/1.1 200 OK", b'{"ok":true}\n')
    [last] = [r for r in system.log.read("run-a") if r.type == "RunReported"][-1:]
    assert last.data["state"] == "chunked"


def test_pipelined_requests_are_answered_in_order_across_both_fronts(port, register):
    token = register("a")
    me = {"run_id": "a", "token": token}
    data = (
        request("/report", orjson.dumps({**me, "state": "one"}))
        + request("/register", orjson.dumps({"run_id": "b"}))  # the ASGI app's
        + request("/heartbeat", orjson.dumps(me))
        + request("/report", orjson.dumps({"run_id": "a", "token": "x" * 32}))
    )
    answers = exchange(port, data, answers=4)
    assert [status for status, _, _ in answers] == [
        b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK", b"HTTP/1.1 200 OK", b"HTTP/1.1 401 Unauthorized"
    ]  # fmt: skip
    assert answers[0][2] == b'{"ok":true}\n'
    assert orjson.loads(answers[1][2])["run_id"] == "b"
    assert answers[2][2] == b"ok"


def test_an_unexpected_error_is_a_500_logged_once_and_the_connection_closed(make_app, register, monkeypatch):
    token = register("a")

    async def broken(self, raw):
        raise RuntimeError("a bug in a handler")

    monkeypatch.setattr(BrokerRoutes, "report_raw", broken)
    with served_app(make_app()) as port, logged("uvicorn.error") as records:
        data = request("/report", orjson.dumps({"run_id": "a", "token": token}))
        with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
            sock.sendall(data)
            received = b""
            while chunk := sock.recv(4096):  # the server closes the connection after its answer
                received += chunk
    assert received.startswith(b"HTTP/1.1 500 Internal Server Error\r\n")
    assert received.endswith(b"\r\n\r\nInternal Server Error")
    errors = [r for r in records if r.exc_info and "a bug in a handler" in str(r.exc_info[1])]
    assert len(errors) == 1


def test_the_access_log_has_the_lean_fronts_requests_without_their_query(tmp_path):
    server = ServerProcess(tmp_path / "logged.db", OPERATOR_TOKEN)  # serve logs each request by default
    try:
        token = server.client.post("/register", json={"run_id": "a"}).json()["token"]
        body = orjson.dumps({"run_id": "a", "token": token, "state": "x"})
        [(status, _, _)] = exchange(int(server.url.rsplit(":", 1)[1]), request("/report?secret=1", body))
        assert status == b"HTTP/1.1 200 OK"
        assert server.stop() == 0
    finally:
        server.close()
    lines = [line for line in server.output().splitlines() if '"POST /report' in line]
    assert len(lines) == 1, server.output()
    assert '"POST /report HTTP/1.1" 200' in lines[0]  # serve's filter drops the query
    assert "secret" not in server.output()


def test_a_client_that_leaves_a_waiting_poll_is_let_go(make_app, register, system):
    token = register("a")
    left = threading.Event()
    on_control = system.broker.on_control

    def watched(run_id, fn):
        unsubscribe = on_control(run_id, fn)

        def leave() -> None:
            unsubscribe()
            left.set()

        return leave

    system.broker.on_control = watched  # type: ignore[method-assign]
    with served_app(make_app(poll_timeout=60.0)) as port:
        sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        sock.sendall(request("/poll-control", orjson.dumps({"run_id": "a", "token": token}), AGENT_HEADERS))
        sock.close()  # long before the poll's 60 s
        assert left.wait(10)  # the poll stopped waiting at once: its client is gone
