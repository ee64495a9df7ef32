"""A real `flightlog serve` on a tampered log: it refuses a broken chain, serves one only when told
to and then says so on every answer, and never shows a forged view snapshot as fact."""

from __future__ import annotations

import sqlite3
import subprocess
import sys

import orjson
import pytest

from eventlog import open_log
from tools.http import TAMPER_HEADER

from ..travel.forgery import FORGER, forge_approval_history, record_rejection, store_snapshots
from .conftest import OPERATOR, OPERATOR_TOKEN
from .server import ServerProcess

pytestmark = pytest.mark.slow
EXIT_TAMPERED = 3


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "served.db"
    with open_log(path) as log:
        record_rejection(log)
    return path


def tamper_decision(db) -> int:
    """Rewrite the recorded rejection as an approval, in place; returns its seq."""
    with sqlite3.connect(db) as conn:
        seq, data = conn.execute("SELECT seq, data FROM events WHERE type = 'ApprovalDecided'").fetchone()
        changed = orjson.loads(data) | {"decision": "approve"}
        conn.execute("UPDATE events SET data = ? WHERE seq = ?", (orjson.dumps(changed), seq))
    return int(seq)


def history(server: ServerProcess) -> list[tuple[str, str]]:
    response = server.client.get("/api/v1/approvals/history", headers=OPERATOR)
    assert response.status_code == 200, response.text
    return [(a["decision"], a["actor"]) for a in response.json()["approvals"]]


def serve_argv(db) -> list[str]:
    return [sys.executable, "-c", "from tools.cli import main; main()", "serve", "--db", str(db),
            "--port", "0"]  # fmt: skip


def test_serve_refuses_a_log_whose_chain_is_broken(db):
    seq = tamper_decision(db)
    env = {"FLIGHTLOG_OPERATOR_TOKEN": OPERATOR_TOKEN, "PATH": "/usr/bin:/bin"}
    done = subprocess.run(serve_argv(db), capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == EXIT_TAMPERED, done.stderr
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"breaks at seq {seq}: hash does not match the record's content" in lines[0]
    assert "--allow-tampered" in lines[0]
    assert "Traceback" not in done.stderr


def test_serve_allow_tampered_marks_every_answer(db):
    seq = tamper_decision(db)
    server = ServerProcess(db, OPERATOR_TOKEN, ("--allow-tampered",))
    try:
        assert f"TAMPERED: the hash chain breaks at seq {seq}" in server.output()
        for path in ("/health", "/api/v1/approvals/history", "/api/v1/verify", "/ui/", "/openapi.json"):
            response = server.client.get(path, headers=OPERATOR)
            assert f"breaks at seq {seq}" in response.headers.get(TAMPER_HEADER, ""), path
        verdict = server.client.get("/api/v1/verify", headers=OPERATOR).json()
        assert (verdict["ok"], verdict["first_bad_seq"]) == (False, seq)
    finally:
        server.close()


def test_serve_never_shows_a_forged_snapshot(db):
    with open_log(db) as log:
        store_snapshots(log)
        forged = forge_approval_history(log)
    server = ServerProcess(db, OPERATOR_TOKEN)
    try:
        assert history(server) == [("reject", "alice")]  # the log's truth, not FORGER's
        assert f"approval_history v{forged.version} @{forged.seq}" in server.output()
        verdict = server.client.get("/api/v1/verify", headers=OPERATOR).json()
        assert verdict["chain_ok"] is True
        assert verdict["ok"] is False
        assert [b["view"] for b in verdict["snapshots"]["bad"]] == ["approval_history"]
        response = server.client.get("/api/v1/console/audit", headers=OPERATOR)
        assert response.json()["verify"]["ok"] is False
        assert "approval_history" in response.headers[TAMPER_HEADER]
        assert FORGER not in response.text
    finally:
        server.close()


def test_a_long_verify_at_start_says_what_it_does(db, monkeypatch, capsys):
    from tools.cli import serve

    monkeypatch.setattr(serve, "PROGRESS_FROM", 1)  # every log is "long"
    log, integrity = serve._open_verified(str(db), allow_tampered=False)
    log.close()
    assert integrity.ok
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == "flightlog: verifying 3 events and the view snapshots before serving"
    assert lines[1].startswith("flightlog: verified in ")
    assert lines[1].endswith("view snapshot(s) re-derived from the log: ok")
