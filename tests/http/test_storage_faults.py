"""Storage faults while serving: 503 with the cause and Retry-After, reads still served, recovery.

In process, SQLite's own limits make the faults (max_page_count: a full database; query_only:
a read-only one) and lifting them clears them; a real `flightlog serve` on a small tmpfs
fills its disk, and gets room again by a remount.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from actors import System
from tests.eventlog.test_bad_files import tmpfs  # noqa: F401 - the fixture

from .conftest import OPERATOR, OPERATOR_TOKEN
from .server import ServerProcess

SUMMARY = "s" * 3000  # a few of these fill a page


@pytest.fixture
def writer(system: System) -> sqlite3.Connection:
    """The log's writer connection (private): SQLite's limits on it make the faults."""
    return system.log._conn  # type: ignore[attr-defined, no-any-return]


@pytest.fixture
def storage_lines(caplog: pytest.LogCaptureFixture) -> Iterator[Callable[[], list[str]]]:
    caplog.set_level(logging.WARNING, logger="flightlog.storage")
    return lambda: [r.getMessage() for r in caplog.records if r.name == "flightlog.storage"]


def report(client: httpx.Client, token: str, summary: str = SUMMARY) -> httpx.Response:
    body = {"run_id": "r1", "token": token, "state": "working", "payload": summary}
    return client.post("/report", json=body)


def fill_up(client: httpx.Client, token: str) -> httpx.Response:
    """Report until even a small report is refused; that refusal."""
    for summary in (SUMMARY, "x"):  # large ones first, then small ones fill what is left
        for _ in range(2000):
            response = report(client, token, summary)
            if response.status_code != 200:
                break
        else:
            raise AssertionError("the database never filled up")
    return response


def assert_unavailable(response: httpx.Response, error: str) -> None:
    assert response.status_code == 503, response.text
    assert response.json() == {"error": error}
    assert response.headers["content-type"] == "application/json"
    assert int(response.headers["retry-after"]) > 0


def test_a_full_database_is_a_503_until_it_has_room(client, register, writer, system, storage_lines):
    token = register("r1")
    (pages,) = writer.execute("PRAGMA page_count").fetchone()
    writer.execute(f"PRAGMA max_page_count = {pages + 8}")
    assert_unavailable(fill_up(client, token), "disk full: nothing was written")
    # Filling took a few incidents (a large report refused, small ones still fitting): from
    # here on the disk stays full, and the refusals below add no line.
    logged = len(storage_lines())
    head = system.log.head()
    for _ in range(5):
        assert_unavailable(report(client, token), "disk full: nothing was written")
    assert_unavailable(client.post("/register", json={"run_id": "r2"}), "disk full: nothing was written")
    # Reads keep working while writes fail.
    runs = client.get("/api/v1/runs", headers=OPERATOR)
    assert runs.status_code == 200
    assert [r["run_id"] for r in runs.json()["runs"]] == ["r1"]
    assert client.get("/api/v1/verify", headers=OPERATOR).json()["ok"] is True
    assert system.log.head() == head  # nothing was written by the refused requests
    assert len(storage_lines()) == logged, storage_lines()
    assert "disk full" in storage_lines()[-1]

    writer.execute("PRAGMA max_page_count = 1000000")
    assert report(client, token, "roomy").status_code == 200
    assert client.post("/register", json={"run_id": "r2"}).status_code == 200
    lines = storage_lines()
    assert len(lines) == logged + 1, lines
    assert "cleared" in lines[-1]
    assert system.log.verify().ok


def test_a_read_only_database_is_a_503_until_it_can_be_written(client, register, writer, storage_lines):
    token = register("r1")
    writer.execute("PRAGMA query_only = 1")
    for _ in range(3):
        assert_unavailable(report(client, token, "x"), "database is read-only: nothing was written")
    assert client.get("/api/v1/runs/r1", headers=OPERATOR).status_code == 200
    assert len(storage_lines()) == 1
    writer.execute("PRAGMA query_only = 0")
    assert report(client, token, "x").status_code == 200
    assert "cleared" in storage_lines()[-1]


def test_a_fault_behind_an_actor_error_is_a_503(client, register, writer):
    # The approval gate wraps the failed append of a request in its own error: still a storage fault.
    token = register("r1")
    writer.execute("PRAGMA query_only = 1")
    body = {"run_id": "r1", "token": token, "request_id": "q1", "tool_name": "sh", "input_preview": "ls"}
    response = client.post("/permission_request", json=body)
    writer.execute("PRAGMA query_only = 0")
    assert_unavailable(response, "database is read-only: nothing was written")


def test_a_server_on_a_full_disk_answers_503_and_recovers(tmpfs: Callable[..., Path]):  # noqa: F811
    folder = tmpfs("size=512k")
    server = ServerProcess(folder / "flightlog.db", OPERATOR_TOKEN)
    try:
        token = server.client.post("/register", json={"run_id": "r1"}).json()["token"]
        refused = fill_up(server.client, token)
        assert_unavailable(refused, "disk full: nothing was written")
        for _ in range(20):
            assert_unavailable(report(server.client, token), "disk full: nothing was written")
        assert server.client.get("/api/v1/runs", headers=OPERATOR).status_code == 200
        tmpfs("size=16m")
        assert report(server.client, token, "roomy").status_code == 200
        assert server.stop() == 0
    finally:
        server.close()
    err = "".join(server.stderr)
    assert "Traceback" not in err, err
    faults = [line for line in server.stderr if "storage fault" in line]
    # An incident starts and clears; filling may take two (small reports fit after a large one
    # was refused), but the 20 refusals of a full disk add no line of their own.
    assert 2 <= len(faults) <= 4, faults
    assert all("disk full" in line for line in faults[0::2]), faults
    assert all("cleared" in line for line in faults[1::2]), faults
    assert "cleared" in faults[-1]
