"""`verify` and `audit` on a database file whose view snapshot was forged: they say so, exit 1, and
the audit shows what the log says."""

from __future__ import annotations

import pytest

from eventlog import open_log

from ..travel.forgery import FORGER, forge_approval_history, record_rejection, store_snapshots
from .helpers import json_of, run


@pytest.fixture
def forged_db(tmp_path):
    path = tmp_path / "forged.db"
    with open_log(path) as log:
        record_rejection(log)
        store_snapshots(log)
        forge_approval_history(log)
    return str(path)


def test_verify_reports_a_forged_snapshot(forged_db):
    result = run("verify", forged_db)
    assert result.exit_code == 1, result.output
    assert "ok: chain verified over 3 events" in result.output
    assert "FORGED" in result.output
    assert "approval_history v1 @3" in result.output

    out = json_of(run("verify", forged_db, "--json"))
    assert (out["ok"], out["chain_ok"]) == (False, True)
    assert [(b["view"], b["seq"]) for b in out["snapshots"]["bad"]] == [("approval_history", 3)]
    assert run("verify", forged_db, "--chain-only").exit_code == 0  # the chain itself holds


def test_audit_shows_the_log_not_the_forgery(forged_db):
    result = run("audit", forged_db, "--json")
    assert result.exit_code == 1
    out = json_of(result)
    assert [(a["decision"], a["actor"]) for a in out["approvals"]] == [("reject", "alice")]
    assert out["verify"]["ok"] is False
    table = run("audit", forged_db)
    assert FORGER not in table.output
    assert "FORGED" in table.output


def test_verify_passes_untouched_snapshots(tmp_path):
    path = tmp_path / "fine.db"
    with open_log(path) as log:
        record_rejection(log)
        store_snapshots(log)
    result = run("verify", str(path))
    assert result.exit_code == 0, result.output
    assert "view snapshot(s) re-derived from the log: ok" in result.output
