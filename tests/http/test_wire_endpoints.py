"""Each broker path in process: statuses and body shapes, field names as §1.10 gives them."""

from __future__ import annotations

from datetime import datetime

import pytest

from actors import ControlMessage, Quotas

from .conftest import BOOTSTRAP, HEX32, OPERATOR, assert_json, credential_id, head, text

# -- /register ------------------------------------------------------------------------------


def test_register_issues_a_token(client, system):
    response = client.post("/register", json={"run_id": "a"})
    body = assert_json(response)
    assert set(body) == {"token", "run_id"}
    assert body["run_id"] == "a"
    assert HEX32.fullmatch(body["token"])
    assert response.headers["cache-control"] == "no-store"
    view = system.broker.get_run("a")
    assert view is not None
    assert view.registered_at == view.last_seen == system.clock.now()


def test_register_keeps_a_chosen_token(client, system):
    body = assert_json(client.post("/register", json={"run_id": "a", "token": "my-own-token-16ch"}))
    assert body == {"token": "my-own-token-16ch", "run_id": "a"}
    assert system.broker.authenticate("a", "my-own-token-16ch")


def test_reregister_with_the_token_refreshes(client, register, system, clock):
    token = register("a")
    clock.advance(5)
    assert assert_json(client.post("/register", json={"run_id": "a", "token": token})) == {
        "token": token,
        "run_id": "a",
    }
    view = system.broker.get_run("a")
    assert view is not None
    assert view.registered_at == view.last_seen == clock.now()


@pytest.mark.parametrize("token", [None, "", "0" * 32])
def test_reregister_without_the_token_is_409(client, register, system, token):
    register("a")
    before = head(system)
    response = client.post("/register", json={"run_id": "a", "token": token})
    assert response.status_code == 409
    assert text(response) == "run already registered\n"
    assert head(system) == before


@pytest.mark.parametrize("body", [{}, {"run_id": ""}, {"run_id": None}, {"token": "t"}])
def test_register_without_run_id_is_400(client, body):
    response = client.post("/register", json=body)
    assert (response.status_code, text(response)) == (400, "missing run_id\n")


@pytest.mark.parametrize("token", ["tökén", "with space", "tab\t", "x" * 513, "\u202e"])
def test_register_refuses_unusable_chosen_tokens(client, system, token):
    response = client.post("/register", json={"run_id": "a", "token": token})
    assert response.status_code == 400
    assert token not in response.text
    assert system.broker.get_run("a") is None


def test_register_refuses_a_run_id_the_log_cannot_name(client, system):
    response = client.post("/register", json={"run_id": "x" * 509})
    assert response.status_code == 400
    assert "invalid run_id" in text(response)


# -- /heartbeat -----------------------------------------------------------------------------


def test_heartbeat(client, register, system, clock):
    token = register("a")
    clock.advance(3)
    response = client.post("/heartbeat", json={"run_id": "a", "token": token})
    assert response.status_code == 200
    assert text(response) == "ok"
    view = system.broker.get_run("a")
    assert view is not None
    assert view.last_seen == clock.now()


# -- /push-control --------------------------------------------------------------------------


def test_push_control_with_the_operator_token(client, register, system, clock):
    register("a")
    message = {"id": "m1", "type": "steer", "run_id": "a", "from_run_id": "ops", "payload": {"text": "hi"}}
    assert assert_json(client.post("/push-control", json=message, headers=OPERATOR)) == {"queued": True}
    (queued,) = system.broker.get_run("a").control_queue
    # The bootstrap admin pushed it; the log says so (the wire message does not carry it).
    sent_by = f"{BOOTSTRAP} ({BOOTSTRAP})"
    assert queued == ControlMessage("m1", "steer", "a", "ops", '{"text":"hi"}', clock.now(), sent_by)


def test_push_control_records_the_enrolled_admin_and_refuses_an_approver(client, register, system, operator):
    register("a")
    alice, ada = operator("alice"), operator("ada", "admin")
    message = {"id": "m1", "type": "steer", "run_id": "a"}
    before = head(system)
    refused = client.post("/push-control", json=message, headers=alice)
    assert refused.status_code == 403
    assert text(refused).startswith("forbidden: operator 'alice'")
    assert head(system) == before
    assert assert_json(client.post("/push-control", json=message, headers=ada)) == {"queued": True}
    (queued,) = system.broker.get_run("a").control_queue
    assert queued.sent_by == f"ada ({credential_id(system, 'ada')})"


@pytest.mark.parametrize(
    "authorization",
    [
        None,
        "",
        "Bearer",
        "Bearer ",
        "bearer operator-0123456789abcdef-secret",
        "Basic x",
        "Bearer wrong",
        "Bearer tökén",
    ],
)
def test_push_control_refuses_anything_but_the_operator_bearer(client, register, system, authorization):
    token = register("a")
    headers = {} if authorization is None else {"Authorization": authorization.encode()}
    before = head(system)
    # Run credentials in the body do not count once an operator token is configured.
    body = {"id": "m", "type": "t", "run_id": "a", "token": token}
    response = client.post("/push-control", json=body, headers=headers)
    assert (response.status_code, text(response)) == (401, "unauthorized\n")
    assert head(system) == before


def test_push_control_trims_the_bearer_token(client, register):
    register("a")
    headers = {"Authorization": "Bearer   operator-0123456789abcdef-secret  "}
    response = client.post("/push-control", json={"id": "m", "type": "t", "run_id": "a"}, headers=headers)
    assert response.status_code == 200


@pytest.mark.parametrize("missing", ["id", "type", "run_id"])
def test_push_control_missing_fields_is_400(client, register, system, missing):
    register("a")
    body = {"id": "m", "type": "t", "run_id": "a"}
    body[missing] = ""
    before = head(system)
    response = client.post("/push-control", json=body, headers=OPERATOR)
    assert (response.status_code, text(response)) == (400, "missing fields\n")
    assert head(system) == before


def test_push_control_unknown_run_is_404(client):
    response = client.post(
        "/push-control", json={"id": "m", "type": "t", "run_id": "ghost"}, headers=OPERATOR
    )
    assert (response.status_code, text(response)) == (404, "run not found\n")


def test_push_control_bad_created_at_is_400(client, register):
    register("a")
    body = {"id": "m", "type": "t", "run_id": "a", "created_at": "yesterday"}
    assert client.post("/push-control", json=body, headers=OPERATOR).status_code == 400


def test_push_control_is_never_refused_for_a_queue_full_of_messages_from_runs(client, register, system):
    a, b = register("a"), register("b")
    system.broker.queue_limit = 2
    system.broker.set_quotas(Quotas(queue_share=2))
    body = {"run_id": "b", "token": b, "from_run_id": "b", "to_run_id": "a", "type": "note"}
    for _ in range(2):
        assert client.post("/send", json=body).status_code == 200
    before = head(system)
    refused = client.post("/send", json=body)
    assert (refused.status_code, refused.text) == (
        429,
        "control queue of run a is full (2 undelivered messages)\n",
    )
    assert head(system) == before
    response = client.post(
        "/push-control", json={"id": "m2", "type": "abort", "run_id": "a"}, headers=OPERATOR
    )
    assert response.json() == {"queued": True}
    polled = client.post("/poll-control", json={"run_id": "a", "token": a}).json()
    assert [m["type"] for m in polled] == ["note", "note", "abort"]


def test_push_control_without_an_operator_token_takes_run_credentials(make_client, system):
    client = make_client(operator_token_sha256="")
    token = client.post("/register", json={"run_id": "a"}).json()["token"]
    body = {"id": "m", "type": "t", "run_id": "a"}
    assert client.post("/push-control", json=body, headers=OPERATOR).status_code == 401
    assert client.post("/push-control", json={**body, "token": "x"}).status_code == 401
    assert client.post("/push-control", json={**body, "token": token}).json() == {"queued": True}
    assert system.broker.queue_depth("a") == 1


def test_push_control_without_a_bootstrap_token_needs_an_enrolled_admin(make_client, system, operator):
    # Once an operator is enrolled, run credentials no longer push control: only an admin does.
    client = make_client(operator_token_sha256="")
    token = client.post("/register", json={"run_id": "a"}).json()["token"]
    ada = operator("ada", "admin")
    body = {"id": "m", "type": "t", "run_id": "a"}
    assert client.post("/push-control", json={**body, "token": token}).status_code == 401
    assert client.post("/push-control", json=body, headers=OPERATOR).status_code == 401
    assert client.post("/push-control", json=body, headers=ada).json() == {"queued": True}
    assert [m.sent_by for m in system.broker.get_run("a").control_queue] == [
        f"ada ({credential_id(system, 'ada')})"
    ]


# -- /poll-control --------------------------------------------------------------------------


def test_poll_returns_every_queued_message_oldest_first(client, register, system, clock):
    token = register("a")
    system.broker.push_control("a", ControlMessage("m1", "steer", "a", "", '{"n": 1}'))
    first_at = clock.now()
    clock.advance(1)
    system.broker.push_control("a", ControlMessage("m2", "agent_message", "a", "b", None))
    messages = assert_json(client.post("/poll-control", json={"run_id": "a", "token": token}))
    assert messages == [
        {"id": "m1", "type": "steer", "run_id": "a", "payload": {"n": 1}, "created_at": iso(first_at)},
        {
            "id": "m2",
            "type": "agent_message",
            "run_id": "a",
            "from_run_id": "b",
            "created_at": iso(clock.now()),
        },
    ]
    assert system.broker.queue_depth("a") == 0


def test_an_empty_poll_answers_an_empty_list(client, register):
    token = register("a")
    assert assert_json(client.post("/poll-control", json={"run_id": "a", "token": token})) is None


def iso(when: datetime) -> str:
    return when.isoformat().replace("+00:00", "Z")


# -- /report, /finish, /reply ---------------------------------------------------------------


def test_report(client, register, system):
    token = register("a")
    payload = b'{"n": 18446744073709551617,  "k": [1.50]}'
    raw = b'{"run_id": "a", "token": "%s", "state": "working", "payload": %s}' % (token.encode(), payload)
    assert assert_json(client.post("/report", content=raw)) == {"ok": True}
    (report,) = system.broker.get_run("a").reports
    # The payload is kept byte for byte, as Go's json.RawMessage (a 65-bit integer, spacing).
    assert (report.run_id, report.state, report.payload) == (
        "a",
        "working",
        '{"n": 18446744073709551617,  "k": [1.50]}',
    )


@pytest.mark.parametrize(
    ("extra", "payload"),
    [({}, None), ({"payload": None}, "null"), ({"payload": "s"}, '"s"'), ({"payload": []}, "[]")],
)
def test_report_payload_absent_null_or_any_json(client, register, system, extra, payload):
    token = register("a")
    client.post("/report", json={"run_id": "a", "token": token, "state": "", **extra})
    assert system.broker.get_run("a").reports[0].payload == payload


def test_report_with_a_mistyped_field_is_400(client, register, system):
    token = register("a")
    before = head(system)
    response = client.post("/report", json={"run_id": "a", "token": token, "state": 3})
    assert (response.status_code, text(response)) == (400, "bad request\n")
    assert head(system) == before


def test_finish_is_recorded_as_given(client, register, system):
    token = register("a")
    body = {
        "run_id": "a",
        "token": token,
        "status": "",
        "summary": "s",
        "files_changed": ["x.py"],
        "payload": {},
    }
    assert assert_json(client.post("/finish", json=body)) == {"ok": True}
    (finish,) = system.broker.get_run("a").finishes
    assert (finish.status, finish.summary, finish.files_changed, finish.payload) == ("", "s", ("x.py",), "{}")
    assert system.broker.finish_count("a") == 1
    assert system.broker.last_finish_status("a") == ""


def test_finish_with_mistyped_files_changed_is_400(client, register):
    token = register("a")
    response = client.post(
        "/finish", json={"run_id": "a", "token": token, "status": "done", "files_changed": "x"}
    )
    assert response.status_code == 400


def test_reply(client, register, system):
    token = register("a")
    assert assert_json(
        client.post("/reply", json={"run_id": "a", "token": token, "to": "u", "payload": 1})
    ) == {"ok": True}
    (reply,) = system.broker.get_run("a").replies
    assert (reply.run_id, reply.to, reply.payload) == ("a", "u", "1")


# -- permissions ----------------------------------------------------------------------------


def test_permission_request_becomes_a_permission_approval(client, register, system):
    token = register("a")
    body = {
        "run_id": "a",
        "token": token,
        "request_id": "r1",
        "tool_name": "bash",
        "description": "list files",
        "input_preview": "ls",
    }
    assert assert_json(client.post("/permission_request", json=body)) == {"ok": True}
    (approval,) = system.approvals.pending()
    assert (approval.kind, approval.run_id, approval.tool_call_id, approval.risk) == (
        "permission",
        "a",
        "r1",
        "high",
    )
    state = system.broker.get_run("a").permission_requests["r1"]
    assert (state.tool_name, state.desc, state.preview, state.approval_id) == (
        "bash",
        "list files",
        "ls",
        approval.id,
    )


def test_permission_decision_is_recorded_and_told_to_the_run(client, register, system):
    token = register("a")
    client.post(
        "/permission_request", json={"run_id": "a", "token": token, "request_id": "r1", "tool_name": "read"}
    )
    assert assert_json(
        client.post(
            "/permission", json={"run_id": "a", "token": token, "request_id": "r1", "behavior": "allow"}
        )
    ) == {"ok": True}
    assert system.broker.get_run("a").permission_decisions == {"r1": "allow"}
    assert system.approvals.pending() == []
    messages = client.post("/poll-control", json={"run_id": "a", "token": token}).json()
    assert [(m["type"], m["payload"]) for m in messages] == [
        ("permission_decision", {"request_id": "r1", "behavior": "allow"})
    ]


# -- /send ----------------------------------------------------------------------------------


def test_send_queues_for_the_target_with_the_authenticated_sender(client, register, system):
    a, _ = register("a"), register("b")
    body = {
        "run_id": "a",
        "token": a,
        "from_run_id": "a",
        "to_run_id": "b",
        "type": "agent_message",
        "payload": {"message": "hi"},
    }
    assert assert_json(client.post("/send", json=body)) == {"queued": True}
    (message,) = system.broker.get_run("b").control_queue
    assert HEX32.fullmatch(message.id)
    assert (message.type, message.run_id, message.from_run_id, message.payload) == (
        "agent_message",
        "b",
        "a",
        '{"message":"hi"}',
    )


@pytest.mark.parametrize("missing", ["from_run_id", "to_run_id", "type"])
def test_send_missing_fields_is_400(client, register, system, missing):
    a, _ = register("a"), register("b")
    body = {"run_id": "a", "token": a, "from_run_id": "a", "to_run_id": "b", "type": "t"}
    del body[missing]
    before = head(system)
    response = client.post("/send", json=body)
    assert (response.status_code, text(response)) == (400, "missing fields\n")
    assert head(system) == before


def test_send_from_an_unknown_run_is_404(client, register):
    a = register("a")
    body = {"run_id": "a", "token": a, "from_run_id": "ghost", "to_run_id": "a", "type": "t"}
    response = client.post("/send", json=body)
    assert (response.status_code, text(response)) == (404, "from run not found\n")


def test_send_as_another_run_is_401(client, register, system):
    # Anti-spoofing: a's valid credentials do not let it speak as b.
    a, _, _ = register("a"), register("b"), register("c")
    before = head(system)
    body = {"run_id": "a", "token": a, "from_run_id": "b", "to_run_id": "c", "type": "agent_message"}
    response = client.post("/send", json=body)
    assert (response.status_code, text(response)) == (401, "unauthorized\n")
    assert head(system) == before


def test_send_to_an_unknown_run_is_404_with_its_id(client, register, system):
    a = register("a")
    before = head(system)
    body = {"run_id": "a", "token": a, "from_run_id": "a", "to_run_id": "ghost", "type": "t"}
    response = client.post("/send", json=body)
    assert (response.status_code, text(response)) == (404, "run not found: ghost\n")
    assert head(system) == before


def test_send_to_a_full_queue_is_429(client, register, system):
    a, _ = register("a"), register("b")
    system.broker.queue_limit = 1
    body = {"run_id": "a", "token": a, "from_run_id": "a", "to_run_id": "b", "type": "t"}
    assert client.post("/send", json=body).status_code == 200
    assert client.post("/send", json=body).status_code == 429
