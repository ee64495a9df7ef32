"""A restarted controller (a new System on the same file) fails the run its process died in."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from actors import System
from eventlog.events import AgentRunStatusChanged

from .helpers import ManualHarness, recorded

# A process that admits a run and dies in the middle of it, without closing anything.
DIES_DURING_A_RUN = textwrap.dedent(
    """
    import os, sys
    from actors import HarnessEvent, System
    from eventlog import ManualClock

    class Harness:
        def start(self, publish):
            self.publish = publish
            return "session-1"
        def send(self, run_id, prompt, delivery):
            self.publish(HarnessEvent("assistant.message", run_id, "a1", {"content": "working on it"}))
        def abort(self, run_id): pass
        def close(self): pass

    system = System.open(sys.argv[1], clock=ManualClock(), scheduler=False)
    ctrl = system.controller(Harness(), controller_id="ctl")
    ctrl.start()
    print(ctrl.send("long job"), flush=True)
    os._exit(0)
    """
)


def test_a_run_in_progress_when_the_process_died_is_failed_with_a_stopped_notice(db_path, clock):
    done = subprocess.run(
        [sys.executable, "-c", DIES_DURING_A_RUN, str(db_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    run_id = done.stdout.strip()
    assert run_id
    clock.advance(60)  # the restart comes later than the child's (equally manual) clock

    with System.open(db_path, clock=clock, scheduler=False) as system:
        harness = ManualHarness()
        statuses = []
        ctrl = system.controller(harness, controller_id="ctl")
        run = ctrl.run()
        assert (run.id, run.title, run.status, run.can_abort) == (run_id, "long job", "failed", False)
        assert ctrl.status() == "idle"
        assert [(e.kind, e.text) for e in run.entries[:1]] == [("message", "working on it")]
        notice = run.entries[-1]
        assert (notice.kind, notice.status) == ("notice", "stopped")
        assert notice.text.startswith("The agent runtime stopped: ")
        last = recorded(system, AgentRunStatusChanged, "controller-ctl")[-1]
        assert system.log.head().seq == list(system.log.read("controller-ctl"))[-1].seq
        assert (last.run_id, last.status) == (run_id, "failed")

        # The controller goes on: a new session, a new run.
        ctrl.on_run_status = lambda rid, status, at: statuses.append(status)
        ctrl.start()
        new_id = ctrl.send("again")
        harness.emit("session.idle", new_id)
        assert ctrl.run().status == "succeeded"
        assert statuses == ["succeeded"]

    with System.open(db_path, clock=clock, scheduler=False) as system:
        # A second restart finds nothing in progress: nothing more is recorded.
        before = system.log.head()
        again = system.controller(ManualHarness(), controller_id="ctl")
        assert again.run().status == "succeeded"
        assert system.log.head() == before


def test_other_controllers_are_not_touched_by_a_recovery(db_path, clock):
    with System.open(db_path, clock=clock, scheduler=False) as system:
        harness = ManualHarness()
        ctrl = system.controller(harness, controller_id="a")
        ctrl.start()
        ctrl.send("left running")
    with System.open(db_path, clock=clock, scheduler=False) as system:
        other = system.controller(ManualHarness(), controller_id="b")
        assert other.run().id == ""
        assert other.status() == "starting"
        recovered = system.controller(ManualHarness(), controller_id="a")
        assert recovered.run().status == "failed"
