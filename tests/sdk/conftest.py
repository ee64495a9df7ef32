"""A real `flightlog serve` for the SDK, the hook and the MCP server, and operators who decide."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.http.server import ServerProcess

OPERATOR_TOKEN = "sdk-operator-0123456789abcdef-secret"
BOOTSTRAP = {"Authorization": f"Bearer {OPERATOR_TOKEN}"}


class Served:
    """The server, its URL, and operators enrolled through its API."""

    def __init__(self, server: ServerProcess) -> None:
        self.server = server
        self.url = server.url
        json = {"Content-Type": "application/json"}
        self.http = httpx.Client(base_url=server.url, timeout=30, headers=json)
        self.operators: dict[str, dict[str, str]] = {}

    def operator(self, name: str) -> dict[str, str]:
        """The headers of approver `name`, enrolled with the bootstrap token on first use."""
        if name not in self.operators:
            response = self.http.post(
                "/api/v1/operators", json={"name": name, "role": "approver"}, headers=BOOTSTRAP
            )
            assert response.status_code == 201, response.text
            self.operators[name] = {"Authorization": f"Bearer {response.json()['token']}"}
        return self.operators[name]

    def pending(self, run_id: str) -> dict[str, str]:
        """The run's pending approvals: request id -> approval id."""
        response = self.http.get("/api/v1/approvals", headers=BOOTSTRAP)
        assert response.status_code == 200, response.text
        rows = response.json()["approvals"]
        return {a["tool_call_id"]: a["id"] for a in rows if a["run_id"] == run_id}

    def decide(self, approval_id: str, decision: str, operator: str) -> httpx.Response:
        # No actor in the body: the operator's own token says who decides.
        return self.http.post(f"/api/v1/approvals/{approval_id}/{decision}", headers=self.operator(operator))

    def history(self, approval_id: str) -> dict[str, Any]:
        rows = self.http.get("/api/v1/approvals/history", headers=BOOTSTRAP).json()["approvals"]
        return next(r for r in rows if r["id"] == approval_id)

    def run(self, run_id: str) -> dict[str, Any]:
        response = self.http.get(f"/api/v1/runs/{run_id}", headers=BOOTSTRAP)
        assert response.status_code == 200, response.text
        return dict(response.json())


@contextlib.contextmanager
def serving(folder: Path) -> Iterator[Served]:
    """A fresh server on a database in `folder`, its bootstrap token OPERATOR_TOKEN; closed after."""
    server = ServerProcess(
        folder / "flightlog.db", OPERATOR_TOKEN, ("--approval-timeout", "120", "--no-access-log")
    )
    served = Served(server)
    try:
        yield served
    finally:
        served.http.close()
        server.close()


@pytest.fixture(scope="package")
def served(tmp_path_factory) -> Iterator[Served]:
    """One server for the package's tests (each uses its own run ids): starting one costs seconds."""
    with serving(tmp_path_factory.mktemp("sdk")) as served:
        yield served
