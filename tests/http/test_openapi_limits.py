"""The OpenAPI document lists every limit's answer where a route can give it, and a real
`flightlog serve` answers only what its document lists (413, 429 with Retry-After, 503)."""

from __future__ import annotations

import pytest

from tools.http.openapi import openapi_document

from .conftest import OPERATOR, OPERATOR_TOKEN
from .server import ServerProcess

# The run's writes that are charged to its quotas: bounded fields, and its bucket of writes.
CHARGED = ("/report", "/finish", "/reply", "/permission_request", "/permission", "/send")
RATED = ("/heartbeat", *CHARGED)


@pytest.fixture(scope="module")
def document():
    return openapi_document()


def responses(document, path: str, method: str = "post") -> dict:
    return document["paths"][path][method]["responses"]


def test_the_rate_and_field_limits_are_listed_on_each_charged_write(document):
    for path in RATED:
        answer = responses(document, path)["429"]
        assert "Retry-After" in answer["headers"], path
        assert "--events-per-second" in answer["description"], path
    for path in CHARGED:
        assert "--max-payload" in responses(document, path)["413"]["description"], path
    assert "--max-peer-field" in responses(document, "/register")["413"]["description"]
    assert "--max-open-permissions" in responses(document, "/permission_request")["429"]["description"]
    assert "--queue-share" in responses(document, "/send")["429"]["description"]


def test_every_body_is_bounded_and_every_route_may_fail_on_storage(document):
    for path, item in document["paths"].items():
        for method, operation in item.items():
            answers = operation["responses"]
            if path not in ("/health", "/openapi.json"):  # neither touches the log
                assert "Retry-After" in answers["503"]["headers"], (method, path)
            if "requestBody" in operation:  # a body read is a body bounded
                assert "413" in answers, (method, path)
            if path.startswith("/api/"):  # the throttle of failed operator authentications
                assert "Retry-After" in answers["429"]["headers"], (method, path)


def test_the_lists_and_the_run_detail_document_their_pages(document):
    def names(path: str, method: str = "get") -> set[str]:
        return {p["name"] for p in document["paths"][path][method].get("parameters", [])}

    assert {"after", "limit"} <= names("/api/v1/approvals")
    assert {"after", "limit"} <= names("/api/v1/approvals/history")
    assert {"after", "limit", "X-Run-Id"} <= names("/sessions")
    assert {"after", "limit"} <= names("/sessions", "post")
    assert {"limit", "before"} <= names("/api/v1/runs/{run_id}")
    detail = document["components"]["schemas"]["RunDetail"]["allOf"][1]["properties"]
    assert "next_before" in detail["page"]["properties"]


@pytest.mark.slow
def test_a_server_over_its_limits_answers_what_its_document_lists(tmp_path, document):
    # One write per 100 s after a burst of two: whatever the machine's pace, the third is refused.
    args = ("--events-per-second", "0.01", "--burst", "2", "--max-payload", "32")
    server = ServerProcess(tmp_path / "limits.db", OPERATOR_TOKEN, args)
    try:
        token = server.client.post("/register", json={"run_id": "r"}).json()["token"]
        creds = {"run_id": "r", "token": token}
        big = server.client.post("/report", json={**creds, "state": "s", "payload": {"x": "y" * 64}})
        assert big.status_code == 413, big.text
        assert "413" in responses(document, "/report")
        answers = [server.client.post("/report", json={**creds, "state": "s"}) for _ in range(3)]
        assert [a.status_code for a in answers] == [200, 200, 429]
        assert int(answers[2].headers["Retry-After"]) >= 1
        assert "Retry-After" in responses(document, "/report")["429"]["headers"]
        beat = server.client.post("/heartbeat", json=creds)
        assert beat.status_code == 429
        assert "Retry-After" in beat.headers
        listed = server.client.get("/openapi.json").json()
        assert listed["paths"]["/heartbeat"]["post"]["responses"]["429"]["headers"]
        assert server.client.get("/api/v1/verify", headers=OPERATOR).json()["ok"] is True
    finally:
        server.close()
