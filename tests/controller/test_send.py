"""Send: validation, admission, titles, the durability hook, delivery failures (SEED-BEHAVIOUR §2.2 Send)."""

from __future__ import annotations

import threading

import pytest

from actors import (
    ControllerBusyError,
    ControllerError,
    ControllerValidationError,
    RunStarted,
    make_title,
)
from eventlog.events import AgentRunStarted, AgentRunStatusChanged, PromptDelivered

from .helpers import WAIT, ObservedLock, in_thread, recorded


@pytest.mark.parametrize("prompt", ["", "   ", "\n\t "])
def test_an_empty_prompt_is_refused(ctrl, harness, prompt):
    with pytest.raises(ControllerValidationError, match=r"^prompt is required$") as info:
        ctrl.send(prompt)
    assert isinstance(info.value, ValueError)
    assert harness.sends == []
    assert ctrl.run().id == ""


@pytest.mark.parametrize("delivery", ["", "later", "IMMEDIATE"])
def test_a_bad_delivery_is_refused(ctrl, harness, delivery):
    with pytest.raises(ControllerValidationError, match=r"^delivery must be immediate or enqueue$"):
        ctrl.send("hello", delivery)
    assert harness.sends == []


def test_a_prompt_is_trimmed_and_becomes_a_running_run(ctrl, harness, clock):
    run_id = ctrl.send("  hello there \n", "enqueue")
    assert harness.sends == [(run_id, "hello there", "enqueue")]
    run = ctrl.run()
    assert (run.id, run.session_id, run.prompt, run.status, run.can_abort) == (
        run_id,
        "session-1",
        "hello there",
        "running",
        True,
    )
    assert run.started_at == clock.now()
    assert ctrl.status() == "running"


def test_send_refuses_while_a_turn_runs(ctrl, harness):
    ctrl.send("first")
    with pytest.raises(ControllerBusyError, match=r"^the agent is already running or stopping a turn$"):
        ctrl.send("second")
    assert len(harness.sends) == 1


def test_send_refuses_while_aborting_until_the_idle_arrives(ctrl, harness):
    run_id = ctrl.send("first")
    ctrl.abort()
    assert ctrl.status() == "aborting"
    with pytest.raises(ControllerBusyError):
        ctrl.send("second")
    harness.emit("session.idle", run_id)
    assert ctrl.status() == "idle"
    assert ctrl.send("second") != run_id


def test_send_is_admitted_after_the_run_ends(ctrl, harness):
    first = ctrl.send("first")
    harness.emit("session.idle", first)
    second = ctrl.send("second")
    assert second != first
    assert ctrl.run().id == second


def test_sends_are_serialized(ctrl, harness):
    # The first send blocks inside the harness; a second send must wait for its admission
    # instead of being judged (and refused) while the first is half done.
    lock = ObservedLock()
    ctrl._admission = lock
    entered, release = threading.Event(), threading.Event()

    def deliver(run_id, prompt, delivery):
        if prompt == "first":
            entered.set()
            assert release.wait(WAIT)
            harness.emit("session.idle", run_id)  # the first turn is over before send returns

    harness.on_send = deliver
    first = in_thread(ctrl.send, "first")
    assert entered.wait(WAIT)
    second = in_thread(ctrl.send, "second")
    assert lock.contended.wait(WAIT)  # the second caller is queued behind the first admission
    assert len(harness.sends) == 1
    release.set()
    first_id, second_id = first.result(WAIT), second.result(WAIT)
    assert [s[0] for s in harness.sends] == [first_id, second_id]
    assert ctrl.run().id == second_id


@pytest.mark.parametrize(
    ("prompt", "title"),
    [
        ("  Fix the build  \nthen deploy", "Fix the build"),
        ("\n\n  second line is first  \nrest", "second line is first"),
        ("a" * 72, "a" * 72),
        ("a" * 73, "a" * 71 + "…"),
        ("é" * 36, "é" * 36),  # 72 bytes exactly
        ("é" * 37, "é" * 35 + "…"),  # 71 bytes would split a character: it is dropped
    ],
)
def test_the_title_is_the_first_line_trimmed_to_72_bytes(ctrl, system, prompt, title):
    assert make_title(prompt) == title
    run_id = ctrl.send(prompt)
    assert ctrl.run().title == title
    [started] = recorded(system, AgentRunStarted)
    assert (started.run_id, started.title) == (run_id, title)


def test_on_run_started_runs_before_the_prompt_is_delivered(ctrl, harness, clock):
    seen: list[RunStarted] = []

    def hook(started):
        assert harness.sends == []  # not delivered yet
        assert ctrl.status() == "running"
        seen.append(started)

    ctrl.on_run_started = hook
    run_id = ctrl.send("  Do it \nnow")
    assert seen == [RunStarted(run_id, "session-1", "Do it", "Do it \nnow", clock.now())]
    assert len(harness.sends) == 1


def test_a_failing_on_run_started_fails_the_run_and_leaves_the_controller_idle(ctrl, harness, system):
    statuses: list[tuple[str, str]] = []
    ctrl.on_run_status = lambda run_id, status, at: statuses.append((run_id, status))

    def hook(started):
        raise RuntimeError("db down")

    ctrl.on_run_started = hook
    with pytest.raises(ControllerError, match=r"^recording agent run: db down$"):
        ctrl.send("hello")
    assert harness.sends == []
    run = ctrl.run()
    assert (run.status, run.can_abort) == ("failed", False)
    assert ctrl.status() == "idle"
    changes = recorded(system, AgentRunStatusChanged)
    assert (changes[-1].status, changes[-1].reason) == ("failed", "recording agent run: db down")
    ctrl.on_run_started = None
    assert ctrl.send("again") != run.id


def test_a_failing_delivery_fails_the_run(ctrl, harness):
    statuses: list[tuple[str, str]] = []
    ctrl.on_run_status = lambda run_id, status, at: statuses.append((run_id, status))
    harness.send_error = OSError("pipe closed")
    with pytest.raises(ControllerError, match=r"^sending agent prompt: pipe closed$"):
        ctrl.send("hello")
    run = ctrl.run()
    assert (run.status, run.can_abort) == ("failed", False)
    assert ctrl.status() == "idle"
    assert statuses == [(run.id, "failed")]


def test_an_idle_published_inside_send_completes_the_run(ctrl, harness):
    statuses: list[tuple[str, str, str]] = []
    ctrl.on_run_status = lambda run_id, status, at: statuses.append((run_id, status, ctrl.status()))
    harness.on_send = lambda run_id, prompt, delivery: harness.emit("session.idle", run_id)
    run_id = ctrl.send("hello")
    assert ctrl.run().status == "succeeded"
    assert ctrl.status() == "idle"
    assert statuses == [(run_id, "succeeded", "persisting")]


def test_each_admitted_run_is_recorded(ctrl, harness, system):
    run_id = ctrl.send("hello", "enqueue")
    types = [r.type for r in system.log.read("controller-default")]
    assert types[-3:] == ["AgentRunStarted", "PromptDelivered", "AgentRunStatusChanged"]
    [delivered] = recorded(system, PromptDelivered)
    assert (delivered.run_id, delivered.prompt, delivered.delivery, delivered.steer) == (
        run_id,
        "hello",
        "enqueue",
        False,
    )
