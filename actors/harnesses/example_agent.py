"""An example agent for CommandHarness: `python -m actors.harnesses.example_agent`.

It speaks the harness's JSON-lines protocol on stdin and stdout. For each prompt it streams a
short reply, asks permission to run `echo <first line of the prompt>` (a `permission.request`
titled `Run: <cmd>`, risk high, the command as payload), runs it if approved (`tool.start`,
then `tool.complete` with its output), answers, and goes idle. An abort for the run ends the
turn at once. A prompt `/exit N` makes the program exit with code N in the middle of the turn
(so a harness's handling of a dying agent can be seen). Only the standard library is used.
"""

from __future__ import annotations

import collections
import json
import shlex
import subprocess
import sys
from typing import Any, TextIO


class ExampleAgent:
    """Reads operations from `stdin`, writes events to `stdout`, one turn at a time."""

    def __init__(self, stdin: TextIO, stdout: TextIO) -> None:
        self.stdin = stdin
        self.stdout = stdout
        self.inbox: collections.deque[dict[str, Any]] = collections.deque()
        self.count = 0

    def emit(self, type_: str, run_id: str, data: dict[str, Any] | None = None, id: str = "") -> str:
        self.count += 1
        id = id or f"{run_id}-{self.count}"
        self.stdout.write(json.dumps({"type": type_, "run_id": run_id, "id": id, "data": data or {}}) + "\n")
        self.stdout.flush()
        return id

    def read(self) -> dict[str, Any] | None:
        """The next operation (queued ones first); None at end of input."""
        if self.inbox:
            return self.inbox.popleft()
        return self.read_fresh()

    def run(self) -> int:
        while (op := self.read()) is not None:
            if op.get("op") == "prompt":
                self.turn(str(op.get("run_id", "")), str(op.get("prompt", "")))
        return 0

    def wait_permission(self, run_id: str, request_id: str) -> str:
        """The decision for `request_id`, or "aborted"; prompts that arrive meanwhile wait their turn."""
        while True:
            op = self.read_fresh()
            if op is None:
                raise SystemExit(0)
            if op.get("op") == "permission" and op.get("id") == request_id:
                return str(op.get("decision", "expired"))
            if op.get("op") == "abort" and op.get("run_id") == run_id:
                return "aborted"
            if op.get("op") == "prompt":
                self.inbox.append(op)

    def read_fresh(self) -> dict[str, Any] | None:
        """The next operation from stdin, skipping lines that are not JSON objects."""
        for line in self.stdin:
            try:
                op = json.loads(line)
            except ValueError:
                continue
            if isinstance(op, dict):
                return op
        return None

    def turn(self, run_id: str, prompt: str) -> None:
        line = prompt.strip().splitlines()[0] if prompt.strip() else "hello"
        if line.startswith("/exit"):
            code = int(line.split()[1]) if len(line.split()) > 1 else 1
            self.emit("assistant.message", run_id, {"content": f"Exiting with code {code}."})
            raise SystemExit(code)
        cmd = ["echo", line]
        shown = shlex.join(cmd)
        reply = f"{run_id}-intro"
        self.emit("assistant.delta", run_id, {"message_id": reply, "delta": "I will run "})
        self.emit("assistant.delta", run_id, {"message_id": reply, "delta": f"`{shown}`."})
        self.emit("assistant.message", run_id, {"message_id": reply, "content": f"I will run `{shown}`."})
        call_id = f"{run_id}-call"
        request = self.emit(
            "permission.request",
            run_id,
            {
                "kind": "shell",
                "title": f"Run: {shown}",
                "detail": shown,
                "risk": "high",
                "tool_name": "shell",
                "tool_call_id": call_id,
                "payload": shown,
            },
        )
        decision = self.wait_permission(run_id, request)
        if decision == "aborted":
            self.emit("session.idle", run_id)
            return
        if decision != "approve":
            self.emit("assistant.message", run_id, {"content": f"Not running it ({decision})."})
            self.emit("session.idle", run_id)
            return
        self.emit(
            "tool.start",
            run_id,
            {"tool_call_id": call_id, "tool_name": "shell", "arguments": {"command": shown}},
        )
        try:
            done = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=30)
            result: dict[str, Any] = {
                "tool_call_id": call_id,
                "output": done.stdout,
                "exit_code": done.returncode,
            }
            if done.returncode != 0:
                result["error"] = done.stderr.strip() or f"exit code {done.returncode}"
        except (OSError, subprocess.TimeoutExpired) as e:
            result = {"tool_call_id": call_id, "error": str(e)}
        self.emit("tool.complete", run_id, result)
        text = (
            f"Done: {result['output'].strip()}" if "error" not in result else f"It failed: {result['error']}"
        )
        self.emit("assistant.message", run_id, {"content": text})
        self.emit("session.idle", run_id)


def main() -> int:
    return ExampleAgent(sys.stdin, sys.stdout).run()


if __name__ == "__main__":
    sys.exit(main())
