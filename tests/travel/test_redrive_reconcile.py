"""Re-driving a quorum reconcile from the recording: the same gate steps, recorded results, nothing live."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from actors import System, fork_run
from eventlog import ManualClock, open_log
from projections import ApprovalRow, Views
from tests.controller.forks import harness_records, served, timeline
from tools._forks import redrive
from tools.cli import cli

from .reconciles import ReconcileOrigin, gate_records, gate_steps, record_reconcile_origin

ROOT = Path(__file__).resolve().parent.parent.parent

# Where each fork point's re-drive takes the gate up again in the origin's records: after the
# fork point, or (for a reconcile approved but not yet dispatched there, whose one-time
# approval stays with the origin) from its request's prepare, as the request is asked again.
POINTS = {
    "before_permission": "after",
    "permission": "after",
    "pending": "prepared",
    "one_vote": "prepared",
    "granted": "prepared",
    "tool_started": "prepared",
    "consumed": "prepared",
    "dispatched": "after",
    "finished": "after",
}


@pytest.fixture
def system(tmp_path: Path) -> Iterator[System]:
    s = System.open(tmp_path / "demo.db", clock=ManualClock(), scheduler=False)
    yield s
    s.close()


@pytest.fixture
def origin(system: System) -> ReconcileOrigin:
    return record_reconcile_origin(system)


def fork_approvals(system: System, run_id: str) -> list[ApprovalRow]:
    return [a for a in Views(system.log).approval_history(at=system.log.head().seq) if a.run_id == run_id]


@pytest.mark.parametrize("point", sorted(POINTS))
def test_a_recorded_redrive_passes_the_reconcile_gate_as_the_origin_did(system, origin, point):
    log, live = system.log, origin.reconciler
    assert (live.prepared, live.applied) == (1, 1)
    at = origin.points[point]
    before = list(log.read(origin.stream))
    fork = fork_run(log, origin.run_id, at, actor="carol", new_id=f"f-{point}")

    done = redrive(system, fork.run_id, apply_recorded=True)

    assert (done.status, done.diverged, done.ran_out) == ("succeeded", "", False)
    asked = point not in ("dispatched", "finished")
    assert done.decisions == (("approve",) if asked else ())
    assert done.dispatches == (("dispatched",) if asked else ())
    assert timeline(log, fork.run_id) == timeline(log, origin.run_id)
    # The harness events after the copies are the origin's after the fork point, with a request
    # that is asked again first.
    origin_rest = served(harness_records(log, origin.stream, at))
    if at >= origin.points["permission"] and asked:
        [request] = [r for r in served(harness_records(log, origin.stream)) if r[0] == "permission.request"]
        origin_rest.insert(0, request)
    assert served(harness_records(log, fork.stream, fork.seq + fork.copied)) == origin_rest
    # The gate's steps (prepare, one-time grant, its use, dispatch) are recorded as the origin's.
    origin_gate = gate_records(log, origin.stream)
    if POINTS[point] == "after":
        expected = gate_steps([r for r in origin_gate if r.seq > at])
    else:
        expected = gate_steps(origin_gate)
        assert expected[0][0] == "ReconcilePrepared"
    assert gate_steps(gate_records(log, fork.stream, fork.seq + fork.copied)) == expected
    if asked:
        [approval] = fork_approvals(system, fork.run_id)
        assert approval.votes == ("alice (recorded)", "bob (recorded)")
        assert (approval.status, approval.actor) == ("approve", "bob (recorded)")
    # Served from the recording: the live reconciler was not called again.
    assert (live.prepared, live.applied) == (1, 1)
    assert list(log.read(origin.stream)) == before
    assert log.verify().ok


def test_every_recorded_vote_is_cast_again_for_a_k_of_n_quorum(tmp_path):
    voters = (("alice", "approve"), ("bob", "approve"), ("carol", "approve"))
    with System.open(tmp_path / "k-of-n.db", clock=ManualClock(), scheduler=False, quorum=3) as system:
        origin = record_reconcile_origin(system, voters, demo_agent=False)
        fork = fork_run(system.log, origin.run_id, origin.points["one_vote"], actor="dave")
        done = redrive(system, fork.run_id, apply_recorded=True)
        [approval] = fork_approvals(system, fork.run_id)
    assert (done.status, done.decisions, done.dispatches) == ("succeeded", ("approve",), ("dispatched",))
    # Two votes alone would leave it pending: the third, recorded last, decides it.
    assert approval.votes == ("alice (recorded)", "bob (recorded)", "carol (recorded)")
    assert (approval.status, approval.actor) == ("approve", "carol (recorded)")
    assert (origin.reconciler.prepared, origin.reconciler.applied) == (1, 1)


def test_an_approval_then_a_rejection_are_cast_again_in_order(tmp_path):
    with System.open(tmp_path / "rejected.db", clock=ManualClock(), scheduler=False) as system:
        origin = record_reconcile_origin(system, (("alice", "approve"), ("bob", "reject")), demo_agent=False)
        fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="dave")
        done = redrive(system, fork.run_id, apply_recorded=True)
        [approval] = fork_approvals(system, fork.run_id)
        assert timeline(system.log, fork.run_id) == timeline(system.log, origin.run_id)
        dispatched = [r for r in gate_records(system.log, fork.stream) if r.type == "ReconcileDispatched"]
    assert (done.status, done.decisions, done.dispatches) == ("succeeded", ("reject",), ())
    assert approval.votes == ("alice (recorded)",)
    assert (approval.status, approval.actor) == ("reject", "bob (recorded)")
    assert dispatched == []  # rejected here as there: nothing to dispatch
    assert (origin.reconciler.prepared, origin.reconciler.applied) == (1, 0)


def test_the_demo_forked_before_its_reconcile_is_redriven_to_success(tmp_path):
    proc = subprocess.run(
        [sys.executable, "-m", "tools.cli", "demo", "--auto", "--port", "0"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=110,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "COLUMNS": "120", "HOME": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    db = str(tmp_path / "flightlog-demo.db")
    runs = CliRunner().invoke(cli, ["runs", db, "--json"])
    [agent_run] = orjson.loads(runs.output)["agent_runs"]
    log = open_log(db, readonly=True)
    try:
        stream = agent_run["stream"]
        harness = harness_records(log, stream)
        request = next(r.seq for r in harness if r.data["type"] == "permission.request")
        at = max(r.seq for r in harness if r.seq < request)
        before = list(log.read(stream))
    finally:
        log.close()

    args = ["fork", db, agent_run["run_id"], "--at", str(at), "--redrive", "--apply-recorded", "--json"]
    result = CliRunner().invoke(cli, args)

    assert result.exit_code == 0, result.output
    fork = orjson.loads(result.output)
    assert (fork["redrive"]["status"], fork["redrive"]["dispatches"]) == ("succeeded", ["dispatched"])
    log = open_log(db, readonly=True)
    try:
        assert timeline(log, fork["run_id"]) == timeline(log, agent_run["run_id"])
        assert list(log.read(stream)) == before
        assert log.verify().ok
    finally:
        log.close()


def test_the_redrive_command_says_how_the_recorded_dispatches_ended(tmp_path):
    path = tmp_path / "recorded.db"
    with System.open(path, clock=ManualClock(), scheduler=False) as system:
        origin = record_reconcile_origin(system, demo_agent=False)
    at = str(origin.points["pending"])
    args = ["fork", str(path), origin.run_id, "--at", at, "--redrive", "--apply-recorded"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    out = " ".join(result.output.split())
    assert "with the recording: succeeded" in out
    assert "permission requests ended: approve recorded reconcile dispatches ended: dispatched" in out
