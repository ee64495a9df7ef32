"""Nobody crowds out the operator, and every run stays within its quotas: through a real `flightlog serve`.

Each test is one attack of issue 28 (items 3 to 6) as a short script would make it: a flood
of messages between runs, a run that only uses gates, oversized fields, a write flood, an
approval flood, ask floods and peer-field floods at /register. Each is refused with a clear
413 or 429 that records nothing, and the operator's control still gets in.
"""

from __future__ import annotations

import orjson
import pytest

from .conftest import OPERATOR, OPERATOR_TOKEN
from .server import ServerProcess

pytestmark = pytest.mark.slow


@pytest.fixture
def serve(tmp_path):
    started: list[ServerProcess] = []

    def start(*args: str) -> ServerProcess:
        server = ServerProcess(tmp_path / f"quotas-{len(started)}.db", OPERATOR_TOKEN, args)
        started.append(server)
        return server

    yield start
    for server in started:
        server.close()


def register(server: ServerProcess, run_id: str, **fields: str) -> str:
    response = server.client.post("/register", json={"run_id": run_id, **fields})
    assert response.status_code == 200, response.text
    return str(response.json()["token"])


def logged(server: ServerProcess) -> int:
    """How many events the log holds (the chain is verified on the way)."""
    verified = server.client.get("/api/v1/verify", headers=OPERATOR).json()
    assert verified["ok"] is True
    return int(verified["checked"])


def send(server: ServerProcess, sender: str, token: str, to: str, n: int):
    body = {"run_id": sender, "token": token, "from_run_id": sender, "to_run_id": to, "type": "note"}
    return server.client.post("/send", json={**body, "payload": {"n": n}})


# -- 3. the operator's lane -------------------------------------------------------------------


def test_a_send_flood_from_a_fresh_run_never_keeps_the_operator_out(serve):
    # Issue 28 §3: 1,000 /send from a freshly registered run to a busy run (not polling)
    # made the operator's stop and /push-control abort 429.
    server = serve("--events-per-second", "0")  # the queue's bounds alone, not the write rate
    victim = register(server, "victim")
    mallory = register(server, "mallory")
    answers = [send(server, "mallory", mallory, "victim", n).status_code for n in range(1000)]
    assert answers[:250] == [200] * 250  # a quarter of the default 1,000
    assert set(answers[250:]) == {429}
    refused = send(server, "mallory", mallory, "victim", 1000)
    assert refused.text == (
        "run mallory holds its share of the control queue of run victim (250 undelivered messages): "
        "wait until victim takes them\n"
    )
    before = logged(server)
    stop = server.client.post("/api/v1/runs/victim/control", json={"type": "stop"}, headers=OPERATOR)
    assert stop.status_code == 200, stop.text
    abort = {"id": "abort-1", "type": "abort", "run_id": "victim"}
    assert server.client.post("/push-control", json=abort, headers=OPERATOR).json() == {"queued": True}
    bob = register(server, "bob")  # another sender is unaffected by mallory's flood
    assert send(server, "bob", bob, "victim", 0).status_code == 200
    assert logged(server) == before + 2 + 2  # stop, abort; bob's registration and message
    polled = server.client.post("/poll-control", json={"run_id": "victim", "token": victim}).json()
    assert [m["type"] for m in polled[-3:]] == ["stop", "abort", "note"]


def test_big_messages_between_runs_stop_at_the_queue_bytes_and_the_operator_still_gets_in(serve):
    # Issue 28 (memory): a run's undelivered messages from other runs hold their payloads in the
    # server; 1,000 of 64 KiB each were 62.5 MiB for one run. Their bytes in all are bounded too.
    server = serve("--events-per-second", "0", "--max-queue-bytes", "200000")
    victim = register(server, "victim")
    senders = {name: register(server, name) for name in ("mallory", "eve")}
    big = "x" * 60_000

    def send_big(sender: str):
        body = {"run_id": sender, "token": senders[sender], "from_run_id": sender, "to_run_id": "victim"}
        return server.client.post("/send", json={**body, "type": "note", "payload": {"blob": big}})

    assert [send_big("mallory").status_code for _ in range(3)] == [200, 200, 200]
    refused = send_big("mallory")
    assert refused.status_code == 429
    assert refused.text == (
        "control queue of run victim is full (200000 bytes of undelivered message payloads): "
        "wait until victim takes them\n"
    )
    assert send_big("eve").status_code == 429  # the bound is the queue's, whoever sends
    before = logged(server)
    stop = server.client.post(
        "/api/v1/runs/victim/control", json={"type": "stop", "payload": {"why": big}}, headers=OPERATOR
    )
    assert stop.status_code == 200, stop.text  # the operator's lane is never refused
    assert logged(server) == before + 1
    polled = server.client.post("/poll-control", json={"run_id": "victim", "token": victim}).json()
    assert [m["type"] for m in polled] == ["note", "note", "note", "stop"]
    assert send_big("eve").status_code == 200  # taken: room again


def test_a_run_that_only_uses_gates_never_crowds_out_the_operator(serve):
    # Its answers (`permission_decision` notices) pile up while it never polls: they have the
    # operator's lane, so neither they nor the operator's control are refused by the bound.
    server = serve("--queue-limit", "4")
    gated = register(server, "gated")
    creds = {"run_id": "gated", "token": gated}
    for i in range(10):
        ask = {**creds, "request_id": f"r{i}", "tool_name": "read_file", "input_preview": "README.md"}
        assert server.client.post("/permission_request", json=ask).status_code == 200
        answer = {**creds, "request_id": f"r{i}", "behavior": "allow"}
        assert server.client.post("/permission", json=answer).status_code == 200
    stop = server.client.post("/api/v1/runs/gated/control", json={"type": "stop"}, headers=OPERATOR)
    assert stop.status_code == 200, stop.text
    other = register(server, "other")
    assert send(server, "other", other, "gated", 0).status_code == 200
    detail = server.client.get("/api/v1/runs/gated", headers=OPERATOR).json()
    kinds = [m["type"] for m in detail["control_queue"]]
    assert kinds == ["permission_decision"] * 10 + ["stop", "note"]


# -- 4. sizes ---------------------------------------------------------------------------------


def test_oversized_fields_are_413_and_record_nothing(serve):
    server = serve()
    token = register(server, "big")
    creds = {"run_id": "big", "token": token}
    before = logged(server)
    huge = "x" * (64 * 1024)
    cases = [
        ("/report", {**creds, "state": "working", "payload": {"b": huge}}, "report payload too large"),
        ("/report", {**creds, "state": "s" * 5000, "payload": {}}, "report state too large"),
        ("/finish", {**creds, "status": "done", "payload": {"b": huge}}, "finish payload too large"),
        ("/finish", {**creds, "status": "done", "summary": huge, "payload": {}}, "finish summary too large"),
        ("/reply", {**creds, "to": "x", "payload": {"b": huge}}, "reply payload too large"),
        (
            "/permission_request",
            {**creds, "request_id": "r", "tool_name": "read_file", "description": huge},
            "permission request description too large",
        ),
        (
            "/send",
            {**creds, "from_run_id": "big", "to_run_id": "big", "type": "note", "payload": {"b": huge}},
            "message payload too large",
        ),
    ]
    for path, body, message in cases:
        response = server.client.post(path, json=body)
        assert response.status_code == 413, (path, response.text)
        assert response.text.startswith(message), response.text
    assert logged(server) == before
    # A caller without the run's token hears 401, whatever it sent.
    stranger = server.client.post("/report", json={**creds, "token": "0" * 32, "payload": {"b": huge}})
    assert stranger.status_code == 401
    # Within the bounds, the same run goes on.
    ok = server.client.post("/report", json={**creds, "state": "working", "payload": {"b": "x" * 60_000}})
    assert ok.json() == {"ok": True}


def test_peer_fields_at_register_are_bounded_and_sessions_stay_small(serve):
    # Issue 28 §5: ~1 MiB label/backend/model/dir/status per anonymous /register grew the log
    # 1 MiB a call and every /sessions answer with it.
    server = serve()
    before = logged(server)
    for field in ("label", "backend", "model", "dir", "status"):
        response = server.client.post("/register", json={"run_id": f"p-{field}", field: "y" * 300_000})
        assert response.status_code == 413, response.text
        assert response.text == f"{field} too large: at most 256 bytes\n"
    assert logged(server) == before  # no run was registered, no info recorded
    token = register(server, "peer", label="l" * 256, model="m" * 256)
    sessions = server.client.post("/sessions", json={"run_id": "peer", "token": token})
    assert sessions.status_code == 200
    assert len(sessions.content) < 2_000


# -- 5. rates and open requests ----------------------------------------------------------------


def test_a_write_flood_is_429_with_retry_after_and_others_go_on(serve):
    server = serve("--events-per-second", "1", "--burst", "5")
    fast = register(server, "fast")
    calm = register(server, "calm")
    beats = [
        server.client.post("/heartbeat", json={"run_id": "fast", "token": fast}).status_code for _ in range(5)
    ]
    assert beats == [200] * 5
    before = logged(server)
    refused = server.client.post(
        "/report", json={"run_id": "fast", "token": fast, "state": "s", "payload": {}}
    )
    assert refused.status_code == 429
    assert refused.text == "run fast writes too fast: at most 1 events a second (bursts of 5)\n"
    assert int(refused.headers["retry-after"]) >= 1
    asked = {"run_id": "fast", "token": fast, "request_id": "r", "tool_name": "read_file"}
    assert server.client.post("/permission_request", json=asked).status_code == 429
    assert logged(server) == before
    calm_report = {"run_id": "calm", "token": calm, "state": "s", "payload": {}}
    assert server.client.post("/report", json=calm_report).json() == {"ok": True}


def test_an_approval_flood_stops_at_the_open_permission_quota(serve):
    # Issue 28 §6: one run filed 1,500 pending approvals and the console's overview took 11-13 s.
    server = serve("--max-open-permissions", "3")
    token = register(server, "flood")
    creds = {"run_id": "flood", "token": token}

    def ask(request_id: str):
        body = {**creds, "request_id": request_id, "tool_name": "bash", "description": f"rm {request_id}"}
        return server.client.post("/permission_request", json=body)

    assert [ask(f"r{i}").status_code for i in range(3)] == [200] * 3
    before = logged(server)
    refused = ask("r3")
    assert refused.status_code == 429
    assert "retry-after" not in refused.headers  # waiting alone does not help: a decision does
    assert refused.text.startswith("run flood has 3 permission requests waiting for a decision")
    assert ask("r0").status_code == 200  # filing an open request again changes nothing
    assert logged(server) == before
    pending = server.client.get("/api/v1/approvals", headers=OPERATOR).json()["approvals"]
    assert len(pending) == 3
    decided = server.client.post(f"/api/v1/approvals/{pending[0]['id']}/reject", headers=OPERATOR, json={})
    assert decided.status_code == 200, decided.text
    assert ask("r3").status_code == 200  # room again once one was decided


def test_an_ask_flood_stops_at_the_open_ask_quota(serve):
    server = serve("--max-open-asks", "2")
    asker = register(server, "asker")
    register(server, "target")

    def ask(message_id: str):
        message = {"id": message_id, "expects_reply": True, "text": "hi"}
        body = {"run_id": "asker", "token": asker, "from_run_id": "asker", "to_run_id": "target"}
        return server.client.post("/send", json={**body, "type": "agent_message", "payload": message})

    assert [ask(f"m{i}").status_code for i in range(2)] == [200, 200]
    before = logged(server)
    refused = ask("m2")
    assert refused.status_code == 429
    assert refused.text.startswith("run asker has 2 asks waiting for replies")
    assert logged(server) == before


# -- 6. pages ---------------------------------------------------------------------------------


def test_a_run_detail_is_one_page_with_a_cursor(serve):
    # Issue 28 §4: GET /api/v1/runs/{id} answered a run's whole history (149 MiB).
    server = serve("--events-per-second", "0")
    token = register(server, "long")
    for n in range(30):
        body = {"run_id": "long", "token": token, "state": "working", "payload": {"n": n}}
        assert server.client.post("/report", json=body).status_code == 200
    first = server.client.get("/api/v1/runs/long?limit=12", headers=OPERATOR).json()
    assert first["report_count"] == 30
    assert [orjson.loads(r["payload"])["n"] if isinstance(r["payload"], str) else r["payload"]["n"]
            for r in first["reports"]] == list(range(18, 30))  # fmt: skip
    cursor = first["page"]["next_before"]
    assert isinstance(cursor, int)
    second = server.client.get(f"/api/v1/runs/long?limit=12&before={cursor}", headers=OPERATOR).json()
    third = server.client.get(
        f"/api/v1/runs/long?limit=12&before={second['page']['next_before']}", headers=OPERATOR
    ).json()
    assert len(second["reports"]) == 12
    assert len(third["reports"]) == 6
    assert third["page"]["next_before"] is None
    default = server.client.get("/api/v1/runs/long", headers=OPERATOR).json()
    assert default["page"] == {"limit": 200, "before": None, "next_before": None}
    bad = server.client.get("/api/v1/runs/long?limit=0", headers=OPERATOR)
    assert (bad.status_code, bad.json()) == (400, {"error": "limit must be from 1 to 1000"})
