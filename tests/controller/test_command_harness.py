"""CommandHarness with real programs: the example agent, and small programs written for a test."""

from __future__ import annotations

import os
import select
import sys
import textwrap
import threading

import pytest

from actors import CommandHarness, Controller, ControllerError, payload_digest

from .helpers import WAIT, wait_pending, wait_until

AGENT = [sys.executable, "-m", "actors.harnesses.example_agent"]

# Answers each prompt in two lines (one is not JSON), taking the run id from the prompt it got.
PLAIN = textwrap.dedent(
    """
    import json, sys
    for n, line in enumerate(sys.stdin):
        op = json.loads(line)
        if op["op"] == "prompt":
            print("warming up", flush=True)
            print(json.dumps({"type": "assistant.message", "id": f"m{n}", "data": {"content": op["prompt"]}}))
            print(json.dumps({"type": "session.idle", "id": f"i{n}"}), flush=True)
    """
)

# Ignores SIGTERM, and starts a grandchild (which inherits that) before reporting its pid.
STUBBORN = textwrap.dedent(
    """
    import json, signal, subprocess, sys
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    for line in sys.stdin:
        op = json.loads(line)
        if op["op"] == "prompt":
            child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
            message = {"type": "warning", "id": "w", "data": {"message": str(child.pid)}}
            print(json.dumps(message), flush=True)
    """
)


@pytest.fixture
def agent(system):
    harness = CommandHarness(AGENT)
    ctrl = system.controller(harness, controller_id="cmd")
    ctrl.start()
    return ctrl, harness


def assert_reaped(pid: int | None) -> None:
    assert pid is not None
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # not a child any more: it was waited for, no zombie is left
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def finished(ctrl: Controller) -> str:
    status: str = wait_until(ctrl, lambda: ctrl.status() == "idle" and ctrl.run().status)
    return status


def test_a_run_asks_permission_uses_a_tool_and_finishes(agent):
    ctrl, harness = agent
    assert ctrl.session_id().startswith("cmd-")
    run_id = ctrl.send("hello world")
    [approval] = wait_pending(ctrl)
    assert (approval.run_id, approval.title, approval.risk) == (run_id, "Run: echo 'hello world'", "high")
    assert approval.payload_sha256 == payload_digest("echo 'hello world'")
    ctrl.approval_queue().resolve(approval.id, "approve", "alice")
    assert finished(ctrl) == "succeeded"
    entries = [(e.kind, e.name, e.text, e.status) for e in ctrl.run().entries]
    assert entries == [
        ("message", "Claw", "I will run `echo 'hello world'`.", ""),
        ("tool", "shell", "", "complete"),
        ("message", "Claw", "Done: hello world", ""),
    ]
    tool = ctrl.run().entries[1]
    assert '"output":"hello world\\n"' in tool.detail
    pid = harness.pid
    assert pid is not None
    ctrl.close()
    assert_reaped(pid)


def test_a_rejected_command_is_not_run(agent):
    ctrl, _ = agent
    ctrl.send("rm everything")
    [approval] = wait_pending(ctrl)
    ctrl.approval_queue().resolve(approval.id, "reject", "alice")
    assert finished(ctrl) == "succeeded"
    assert [e.kind for e in ctrl.run().entries] == ["message", "message"]
    assert ctrl.run().entries[-1].text == "Not running it (reject)."


def test_abort_kills_the_program_and_the_next_send_starts_it_again(agent, system):
    ctrl, harness = agent
    run_id = ctrl.send("hello")
    [approval] = wait_pending(ctrl)
    pid = harness.pid
    assert pid is not None
    ctrl.abort()
    assert_reaped(pid)
    assert harness.pid is None
    assert harness.aborts == [run_id]
    assert ctrl.status() == "idle"  # the harness published the idle once the program was gone
    assert ctrl.run().status == "aborted"
    assert (system.views.approval(approval.id).decision, system.views.approval(approval.id).actor) == (
        "expired",
        "abort",
    )
    ctrl.send("again")
    [second] = wait_pending(ctrl)
    assert harness.pid not in (None, pid)
    ctrl.approval_queue().resolve(second.id, "approve", "alice")
    assert finished(ctrl) == "succeeded"
    assert ctrl.run().entries[-1].text == "Done: again"


def test_a_program_that_exits_by_itself_fails_the_run(agent):
    ctrl, harness = agent
    ctrl.send("/exit 3")
    assert finished(ctrl) == "failed"
    notice = ctrl.run().entries[-1]
    assert (notice.kind, notice.status, notice.text) == (
        "notice",
        "stopped",
        "The agent runtime stopped: exit code 3",
    )
    ctrl.send("back again")  # restarted
    wait_pending(ctrl)
    pid = harness.pid
    ctrl.close()
    assert_reaped(pid)


def test_close_kills_the_program_and_cancels_its_permission_request(agent):
    ctrl, harness = agent
    ctrl.send("hello")
    wait_pending(ctrl)
    pid = harness.pid
    ctrl.close()
    assert_reaped(pid)
    assert ctrl.approval_queue().pending() == []
    with pytest.raises(ControllerError, match="not started"):
        harness.send("r", "hello", "immediate")


class AnswersBeforeSendReturns(CommandHarness):
    """A harness whose program answers a prompt before `send` has returned (a busy machine)."""

    def __init__(self, argv: list[str]) -> None:
        super().__init__(argv)
        self.delivered = threading.Event()

    def _deliver(self, proc, line):  # type: ignore[no-untyped-def]
        super()._deliver(proc, line)
        self.delivered.set()

    def _write(self, proc, message):  # type: ignore[no-untyped-def]
        self.delivered.clear()
        super()._write(proc, message)
        if message["op"] == "prompt":
            assert self.delivered.wait(WAIT), "the program did not answer"


# The second: output that arrives before `send` returns belongs to the new run too.
@pytest.mark.parametrize("harness", [CommandHarness, AnswersBeforeSendReturns])
def test_events_without_a_run_id_belong_to_the_run_in_progress(system, harness):
    ctrl = system.controller(harness([sys.executable, "-c", PLAIN]), controller_id="plain")
    ctrl.start()
    for prompt in ("one", "two"):
        ctrl.send(prompt)
        assert finished(ctrl) == "succeeded"
    assert [(e.kind, e.text) for e in ctrl.run().entries] == [
        ("notice", "unreadable agent output: warming up"),
        ("message", "one"),
        ("notice", "unreadable agent output: warming up"),
        ("message", "two"),
    ]


def test_abort_escalates_to_sigkill_and_kills_the_whole_tree(system):
    harness = CommandHarness([sys.executable, "-c", STUBBORN], kill_timeout=0.2)
    ctrl = system.controller(harness, controller_id="stubborn")
    ctrl.start()
    ctrl.send("go")
    notice = wait_until(ctrl, lambda: ctrl.run().entries and ctrl.run().entries[0])
    grandchild = os.pidfd_open(int(notice.text))
    try:
        pid = harness.pid
        ctrl.abort()
        assert_reaped(pid)
        readable, _, _ = select.select([grandchild], [], [], WAIT)  # a pidfd is readable once it has exited
        assert readable == [grandchild]
    finally:
        os.close(grandchild)
    assert ctrl.status() == "idle"


def test_a_program_that_cannot_start_fails_the_start(system):
    ctrl = system.controller(CommandHarness(["/nonexistent/agent"]), controller_id="none")
    with pytest.raises(ControllerError, match=r"^starting agent harness: cannot run /nonexistent/agent"):
        ctrl.start()
    assert ctrl.status() == "stopped"


def test_argv_is_a_list():
    with pytest.raises(TypeError):
        CommandHarness("python -m actors.harnesses.example_agent")
    with pytest.raises(TypeError):
        CommandHarness([])
