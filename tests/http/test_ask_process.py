"""avenor's broker scenarios for ask/reply, cancel and sessions, against a real `flightlog serve`.

Each test follows one of avenor's broker HTTP tests (status codes and JSON bodies as those
tests expect), over loopback to a real server process; then what avenor cannot do: a server
restart between the ask, the reply and the wait loses nothing. The scenarios run on a server
open to self-registration, as avenor's broker is, and on one taking enrolled runs only (the
default), where each run is created through the operator API first and its agent registers
with the token it was given, as avenor's sidecar does with its orchestrator's.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import httpx
import pytest

from .conftest import OPERATOR_TOKEN
from .server import ServerProcess

pytestmark = pytest.mark.slow


class Agent:
    """One registered run talking to a server, as avenor's test helpers talk to its broker."""

    def __init__(self, server: ServerProcess, run_id: str, **info: str) -> None:
        self.server = server
        self.run_id = run_id
        given = {"token": server.create_run(run_id)} if server.registration == "enrolled" else {}
        answer = server.client.post("/register", json={"run_id": run_id, **given, **info})
        assert answer.status_code == 200, answer.text
        self.token = answer.json()["token"]

    def post(self, path: str, body: dict[str, Any], timeout: float = 30.0) -> httpx.Response:
        creds = {"run_id": self.run_id, "token": self.token}
        return self.server.client.post(path, json={**creds, **body}, timeout=timeout)

    def send(self, to: str, payload: dict[str, Any]) -> httpx.Response:
        body = {"from_run_id": self.run_id, "to_run_id": to, "type": "agent_message", "payload": payload}
        return self.post("/send", body)

    def ask(self, to: str, message_id: str, message: str = "question?") -> httpx.Response:
        payload = {"id": message_id, "from": self.run_id, "from_run_id": self.run_id, "to_run_id": to}
        return self.send(to, {**payload, "message": message, "expects_reply": True})

    def reply(self, to: str, reply_to: str, message: str = "answer") -> httpx.Response:
        payload = {"id": f"reply-{reply_to}", "from": self.run_id, "from_run_id": self.run_id}
        return self.send(to, {**payload, "to_run_id": to, "message": message, "reply_to": reply_to})

    def wait_reply(self, message_id: str) -> httpx.Response:
        return self.post("/wait_reply", {"waiting_for": message_id})

    def cancel(self, message_id: str) -> httpx.Response:
        return self.post("/cancel_message", {"cancel_message_id": message_id})

    def poll(self) -> list[dict[str, Any]]:
        answer = self.post("/poll-control", {})
        assert answer.status_code == 200, answer.text
        return list(answer.json() or [])


@pytest.fixture(scope="module", params=["open", "enrolled", "open --workers 2"])
def server(tmp_path_factory, request) -> Iterator[ServerProcess]:
    """Each registration mode; and two workers, whose connections the kernel hands out, so that
    an ask and its reply, or a wait and its wake-up, often go through different workers."""
    db = tmp_path_factory.mktemp("ask") / "ask.db"
    registration, *args = request.param.split()
    served = ServerProcess(db, OPERATOR_TOKEN, tuple(args), registration=registration)
    yield served
    served.close()


@pytest.fixture
def pair(server, request) -> tuple[Agent, Agent]:
    name = request.node.name.split("[")[0][-24:]
    return Agent(server, f"{name}-asker"), Agent(server, f"{name}-target")


def body(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


def test_ask_happy_path_reply_after_the_wait_started(pair):
    asker, target = pair
    assert body(asker.ask(target.run_id, "ask-001")) == {
        "expects_reply": True,
        "message_id": "ask-001",
        "queued": True,
    }
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(asker.wait_reply, "ask-001")
        [question] = target.poll()
        assert (question["type"], question["from_run_id"]) == ("agent_message", asker.run_id)
        assert question["payload"]["id"] == "ask-001"
        assert question["id"] != "ask-001"  # the control message's id is the broker's own
        assert body(target.reply(asker.run_id, "ask-001")) == {"queued": True, "reply_to": "ask-001"}
        got = body(waiting.result(30))
    assert got["message_id"] == "ask-001"
    assert got["from_run_id"] == target.run_id
    assert got["payload"]["message"] == "answer"
    assert got["payload"]["reply_to"] == "ask-001"
    # The edge is gone: waiting again finds no pending ask, and the reply never went to a queue.
    assert asker.wait_reply("ask-001").status_code == 404
    assert asker.poll() == []


def test_a_reply_before_the_wait_is_kept_for_it(pair):
    asker, target = pair
    body(asker.ask(target.run_id, "early"))
    body(target.reply(asker.run_id, "early", "already here"))
    assert body(asker.wait_reply("early"))["payload"]["message"] == "already here"


def test_plain_sends_are_unchanged(pair):
    asker, target = pair
    assert body(asker.send(target.run_id, {"from": asker.run_id, "message": "fire"})) == {"queued": True}
    [message] = target.poll()
    assert message["from_run_id"] == asker.run_id
    assert message["id"]


def test_an_ask_needs_an_id_and_a_target(pair):
    asker, target = pair
    missing = asker.send(target.run_id, {"message": "?", "expects_reply": True})
    assert (missing.status_code, missing.text) == (400, "expects_reply requires a message id\n")
    ghost = asker.ask("ghost-run", "ask-ghost")
    assert (ghost.status_code, ghost.text) == (404, "to run not found\n")
    plain_ghost = asker.send("ghost-run", {"message": "fire"})
    assert (plain_ghost.status_code, plain_ghost.text) == (404, "run not found: ghost-run\n")


def test_a_mutual_ask_and_a_reused_id_are_refused(pair):
    asker, target = pair
    body(asker.ask(target.run_id, "dup-id"))
    assert body(asker.ask(target.run_id, "dup-id"), 409) == {"error": "message id already in use"}
    assert body(target.ask(asker.run_id, "back"), 409) == {"error": "mutual ask refused"}
    # Another sender may use the same id.
    third = Agent(asker.server, f"{asker.run_id}-3")
    body(third.ask(target.run_id, "dup-id"))


def test_concurrent_mutual_asks_one_wins(pair):
    a, b = pair
    go = threading.Barrier(2)

    def ask(me: Agent, other: Agent, mid: str) -> int:
        go.wait(10)
        return me.ask(other.run_id, mid).status_code

    with ThreadPoolExecutor(2) as pool:
        codes = sorted(pool.map(lambda args: ask(*args), [(a, b, "c-msg-a"), (b, a, "c-msg-b")]))
    if "--workers" in a.server.proc.args:
        # Across processes the guard reads the log: two mutual asks never both stand, and in
        # a true race both may be refused (actors/broker/conversation.py).
        assert codes in ([200, 409], [409, 409])
    else:
        assert codes == [200, 409]


def test_only_the_target_may_reply(pair):
    asker, target = pair
    third = Agent(asker.server, f"{asker.run_id}-third")
    body(asker.ask(target.run_id, "ask-for-403"))
    assert body(third.reply(asker.run_id, "ask-for-403"), 403) == {"error": "not the target of this ask"}
    assert body(target.reply(asker.run_id, "ask-for-403")) == {"queued": True, "reply_to": "ask-for-403"}


def test_a_reply_without_a_pending_ask_is_delivered_as_a_message(pair):
    asker, target = pair
    got = body(target.reply(asker.run_id, "expired-ask"))
    assert got == {"note": "reply_to edge not found, delivered as fire-and-forget", "queued": True}
    [message] = asker.poll()
    assert message["payload"]["reply_to"] == "expired-ask"


def test_cancel(pair):
    asker, target = pair
    body(asker.ask(target.run_id, "cancel-me"))
    body(asker.ask(target.run_id, "other-ask"))
    assert target.cancel("other-ask").status_code in (403, 404)
    assert body(asker.cancel("cancel-me")) == {"cancelled": True, "message_id": "cancel-me"}
    assert asker.cancel("cancel-me").text == "no pending ask for this message id\n"
    assert asker.cancel("nonexistent").status_code == 404
    # A reply after the cancel takes the no-edge path; the other ask still stands.
    assert "note" in body(target.reply(asker.run_id, "cancel-me"))
    assert body(target.reply(asker.run_id, "other-ask")) == {"queued": True, "reply_to": "other-ask"}


def test_cancel_wakes_the_waiter(pair):
    asker, target = pair
    body(asker.ask(target.run_id, "cancel-via-wait"))
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(asker.wait_reply, "cancel-via-wait")
        # The wait is in when the ask is still open for it (it is not consumed before the cancel).
        body(asker.cancel("cancel-via-wait"))
        got = waiting.result(30)
    # Either the waiter was already waiting (cancelled) or it came after the cancel (404).
    if got.status_code == 200:
        assert got.json() == {"cancelled": True, "message_id": "cancel-via-wait"}
    else:
        assert got.status_code == 404


def test_cancel_after_a_buffered_reply_drops_it(pair):
    asker, target = pair
    body(asker.ask(target.run_id, "buffered"))
    body(target.reply(asker.run_id, "buffered"))
    assert body(asker.cancel("buffered")) == {"cancelled": True, "message_id": "buffered"}
    assert asker.wait_reply("buffered").status_code == 404


def test_wait_reply_errors(pair):
    asker, target = pair
    ghost = asker.wait_reply("ghost")
    assert (ghost.status_code, ghost.text) == (404, "no pending ask for this message id\n")
    missing = asker.post("/wait_reply", {})
    assert (missing.status_code, missing.text) == (400, "missing waiting_for\n")
    # Only the sender can wait: anyone else's key is its own, so it finds nothing.
    body(asker.ask(target.run_id, "mine"))
    assert target.wait_reply("mine").status_code in (403, 404)


def test_auth_is_still_required(pair, server):
    asker, target = pair
    wrong = {"run_id": asker.run_id, "token": "wrong", "waiting_for": "x"}
    assert server.client.post("/wait_reply", json=wrong).status_code == 401
    ask = {"run_id": asker.run_id, "token": "wrong", "from_run_id": asker.run_id, "to_run_id": target.run_id}
    ask |= {"type": "agent_message", "payload": {"id": "ask-noauth", "expects_reply": True}}
    assert server.client.post("/send", json=ask).status_code == 401
    assert asker.wait_reply("ask-noauth").status_code == 404
    cancel = {"run_id": asker.run_id, "token": "wrong", "cancel_message_id": "x"}
    assert server.client.post("/cancel_message", json=cancel).status_code == 401


def test_sessions(server):
    me = Agent(server, "sessions-user")
    runner = Agent(
        server, "runner_1", label="my-runner", backend="test-backend", model="test-model", dir="/tmp/test"
    )
    body(runner.post("/report", {"state": "thinking", "payload": {}}))
    headers = {"Authorization": f"Bearer {me.token}", "X-Run-Id": me.run_id}
    listed = body(server.client.get("/sessions", headers=headers))["sessions"]
    by_id = {s["run_id"]: s for s in listed}
    assert list(by_id["runner_1"]) == ["run_id", "label", "backend", "model", "dir", "status", "last_seen"]
    assert by_id["runner_1"]["label"] == "my-runner"
    assert by_id["runner_1"]["status"] == "thinking"
    assert list(by_id["sessions-user"]) == ["run_id", "last_seen"]
    assert isinstance(by_id["sessions-user"]["last_seen"], int)
    # The body works too (POST); no credentials is 401; a token in the URL is refused with why.
    assert body(me.post("/sessions", {}))["sessions"] == listed
    assert server.client.get("/sessions").status_code == 401
    in_url = server.client.get("/sessions", params={"run_id": me.run_id, "token": me.token})
    assert in_url.status_code == 400
    assert "tokens never go in URLs" in in_url.text
    bad = server.client.get("/sessions", headers={"Authorization": "Bearer nope", "X-Run-Id": me.run_id})
    assert bad.status_code == 401


def test_an_empty_poll_is_null_and_register_keys_come_in_avenors_order(server):
    given = {"token": server.create_run("bytes-run")} if server.registration == "enrolled" else {}
    answer = server.client.post("/register", json={"run_id": "bytes-run", **given})
    assert answer.content.startswith(b'{"run_id":"bytes-run","token":"')
    token = answer.json()["token"]
    empty = server.client.post("/poll-control", json={"run_id": "bytes-run", "token": token})
    assert (empty.status_code, empty.content) == (200, b"null\n")


# -- what avenor cannot: restarts and timeouts ----------------------------------------------


def test_a_restart_between_ask_reply_and_wait_loses_nothing(tmp_path):
    db = tmp_path / "restart.db"
    first = ServerProcess(db, OPERATOR_TOKEN)
    try:
        asker, target = Agent(first, "r-asker"), Agent(first, "r-target")
        body(asker.ask(target.run_id, "across"))
    finally:
        first.close()  # killed: no shutdown code runs
    second = ServerProcess(db, OPERATOR_TOKEN)
    try:
        asker.server = target.server = second
        [question] = target.poll()
        assert question["payload"]["id"] == "across"
        body(target.reply(asker.run_id, "across", "after the restart"))
    finally:
        second.close()
    third = ServerProcess(db, OPERATOR_TOKEN)
    try:
        asker.server = third
        assert body(asker.wait_reply("across"))["payload"]["message"] == "after the restart"
    finally:
        third.close()


def test_an_unanswered_ask_times_out_with_504(tmp_path):
    served = ServerProcess(tmp_path / "timeout.db", OPERATOR_TOKEN, ("--ask-timeout", "0.5"))
    try:
        asker, target = Agent(served, "t-asker"), Agent(served, "t-target")
        body(asker.ask(target.run_id, "slow"))
        assert body(asker.wait_reply("slow"), 504) == {"message_id": "slow", "timeout": True}
        assert asker.wait_reply("slow").status_code == 404
        assert "note" in body(target.reply(asker.run_id, "slow"))
    finally:
        served.close()
