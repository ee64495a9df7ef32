"""`flightlog hook claude` fed Claude Code's documented hook JSON, from parallel processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import OPERATOR_TOKEN, Served

pytestmark = pytest.mark.slow

SESSION = "5c1e7d2a-0b9e-4f7e-9a61-3f4c2d1b0a99"
RUN = f"claude-{SESSION}"


def event(kind: str, tool: str, tool_input: dict, call_id: str, session: str = SESSION, **more) -> bytes:
    """A hook input as Claude Code's hooks reference documents it."""
    body = {
        "session_id": session,
        "transcript_path": "/home/user/.claude/projects/demo/session.jsonl",
        "cwd": "/home/user/demo",
        "permission_mode": "default",
        "hook_event_name": kind,
        "tool_name": tool,
        "tool_input": tool_input,
        "tool_use_id": call_id,
        **more,
    }
    return json.dumps(body).encode()


def expected(decision: str, reason: str) -> bytes:
    """The PreToolUse answer, byte for byte: one JSON line."""
    out = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }
    return json.dumps(out).encode() + b"\n"


@pytest.fixture
def hook(served: Served, tmp_path: Path):
    env = {
        **os.environ,
        "FLIGHTLOG_URL": served.url,
        "FLIGHTLOG_TOKEN": OPERATOR_TOKEN,  # creates the session's run (an enrolment credential)
        "FLIGHTLOG_TOKEN_DIR": str(tmp_path / "tokens"),
    }
    env.pop("FLIGHTLOG_HOOK_POLICY", None)

    def start(stdin: bytes, *args: str) -> subprocess.Popen[bytes]:
        argv = [sys.executable, "-m", "tools.cli", "hook", "claude", *args]
        process = subprocess.Popen(
            argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert process.stdin is not None
        process.stdin.write(stdin)
        process.stdin.close()
        process.stdin = None  # written and closed, as Claude Code does: communicate() only reads
        return process

    return start


def finish(process: subprocess.Popen[bytes]) -> bytes:
    out, err = process.communicate(timeout=90)
    assert process.returncode == 0, err.decode()
    return out


def test_parallel_hooks_of_one_session_each_get_their_own_decision(served: Served, hook, tmp_path):
    short = tmp_path / "short.toml"
    short.write_text('gate = ["Bash", "Write"]\nwait = 0.5\n')
    calls = {
        "toolu_01A": ("Bash", {"command": "make deploy", "description": "Deploy"}),
        "toolu_01B": ("Write", {"file_path": "/home/user/demo/x.py", "content": "print(1)\n"}),
        "toolu_01C": ("Bash", {"command": "rm -rf build", "description": "Clean"}),
    }
    processes = {
        call_id: hook(event("PreToolUse", tool, tool_input, call_id), *(("--policy", str(short)) * (i == 2)))
        for i, (call_id, (tool, tool_input)) in enumerate(calls.items())
    }
    # The operators decide once both requests are filed: the API is asked until they show,
    # each answer pacing the next question (the hooks wait as long as it takes).
    pending: dict[str, str] = {}
    while not {"toolu_01A", "toolu_01B"} <= pending.keys():
        pending = served.pending(RUN)
    assert served.decide(pending["toolu_01A"], "approve", "alice").status_code == 200
    assert served.decide(pending["toolu_01B"], "reject", "bob").status_code == 200
    assert finish(processes["toolu_01A"]) == expected("allow", "flightlog: approved by alice")
    assert finish(processes["toolu_01B"]) == expected("deny", "flightlog: rejected by bob")
    assert finish(processes["toolu_01C"]) == expected("ask", "flightlog: no operator decided within 0.5 s")
    assert served.pending(RUN) == {}  # the unanswered one was withdrawn, not left for an operator


def test_recorded_calls_and_results_are_reports(served: Served, hook):
    session = "9d0c4b6e-2f1a-4c3b-8e7d-6a5f4e3d2c1b"
    read = event("PreToolUse", "Read", {"file_path": "/home/user/demo/README.md"}, "toolu_02A", session)
    assert finish(hook(read)) == b""  # not gated: no decision, Claude Code goes on as usual
    result = {"type": "text", "file": {"filePath": "/home/user/demo/README.md", "numLines": 3}}
    post = event("PostToolUse", "Read", {"file_path": "/home/user/demo/README.md"}, "toolu_02A", session,
                 tool_response=result)  # fmt: skip
    assert finish(hook(post)) == b""
    reports = served.run(f"claude-{session}")["reports"]
    assert reports[-2]["state"] == "tool.start"
    assert reports[-2]["payload"]["tool"] == "Read"
    assert reports[-1]["state"] == "tool.complete"
    assert reports[-1]["payload"]["response"] == result


def test_install_merges_into_the_project_settings(tmp_path):
    settings = tmp_path / ".claude" / "settings.json"
    settings.parent.mkdir()
    mine = {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh"}]}
    settings.write_text(json.dumps({"permissions": {"allow": ["Read"]}, "hooks": {"PreToolUse": [mine]}}))
    argv = [sys.executable, "-m", "tools.cli", "hook", "claude", "--install", "--project", str(tmp_path)]
    for _ in range(2):  # installing again changes nothing
        subprocess.run(argv, check=True, capture_output=True, timeout=60)
    merged = json.loads(settings.read_text())
    command = {"type": "command", "command": "flightlog hook claude", "timeout": 150}
    ours = {"matcher": "*", "hooks": [command]}
    assert merged == {
        "permissions": {"allow": ["Read"]},
        "hooks": {"PreToolUse": [mine, ours], "PostToolUse": [ours]},
    }
