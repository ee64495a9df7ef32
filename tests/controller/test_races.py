"""Races: a stale idle against the next run's admission (SEED-BEHAVIOUR §2.2: fence check and
mutation are atomic, so a stale idle never completes a new run)."""

from __future__ import annotations

import threading

from actors import HarnessEventError

from .helpers import WAIT, in_thread

ROUNDS = 256


def test_a_stale_idle_never_completes_the_next_run(ctrl, harness):
    run_id = ctrl.send("round 0")
    outcomes = {"ignored": 0, "refused": 0}
    for n in range(1, ROUNDS + 1):
        if n % 2:
            harness.emit("session.idle", run_id, id=f"{run_id}-idle")
        else:
            # The aborted turn's idle ends the abort; a second, later idle is the stale one.
            ctrl.abort()
            harness.emit("session.idle", run_id, id=f"{run_id}-idle")
        assert ctrl.status() == "idle"
        barrier = threading.Barrier(2)

        def stale_idle(old=run_id, barrier=barrier):
            barrier.wait(WAIT)
            try:
                harness.emit("session.idle", old, id=f"{old}-stale")
            except HarnessEventError:
                return "refused"  # it arrived after the new run was admitted
            return "ignored"  # it arrived first, for a run that had already ended

        def next_run(old=run_id, n=n, barrier=barrier):
            barrier.wait(WAIT)
            return ctrl.send_to_session("session-1", old, f"round {n}")

        stale, admitted = in_thread(stale_idle), in_thread(next_run)
        new_id = admitted.result(WAIT)
        outcomes[stale.result(WAIT)] += 1
        assert new_id != run_id
        run = ctrl.run()
        assert (run.id, run.status, run.can_abort) == (new_id, "running", True), f"round {n}"
        assert ctrl.status() == "running"
        run_id = new_id
    assert sum(outcomes.values()) == ROUNDS, outcomes
