"""Re-driving a fork: unknown ids, streams that are no fork, a second re-drive, aborts, crashes."""

from __future__ import annotations

import threading

import pytest

from actors import (
    ControllerValidationError,
    ForkError,
    ForkNotFoundError,
    ForkRedrivenError,
    NotAForkError,
    RecordedHarness,
    System,
    fork_run,
)
from eventlog import open_log
from eventlog.events import ControllerStarted

from .forks import GatedHarness, Origin, aborted_origin, record_origin, timeline
from .helpers import WAIT, ManualHarness, in_thread, recorded, wait_until


@pytest.fixture
def origin(system: System) -> Origin:
    return record_origin(system)


def settle(ctrl) -> None:
    wait_until(ctrl, lambda: ctrl.status() == "idle")


# -- refusals --------------------------------------------------------------------------------


def test_an_unknown_fork_is_refused(system):
    with pytest.raises(ForkNotFoundError, match="no fork 'nope'"):
        system.fork_controller("nope", ManualHarness())
    with pytest.raises(LookupError):
        RecordedHarness.for_fork(system.log, "nope")


def test_a_run_or_a_controller_that_is_not_a_fork_is_refused(system, origin):
    with pytest.raises(NotAForkError, match="is not a fork"):
        system.fork_controller(origin.run_id, ManualHarness())
    plain = system.controller(ManualHarness(), controller_id="fork-plain")  # named like one, but not
    plain.start()
    with pytest.raises(NotAForkError, match="opens with ControllerStarted"):
        system.fork_controller("plain", ManualHarness())
    head = system.log.head()
    with pytest.raises(NotAForkError, match="does not hold a fork"):
        plain.redrive()
    assert system.log.head() == head


def test_a_fork_is_re_driven_once(system, origin):
    fork = fork_run(system.log, origin.run_id, origin.points["finished"], actor="alice")
    first = system.fork_controller(fork.run_id, RecordedHarness.for_fork(system.log, fork.run_id))
    first.redrive()
    head = system.log.head()
    again = ManualHarness()
    with pytest.raises(ForkRedrivenError, match="already re-driven"):
        system.fork_controller(fork.run_id, again).redrive()
    with pytest.raises(ForkRedrivenError):
        first.redrive()
    assert again.starts == 0  # refused before its harness started
    assert system.log.head() == head


def test_of_two_concurrent_re_drives_one_wins_and_the_other_records_nothing(system, origin, db_path):
    fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
    gate = threading.Barrier(2)
    harnesses = [GatedHarness(gate), GatedHarness(gate)]
    ctrls = [system.fork_controller(fork.run_id, h) for h in harnesses]
    futures = [in_thread(c.redrive) for c in ctrls]
    outcomes = []
    for f in futures:
        error = f.exception(WAIT)
        outcomes.append(error if error is not None else f.result())
    # Both passed the check before either resumed (the gate holds them in harness.start), so
    # the append that resumes the fork is what decides: one wins, the other hears why.
    [winner] = [i for i, o in enumerate(outcomes) if o == fork.run_id]
    loser = 1 - winner
    assert isinstance(outcomes[loser], ForkRedrivenError)
    assert len(recorded(system, ControllerStarted, fork.stream)) == 1
    assert harnesses[loser].closes == 1
    assert harnesses[loser].sends == []
    assert ctrls[loser].status() == "stopped"
    assert harnesses[winner].sends == [(fork.run_id, "list files", "immediate")]
    harnesses[winner].emit("session.idle", fork.run_id)
    assert ctrls[winner].run().status == "succeeded"
    system.close()  # closing the loser records nothing in the winner's stream
    log = open_log(db_path, readonly=True)
    try:
        types = [r.type for r in log.read(fork.stream)]
    finally:
        log.close()
    assert types.count("ControllerClosed") == 1  # the winner's, when the System closed it
    assert types[-1] == "ControllerClosed"


def test_a_re_drive_refused_in_another_process_leaves_the_winner_running(system, origin, db_path, clock):
    fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
    harness = ManualHarness()
    ctrl = system.fork_controller(fork.run_id, harness)
    ctrl.redrive()
    head = system.log.head()
    with System.open(db_path, clock=clock, scheduler=False) as other:
        late = other.fork_controller(fork.run_id, ManualHarness())
        with pytest.raises(ForkRedrivenError):
            late.redrive()
        late.close()
        other.fork_controller(fork.run_id, ManualHarness())  # opened, never re-driven
    # Both closed (the second by its System) without writing: the fork's stream is the winner's.
    assert system.log.head() == head
    harness.emit("session.idle", fork.run_id)
    assert (ctrl.status(), ctrl.run().status) == ("idle", "succeeded")


# -- aborts ----------------------------------------------------------------------------------


def test_a_recording_that_runs_out_where_the_origin_was_aborted_leaves_the_run_to_its_re_driver(system):
    run_id, _ = aborted_origin(system, idle_at_once=True)
    answered = next(r.seq for r in system.log.read("controller-aborted") if r.data.get("event_id") == "a1")
    fork = fork_run(system.log, run_id, answered, actor="alice")
    harness = RecordedHarness.for_fork(system.log, fork.run_id)
    assert harness.turn.steps == ()  # the origin's abort began next: its idle is not a result
    assert harness.turn.aborted_seq > answered
    ctrl = system.fork_controller(fork.run_id, harness)
    ctrl.redrive()
    assert harness.finished.wait(WAIT)
    assert harness.exhausted
    assert ctrl.run().status == "running"
    ctrl.abort()
    settle(ctrl)
    assert ctrl.run().status == "aborted"
    assert timeline(system.log, fork.run_id) == timeline(system.log, run_id)


def test_a_fork_made_while_its_run_was_aborting_finishes_the_abort(system):
    run_id, _ = aborted_origin(system, idle_at_once=False)
    aborting = next(
        r.seq
        for r in system.log.read("controller-aborted")
        if r.type == "AgentRunStatusChanged" and r.data["status"] == "aborting"
    )
    fork = fork_run(system.log, run_id, aborting, actor="alice")
    harness = RecordedHarness.for_fork(system.log, fork.run_id)
    ctrl = system.fork_controller(fork.run_id, harness)
    assert ctrl.run().status == "aborting"
    head = system.log.head()
    with pytest.raises(ControllerValidationError, match="aborting at the fork point"):
        ctrl.redrive(prompt="go on")
    assert system.log.head() == head
    assert ctrl.redrive() == fork.run_id
    assert harness.aborts == [fork.run_id]
    assert (ctrl.run().status, ctrl.status()) == ("aborted", "idle")


# -- crashes ---------------------------------------------------------------------------------


def test_closing_a_fork_before_its_re_drive_records_nothing(system, origin):
    fork = fork_run(system.log, origin.run_id, origin.points["pending"], actor="alice")
    head = system.log.head()
    ctrl = system.fork_controller(fork.run_id, ManualHarness())
    ctrl.close()
    assert system.log.head() == head
    again = system.fork_controller(fork.run_id, RecordedHarness.for_fork(system.log, fork.run_id))
    assert again.status() == "starting"


def test_a_re_drive_that_died_is_recovered_like_any_run(db_path, clock, origin, system):
    fork = fork_run(system.log, origin.run_id, origin.points["before_permission"], actor="alice")
    harness = ManualHarness()
    system.fork_controller(fork.run_id, harness).redrive()
    assert harness.sends  # the run is running again, and this "process" now stops answering
    with System.open(db_path, clock=clock, scheduler=False) as restarted:
        with pytest.raises(ForkRedrivenError):
            restarted.fork_controller(fork.run_id, ManualHarness()).redrive()
        ctrl = restarted.controller(ManualHarness(), controller_id=fork.controller_id)
        run = ctrl.run()
        assert (run.id, run.status) == (fork.run_id, "failed")
        assert (run.entries[-1].kind, run.entries[-1].status) == ("notice", "stopped")
        with pytest.raises(ForkError):
            ctrl.redrive()
