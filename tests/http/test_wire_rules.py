"""The wire protocol's general rules in process: methods, credentials, JSON, body size, isolation (§1.9)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
import pytest

from actors import ControlMessage
from tools.http.wire import MAX_BODY

from .conftest import AGENT_HEADERS, AUTHED, OPERATOR, POST_ONLY, assert_json, head, text

# -- general rules --------------------------------------------------------------------------


@pytest.mark.parametrize("path", POST_ONLY)
@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "BREW"])
def test_wrong_method_is_405(client, system, path, method):
    before = head(system)
    response = client.request(method, path)
    assert response.status_code == 405
    if method != "HEAD":
        assert text(response) == "method not allowed\n"
    assert head(system) == before


def test_method_guard_comes_before_auth(client, register, system):
    # Valid credentials in the query of a GET still meet the method guard first, as in the seed.
    token = register("a")
    before = head(system)
    response = client.get("/report", params={"run_id": "a", "token": token, "state": "x"})
    assert response.status_code == 405
    assert head(system) == before


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "DELETE", "BREW"])
def test_health_answers_ok_to_any_method(client, method):
    response = client.request(method, "/health")
    assert response.status_code == 200
    assert text(response) == "ok"


def test_unknown_path_and_trailing_slash_are_plain_404(client):
    for path in ("/nope", "/register/", "/api"):
        response = client.post(path, json={})
        assert response.status_code == 404
        assert text(response) == "404 page not found\n"


@pytest.mark.parametrize("path", AUTHED)
@pytest.mark.parametrize(
    "body",
    [{}, {"run_id": "a"}, {"token": "t"}, {"run_id": "", "token": "t"}, {"run_id": "a", "token": None}, None],
)
def test_missing_credentials_are_401(client, register, system, path, body):
    register("a")
    before = head(system)
    response = client.post(path, content=orjson.dumps(body))
    assert response.status_code == 401
    assert text(response) == "unauthorized: missing run_id or token\n"
    assert head(system) == before


@pytest.mark.parametrize("path", AUTHED)
@pytest.mark.parametrize(
    "creds",
    [
        ("a", "0" * 32),
        ("ghost", "chosen-token-sixteen"),
        ("a", "chösen-token-sixteen"),
        ("a", "CHOSEN-TOKEN-SIXTEEN"),
        ("a", "chosen"),
    ],
)
def test_bad_credentials_are_401(client, register, system, path, creds):
    register("a", "chosen-token-sixteen")
    run_id, token = creds
    before = head(system)
    response = client.post(path, json={"run_id": run_id, "token": token, "to_run_id": "a"})
    assert response.status_code == 401
    assert text(response) == "unauthorized\n"
    assert head(system) == before


@pytest.mark.parametrize("path", ["/register", "/push-control", *AUTHED])
@pytest.mark.parametrize(
    "raw", [b"", b"{", b"not json", b"[1, 2]", b'"run"', b"1", b'{"run_id": 5, "token": "t"}', b"\xff\xfe"]
)
def test_bad_json_is_400(client, system, path, raw):
    before = head(system)
    response = client.post(path, content=raw, headers=OPERATOR)
    assert response.status_code == 400
    assert text(response) == "bad request\n"
    assert head(system) == before


@pytest.mark.parametrize("path", ["/register", "/push-control", *AUTHED])
def test_body_over_one_mebibyte_is_413(client, register, system, path):
    token = register("a")
    before = head(system)
    body = orjson.dumps({"run_id": "a", "token": token, "state": "x" * MAX_BODY})
    response = client.post(path, content=body, headers=OPERATOR)
    assert response.status_code == 413
    assert text(response) == "request body too large\n"
    assert head(system) == before


def test_declared_content_length_over_the_limit_is_413_before_reading(client, system):
    # The declared length alone decides: the (small) body is never looked at.
    before = head(system)
    response = client.post(
        "/register", content=b'{"run_id": "a"}', headers={"Content-Length": str(MAX_BODY + 1)}
    )
    assert response.status_code == 413
    assert head(system) == before


def test_streamed_body_over_the_limit_is_413(make_app, portal, system):
    import httpx

    async def go() -> int:
        async def chunks() -> AsyncIterator[bytes]:
            yield b'{"run_id": "a", "pad": "'
            for _ in range(20):
                yield b"x" * (64 * 1024)
            yield b'"}'

        transport = httpx.ASGITransport(app=make_app())
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            response = await c.post("/register", content=chunks(), headers=AGENT_HEADERS)
            assert "content-length" not in response.request.headers  # chunked: no length to check
            return response.status_code

    before = head(system)
    assert portal.call(go) == 413
    assert head(system) == before


def test_a_body_of_exactly_one_mebibyte_is_accepted(client, register):
    token = register("a")
    prefix = orjson.dumps({"run_id": "a", "token": token, "state": "s"})[:-1] + b', "pad": "'
    body = prefix + b"x" * (MAX_BODY - len(prefix) - 2) + b'"}'
    assert len(body) == MAX_BODY
    assert assert_json(client.post("/report", content=body)) == {"ok": True}


def test_query_credentials_authenticate_a_get(make_app, portal, system, register):
    # No v0.20.2 path is GET-and-authenticated; the rule itself (query for GET) is checked
    # on a route built from the same guard.
    import httpx
    from starlette.applications import Starlette
    from starlette.routing import Route

    from tools.http.broker import BrokerRoutes
    from tools.http.wire import Endpoint, json_response

    from .conftest import PortalTransport

    token = register("a")
    routes = BrokerRoutes(system.broker, "")

    async def whoami(request):
        await routes.authenticated(request)
        return json_response({"run_id": request.query_params["run_id"]})

    app = Starlette(routes=[Route("/whoami", Endpoint(whoami, ("GET",)))])
    with httpx.Client(transport=PortalTransport(app, portal), base_url="http://t") as c:
        assert c.get("/whoami", params={"run_id": "a", "token": token}).json() == {"run_id": "a"}
        assert c.get("/whoami", params={"run_id": "a", "token": "x"}).status_code == 401
        missing = c.get("/whoami", params={"run_id": "a"})
        assert (missing.status_code, missing.text) == (401, "unauthorized: missing run_id or token\n")


# -- isolation ------------------------------------------------------------------------------


@pytest.mark.parametrize("path", AUTHED)
def test_a_runs_token_does_not_act_as_another_run(client, register, system, path):
    a, b = register("a"), register("b")
    system.broker.push_control("b", ControlMessage("m", "t", "b"))
    before = head(system)
    body = {
        "run_id": "b",
        "token": a,
        "from_run_id": "b",
        "to_run_id": "a",
        "type": "t",
        "state": "s",
        "status": "done",
        "to": "x",
        "request_id": "r",
        "behavior": "allow",
    }
    response = client.post(path, json=body)
    assert (response.status_code, text(response)) == (401, "unauthorized\n")
    assert head(system) == before
    assert system.broker.queue_depth("b") == 1  # b's message was not taken by a's poll
    assert b != a
