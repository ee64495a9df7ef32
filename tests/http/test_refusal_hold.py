"""A refused request holds its connection back, and no other: through a real `flightlog serve`.

Issue 28's hostile mix: runs that flood the server with what it refuses (1 MiB reports over
the payload quota, ~1 MiB peer fields at /register, writes past their rate) cost it a body
read and parsed each, as fast as the server answered, and the normal runs' reports waited
behind them (p99 2.9 to 12.7 times the quiet server's). Now an answer of 413 or 429 leaves
its connection unread for `--refusal-hold` seconds: the flooding connection gets one refusal
per hold, every other connection is answered as before.

The hold is a lower bound on the next answer's time, so these tests assert "not before" on
the held connection (it cannot come early) and "first" on the others, with a hold long
enough (2 s) that the two cannot be confused on a busy machine.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from urllib.parse import urlsplit

import orjson
import pytest

from .conftest import OPERATOR_TOKEN
from .server import ServerProcess

pytestmark = pytest.mark.slow

HOLD = 2.0
NOT_BEFORE = HOLD * 0.75  # the held answer comes no sooner (minus the clock's slack)
LABEL_OVER = {"run_id": "peer", "label": "x" * 300}  # over the default 256-byte peer field: 413


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("hold") / "hold.db"
    args = ("--refusal-hold", str(HOLD), "--events-per-second", "1", "--burst", "1")
    process = ServerProcess(path, OPERATOR_TOKEN, args)
    yield process
    process.close()


def connect(server: ServerProcess) -> http.client.HTTPConnection:
    address = urlsplit(server.url)
    conn = http.client.HTTPConnection(str(address.hostname), address.port, timeout=30)
    conn.connect()
    return conn


def post(conn: http.client.HTTPConnection, path: str, value: object) -> tuple[int, bytes, float]:
    """(status, body, seconds until the answer) of one POST on `conn`."""
    started = time.monotonic()
    conn.request("POST", path, orjson.dumps(value), {"Content-Type": "application/json"})
    response = conn.getresponse()
    body = response.read()
    return response.status, body, time.monotonic() - started


def test_after_a_413_the_connection_waits_and_the_others_do_not(server):
    held, other = connect(server), connect(server)
    try:
        status, body, _ = post(held, "/register", LABEL_OVER)
        assert status == 413, body
        order: list[str] = []  # which connection's answer came first
        held_answer: list[tuple[int, float]] = []

        def next_on_held() -> None:
            status, _, took = post(held, "/register", {"run_id": "patient"})
            held_answer.append((status, took))
            order.append("held")

        thread = threading.Thread(target=next_on_held)
        thread.start()
        status, _, took = post(other, "/register", {"run_id": "bystander"})
        order.append("other")
        thread.join(30)
        assert status == 200
        assert order == ["other", "held"]  # not held behind the refused connection
        assert took < NOT_BEFORE
        [(held_status, held_took)] = held_answer
        assert held_status == 200  # held, then answered as ever
        assert held_took >= NOT_BEFORE
    finally:
        held.close()
        other.close()


def test_after_a_429_the_connection_waits(server):
    conn = connect(server)
    try:
        token = orjson.loads(post(conn, "/register", {"run_id": "fast"})[1])["token"]
        report = {"run_id": "fast", "token": token, "state": "working"}
        assert post(conn, "/report", report)[0] == 200  # the bucket's one write
        status, body, _ = post(conn, "/report", report)
        assert status == 429, body  # past the rate of one write a second
        status, _, took = post(conn, "/health", {})
        assert status == 200
        assert took >= NOT_BEFORE
    finally:
        conn.close()


def read_answer(reader) -> tuple[int, bytes]:
    """(status, body) of the next answer on a raw connection (a Content-Length body)."""
    status = int(reader.readline().split()[1])
    length = 0
    while (line := reader.readline()) not in (b"\r\n", b""):
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    return status, reader.read(length)


def test_a_pipelined_request_behind_a_refused_one_waits_too(server):
    address = urlsplit(server.url)
    refused = orjson.dumps(LABEL_OVER)
    request = (
        b"POST /register HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n%s" % (len(refused), refused)
    )
    health = b"GET /health HTTP/1.1\r\nHost: t\r\n\r\n"
    with socket.create_connection((address.hostname, address.port), timeout=30) as sock:
        started = time.monotonic()
        sock.sendall(request + health)  # both at once: the second is read with the first
        reader = sock.makefile("rb")
        first = read_answer(reader)
        refused_at = time.monotonic() - started
        second = read_answer(reader)
        answered_at = time.monotonic() - started
    assert first[0] == 413
    assert refused_at < NOT_BEFORE  # the refusal itself is not held
    assert second == (200, b"ok")
    assert answered_at - refused_at >= NOT_BEFORE * 0.9


def test_other_errors_do_not_hold(server):
    conn = connect(server)
    try:
        assert post(conn, "/register", {"label": "no run id"})[0] == 400
        assert post(conn, "/report", {"run_id": "nobody", "token": "t" * 32})[0] == 401
        status, _, took = post(conn, "/health", {})
        assert status == 200
        assert took < NOT_BEFORE
    finally:
        conn.close()


def test_no_hold_when_turned_off(tmp_path):
    server = ServerProcess(tmp_path / "off.db", OPERATOR_TOKEN, ("--refusal-hold", "0"))
    try:
        conn = connect(server)
        started = time.monotonic()
        for _ in range(20):  # twenty refusals in a row on one connection, each answered at once
            assert post(conn, "/register", LABEL_OVER)[0] == 413
        assert time.monotonic() - started < NOT_BEFORE
        conn.close()
    finally:
        server.close()
