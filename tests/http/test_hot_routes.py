"""The hot routes (served before Starlette's router) keep every rule of the wire protocol.

A web page holding a run's token — or none — must not drive `/report`, `/heartbeat`,
`/finish`, `/reply`, `/poll-control` or `/push-control` through a browser: a foreign Origin
is a 403 and a body that is not JSON a 415, before any credential is looked at, and nothing
is written. Everything else these paths answer (method guard, body limit, errors, the
tamper line) is what the other routes answer.
"""

from __future__ import annotations

import threading
import time

import orjson
import pytest

from actors import ControlMessage
from eventlog import Head, VerifyResult, encode
from eventlog.events import RunHeartbeat
from tools.http.integrity import TAMPER_HEADER, Integrity

from .conftest import OPERATOR, assert_json, head, text

HOT = ["/report", "/heartbeat", "/finish", "/reply", "/poll-control", "/push-control"]
PAGE_ORIGINS = ["http://evil.example", "null", "http://127.0.0.1:9", "http://127.0.0.1.evil.example"]
PAGE_TYPES = [
    "text/plain",
    "text/plain;charset=UTF-8",
    "application/x-www-form-urlencoded",
    "multipart/form-data",
]


def credentials(path: str, run_id: str, token: str) -> tuple[dict, dict]:
    """A body that the path would accept from the run, and the headers that go with it."""
    if path == "/push-control":
        return {"id": "m1", "type": "steer", "run_id": run_id, "payload": {"go": 1}}, dict(OPERATOR)
    body = {"run_id": run_id, "token": token, "state": "working", "status": "done", "to": "x"}
    return {**body, "payload": {"n": 1}}, {}


@pytest.mark.parametrize("origin", PAGE_ORIGINS)
@pytest.mark.parametrize("path", HOT)
def test_a_page_with_the_runs_token_is_refused_403_and_writes_nothing(client, register, system, path, origin):
    token = register("victim")
    system.broker.push_control("victim", ControlMessage("queued", "steer", "victim"))
    body, headers = credentials(path, "victim", token)
    before = head(system)
    response = client.post(path, json=body, headers={**headers, "Origin": origin})
    assert "cross-site" in assert_json(response, 403)["error"]
    assert head(system) == before
    assert system.broker.queue_depth("victim") == 1  # a poll took nothing either


@pytest.mark.parametrize("content_type", PAGE_TYPES)
@pytest.mark.parametrize("path", HOT)
def test_a_simple_request_with_the_runs_token_is_refused_415_and_writes_nothing(
    client, register, system, path, content_type
):
    token = register("victim")
    body, headers = credentials(path, "victim", token)
    before = head(system)
    raw = orjson.dumps(body)
    response = client.post(path, content=raw, headers={**headers, "Content-Type": content_type})
    assert "application/json" in assert_json(response, 415)["error"]
    assert head(system) == before


@pytest.mark.parametrize("path", HOT)
def test_the_same_request_from_an_agent_goes_through(client, register, system, path):
    token = register("victim")
    body, headers = credentials(path, "victim", token)
    before = head(system)
    response = client.post(path, json=body, headers=headers)
    assert response.status_code == 200, response.text
    assert head(system) >= before + (0 if path == "/poll-control" else 1)


def test_the_servers_own_loopback_origin_may_report(client, register, system):
    token = register("a")
    body = {"run_id": "a", "token": token, "state": "s", "payload": 1}
    assert client.post("/report", json=body, headers={"Origin": "http://127.0.0.1"}).status_code == 200


@pytest.mark.parametrize("path", HOT)
def test_other_methods_on_a_hot_path_get_the_method_guard(client, path):
    response = client.get(path)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert client.request("TRACE", path).status_code == 405


@pytest.mark.parametrize("path", HOT)
def test_errors_are_those_of_the_other_routes(client, register, path):
    token = register("a")
    assert text(client.post(path, content=b"{not json")) in {"bad request\n", "unauthorized\n"}
    assert client.post(path, content=b"x" * ((1 << 20) + 1)).status_code == 413
    declared = {"Content-Length": "nope"}
    assert client.post(path, content=b"{}", headers=declared).status_code == 400
    if path != "/push-control":
        wrong = {"run_id": "a", "token": token + "x"}
        assert client.post(path, json=wrong).status_code == 401
        assert client.post(path, json={"run_id": "a"}).text == "unauthorized: missing run_id or token\n"


def test_a_payload_is_kept_byte_for_byte(client, register, system):
    token = register("a")
    payload = b'{"big": 123456789012345678901234567890,  "k": [1, 2]}'
    raw = b'{"run_id": "a", "token": "%s", "state": "s", "payload": %s}' % (token.encode(), payload)
    assert client.post("/report", content=raw).status_code == 200
    [row] = [r for r in system.log.read("run-a") if r.type == "RunReported"]
    assert row.data["payload"] == payload.decode()


def test_hot_answers_carry_the_tamper_line(make_client, register, system):
    broken = VerifyResult(
        ok=False, checked=1, first_bad_seq=1, reason="hash mismatch", head=Head(1, "0" * 64)
    )
    client = make_client(integrity=Integrity(broken))
    token = client.post("/register", json={"run_id": "a"}).json()["token"]
    response = client.post("/report", json={"run_id": "a", "token": token, "state": "s"})
    assert response.status_code == 200
    assert response.headers[TAMPER_HEADER] == "the hash chain breaks at seq 1: hash mismatch"
    assert client.post("/report", json={"run_id": "a", "token": "no"}).headers[TAMPER_HEADER]


# -- a push to a waiting poll ------------------------------------------------------------------


def parked_poll(client, system, token: str) -> tuple[threading.Thread, list]:
    """A poll of run `a` started on its own thread, returned once it is parked on the empty queue."""
    result: list = []
    poller = threading.Thread(
        target=lambda: result.append(client.post("/poll-control", json={"run_id": "a", "token": token}))
    )
    poller.start()
    deadline = time.monotonic() + 10
    while len(system.broker._parking) == 0:
        assert time.monotonic() < deadline, "the poll never parked"
        time.sleep(0.001)
    return poller, result


def test_a_push_to_a_waiting_poll_is_queued_and_delivered_in_one_commit(make_client, system):
    client = make_client(poll_timeout=30.0)
    token = client.post("/register", json={"run_id": "a"}).json()["token"]
    poller, result = parked_poll(client, system, token)
    before = head(system)
    push = {"id": "m1", "type": "steer", "run_id": "a", "payload": {"go": True}}
    assert assert_json(client.post("/push-control", json=push, headers=OPERATOR)) == {"queued": True}
    poller.join(20)
    assert [m["id"] for m in result[0].json()] == ["m1"]
    queued, delivered = list(system.log.read("run-a", from_version=2))
    assert (queued.type, delivered.type) == ("ControlQueued", "ControlDelivered")
    assert queued.recorded_at == delivered.recorded_at  # one append
    assert head(system) == before + 2
    assert system.broker.queue_depth("a") == 0
    assert len(system.broker._parking) == 0


def test_a_handover_that_meets_another_writer_is_decided_again(make_client, system, monkeypatch):
    """Another writer appends to the run between the poll parking and the push: the push's
    append is refused, it folds and decides again — and the poll still gets exactly the queue."""
    client = make_client(poll_timeout=30.0)
    token = client.post("/register", json={"run_id": "a"}).json()["token"]
    poller, result = parked_poll(client, system, token)
    system.log.append("run-a", [encode(RunHeartbeat("a", system.clock.now()))])  # behind the writer's back
    push = {"id": "m1", "type": "steer", "run_id": "a"}
    assert client.post("/push-control", json=push, headers=OPERATOR).status_code == 200
    poller.join(20)
    assert [m["id"] for m in result[0].json()] == ["m1"]
    types = [r.type for r in system.log.read("run-a")]
    assert types == ["RunRegistered", "RunHeartbeat", "ControlQueued", "ControlDelivered"]
    assert system.broker.queue_depth("a") == 0
