"""ScriptedHarness: recorded turns played for a controller, threaded or inside send."""

from __future__ import annotations

import pytest

from actors import Controller, ControllerError, HarnessEvent, ScriptedHarness, SentPrompt

from .helpers import TURN, WAIT, wait_pending, wait_until


def settled(ctrl: Controller) -> None:
    wait_until(ctrl, lambda: ctrl.status() == "idle")


def texts(ctrl: Controller) -> list[tuple[str, str, str]]:
    return [(e.kind, e.text or e.name, e.status) for e in ctrl.run().entries]


@pytest.mark.parametrize("decision", ["approve", "reject"])
def test_a_threaded_turn_waits_for_the_decision_and_branches_on_it(system, decision):
    harness = ScriptedHarness(TURN, session_id="demo")
    ctrl = system.controller(harness)
    ctrl.start()
    assert ctrl.session_id() == "demo"
    run_id = ctrl.send("list files")
    [approval] = wait_pending(ctrl)  # send returned while the turn waits for its approval
    assert ctrl.status() == "running"
    assert (approval.title, approval.run_id) == ("Run: ls", run_id)
    system.approvals.resolve(approval.id, decision, "alice")
    settled(ctrl)
    assert harness.join(WAIT)
    assert ctrl.run().status == "succeeded"
    assert harness.decisions == [decision]
    assert harness.prompts == [SentPrompt(run_id, "list files", "immediate")]
    tail = (
        [("tool", "shell", "complete"), ("message", "Found a and b.", "")]
        if decision == "approve"
        else [("message", "I did not look.", "")]
    )
    assert texts(ctrl) == [("message", "list files", ""), ("message", "Let me look.", ""), *tail]


def test_a_synchronous_turn_is_played_inside_send(system):
    harness = ScriptedHarness(
        [{"type": "assistant.message", "content": "Hi"}, {"type": "session.idle"}], threaded=False, echo=False
    )
    ctrl = system.controller(harness)
    ctrl.start()
    ctrl.send("hello")
    assert ctrl.run().status == "succeeded"
    assert ctrl.status() == "idle"
    assert texts(ctrl) == [("message", "Hi", "")]


def test_scripts_by_prompt_with_a_default(system):
    harness = ScriptedHarness(
        {
            "ping": [{"type": "assistant.message", "content": "pong"}, {"type": "session.idle"}],
            "*": [{"type": "session.error", "message": "unknown prompt"}],
        },
        threaded=False,
        echo=False,
    )
    ctrl = system.controller(harness)
    ctrl.start()
    ctrl.send("ping")
    assert (ctrl.run().status, texts(ctrl)[-1]) == ("succeeded", ("message", "pong", ""))
    ctrl.send("what?")
    assert (ctrl.run().status, texts(ctrl)[-1]) == ("failed", ("error", "unknown prompt", "failed"))


def test_a_script_may_be_a_function_of_the_prompt_and_steps_may_be_events(system):
    def script(prompt):
        return [
            HarnessEvent("assistant.message", data={"content": prompt.upper()}),
            HarnessEvent("session.idle"),
        ]

    harness = ScriptedHarness(script, threaded=False, echo=False)
    ctrl = system.controller(harness)
    ctrl.start()
    ctrl.send("shout")
    assert texts(ctrl) == [("message", "SHOUT", "")]
    assert ctrl.run().status == "succeeded"


def test_a_prompt_for_the_playing_run_is_a_steer(system):
    harness = ScriptedHarness(TURN)
    ctrl = system.controller(harness)
    ctrl.start()
    run_id = ctrl.send("list files")
    [approval] = wait_pending(ctrl)
    assert ctrl.send_to_session("scripted-session", run_id, "hurry", "immediate") == run_id
    ctrl.steer("scripted-session", run_id, "and then stop", "enqueue")
    assert harness.prompts[1:] == [
        SentPrompt(run_id, "hurry", "immediate", steer=True),
        SentPrompt(run_id, "and then stop", "enqueue", steer=True),
    ]
    assert [e.status for e in ctrl.run().entries if e.role == "user"] == ["", "steering", "queued"]
    system.approvals.resolve(approval.id, "approve", "alice")
    settled(ctrl)
    assert ctrl.run().status == "succeeded"


def test_an_abort_stops_the_turn_and_the_idle_follows(system):
    harness = ScriptedHarness(TURN)
    ctrl = system.controller(harness)
    ctrl.start()
    run_id = ctrl.send("list files")
    [approval] = wait_pending(ctrl)
    ctrl.abort()
    settled(ctrl)
    assert harness.join(WAIT)
    assert harness.aborts == [run_id]
    assert harness.decisions == ["expired"]
    assert ctrl.run().status == "aborted"
    assert system.views.approval(approval.id).actor == "abort"
    assert all(e.kind != "tool" for e in ctrl.run().entries)  # the rest of the turn never played
    assert not any("did not look" in e.text for e in ctrl.run().entries)


def test_an_abort_after_the_script_ran_out_still_answers_with_idle(system):
    harness = ScriptedHarness([{"type": "assistant.message", "content": "thinking forever"}], threaded=False)
    ctrl = system.controller(harness)
    ctrl.start()
    ctrl.send("hello")
    assert ctrl.status() == "running"
    ctrl.abort()
    assert ctrl.status() == "idle"
    assert ctrl.run().status == "aborted"


def test_a_bad_step_fails_the_delivery(system):
    harness = ScriptedHarness([{"data": {"content": "no type"}}])
    ctrl = system.controller(harness)
    ctrl.start()
    with pytest.raises(ControllerError, match="sending agent prompt: a script step needs a type"):
        ctrl.send("hello")
    assert ctrl.run().status == "failed"


def test_a_script_is_not_a_string():
    with pytest.raises(TypeError):
        ScriptedHarness("session.idle")


def test_send_before_start_is_refused():
    harness = ScriptedHarness([])
    with pytest.raises(ControllerError, match="not started"):
        harness.send("r", "hello", "immediate")


def test_an_event_the_controller_refuses_ends_the_turn_and_is_kept(ctrl):
    stale = ScriptedHarness(
        [{"type": "assistant.message", "content": "late"}, {"type": "session.idle"}],
        threaded=False,
        echo=False,
    )
    stale.start(ctrl.publish)
    stale.send("not-the-active-run", "hello", "immediate")
    assert [str(e) for e in stale.errors] == ["publishing harness event: run_id is not the active run"]


def test_close_joins_the_turns_and_blocks_further_sends(system):
    harness = ScriptedHarness(TURN)
    ctrl = system.controller(harness)
    ctrl.start()
    ctrl.send("list files")
    wait_pending(ctrl)
    ctrl.close()  # the waiting permission is cancelled, the turn ends, close joins it
    assert harness.closed
    assert harness.decisions == ["error"]
    assert ctrl.approval_queue().pending() == []
    with pytest.raises(ControllerError, match="not started"):
        harness.send("r", "again", "immediate")
