"""Re-driving a fork: the copied run resumes at the fork point, from its recording or a live harness."""

from __future__ import annotations

import sys

import pytest

from actors import (
    CommandHarness,
    ControllerError,
    RecordedHarness,
    ScriptedHarness,
    SentPrompt,
    System,
    fork_run,
)
from eventlog.events import AgentRunStatusChanged, PromptDelivered
from projections import Views

from .forks import MARKER_AGENT, PROMPT, Origin, harness_records, record_origin, served, timeline
from .helpers import WAIT, ManualHarness, recorded, wait_pending, wait_until


@pytest.fixture
def origin(system: System) -> Origin:
    return record_origin(system)


def settle(ctrl) -> None:
    wait_until(ctrl, lambda: ctrl.status() == "idle")


# -- from the recording ----------------------------------------------------------------------


@pytest.mark.parametrize("point", ["before_permission", "permission", "pending", "finished"])
def test_a_recorded_redrive_plays_the_rest_of_the_origin(system, origin, point):
    log = system.log
    at = origin.points[point]
    before = list(log.read(origin.stream))
    fork = fork_run(log, origin.run_id, at, actor="alice", reason="replay", new_id=f"f-{point}")
    harness = RecordedHarness.for_fork(log, fork.run_id)
    ctrl = system.fork_controller(fork.run_id, harness)
    copied_status = "succeeded" if point == "finished" else "running"
    assert (ctrl.status(), ctrl.run().status) == ("starting", copied_status)

    assert ctrl.redrive() == fork.run_id
    if point != "finished":
        [approval] = wait_pending(ctrl)  # asked again in the fork, decided by whoever re-drives it
        assert (approval.run_id, approval.tool_call_id) == (fork.run_id, "c1")
        system.approvals.resolve(approval.id, "approve", "bob")
    settle(ctrl)
    assert harness.join(WAIT)

    # The fork's harness events after its copies are the origin's after the fork point (a
    # request still undecided at the fork point is asked again first).
    origin_rest = served(harness_records(log, origin.stream, at))
    if point in ("permission", "pending"):
        [request] = [r for r in served(harness_records(log, origin.stream)) if r[0] == "permission.request"]
        origin_rest.insert(0, request)
    assert served(harness_records(log, fork.stream, fork.seq + fork.copied)) == origin_rest
    assert harness.decisions == ([] if point == "finished" else ["approve"])
    assert timeline(log, fork.run_id) == timeline(log, origin.run_id)
    row = Views(log).agent_run(fork.run_id, at=log.head().seq)
    assert row is not None
    assert (row.status, row.forked_from, row.fork_seq) == ("succeeded", origin.run_id, at)
    assert list(log.read(origin.stream)) == before  # the origin is only read
    assert log.verify().ok


def test_the_resumed_run_is_recorded_as_resumed(system, origin):
    fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
    ctrl = system.fork_controller(fork.run_id, RecordedHarness.for_fork(system.log, fork.run_id))
    copied = len(recorded(system, PromptDelivered, fork.stream))
    ctrl.redrive()
    [approval] = wait_pending(ctrl)
    system.approvals.resolve(approval.id, "approve", "bob")
    settle(ctrl)
    statuses = [(e.status, e.reason) for e in recorded(system, AgentRunStatusChanged, fork.stream)]
    assert statuses == [("running", ""), ("running", "re-driven from the fork point"), ("succeeded", "")]
    delivered = recorded(system, PromptDelivered, fork.stream)
    assert len(delivered) == copied + 1
    assert (delivered[-1].prompt, delivered[-1].steer) == (PROMPT, False)


@pytest.mark.parametrize(("actor", "meta"), [("carol", "carol"), ("", "controller")])
def test_who_re_drives_is_the_actor_of_the_events_that_resume_the_fork(system, origin, actor, meta):
    fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
    head = system.log.head().seq
    ctrl = system.fork_controller(fork.run_id, ManualHarness())
    ctrl.redrive(actor=actor)
    resumed = [(r.type, r.meta["actor"]) for r in system.log.read(fork.stream) if r.seq > head]
    assert resumed == [
        ("ControllerStarted", meta),
        ("AgentRunStatusChanged", meta),
        ("PromptDelivered", meta),
    ]


def test_a_decision_other_than_the_origins_ends_the_recording(system, origin):
    before = list(system.log.read(origin.stream))
    fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
    harness = RecordedHarness.for_fork(system.log, fork.run_id)
    ctrl = system.fork_controller(fork.run_id, harness)
    ctrl.redrive()
    [approval] = wait_pending(ctrl)
    system.approvals.resolve(approval.id, "reject", "bob")
    settle(ctrl)
    run = ctrl.run()
    assert run.status == "failed"
    assert harness.decisions == ["reject"]
    error = run.entries[-1]
    assert (error.kind, error.status) == ("error", "failed")
    assert error.text == harness.diverged
    assert "ended 'reject' here and 'approve' in run" in error.text
    assert not any(e.kind == "tool" for e in run.entries)  # nothing the origin did after approval
    assert list(system.log.read(origin.stream)) == before


def test_a_recorded_redrive_runs_nothing_and_a_live_one_does(system, tmp_path):
    marker = tmp_path / "marker"
    agent = [sys.executable, "-c", MARKER_AGENT, str(marker)]
    ctrl = system.controller(CommandHarness(agent), controller_id="cmd")
    ctrl.start()
    origin_id = ctrl.send("write the marker")
    settle(ctrl)
    ctrl.close()
    assert marker.read_text().splitlines() == [origin_id]
    events = harness_records(system.log, "controller-cmd")
    [tool_start] = [r for r in events if r.data["type"] == "tool.start"]

    fork = fork_run(system.log, origin_id, tool_start.seq, actor="alice")
    replay = system.fork_controller(fork.run_id, RecordedHarness.for_fork(system.log, fork.run_id))
    replay.redrive()
    settle(replay)
    assert replay.run().status == "succeeded"
    assert timeline(system.log, fork.run_id) == timeline(system.log, origin_id)
    # Served from the records: the program never ran, so the marker holds the origin's line only.
    assert marker.read_text().splitlines() == [origin_id]

    live_fork = fork_run(system.log, origin_id, tool_start.seq, actor="alice")
    live = system.fork_controller(live_fork.run_id, CommandHarness(agent))
    live.redrive()
    settle(live)
    assert live.run().status == "succeeded"
    assert marker.read_text().splitlines() == [origin_id, live_fork.run_id]  # a live harness does run


# -- with a live harness ---------------------------------------------------------------------


def test_a_live_harness_gives_the_fork_another_ending(system, origin):
    before = list(system.log.read(origin.stream))
    fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
    harness = ScriptedHarness([{"type": "session.error", "message": "the tool is gone"}], session_id="live")
    ctrl = system.fork_controller(fork.run_id, harness)
    assert ctrl.redrive(prompt="list files, again") == fork.run_id
    settle(ctrl)
    assert harness.prompts == [SentPrompt(fork.run_id, "list files, again", "immediate")]
    assert ctrl.session_id() == "live"
    views = Views(system.log)
    head = system.log.head().seq
    forked, source = views.agent_run(fork.run_id, at=head), views.agent_run(origin.run_id, at=head)
    assert forked is not None
    assert source is not None
    assert (forked.status, forked.reason, forked.forked_from) == ("failed", "the tool is gone", origin.run_id)
    assert source.status == "succeeded"  # the origin's ending is its own
    assert list(system.log.read(origin.stream)) == before
    tail = views.timeline(fork.run_id, at=head)[-2:]
    assert [(e.kind, e.text) for e in tail] == [
        ("message", "list files, again"),
        ("error", "the tool is gone"),
    ]
    assert [r.run_id for r in views.agent_runs(at=head)] == [origin.run_id, fork.run_id]
    assert views.timeline_at_each_event(fork.run_id)[0].type == "ForkedFrom"


def test_any_harness_re_drives_a_fork_opened_as_an_ordinary_controller(system, origin):
    fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
    head = system.log.head()
    harness = ManualHarness()
    ctrl = system.controller(harness, controller_id=fork.controller_id)
    # Opening recovers crashed runs: a fork waiting at its fork point is not one.
    assert system.log.head() == head
    assert (ctrl.status(), ctrl.run().status) == ("starting", "running")
    with pytest.raises(ValueError, match="use redrive"):
        ctrl.start()
    assert system.log.head() == head
    assert ctrl.redrive() == fork.run_id
    assert harness.sends == [(fork.run_id, PROMPT, "immediate")]
    assert ctrl.status() == "running"
    harness.emit("session.idle", fork.run_id)
    assert ctrl.run().status == "succeeded"


def test_a_finished_fork_takes_a_prompt_as_its_next_run(system, origin):
    fork = fork_run(system.log, origin.run_id, origin.points["finished"], actor="alice")
    harness = RecordedHarness.for_fork(system.log, fork.run_id)
    ctrl = system.fork_controller(fork.run_id, harness)
    # Nothing was recorded for another prompt: the recording refuses it and the new run fails.
    with pytest.raises(ControllerError, match="sending agent prompt: no recorded result for this prompt"):
        ctrl.redrive(prompt="and now?")
    run = ctrl.run()
    assert run.id != fork.run_id
    assert (run.prompt, run.status) == ("and now?", "failed")
    assert ctrl.status() == "idle"
