"""The approval commands: approvals, approve, reject, audit, on a database file directly."""

from __future__ import annotations

import getpass
import json
import queue
import sqlite3
import subprocess
import sys
import textwrap
import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from click.testing import CliRunner, Result

from actors import System
from eventlog import open_log
from eventlog.events import ApprovalPublished, ApprovalRequested
from tools.cli import cli
from tools.cli import decide as _cli_decide

WAIT = 30.0  # seconds a test waits for another process before failing


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "flightlog.db"
    open_log(path).close()
    return str(path)


def run(*args: str) -> Result:
    # Wide enough that rich never truncates a cell the assertions look for.
    return CliRunner().invoke(cli, list(args), catch_exceptions=False, env={"COLUMNS": "250"})


def seed(
    db: str,
    *,
    run_id: str = "run-1",
    title: str = "rm -rf build",
    quorum: int = 1,
    expires_in: float = 300.0,
    publish: bool = True,
) -> str:
    """Record a request as a requester would, with nobody waiting on it; return its id."""
    id = str(uuid.uuid4())
    now = datetime.now(UTC)
    requested = ApprovalRequested(
        id, run_id, "call-1", "shell", title, "delete the build folder", "high", "ab" * 32,
        quorum > 1, quorum, now, now + timedelta(seconds=expires_in), "agent",
    )  # fmt: skip
    events = [requested, ApprovalPublished(id, now)] if publish else [requested]
    with open_log(db) as log:
        log.append(f"approval-{id}", events, expect=0)
    return id


def json_of(result: Result) -> Any:
    assert result.output, result
    return json.loads(result.output)


# -- approvals -------------------------------------------------------------------------------


def test_approvals_lists_pending_oldest_first(db):
    first = seed(db, title="first")
    second = seed(db, title="second")
    decided = seed(db, title="decided")
    assert run("approve", db, decided, "--as", "alice").exit_code == 0

    rows = json_of(run("approvals", db, "--json"))
    assert [r["id"] for r in rows] == [first, second]
    assert rows[0]["payload_sha256"] == "ab" * 32
    assert 0 < rows[0]["expires_in_s"] <= 300

    table = run("approvals", db)
    assert table.exit_code == 0
    assert first in table.output
    assert second in table.output
    assert decided not in table.output
    assert "abababababab" in table.output  # the short digest


def test_approvals_all_lists_the_history(db):
    pending = seed(db)
    decided = seed(db)
    run("reject", db, decided, "--as", "alice")
    run("approve", db, decided, "--as", "bob")  # refused: already rejected

    rows = {r["id"]: r for r in json_of(run("approvals", db, "--all", "--json"))}
    assert rows[pending]["status"] == "pending"
    assert rows[decided]["status"] == "reject"
    assert rows[decided]["actor"] == "alice"
    assert rows[decided]["refused_count"] == 1
    assert rows[decided]["latency_ms"] >= 0

    table = run("approvals", db, "--all")
    assert table.exit_code == 0
    assert decided in table.output
    assert pending in table.output


def test_approvals_on_an_empty_database(db):
    assert "no pending approvals" in run("approvals", db).output
    assert json_of(run("approvals", db, "--json")) == []


def test_a_missing_database_is_a_usage_error(tmp_path):
    missing = str(tmp_path / "missing.db")
    for args in (
        ["approvals", missing],
        ["approve", missing, "some-id", "--as", "alice"],
        ["reject", missing, "some-id", "--as", "alice"],
        ["audit", missing],
    ):
        result = run(*args)
        assert result.exit_code == 2, args
        assert "no database" in result.output
    assert not (tmp_path / "missing.db").exists()


# -- approve / reject ------------------------------------------------------------------------


def test_approve_decides_and_records_the_actor(db):
    id = seed(db)
    result = run("approve", db, id, "--as", "alice")
    assert result.exit_code == 0, result.output
    assert "approved" in result.output
    assert id in result.output

    with System.open(db, scheduler=False) as system:
        row = system.views.approval(id)
    assert row is not None
    assert (row.status, row.actor) == ("approve", "alice")
    assert row.identity.startswith("os-user:") or row.identity == ""


def test_reject_with_json(db):
    id = seed(db)
    out = json_of(run("reject", db, id, "--as", "alice", "--json"))
    assert out["ok"] is True
    assert (out["id"], out["decision"], out["actor"]) == (id, "reject", "alice")


def test_an_unknown_id_is_refused(db):
    result = run("approve", db, "no-such-approval", "--as", "alice")
    assert result.exit_code == _cli_decide.EXIT_UNKNOWN
    assert "no approval with id 'no-such-approval'" in result.output

    out = json_of(run("reject", db, "no-such-approval", "--as", "alice", "--json"))
    assert out == {"ok": False, "error": "unknown", "message": "no approval with id 'no-such-approval'"}


def test_a_second_decision_is_refused_and_audited(db):
    id = seed(db)
    assert run("approve", db, id, "--as", "alice").exit_code == 0
    second = run("reject", db, id, "--as", "bob")
    assert second.exit_code == _cli_decide.EXIT_DECIDED
    assert "already decided: approve by 'alice'" in second.output

    audit = json_of(run("audit", db, "--json"))
    (row,) = audit["approvals"]
    assert (row["status"], row["actor"]) == ("approve", "alice")
    assert [(a["actor"], a["decision"]) for a in row["refused"]] == [("bob", "reject")]


def test_an_expired_approval_says_it_expired(db):
    # Past its deadline when the command opens the database: the expiry fires first.
    id = seed(db, expires_in=-1.0)
    result = run("approve", db, id, "--as", "alice")
    assert result.exit_code == _cli_decide.EXIT_EXPIRED
    assert "expired" in result.output
    row = json_of(run("audit", db, "--json"))["approvals"][0]
    assert (row["status"], row["actor"]) == ("expired", "timeout")


def test_a_deadline_passing_before_the_decision_says_it_expired(db, monkeypatch):
    # With the open-time expiry switched off, the decision itself meets the passed deadline:
    # the decider records the expiry and refuses the decision (ApprovalExpiredError).
    monkeypatch.setattr(System, "tick", lambda self: 0)
    id = seed(db, expires_in=-1.0)
    out = json_of(run("approve", db, id, "--as", "alice", "--json"))
    assert (out["ok"], out["error"]) == (False, "expired")
    assert f"approval {id} expired at" in out["message"]
    row = json_of(run("audit", db, "--json"))["approvals"][0]
    assert row["status"] == "expired"
    assert [a["actor"] for a in row["refused"]] == ["alice"]


def test_a_quorum_approval_counts_votes(db, monkeypatch):
    id = seed(db, quorum=2)
    first = run("approve", db, id, "--as", "alice")
    assert first.exit_code == 0
    assert "1 of 2 approvals recorded" in first.output

    again = run("approve", db, id, "--as", "alice")
    assert again.exit_code == _cli_decide.EXIT_DUPLICATE_VOTE
    assert "'alice' has already approved" in again.output

    # Another person is another OS user on the machine holding the database file.
    monkeypatch.setattr(getpass, "getuser", lambda: "bob")
    out = json_of(run("approve", db, id, "--as", "bob", "--json"))
    assert (out["status"], out["decision"], out["actor"], out["identity"]) == (
        "decided",
        "approve",
        "bob",
        "os-user:bob",
    )


def test_one_os_user_cannot_cast_both_votes_under_two_names(db, monkeypatch):
    # On a database file the credential is the OS user: a second name does not make a second person.
    monkeypatch.setattr(getpass, "getuser", lambda: "alice")
    id = seed(db, quorum=2)
    assert run("approve", db, id, "--as", "alice").exit_code == 0
    second = run("approve", db, id, "--as", "bob", "--json")
    assert second.exit_code == _cli_decide.EXIT_DUPLICATE_VOTE
    out = json_of(second)
    assert (out["ok"], out["error"]) == (False, "duplicate_vote")
    assert f"os-user:alice has already approved {id} under another name" in out["message"]

    (row,) = json_of(run("audit", db, "--json"))["approvals"]
    assert (row["status"], row["votes"]) == ("pending", ["alice"])
    assert [(a["actor"], a["identity"]) for a in row["refused"]] == [("bob", "os-user:alice")]


def test_a_request_still_recording_cannot_be_decided(db):
    id = seed(db, publish=False)
    result = run("approve", db, id, "--as", "alice")
    assert result.exit_code == _cli_decide.EXIT_RECORDING
    assert "still being recorded" in result.output


def test_as_is_required_on_a_database_file(db):
    id = seed(db)
    missing = run("approve", db, id)
    assert missing.exit_code == 2
    assert "--as NAME is required on a database file" in missing.output
    assert run("approve", db, id, "--as", "  ").exit_code == 2


# -- audit -----------------------------------------------------------------------------------


def test_audit_shows_history_and_verifies_the_chain(db):
    a = seed(db, run_id="run-a")
    b = seed(db, run_id="run-b")
    run("approve", db, a, "--as", "alice")

    result = run("audit", db)
    assert result.exit_code == 0
    assert a in result.output
    assert b in result.output
    assert "chain verified up to seq 5" in result.output

    out = json_of(run("audit", db, "--run", "run-a", "--json"))
    assert [r["id"] for r in out["approvals"]] == [a]
    assert out["approvals"][0]["payload_sha256"] == "ab" * 32
    snapshots = {"ok": True, "method": "re-derived", "checked": 0, "bad": []}
    catalogue = {"ok": True, "checked": 5, "off_catalogue": 0, "first": []}
    assert out["verify"] == {"ok": True, "checked": 5, "first_bad_seq": None, "reason": "", "head_seq": 5,
                             "snapshots": snapshots, "catalogue": catalogue}  # fmt: skip


def test_audit_reports_a_broken_chain(db):
    id = seed(db)
    run("approve", db, id, "--as", "alice")
    # Rewrite who decided, as someone with write access to the file could.
    conn = sqlite3.connect(db)
    with conn:
        (data,) = conn.execute("SELECT data FROM events WHERE seq = 3").fetchone()
        text = data if isinstance(data, str) else bytes(data).decode()  # JSON TEXT, or older bytes
        forged = text.replace('"alice"', '"mallory"')
        assert forged != text
        conn.execute("UPDATE events SET data = ? WHERE seq = 3", (forged,))
    conn.close()

    result = run("audit", db)
    assert result.exit_code == 1
    assert "BROKEN" in result.output
    assert "seq 3" in result.output
    out = json_of(run("audit", db, "--json"))
    assert out["verify"]["first_bad_seq"] == 3
    assert out["approvals"][0]["actor"] == "mallory"  # the history shows it; the check catches it


def test_audit_still_verifies_when_the_history_cannot_be_read(db):
    seed(db)
    conn = sqlite3.connect(db)
    with conn:
        conn.execute("UPDATE events SET data = ? WHERE seq = 2", (b'{"approval_id":"x"}',))
    conn.close()

    result = run("audit", db)
    assert result.exit_code == 1
    assert "could not be read" in result.output
    assert "BROKEN" in result.output
    assert "seq 2" in result.output


@pytest.mark.parametrize("command", ["approvals", "approve", "reject", "audit"])
def test_every_command_has_help_with_an_example(command):
    result = run(command, "--help")
    assert result.exit_code == 0
    assert "Example:" in result.output
    assert f"flightlog {command} flightlog.db" in result.output


# -- across processes ------------------------------------------------------------------------

REQUESTER = textwrap.dedent(
    """
    import sys
    from actors import ApprovalRequest, System

    with System.open(sys.argv[1]) as system:
        seen = set()

        def announce():
            for a in system.approvals.pending():
                if a.id not in seen:
                    seen.add(a.id)
                    print("PENDING", a.id, flush=True)

        system.approvals.subscribe(announce)
        request = ApprovalRequest("shell", "rm -rf build", "delete the build folder", "high", run_id="run-1")
        resolution = system.approvals.request(request)
        print("RESOLVED", resolution.decision, resolution.actor, flush=True)
    """
)


def test_approve_unblocks_a_request_waiting_in_another_process(db):
    proc = subprocess.Popen(
        [sys.executable, "-c", REQUESTER, db],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def pump() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.put(line.rstrip("\n"))

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()

    def next_line() -> str:
        try:
            return lines.get(timeout=WAIT)
        except queue.Empty:
            pytest.fail(f"the requester said nothing for {WAIT} s")

    try:
        line = next_line()
        assert line.startswith("PENDING "), line
        id = line.split()[1]
        # The requester is blocked in request() now: only this decision can unblock it
        # (its deadline is 300 s away), so the RESOLVED line proves the cross-process wake-up.
        result = run("approve", db, id, "--as", "alice")
        assert result.exit_code == 0, result.output
        assert next_line() == "RESOLVED approve alice"
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        reader.join(timeout=WAIT)
        assert proc.stdout is not None
        proc.stdout.close()
