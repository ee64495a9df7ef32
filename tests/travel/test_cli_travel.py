"""The time-travel CLI on a database file: runs, timeline, travel, diff, fork, replay."""

from __future__ import annotations

import orjson
import pytest
from click.testing import CliRunner

from eventlog import open_log
from projections import Views
from tools.cli import cli


@pytest.fixture
def run(db):
    def invoke(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, [args[0], str(db), *args[1:]])
        return result.exit_code, result.output

    return invoke


@pytest.fixture
def agent(db):
    log = open_log(db, readonly=True)
    views = Views(log)
    row = views.agent_runs(at=log.head().seq)[3]
    moments = views.timeline_at_each_event(row.run_id)
    log.close()
    return row, moments


def test_runs_now_and_as_of_a_seq(run):
    code, out = run("runs", "--json")
    assert code == 0
    now = orjson.loads(out)
    assert now["seq"] == 1200
    assert len(now["runs"]) == 12
    assert len(now["agent_runs"]) == 12
    assert now["runs"][0]["finish"]["count"] == 1
    code, out = run("runs", "--at", "300", "--json")
    early = orjson.loads(out)
    assert code == 0
    assert early["seq"] == 300
    assert 0 < len(early["runs"]) < 12
    code, out = run("runs", "--at", "300")
    assert code == 0
    assert "broker runs at seq 300" in out
    assert "agent runs at seq 300" in out


def test_timeline_now_at_a_seq_and_at_each_event(run, agent):
    row, moments = agent
    code, out = run("timeline", row.run_id, "--json")
    assert code == 0
    assert orjson.loads(out)["entries"][-1]["id"] == moments[-1].entries[-1].id
    middle = moments[len(moments) // 2]
    code, out = run("timeline", row.run_id, "--at", str(middle.seq), "--json")
    assert code == 0
    assert len(orjson.loads(out)["entries"]) == len(middle.entries)
    code, out = run("timeline", row.run_id, "--each", "--json")
    assert code == 0
    assert [m["seq"] for m in orjson.loads(out)["moments"]] == [m.seq for m in moments]
    code, out = run("timeline", row.run_id, "--each")
    assert code == 0
    assert "after each of its events" in out
    assert "succeeded" in out
    code, out = run("timeline", row.run_id)
    assert code == 0
    assert "You" in out


def test_travel_by_seq_and_by_time(run, agent, db):
    row, moments = agent
    middle = moments[len(moments) // 2]
    code, out = run("travel", row.run_id, "--at", str(middle.seq), "--json")
    assert code == 0
    state = orjson.loads(out)
    assert state["agent_run"]["status"] == middle.status
    assert [e["id"] for e in state["timeline"]] == [e.id for e in middle.entries]
    assert state["run"]["run_id"] == row.run_id  # the workload's broker run shares the id
    stamp = middle.at.isoformat().replace("+00:00", "Z")
    code, out = run("travel", row.run_id, "--at", stamp, "--json")
    assert code == 0
    assert orjson.loads(out)["seq"] >= middle.seq
    naive = middle.at.replace(tzinfo=None).isoformat()
    assert run("travel", row.run_id, "--at", naive, "--json")[1] == out  # naive times are UTC
    code, out = run("travel", row.run_id, "--at", "0")
    assert code == 0
    assert "did not exist yet" in out
    code, out = run("travel", row.run_id, "--at", str(moments[-1].seq))
    assert code == 0
    assert "succeeded" in out
    assert "timeline" in out


def test_diff_exits_1_when_something_changed(run, agent):
    row, moments = agent
    a, b = moments[3].seq, moments[-1].seq
    code, out = run("diff", row.run_id, "--from", str(a), "--to", str(b), "--json")
    assert code == 1
    diff = orjson.loads(out)
    assert diff["view"] == "timeline"
    assert diff["added"]
    code, out = run("diff", row.run_id, "--from", str(b), "--to", str(b))
    assert code == 0
    assert "no change" in out
    code, out = run("diff", row.run_id, "--from", "0", "--to", "1200", "--view", "runs", "--json")
    assert code == 1
    assert [i["run_id"] for i in orjson.loads(out)["added"]] == [row.run_id]
    code, out = run("diff", row.run_id, "--from", str(a), "--to", str(b))
    assert code == 1
    assert "+ " in out


def test_fork_records_a_new_run(run, agent):
    row, moments = agent
    at = moments[10].seq
    code, out = run("fork", row.run_id, "--at", str(at), "--actor", "alice", "--reason", "why not", "--json")
    assert code == 0
    fork = orjson.loads(out)
    assert fork["origin_run_id"] == row.run_id
    assert fork["at_seq"] == at
    assert fork["copied"] == 11
    code, out = run("timeline", fork["run_id"], "--json")
    assert [e["id"] for e in orjson.loads(out)["entries"]] == [e.id for e in moments[10].entries]
    code, out = run("runs", "--json")
    [forked] = [r for r in orjson.loads(out)["agent_runs"] if r["forked_from"]]
    assert (forked["run_id"], forked["forked_from"], forked["fork_seq"]) == (fork["run_id"], row.run_id, at)
    code, out = run("fork", row.run_id, "--at", str(at))
    assert code == 0
    assert "forked run" in out


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("travel", "nope", "--at", "5"), "no run 'nope'"),
        (("timeline", "nope"), "no run 'nope'"),
        (("diff", "nope", "--from", "1", "--to", "2"), "no run 'nope'"),
        (("fork", "nope", "--at", "5"), "no agent run 'nope'"),
        (("runs", "--at", "yesterday"), "neither a seq nor an ISO time"),
        (("runs", "--at", "-3"), "outside the log"),
        (("runs", "--at", "999999"), "outside the log (seqs 0 to 1200)"),
        (("replay", "--view", "nope"), "no view nope"),
        (("replay-check", "--update-golden"), "--update-golden needs --golden"),
    ],
)
def test_usage_errors_exit_2(run, args, message):
    code, out = run(*args)
    assert code == 2, out
    assert message in out.replace("\n", " ")


def test_a_missing_database_is_a_usage_error(tmp_path):
    for command in (["runs"], ["timeline", "x"], ["travel", "x", "--at", "1"], ["replay"], ["replay-check"]):
        result = CliRunner().invoke(cli, [command[0], str(tmp_path / "none.db"), *command[1:]])
        assert result.exit_code == 2
        assert "no database" in result.output


def test_replay_stores_snapshots_and_reports_digests(run, db):
    code, out = run("replay", "--json")
    assert code == 0
    result = orjson.loads(out)
    assert result["head"] == 1200
    assert result["snapshots_stored"] == len(result["views"])
    log = open_log(db)
    assert result["views"]["timeline"]["digest"] == Views(log, snapshots=None).digest("timeline")
    log.close()
    code, out = run("replay", "--view", "run_registry", "--no-store")
    assert code == 0
    assert "run_registry" in out
    assert "timeline" not in out
