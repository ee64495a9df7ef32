"""Fixtures for the HTTP tests: a System on a file, the app over it, sync clients in process."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import anyio.from_thread
import httpx
import pytest

from actors import System
from actors.operators import APPROVER
from eventlog import ManualClock, open_log
from tests.conftest import drop_pg_schema, new_pg_schema, pg_schema_url, pg_unavailable, require_or_skip
from tools.http.app import create_app

OPERATOR_TOKEN = "operator-0123456789abcdef-secret"
OPERATOR_DIGEST = hashlib.sha256(OPERATOR_TOKEN.encode()).hexdigest()
OPERATOR = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}
# The bootstrap token's credential: the admin named `bootstrap`, credential id `bootstrap`.
BOOTSTRAP = "bootstrap"
BASE = "http://flightlog.test"
# What an agent sends with every body, raw ones too (the wire protocol takes only JSON).
AGENT_HEADERS = {"Content-Type": "application/json"}
# Short, so that an empty poll answers quickly; tests of the wait itself build their own app.
TEST_POLL_TIMEOUT = 0.2


class PortalTransport(httpx.BaseTransport):
    """Runs httpx's ASGI transport on an anyio portal's loop, so tests stay synchronous."""

    def __init__(self, app: Any, portal: anyio.from_thread.BlockingPortal) -> None:
        self._inner = httpx.ASGITransport(app=app)
        self._portal = portal

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        async def roundtrip() -> httpx.Response:
            response = await self._inner.handle_async_request(request)
            body = await response.aread()
            return httpx.Response(response.status_code, headers=response.headers, content=body)

        return self._portal.call(roundtrip)


def operator_token(name: str) -> str:
    """The fixed token the tests give operator `name`: 64 hex digits, distinct per name."""
    return hashlib.sha256(f"flightlog-test-operator:{name}".encode()).hexdigest()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def portal() -> Iterator[anyio.from_thread.BlockingPortal]:
    with anyio.from_thread.start_blocking_portal() as p:
        yield p


@pytest.fixture
def system(tmp_path, clock: ManualClock) -> Iterator[System]:
    # No scheduler thread: deadlines fire only when a test moves the clock and ticks.
    with System.open(tmp_path / "flightlog.db", clock=clock, scheduler=False) as s:
        yield s


@pytest.fixture
def operator(system: System) -> Callable[..., dict[str, str]]:
    """Enrol operator `name` with `role` (once per test) and return the headers of their token.

    Each name gets its own credential, so two names are two people to a quorum; the recorded
    identity of their decisions is `system.operators.get(name).credential_id`.
    """
    enrolled: dict[str, dict[str, str]] = {}

    def enrol(name: str, role: str = APPROVER) -> dict[str, str]:
        if name not in enrolled:
            system.operators.enrol(name, role, by="tests", token=operator_token(name))
            enrolled[name] = bearer(operator_token(name))
        return enrolled[name]

    return enrol


def credential_id(system: System, name: str) -> str:
    """The credential id of operator `name`, as decisions record it in `identity`."""
    credential = system.operators.get(name)
    assert credential is not None, f"{name} is not enrolled"
    return credential.credential_id


@pytest.fixture
def make_app(system: System) -> Callable[..., Any]:
    def make(**options: Any) -> Any:
        options.setdefault("operator_token_sha256", OPERATOR_DIGEST)
        options.setdefault("poll_timeout", TEST_POLL_TIMEOUT)
        # These tests speak the seed's protocol, where an agent registers a new run itself;
        # a server takes enrolled runs only by default (tests/http/test_run_enrolment.py).
        options.setdefault("registration", "open")
        return create_app(system, **options)

    return make


@pytest.fixture
def make_client(portal, make_app) -> Iterator[Callable[..., httpx.Client]]:
    clients: list[httpx.Client] = []

    def make(**options: Any) -> httpx.Client:
        client = httpx.Client(
            transport=PortalTransport(make_app(**options), portal), base_url=BASE, headers=AGENT_HEADERS
        )
        clients.append(client)
        return client

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def client(make_client: Callable[..., httpx.Client]) -> httpx.Client:
    return make_client()


@pytest.fixture
def register(client: httpx.Client) -> Callable[..., str]:
    """Register a run over HTTP and return its token."""

    def reg(run_id: str, token: str | None = None) -> str:
        body = {"run_id": run_id} if token is None else {"run_id": run_id, "token": token}
        response = client.post("/register", json=body)
        assert response.status_code == 200, response.text
        return str(response.json()["token"])

    return reg


def head(system: System) -> int:
    """The log's head seq: unchanged means nothing was appended."""
    return system.log.head().seq


AUTHED = [
    "/heartbeat",
    "/poll-control",
    "/report",
    "/finish",
    "/reply",
    "/permission_request",
    "/permission",
    "/send",
]
POST_ONLY = ["/register", "/push-control", *AUTHED]
HEX32 = re.compile(r"[0-9a-f]{32}")


def text(response: httpx.Response) -> str:
    assert response.headers["content-type"] == "text/plain; charset=utf-8"
    return str(response.text)


def assert_json(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    return response.json()


@pytest.fixture
def pg_database() -> Iterator[str]:
    """A fresh schema on the PostgreSQL test server, migrated before either server starts."""
    if reason := pg_unavailable():
        require_or_skip(reason)
    schema = new_pg_schema()
    url = pg_schema_url(schema)
    open_log(url).close()
    yield url
    drop_pg_schema(schema)
