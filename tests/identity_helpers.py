"""Helpers for the operator-identity tests: enrolled operators, quorum approvals, real servers, sessions."""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from click.testing import CliRunner, Result

from actors import ApprovalRequest, System
from eventlog import open_log
from tests.http.server import ServerProcess
from tools.cli import cli

TOKEN_ENV = "FLIGHTLOG_OPERATOR_TOKEN"
CSRF_HEADER = "X-Flightlog-CSRF"


def strong_token() -> str:
    """A bootstrap token the server accepts (32 printable characters, 128 random bits)."""
    return secrets.token_hex(16)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def flightlog(*args: str, token: str | None = None) -> Result:
    """`flightlog ARGS` in process, with `token` (or no token at all) in FLIGHTLOG_OPERATOR_TOKEN.

    Exceptions other than SystemExit propagate: a traceback fails the test instead of passing
    as a non-zero exit.
    """
    env: dict[str, str | None] = {"COLUMNS": "250", TOKEN_ENV: token}
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env=env)


def new_db(path: Path) -> str:
    """An empty, migrated log file; its path."""
    open_log(path).close()
    return str(path)


def enrol(db: str, name: str, role: str) -> str:
    """`flightlog operators add DB NAME --role ROLE` (before the server starts); the token it prints."""
    result = flightlog("operators", "add", db, name, "--role", role)
    assert result.exit_code == 0, result.output
    token = result.stdout.strip()
    assert re.fullmatch(r"[0-9a-f]{64}", token), result.stdout  # the token alone, once
    return token


def seed_quorum_approvals(db: str, *titles: str) -> list[str]:
    """A published two-person approval per title, as a controller's reconcile asks for one; their ids."""
    ids = []
    with System.open(db, scheduler=False, approval_timeout=900.0) as system:
        for title in titles:
            request = ApprovalRequest("deploy", title, f"{title} to prod", "high", requires_fleet_quorum=True)
            approval = system.approvals.submit(request, requested_by="ci")
            ids.append(approval.id)
    return ids


def create_run(db: str, run_id: str) -> str:
    """A run created on the database before the server starts, as an orchestrator would; its token."""
    with System.open(db, scheduler=False) as system:
        return system.broker.register(run_id)


@contextmanager
def served(db: str, bootstrap: str | None, *args: str) -> Iterator[ServerProcess]:
    """`flightlog serve` over `db`, stopped (and its output complete) when the block ends."""
    server = ServerProcess(db, bootstrap, args)
    try:
        yield server
    finally:
        if server.proc.poll() is None:
            server.stop()
        server.close()


def history_row(server: ServerProcess, token: str, approval_id: str) -> dict[str, Any]:
    response = server.client.get("/api/v1/approvals/history", headers=bearer(token))
    assert response.status_code == 200, response.text
    return next(a for a in response.json()["approvals"] if a["id"] == approval_id)


def pending_ids(server: ServerProcess, token: str) -> list[str]:
    response = server.client.get("/api/v1/approvals", headers=bearer(token))
    assert response.status_code == 200, response.text
    return [a["id"] for a in response.json()["approvals"]]


class ConsoleSession:
    """A console session held by an httpx client, as the page holds it: the cookie and the CSRF secret."""

    def __init__(self, url: str, token: str) -> None:
        self.client = httpx.Client(base_url=url, timeout=30)
        response = self.client.post("/ui/login", json={"token": token})
        assert response.status_code == 200, response.text
        self.login = response.json()
        self.csrf: str = self.login["csrf"]
        self.set_cookie = response.headers["set-cookie"]

    def get(self, path: str) -> httpx.Response:
        return self.client.get(path, headers={CSRF_HEADER: self.csrf})

    def post(self, path: str, body: Any = None) -> httpx.Response:
        return self.client.post(path, json={} if body is None else body, headers={CSRF_HEADER: self.csrf})

    def close(self) -> None:
        self.client.close()
