"""`flightlog runs create|revoke|rekey`: on a database file and through a running server.

The token is the product of `create` and `rekey`: it is stdout, alone (or in --json), and it
reaches no argv, no event and no error. `flightlog runs DB` still lists the runs, now with
who created each and whether its token is revoked.
"""

from __future__ import annotations

import getpass
import re
from collections.abc import Iterator

import pytest

from actors import System
from eventlog import open_log
from tests.http.server import ServerProcess

from .helpers import json_of, run

TOKEN = re.compile(r"[0-9a-f]{32}\n")
OPERATOR_TOKEN = "cli-runs-operator-0123456789abcdef"


@pytest.fixture
def empty(tmp_path) -> str:
    path = str(tmp_path / "runs.db")
    open_log(path).close()
    return path


def authenticates(db: str, run_id: str, token: str) -> bool:
    with System.open(db, scheduler=False) as system:
        return system.broker.authenticate(run_id, token)


def test_create_prints_the_token_alone_and_records_who(empty):
    created = run("runs", "create", empty, "deployer")
    assert created.exit_code == 0, created.output
    assert TOKEN.fullmatch(created.stdout)
    token = created.stdout.strip()
    assert "shown only now" in created.stderr
    assert authenticates(empty, "deployer", token)
    with open_log(empty) as log:
        [record] = list(log.read("run-deployer"))
    assert (record.data["origin"], record.data["by"]) == ("local", f"local:{getpass.getuser()}")
    assert token not in str(record.data)
    listed = json_of(run("runs", empty, "--json"))["runs"]
    assert [(r["run_id"], r["origin"], r["revoked"]) for r in listed] == [("deployer", "local", False)]
    table = run("runs", empty)
    assert f"local local:{getpass.getuser()}" in table.stdout


def test_create_with_db_option_and_json(empty):
    created = run("runs", "create", "--db", empty, "worker", "--json")
    assert created.exit_code == 0, created.output
    answer = json_of(created)
    assert list(answer) == ["run_id", "token"]
    assert authenticates(empty, "worker", answer["token"])


def test_create_refuses_an_existing_run_and_a_bad_id(empty):
    assert run("runs", "create", empty, "deployer").exit_code == 0
    again = run("runs", "create", empty, "deployer")
    assert again.exit_code == 1
    assert "already registered" in again.stderr
    assert again.stdout == ""
    bad = run("runs", "create", empty, "a\x1bb")
    assert bad.exit_code == 2
    assert bad.stdout == ""


def test_revoke_and_rekey_on_the_database(empty):
    token = run("runs", "create", empty, "deployer").stdout.strip()
    revoked = run("runs", "revoke", empty, "deployer", "--reason", "leaked in a CI log")
    assert revoked.exit_code == 0, revoked.output
    assert not authenticates(empty, "deployer", token)
    assert json_of(run("runs", "list", empty, "--json"))["runs"][0]["revoked"] is True
    rekeyed = run("runs", "rekey", empty, "deployer")
    assert rekeyed.exit_code == 0, rekeyed.output
    assert TOKEN.fullmatch(rekeyed.stdout)
    new = rekeyed.stdout.strip()
    assert authenticates(empty, "deployer", new)
    assert not authenticates(empty, "deployer", token)
    with open_log(empty) as log:
        revocation = next(r for r in log.read("run-deployer") if r.type == "RunTokenRevoked")
    assert revocation.data["reason"] == "leaked in a CI log"
    assert revocation.data["by"] == f"local:{getpass.getuser()}"


def test_an_unknown_run_or_a_missing_database_is_a_usage_error(empty, tmp_path):
    for command in ("revoke", "rekey"):
        result = run("runs", command, empty, "ghost")
        assert result.exit_code == 2, result.output
        assert "no run 'ghost'" in result.stderr
    missing = str(tmp_path / "missing.db")
    result = run("runs", "create", missing, "x")
    assert result.exit_code == 2
    assert f"no database at {missing!r}" in result.stderr
    assert run("runs", "create", "x").exit_code == 2  # neither DB nor --server


@pytest.fixture
def server(tmp_path) -> Iterator[ServerProcess]:
    served = ServerProcess(tmp_path / "served.db", OPERATOR_TOKEN, registration="enrolled")
    yield served
    served.close()


@pytest.mark.slow
def test_through_a_server_with_the_token_from_the_environment(server):
    env = {"FLIGHTLOG_OPERATOR_TOKEN": OPERATOR_TOKEN}
    created = run("runs", "create", "--server", server.url, "deployer", env=env)
    assert created.exit_code == 0, created.output
    assert TOKEN.fullmatch(created.stdout)
    token = created.stdout.strip()
    body = {"run_id": "deployer", "token": token}
    assert server.client.post("/register", json=body).status_code == 200
    assert server.client.post("/report", json={**body, "state": "working"}).status_code == 200
    revoked = run("runs", "revoke", "--server", server.url, "deployer", "--reason", "leaked", env=env)
    assert revoked.exit_code == 0, revoked.output
    assert server.client.post("/report", json={**body, "state": "working"}).status_code == 401
    rekeyed = run("runs", "rekey", "--server", server.url, "deployer", "--json", env=env)
    new = json_of(rekeyed)["token"]
    assert server.client.post("/report", json={**body, "token": new, "state": "working"}).status_code == 200
    assert run("runs", "rekey", "--server", server.url, "ghost", env=env).exit_code == 2
    assert run("runs", "create", "--server", server.url, "deployer", env=env).exit_code == 1
    # Without the token in the environment: a usage error, and no token is read from argv.
    assert run("runs", "create", "--server", server.url, "other").exit_code == 2
    # An enroller creates runs and nothing else.
    enroller = server.client.post(
        "/api/v1/operators",
        json={"name": "orchestrator", "role": "enroller"},
        headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"},
    )
    assert enroller.status_code == 201, enroller.text
    as_enroller = {"FLIGHTLOG_OPERATOR_TOKEN": enroller.json()["token"]}
    assert run("runs", "create", "--server", server.url, "worker-1", env=as_enroller).exit_code == 0
    refused = run("runs", "revoke", "--server", server.url, "worker-1", env=as_enroller)
    assert refused.exit_code == 2
    assert "refused" in refused.stderr
    detail = server.client.get("/api/v1/runs/worker-1", headers={"Authorization": f"Bearer {OPERATOR_TOKEN}"})
    assert (detail.json()["origin"], detail.json()["created_by"]) == ("enrolment", "orchestrator")
