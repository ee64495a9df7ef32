"""One run model: `timeline`, `travel` and `diff` on a broker run, as on a controller run."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import orjson
import pytest
from click.testing import CliRunner

from eventlog import ANY, ManualClock, open_log
from eventlog.events import PermissionDecided, PermissionRequested, RunFinished, RunRegistered, RunReported
from tools.cli import cli

T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def db(tmp_path):
    """A broker run `deployer`: registered (1), working (2), asks (3), allowed (4), done (5)."""
    path = tmp_path / "broker.db"
    clock = ManualClock(T0)
    log = open_log(path, clock=clock)
    events = [
        RunRegistered("deployer", "0" * 64, T0, T0),
        RunReported("deployer", "working", '{"note": "rolling out"}', T0),
        PermissionRequested("deployer", "q1", "kubectl", "restart web", "kubectl rollout", "ap1", T0),
        PermissionDecided("deployer", "q1", "allow", "ap1", "alice", T0),
        RunFinished("deployer", "done", "rolled out", ("deploy.yaml",), None, T0),
    ]
    for n, event in enumerate(events):
        clock.set(T0 + timedelta(seconds=n))
        log.append("run-deployer", [event], expect=ANY)
    log.close()
    return path


def run(db, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, [args[0], str(db), *args[1:]])
    return result.exit_code, result.output


def test_the_timeline_of_a_broker_run(db):
    code, out = run(db, "timeline", "deployer", "--json")
    assert code == 0, out
    entries = orjson.loads(out)["entries"]
    assert [(e["seq"], e["kind"], e.get("status")) for e in entries] == [
        (1, "notice", "registered"),
        (2, "report", "working"),
        (3, "permission", "allow"),
        (4, "decision", "allow"),
        (5, "finish", "done"),
    ]
    code, out = run(db, "timeline", "deployer", "--at", "3", "--json")
    assert [e["status"] for e in orjson.loads(out)["entries"]][-1] == "pending"
    code, out = run(db, "timeline", "deployer", "--each", "--json")
    assert [m["status"] for m in orjson.loads(out)["moments"]] == [
        "registered", "working", "working", "working", "done",
    ]  # fmt: skip
    code, out = run(db, "timeline", "deployer")
    assert code == 0
    assert "rolling out" in out


def test_travel_to_a_broker_run_shows_its_timeline(db):
    code, out = run(db, "travel", "deployer", "--at", "3", "--json")
    assert code == 0, out
    state = orjson.loads(out)
    assert state["agent_run"] is None
    assert [e["kind"] for e in state["timeline"]] == ["notice", "report", "permission"]
    code, out = run(db, "travel", "deployer", "--at", "3")
    assert "kubectl" in out


def test_diff_of_a_broker_run_reports_registered_to_done(db):
    code, out = run(db, "diff", "deployer", "--from", "1", "--to", "5", "--json")
    assert code == 1, out  # it changed: before, the default view said "no change", exit 0
    diff = orjson.loads(out)
    added = [(e["seq"], e["kind"]) for e in diff["added"]]
    assert added == [(2, "report"), (3, "permission"), (4, "decision"), (5, "finish")]
    assert diff["changed"] == []
    assert diff["removed"] == []
    code, out = run(db, "diff", "deployer", "--from", "3", "--to", "5", "--json")
    [change] = orjson.loads(out)["changed"]
    assert (change["key"], change["fields"], change["after"]["status"]) == ("3", ["status"], "allow")
    code, out = run(db, "diff", "deployer", "--from", "1", "--to", "5")
    assert "+ seq 5 finish rolled out" in out
