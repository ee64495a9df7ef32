"""`--server URL`: the commands that read and decide through a live server's operator API print what
they print on the database file, with the same exit codes; the token comes from the environment."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import NamedTuple

import pytest

from actors import System
from actors.operators import APPROVER
from eventlog import open_log
from tools._integrity import check_log
from tools.cli import decide as _cli_decide
from tools.demo.background import BackgroundServer
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


class Enrolled(NamedTuple):
    """An operator enrolled on the test's database: the environment holding their token, and
    the credential id their decisions record as `identity`."""

    env: dict[str, str | None]
    credential_id: str


@pytest.fixture
def operator(db) -> Callable[..., Enrolled]:
    """Enrol `name` with `role` on the database the server serves (it sees the enrolment from
    its next request on), each with their own token, as `flightlog operators add DB` does."""

    def enrol(name: str, role: str = APPROVER) -> Enrolled:
        token = hashlib.sha256(f"cli-test-operator:{name}".encode()).hexdigest()
        with System.open(db, scheduler=False) as system:
            credential, _ = system.operators.enrol(name, role, by="tests", token=token)
        return Enrolled({TOKEN_ENV: token}, credential.credential_id)

    return enrol


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


def test_decisions_through_the_server(db, server, operator):
    alice, bob, carol = operator("alice"), operator("bob"), operator("carol")
    pending = seed_approval(db)
    # No --as: the server names who decided, from the token.
    decided = json_of(on_server(server, "approve", pending, "--json", env=alice.env))
    assert decided["status"] == "decided"
    assert (decided["id"], decided["decision"], decided["actor"]) == (pending, "approve", "alice")
    assert decided["identity"] == alice.credential_id  # the credential the server authenticated
    assert decided["payload_sha256"] == "ab" * 32
    assert decided["run_id"] == "run-1"

    again = on_server(server, "reject", pending, env=bob.env)
    assert again.exit_code == _cli_decide.EXIT_DECIDED
    assert "already decided: approve by 'alice'" in again.stderr
    assert "this reject was refused" in again.stderr

    unknown = on_server(server, "approve", "no-such-approval", "--json", env=alice.env)
    assert unknown.exit_code == _cli_decide.EXIT_UNKNOWN
    assert json_of(unknown)["error"] == "unknown"

    other = seed_approval(db)
    rejected = on_server(server, "reject", other, "--as", "carol", env=carol.env)  # --as may repeat it
    assert rejected.exit_code == 0, rejected.output
    assert f"rejected {other} (run run-1): shell 'rm -rf build' by carol" in rejected.stdout
    with open_log(db) as log:
        assert log.verify().ok


def test_the_bootstrap_token_decides_as_bootstrap(db, server):
    pending = seed_approval(db)
    decided = json_of(on_server(server, "approve", pending, "--json"))
    assert (decided["actor"], decided["identity"]) == ("bootstrap", "bootstrap")


def test_as_another_name_than_the_tokens_is_refused_through_the_server(db, server, operator):
    alice = operator("alice")
    pending = seed_approval(db)
    result = on_server(server, "approve", pending, "--as", "bob", env=alice.env)
    assert result.exit_code == 2
    assert "the server refused: actor 'bob' is not the authenticated operator 'alice'" in result.stderr
    with System.open(db, scheduler=False) as system:
        row = system.views.approval(pending)
    assert row is not None
    assert (row.status, row.votes, row.refused) == ("pending", (), ())


def test_a_viewer_cannot_decide_through_the_server(db, server, operator):
    vera = operator("vera", "viewer")
    pending = seed_approval(db)
    result = on_server(server, "approve", pending, env=vera.env)
    assert result.exit_code == 2
    assert "the server refused: forbidden: operator 'vera'" in result.stderr
    with System.open(db, scheduler=False) as system:
        row = system.views.approval(pending)
    assert row is not None
    assert row.status == "pending"
    # The attempt is kept in the audit trail, as the viewer's credential's.
    assert [(a.actor, a.decision) for a in row.refused] == [(f"vera ({vera.credential_id})", "approve")]


def test_a_quorum_vote_and_a_duplicate_vote_through_the_server(db, server, operator):
    alice, bob = operator("alice"), operator("bob")
    pending = seed_approval(db, quorum=2)
    vote = json_of(on_server(server, "approve", pending, "--json", env=alice.env))
    assert (vote["status"], vote["actor"], vote["votes"], vote["needed"]) == ("vote_recorded", "alice", 1, 2)
    again = on_server(server, "approve", pending, env=alice.env)
    assert again.exit_code == _cli_decide.EXIT_DUPLICATE_VOTE
    assert "'alice' has already approved" in again.stderr
    # Alice's token cannot cast the second vote under bob's name either.
    as_bob = on_server(server, "approve", pending, "--as", "bob", env=alice.env)
    assert as_bob.exit_code == 2
    assert "not the authenticated operator 'alice'" in as_bob.stderr
    decided = json_of(on_server(server, "approve", pending, "--json", env=bob.env))
    assert (decided["status"], decided["actor"], decided["identity"]) == ("decided", "bob", bob.credential_id)


def test_an_expired_approval_through_the_server(db, server, operator):
    alice = operator("alice")
    pending = seed_approval(db, expires_in=0.001)
    result = on_server(server, "approve", pending, env=alice.env)
    assert result.exit_code == _cli_decide.EXIT_EXPIRED
    assert "expired" in result.stderr
    assert "before 'alice' could approve it" in result.stderr


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
    # --as is optional with --server (the token names the operator), required on a database.
    assert on_server(server, "approve", "no-such-approval").exit_code == _cli_decide.EXIT_UNKNOWN
    on_file = run("approve", db, "no-such-approval")
    assert on_file.exit_code == 2
    assert "--as NAME is required on a database file" in on_file.stderr
    assert on_server(server, "approve", "no-such-approval", "--as", " ").exit_code == 2
