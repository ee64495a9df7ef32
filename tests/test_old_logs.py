"""Logs are forever: every log an earlier version wrote still verifies, imports as the same chain
and shows the same views (the fixtures' README, beside them, says what must hold)."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from .tools.helpers import json_of, run

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT.parent / "shared" / "fixtures" / "logs"
EXPORTS = sorted(FIXTURES.glob("*.ndjson")) if FIXTURES.is_dir() else []

if not EXPORTS:
    reason = f"no old-log fixtures at {FIXTURES.relative_to(ROOT.parent)} (beside the project)"
    if os.environ.get("FLIGHTLOG_REQUIRE_SERVICES"):
        pytest.fail(reason, pytrace=False)  # in CI the fixtures are always there
    pytestmark = pytest.mark.skip(reason=reason)


@pytest.fixture(params=EXPORTS, ids=[p.name for p in EXPORTS])
def imported(request, tmp_path) -> tuple[str, Path]:
    """The fixture's export imported into an empty log (and its .db copied beside it, if any)."""
    export: Path = request.param
    db = tmp_path / "imported.db"
    result = run("import", str(db), str(export), "--json")
    assert result.exit_code == 0, result.output
    return str(db), export


def test_it_imports_as_the_same_chain_and_verifies(imported):
    db, export = imported
    lines = export.read_text().splitlines()
    last = json.loads(lines[-1])
    verified = run("verify", db, "--json")
    assert verified.exit_code == 0, verified.output
    anchor = json_of(run("anchor", db, "--json"))
    assert (anchor["seq"], anchor["hash"]) == (last["seq"], last["hash"])
    stored = export.with_suffix(".db")
    if stored.exists():  # the log as that version left it: verified on a copy, never in place
        copy = Path(db).with_name("stored.db")
        shutil.copyfile(stored, copy)
        assert run("verify", str(copy)).exit_code == 0


def test_the_demo_of_ceb002b_shows_the_same_views(imported):
    db, export = imported
    if not export.name.startswith("ceb002b-demo"):
        pytest.skip("the views below are those of the ceb002b demo")
    approvals = [
        (r["title"], r["decision"], r["votes"] or [r["actor"]])
        for r in json_of(run("approvals", db, "--all", "--json"))
    ]
    assert approvals == [
        ("Scale web to 3 replicas", "approve", ["alice", "bob"]),
        ("Run: kubectl rollout restart deploy/web", "approve", ["alice"]),
        ("Write /etc/motd", "reject", ["alice"]),
        ("Scale web to 3 replicas", "approve", ["alice (recorded)", "bob (recorded)"]),
    ]
    runs = json_of(run("runs", db, "--json"))
    broker = {r["run_id"]: r["finish"]["last_status"] for r in runs["runs"]}
    assert broker == {"deployer": "done", "reviewer": "failed"}
    agent = {r["run_id"][:8]: (r["status"], r["forked_from"][:8], r["fork_seq"]) for r in runs["agent_runs"]}
    assert agent == {"94da1208": ("succeeded", "", 0), "84b2de34": ("succeeded", "94da1208", 20)}
    checked = run("replay-check", db, "--json")
    assert checked.exit_code == 0, checked.output
