"""`flightlog hook claude`: Claude Code's PreToolUse and PostToolUse hook, built on the SDK.

Claude Code runs the command once per tool call with the hook's JSON on stdin. A session is
a run (`claude-<session_id>`); a tool call the policy gates is filed as a permission request
whose id is the call's `tool_use_id`, so parallel calls of one session each wait for their own
decision; the answer is the `hookSpecificOutput` Claude Code reads (allow, deny with the
operator's reason, or ask when no decision came in time). Every other call, and every
result (PostToolUse), is recorded as a report. The hook never fails the tool call by itself:
when flightlog cannot be reached, a gated call is answered `ask` and the person decides.
"""

from __future__ import annotations

import fnmatch
import json
import os
import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

import flightlog

PRE, POST = "PreToolUse", "PostToolUse"
POLICY_VAR = "FLIGHTLOG_HOOK_POLICY"
# Tools that change things: an operator decides them unless a policy says otherwise.
GATED = ("Bash", "Write", "Edit", "MultiEdit", "NotebookEdit", "WebFetch", "mcp__*")
DEFAULT_WAIT = 120.0  # seconds a gated call waits for an operator before Claude Code asks its user
RESULT_LIMIT = 4000  # characters of a tool's result kept in its report
COMMAND = "flightlog hook claude"


@dataclass(frozen=True, slots=True)
class Policy:
    """Which tools an operator decides (`gate`) and which are only recorded (`record`), by name pattern.

    A call matching a `gate` pattern (fnmatch, case-sensitive) waits for an operator, up to
    `wait` seconds; any other call is recorded. `risk` is the lowest risk a gated call is filed
    with (the server may derive a higher one from the tool's name).
    """

    gate: tuple[str, ...] = GATED
    record: tuple[str, ...] = ("*",)
    wait: float = DEFAULT_WAIT
    risk: str = ""

    def gates(self, tool: str) -> bool:
        if any(fnmatch.fnmatchcase(tool, p) for p in self.record if p != "*"):
            return False  # named to be recorded only: that wins over a wider gate pattern
        return any(fnmatch.fnmatchcase(tool, p) for p in self.gate)

    @classmethod
    def load(cls, path: Path | None) -> Policy:
        """The policy in `path` (TOML, or JSON for a .json file); the default with none."""
        if path is None:
            return cls()
        text = path.read_text()
        data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        if not isinstance(data, dict):
            raise click.UsageError(f"{path}: a policy is a table of gate, record, wait and risk")
        names = ("gate", "record")
        for key in names:
            value = data.get(key)
            if value is not None and not (isinstance(value, list) and all(isinstance(v, str) for v in value)):
                raise click.UsageError(f"{path}: {key} must be a list of tool name patterns")
        wait = data.get("wait", DEFAULT_WAIT)
        if isinstance(wait, bool) or not isinstance(wait, int | float) or wait < 0:
            raise click.UsageError(f"{path}: wait must be a number of seconds")
        risk = data.get("risk", "")
        if risk not in ("", "low", "medium", "high"):
            raise click.UsageError(f"{path}: risk must be low, medium or high")
        return cls(
            gate=tuple(data.get("gate", GATED)),
            record=tuple(data.get("record", ("*",))),
            wait=float(wait),
            risk=risk,
        )


def decision_output(decision: str, reason: str) -> dict[str, Any]:
    """The PreToolUse answer Claude Code reads: `permissionDecision` allow, deny or ask, and why."""
    return {
        "hookSpecificOutput": {
            "hookEventName": PRE,
            "permissionDecision": decision,
            "permissionDecisionReason": reason,
        }
    }


def answer_for(decision: flightlog.Decision, wait: float) -> dict[str, Any]:
    """An operator's decision as Claude Code's answer; no decision in time is `ask`."""
    if decision.outcome == flightlog.ALLOW:
        return decision_output("allow", f"flightlog: {decision.reason}")
    if decision.outcome == flightlog.DENY:
        return decision_output("deny", f"flightlog: {decision.reason}")
    if decision.outcome == flightlog.WITHDRAWN:
        return decision_output("ask", f"flightlog: no operator decided within {wait:g} s")
    return decision_output("ask", f"flightlog: {decision.reason or decision.outcome}")


def handle(event: dict[str, Any], policy: Policy, client: flightlog.Client) -> dict[str, Any] | None:
    """The hook's answer to one event (None: nothing to say, Claude Code goes on as usual)."""
    session = str(event.get("session_id") or "")
    if not session:
        raise click.UsageError("the hook's input has no session_id")
    kind = str(event.get("hook_event_name") or "")
    tool = str(event.get("tool_name") or "")
    arguments = event.get("tool_input")
    call_id = str(event.get("tool_use_id") or "")
    run = client.run(f"claude-{session}")
    if kind == PRE and policy.gates(tool):
        decision = run.gate(
            tool, arguments, request_id=call_id or None, timeout=policy.wait, risk=policy.risk or None
        )
        return answer_for(decision, policy.wait)
    if kind == PRE:
        run.report("tool.start", {"tool": tool, "input": arguments, "tool_use_id": call_id})
    elif kind == POST:
        result = event.get("tool_response")
        text = json.dumps(result, default=str)
        if len(text) > RESULT_LIMIT:
            result = text[: RESULT_LIMIT - 1] + "…"
        run.report("tool.complete", {"tool": tool, "tool_use_id": call_id, "response": result})
    elif kind == "SessionEnd":
        run.finish("done", f"Claude Code session ended ({event.get('reason') or 'exit'})")
    return None


def install(settings: Path, command: str, timeout: float, url: str | None) -> dict[str, Any]:
    """Merge the hook's entries into a Claude Code settings file (kept as it was otherwise)."""
    current: dict[str, Any] = {}
    if settings.exists():
        try:
            current = json.loads(settings.read_text() or "{}")
        except json.JSONDecodeError as e:
            raise click.ClickException(f"{settings} is not JSON ({e}): left as it is") from None
        if not isinstance(current, dict):
            raise click.ClickException(f"{settings} is not a JSON object: left as it is")
    hooks = current.setdefault("hooks", {})
    entry = {"type": "command", "command": command, "timeout": int(timeout)}
    for kind in (PRE, POST):
        groups = [g for g in hooks.get(kind, []) if not _ours(g)]
        groups.append({"matcher": "*", "hooks": [entry]})
        hooks[kind] = groups
    if url:
        current.setdefault("env", {})["FLIGHTLOG_URL"] = url
    settings.parent.mkdir(parents=True, exist_ok=True)
    settings.write_text(json.dumps(current, indent=2) + "\n")
    return current


def _ours(group: Any) -> bool:
    """Whether a matcher group holds this hook (an earlier install): it is replaced, not repeated."""
    hooks = group.get("hooks", []) if isinstance(group, dict) else []
    return any(isinstance(h, dict) and str(h.get("command", "")).startswith(COMMAND) for h in hooks)


def token_dir() -> str:
    """Where the hook keeps its sessions' run tokens: every hook call of a session is a new process."""
    state = os.environ.get("XDG_STATE_HOME") or str(Path.home() / ".local" / "state")
    return os.environ.get("FLIGHTLOG_TOKEN_DIR") or str(Path(state) / "flightlog" / "tokens")


def register(cli: click.Group) -> None:
    @cli.group("hook")
    def hook() -> None:
        """Hooks for agents: put flightlog's gate and record into an agent's own tool loop.

        \b
        Example:
          flightlog hook claude --install --project .
        """

    @hook.command("claude")
    @click.option(
        "--policy",
        type=click.Path(dir_okay=False, path_type=Path),
        envvar=POLICY_VAR,
        help="A TOML or JSON file: gate = [patterns], record = [patterns], wait = seconds, risk.",
    )
    @click.option("--url", envvar="FLIGHTLOG_URL", help="The flightlog server (FLIGHTLOG_URL).")
    @click.option("--install", "do_install", is_flag=True, help="Write the hook into Claude Code's settings.")
    @click.option(
        "--project",
        type=click.Path(file_okay=False, path_type=Path),
        help="With --install: this project's .claude/settings.json (default: your ~/.claude/settings.json).",
    )
    def claude(policy: Path | None, url: str | None, do_install: bool, project: Path | None) -> None:
        """Claude Code's PreToolUse/PostToolUse hook: gate and record each tool call in flightlog.

        Claude Code runs it with the event's JSON on stdin. A gated call waits for an operator
        and prints Claude Code's decision; no decision in time answers `ask`. The run's token
        is kept in FLIGHTLOG_TOKEN_DIR (default ~/.local/state/flightlog/tokens); the run is
        created with FLIGHTLOG_TOKEN, an enrolment credential, where the server asks for one.

        \b
        Example:
          flightlog hook claude --install --project .
          echo '{"hook_event_name": "PreToolUse", ...}' | flightlog hook claude
        """
        rules = Policy.load(policy)
        if do_install:
            settings = (project / ".claude" if project else Path.home() / ".claude") / "settings.json"
            command = COMMAND + (f" --policy {json.dumps(str(policy.resolve()))}" if policy else "")
            install(settings, command, rules.wait + 30, url)
            click.echo(f"flightlog: the hook is in {settings}")
            return
        try:
            event = json.loads(sys.stdin.read() or "{}")
        except json.JSONDecodeError as e:
            raise click.UsageError(f"the hook's input is not JSON: {e}") from None
        if not isinstance(event, dict):
            raise click.UsageError("the hook's input is not a JSON object")
        gated = event.get("hook_event_name") == PRE and rules.gates(str(event.get("tool_name") or ""))
        try:
            with flightlog.Client(url, token_dir=token_dir()) as client:
                out = handle(event, rules, client)
        except flightlog.FlightlogError as e:
            click.echo(f"flightlog: {e}", err=True)
            out = decision_output("ask", f"flightlog could not decide: {e}") if gated else None
        if out is not None:
            click.echo(json.dumps(out))
