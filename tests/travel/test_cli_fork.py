"""`flightlog fork --redrive` and `flightlog redrive` on a file holding a recorded run."""

from __future__ import annotations

import getpass
import importlib
import shlex
import sys
import threading
from pathlib import Path

import orjson
import pytest
from click.testing import CliRunner

from actors import ControllerError, ForkRedrivenError, System, fork_run
from eventlog import ManualClock, open_log
from projections import Views
from tests.controller.forks import (
    MARKER_AGENT,
    GatedHarness,
    Origin,
    aborted_origin,
    record_origin,
    timeline,
)
from tests.controller.helpers import WAIT, ManualHarness, in_thread
from tools._forks import Redriven, redrive
from tools.cli import cli


@pytest.fixture
def recorded_db(tmp_path: Path) -> tuple[Path, Origin]:
    """A database holding one finished run whose permission request was approved."""
    path = tmp_path / "recorded.db"
    with System.open(path, clock=ManualClock(), scheduler=False) as system:
        origin = record_origin(system)
    return path, origin


@pytest.fixture
def run(recorded_db):
    path, _ = recorded_db

    def invoke(*args: str) -> tuple[int, str]:
        result = CliRunner().invoke(cli, [args[0], str(path), *args[1:]])
        return result.exit_code, result.output

    return invoke


def records(path: Path, stream: str) -> list:
    log = open_log(path, readonly=True)
    try:
        return list(log.read(stream))
    finally:
        log.close()


def test_fork_and_redrive_from_the_recording_with_the_recorded_decisions(run, recorded_db):
    path, origin = recorded_db
    before = records(path, origin.stream)
    at = str(origin.points["before_permission"])
    code, out = run(
        "fork", origin.run_id, "--at", at, "--actor", "alice", "--redrive", "--apply-recorded", "--json"
    )
    assert code == 0, out
    fork = orjson.loads(out)
    redriven = fork["redrive"]
    assert (redriven["run_id"], redriven["status"], redriven["recorded"]) == (
        fork["run_id"],
        "succeeded",
        True,
    )
    assert redriven["decisions"] == ["approve"]
    assert redriven["served"] == 5  # the request, the tool's start and result, the answer, idle
    assert records(path, origin.stream) == before
    log = open_log(path, readonly=True)
    try:
        assert log.verify().ok
        assert timeline(log, fork["run_id"]) == timeline(log, origin.run_id)
        [approval] = [a for a in Views(log).approval_history(at=log.head().seq) if a.run_id == fork["run_id"]]
    finally:
        log.close()
    assert (approval.decision, approval.actor) == ("approve", "alice (recorded)")


def test_a_fork_made_first_is_redriven_once(run, recorded_db):
    _, origin = recorded_db
    code, out = run("fork", origin.run_id, "--at", str(origin.points["finished"]), "--json")
    assert code == 0
    fork = orjson.loads(out)
    assert fork["redrive"] is None
    code, out = run("redrive", fork["run_id"])
    assert code == 0, out
    assert f"re-drove run {fork['run_id']} with the recording: succeeded" in " ".join(out.split())
    code, out = run("redrive", fork["run_id"], "--json")
    assert code == 2
    assert "already re-driven" in out


def test_a_live_command_redrives_the_fork(run, recorded_db, tmp_path):
    path, origin = recorded_db
    marker = tmp_path / "marker"
    command = shlex.join([sys.executable, "-c", MARKER_AGENT, str(marker)])
    at = str(origin.points["before_permission"])
    code, out = run(
        "fork", origin.run_id, "--at", at, "--redrive", "--command", command, "--prompt", "write it"
    )
    assert code == 0, out
    [run_id] = marker.read_text().splitlines()  # the program ran, for the fork's run
    assert f"re-drove run {run_id} with a live harness: succeeded" in " ".join(out.split())
    log = open_log(path, readonly=True)
    try:
        entries = timeline(log, run_id)
        prompts = [
            r.data["prompt"] for r in log.read(f"controller-fork-{run_id}") if r.type == "PromptDelivered"
        ]
    finally:
        log.close()
    assert prompts == ["list files", "write it"]  # the origin's (copied), then the one handed over
    assert [(e[0], e[1], e[6]) for e in entries[-2:]] == [("w1", "tool", "complete"), ("m1", "message", "")]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("redrive", "nope"), "no fork 'nope'"),
        (("fork", "ORIGIN", "--at", "5", "--prompt", "x"), "need --redrive"),
        (("fork", "ORIGIN", "--at", "5", "--redrive", "--prompt", "x"), "--prompt needs --command"),
        (("fork", "ORIGIN", "--at", "5", "--redrive", "--command", "a", "--apply-recorded"), "not --command"),
        (("redrive", "nope", "--command", "'unclosed"), "No closing quotation"),
        (("redrive", "nope", "--command", " "), "an empty command"),
        (("redrive", "ORIGIN"), "is not a fork"),
    ],
)
def test_bad_input_is_a_usage_error(run, recorded_db, args, message):
    _, origin = recorded_db
    args = tuple(origin.run_id if a == "ORIGIN" else a for a in args)
    code, out = run(*args)
    assert code == 2, out
    assert message in " ".join(out.split())


# -- the re-drive behind the commands ----------------------------------------------------------


def test_without_recorded_decisions_the_redriver_decides(recorded_db):
    path, origin = recorded_db
    with System.open(path, clock=ManualClock(), scheduler=False) as system:
        fork = fork_run(system.log, origin.run_id, origin.points["pending"], actor="alice")
        asked = []

        def decide(approval):
            asked.append(approval.title)
            system.approvals.resolve(approval.id, "reject", "carol")

        done = redrive(system, fork.run_id, on_pending=decide)
    assert asked == ["Run: ls"]
    assert (done.status, done.decisions, done.ran_out) == ("failed", ("reject",), False)
    assert "ended 'reject' here and 'approve'" in done.diverged
    assert done.reason == done.diverged


def test_a_recording_that_runs_out_is_aborted(tmp_path):
    path = tmp_path / "aborted.db"
    with System.open(path, clock=ManualClock(), scheduler=False) as system:
        run_id, _ = aborted_origin(system, idle_at_once=True)
        answered = next(
            r.seq for r in system.log.read("controller-aborted") if r.data.get("event_id") == "a1"
        )
        fork = fork_run(system.log, run_id, answered, actor="alice")
        done = redrive(system, fork.run_id)
    assert (done.status, done.ran_out, done.served) == ("aborted", True, 0)


def test_a_recording_whose_event_is_refused_is_aborted_and_says_why(recorded_db, monkeypatch):
    """The turn stops when an event it serves is refused; the re-drive then ends the run
    instead of waiting for it to end by itself."""
    from actors import RecordedHarness

    _fork = importlib.import_module("tools._forks")

    class Refused(RecordedHarness):
        def _emit(self, publish, event):
            if self.served:
                raise RuntimeError("the log refused the event")
            return super()._emit(publish, event)

    monkeypatch.setattr(_fork, "RecordedHarness", Refused)  # redrive builds its recording from this
    path, origin = recorded_db
    with System.open(path, clock=ManualClock(), scheduler=False) as system:
        fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")

        def approve(approval):
            system.approvals.resolve(approval.id, "approve", "carol")

        done = in_thread(lambda: redrive(system, fork.run_id, on_pending=approve)).result(WAIT)
    assert (done.status, done.served, done.ran_out) == ("aborted", 1, False)
    assert done.broke == "RuntimeError: the log refused the event"
    assert done.to_dict()["broke"] == done.broke


def test_a_re_drive_whose_harness_cannot_start_says_why_and_records_nothing(run, recorded_db, tmp_path):
    path, origin = recorded_db
    with System.open(path, clock=ManualClock(), scheduler=False) as system:
        fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
        head = system.log.head()
        harness = ManualHarness()
        harness.start_error = OSError("no such program")
        with pytest.raises(ControllerError, match="no such program"):
            redrive(system, fork.run_id, harness)
        assert harness.closes == 1
        assert system.log.head() == head
    code, out = run("redrive", fork.run_id, "--command", str(tmp_path / "missing-agent"))
    assert code == 2, out  # checked before the re-drive is claimed
    assert "cannot run" in out
    code, out = run("redrive", fork.run_id, "--apply-recorded")  # the fork still waits for its re-drive
    assert code == 0, out


def test_the_loser_of_two_re_drives_hears_why(recorded_db):
    path, origin = recorded_db
    with System.open(path, clock=ManualClock(), scheduler=False) as system:
        fork = fork_run(system.log, origin.run_id, origin.points["finished"], actor="alice")
        gate = threading.Barrier(2)
        # Both pass the first check before either resumes (the gate holds them in harness.start):
        # the append that resumes the fork decides which one loses.
        futures = [in_thread(redrive, system, fork.run_id, GatedHarness(gate)) for _ in range(2)]
        outcomes = [f.exception(WAIT) or f.result() for f in futures]
    [won] = [o for o in outcomes if isinstance(o, Redriven)]
    [lost] = [o for o in outcomes if not isinstance(o, Redriven)]
    assert won.status == "succeeded"
    assert isinstance(lost, ForkRedrivenError)


def test_fork_redrive_refuses_an_empty_prompt_before_writing(run, recorded_db):
    path, origin = recorded_db
    head = head_of(path)
    at = str(origin.points["before_permission"])
    code, out = run("fork", origin.run_id, "--at", at, "--redrive", "--command", "agent", "--prompt", " ")
    assert code == 2, out
    assert "an empty prompt" in out
    assert head_of(path) == head  # no fork was recorded


def test_a_fork_whose_re_drive_cannot_start_is_not_recorded(run, recorded_db, tmp_path):
    path, origin = recorded_db
    at = str(origin.points["before_permission"])
    code, out = run("fork", origin.run_id, "--at", at, "--redrive", "--command", str(tmp_path / "missing"))
    assert code == 2, out  # the program is checked before anything is written
    assert "cannot run" in " ".join(out.split())
    log = open_log(path, readonly=True)
    try:
        assert [r for r in Views(log).agent_runs(at=log.head().seq) if r.forked_from == origin.run_id] == []
    finally:
        log.close()


def head_of(path: Path) -> int:
    log = open_log(path, readonly=True)
    try:
        return log.head().seq
    finally:
        log.close()


def resumed_by(path: Path, fork_run_id: str) -> list[tuple[str, str]]:
    """The events that resumed a fork (from its ControllerStarted on) with their meta's actor."""
    rows = [(r.type, r.meta.get("actor", "")) for r in records(path, f"controller-fork-{fork_run_id}")]
    types = [t for t, _ in rows]
    return rows[types.index("ControllerStarted") :]


def test_who_re_drives_is_kept_in_the_log(run, recorded_db):
    path, origin = recorded_db
    code, out = run("fork", origin.run_id, "--at", str(origin.points["pending"]), "--json")
    assert code == 0, out
    fork = orjson.loads(out)
    code, out = run("redrive", fork["run_id"], "--actor", "bob", "--apply-recorded", "--json")
    assert code == 0, out
    assert resumed_by(path, fork["run_id"])[:3] == [
        ("ControllerStarted", "bob"),
        ("AgentRunStatusChanged", "bob"),
        ("PromptDelivered", "bob"),
    ]
    log = open_log(path, readonly=True)
    try:
        [approval] = [a for a in Views(log).approval_history(at=log.head().seq) if a.run_id == fork["run_id"]]
    finally:
        log.close()
    # Cast by bob's re-drive, on behalf of the recorded voter (each voter its own identity).
    assert (approval.actor, approval.identity) == ("alice (recorded)", "bob replaying alice")


def test_fork_redrive_keeps_the_forker_as_the_re_driver(run, recorded_db):
    path, origin = recorded_db
    at = str(origin.points["finished"])
    code, out = run("fork", origin.run_id, "--at", at, "--redrive", "--json")
    assert code == 0, out
    fork = orjson.loads(out)
    [opening] = [r for r in records(path, fork["stream"]) if r.type == "ForkedFrom"]
    user = opening.meta["actor"]
    assert user == f"cli:{getpass.getuser()}"  # the default, as `fork` has always recorded it
    assert resumed_by(path, fork["run_id"])[0] == ("ControllerStarted", user)
