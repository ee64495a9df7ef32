"""`--server URL`: the commands that read and decide through a live server's operator API print what
they print on the database file, with the same exit codes; the token comes from the environment."""

from __future__ import annotations

import hashlib

import pytest

from actors import System
from eventlog import open_log
from tools.cli import decide as _cli_decide
from tools.demo.background import BackgroundServer
from tools.http import check_log
from tools.http.app import create_app

from .helpers import TOKEN, TOKEN_ENV, json_of, run, seed_approval

AUTH = {TOKEN_ENV: TOKEN}


@pytest.fixture
def server(db):
    """A live server over the seeded log (no scheduler: nothing is appended behind the test's back),
    verified before it serves as `flightlog serve` does."""
    system = System.open(db, scheduler=False)
    digest = hashlib.sha256(TOKEN.encode()).hexdigest()
    app = create_app(system, operator_token_sha256=digest, integrity=check_log(system.log))
    try:
        with BackgroundServer(app) as background:
            yield background.url
    finally:
        system.close()


def on_server(url: str, *args: str, env: dict[str, str | None] | None = None):
    return run(*args, "--server", url, env={**AUTH, **(env or {})})


@pytest.mark.parametrize(
    "command",
    [
        ["approvals", "--all", "--json"],
        ["approvals", "--all"],
        ["audit", "--json"],
        ["audit", "--run", "RUN"],
        ["verify", "--json"],
        ["verify"],
        ["runs", "--json"],
        ["runs", "--at", "120", "--json"],
        ["runs", "--at", "2026-01-01T10:00:30Z"],
        ["timeline", "RUN", "--json"],
        ["timeline", "RUN", "--at", "150", "--json"],
        ["timeline", "RUN", "--at", "150"],
        ["timeline", "RUN", "--each", "--json"],
    ],
)
def test_reads_print_the_same_as_on_the_database(db, server, seeded, command):
    name, *rest = [seeded.run if arg == "RUN" else arg for arg in command]
    direct = run(name, db, *rest)
    remote = on_server(server, name, *rest)
    assert (remote.exit_code, direct.exit_code) == (0, 0), remote.output + direct.output
    assert remote.stdout == direct.stdout
    assert TOKEN not in remote.output


def test_pending_approvals_through_the_server(db, server):
    first, second = seed_approval(db), seed_approval(db, expires_in=600)
    rows = json_of(on_server(server, "approvals", "--json"))
    assert [r["id"] for r in rows] == [first, second]
    assert 0 < rows[0]["expires_in_s"] <= 300
    direct = json_of(run("approvals", db, "--json"))
    assert [{k: v for k, v in r.items() if k != "expires_in_s"} for r in rows] == [
        {k: v for k, v in r.items() if k != "expires_in_s"} for r in direct
    ]


def test_decisions_through_the_server(db, server):
    pending = seed_approval(db)
    decided = json_of(on_server(server, "approve", pending, "--as", "alice", "--json"))
    assert decided["status"] == "decided"
    assert (decided["id"], decided["decision"], decided["actor"]) == (pending, "approve", "alice")
    assert decided["identity"] == "operator-token"  # how the server authenticated it
    assert decided["payload_sha256"] == "ab" * 32
    assert decided["run_id"] == "run-1"

    again = on_server(server, "reject", pending, "--as", "bob")
    assert again.exit_code == _cli_decide.EXIT_DECIDED
    assert "already decided: approve by 'alice'" in again.stderr

    unknown = on_server(server, "approve", "no-such-approval", "--as", "alice", "--json")
    assert unknown.exit_code == _cli_decide.EXIT_UNKNOWN
    assert json_of(unknown)["error"] == "unknown"

    other = seed_approval(db)
    rejected = on_server(server, "reject", other, "--as", "carol")
    assert rejected.exit_code == 0
    assert f"rejected {other} (run run-1): shell 'rm -rf build' by carol" in rejected.stdout
    with open_log(db) as log:
        assert log.verify().ok


def test_a_quorum_vote_and_a_duplicate_vote_through_the_server(db, server):
    pending = seed_approval(db, quorum=2)
    vote = json_of(on_server(server, "approve", pending, "--as", "alice", "--json"))
    assert (vote["status"], vote["votes"], vote["needed"]) == ("vote_recorded", 1, 2)
    again = on_server(server, "approve", pending, "--as", "alice")
    assert again.exit_code == _cli_decide.EXIT_DUPLICATE_VOTE
    assert "'alice' has already approved" in again.stderr
    assert on_server(server, "approve", pending, "--as", "bob").exit_code == 0


def test_an_expired_approval_through_the_server(db, server):
    pending = seed_approval(db, expires_in=0.001)
    result = on_server(server, "approve", pending, "--as", "alice")
    assert result.exit_code == _cli_decide.EXIT_EXPIRED
    assert "expired" in result.stderr


def test_verify_against_an_anchor_through_the_server(db, server, tmp_path, seeded):
    anchor = tmp_path / "anchor.txt"
    anchor.write_text(run("anchor", db).stdout)
    assert on_server(server, "verify", "--anchor", str(anchor)).exit_code == 0
    anchor.write_text(f"{seeded.head} {'0' * 64}")
    result = on_server(server, "verify", "--anchor", str(anchor), "--json")
    assert result.exit_code == 1
    assert json_of(result)["reason"] == "hash differs from the anchor"
    anchor.write_text(f"{seeded.head + 5} {'0' * 64}")
    result = on_server(server, "verify", "--anchor", str(anchor))
    assert result.exit_code == 1
    assert f"log ends at seq {seeded.head}" in result.stdout


def test_a_broken_chain_exits_1_through_the_server(db, server):
    import sqlite3

    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE events SET hash = ? WHERE seq = 42", ("e" * 64,))
    result = on_server(server, "verify")
    assert result.exit_code == 1
    assert "BROKEN at seq 42" in result.stdout
    assert on_server(server, "audit").exit_code == 1


def test_wrong_ids_and_moments_through_the_server(server, seeded):
    result = on_server(server, "timeline", "no-such-run")
    assert result.exit_code == 2
    assert "no run 'no-such-run'" in result.stderr
    for at in ("soon", str(seeded.head + 1), "-3"):
        result = on_server(server, "timeline", seeded.run, "--at", at)
        assert result.exit_code == 2, at
        assert "Invalid value for --at" in result.stderr
        assert on_server(server, "runs", "--at", at).exit_code == 2
    assert "outside the log (seqs 0 to 200)" in on_server(server, "runs", "--at", "201").stderr


def test_the_token_comes_from_the_environment_only(server):
    result = run("approvals", "--server", server)
    assert result.exit_code == 2
    assert f"--server needs the operator token in the {TOKEN_ENV} environment" in result.stderr

    result = run("audit", "--server", server, env={TOKEN_ENV: "not-the-operator-token-at-all"})
    assert result.exit_code == 2
    assert f"refused the token in {TOKEN_ENV}" in result.stderr
    assert "not-the-operator-token" not in result.output


def test_a_server_that_is_not_there_is_a_usage_error(tmp_path):
    import socket

    with socket.socket() as s:  # a port nothing listens on once this closes
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = run("verify", "--server", f"http://127.0.0.1:{port}", env=AUTH)
    assert result.exit_code == 2
    assert f"cannot reach the server at http://127.0.0.1:{port}" in result.stderr
    result = run("verify", "--server", "ftp://example.org", env=AUTH)
    assert result.exit_code == 2
    assert "not an http(s) URL" in result.stderr


def test_database_or_server_exactly_one(db, server, seeded):
    both = on_server(server, "approvals", db)
    assert both.exit_code == 2
    assert "either DB or --server URL, not both" in both.stderr
    assert on_server(server, "approve", db, "some-id", "--as", "alice").exit_code == 2
    assert on_server(server, "timeline", db, seeded.run).exit_code == 2
    neither = run("verify")
    assert neither.exit_code == 2
    assert "give a database (DB) or --server URL" in neither.stderr
    missing = run("timeline", db)
    assert missing.exit_code == 2
    assert "missing an argument" in missing.stderr
    missing = on_server(server, "approve", "--as", "alice")
    assert missing.exit_code == 2
    assert "missing an argument" in missing.stderr
