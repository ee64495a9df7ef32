"""`flightlog mcp`: an MCP server (stdio) on the official MCP Python SDK, built on flightlog's SDK.

Its tools: `approval_prompt`, the permission-prompt tool Claude Code's `--permission-prompt-tool`
calls before each tool use (it files the call for an operator and answers Claude Code's JSON:
`{"behavior":"allow","updatedInput":…}` or `{"behavior":"deny","message":…}`); `report`, to
record progress; and `finish`, to end the run. Any MCP client may call them. The server is one
run, created on its first call (`--run`, or FLIGHTLOG_RUN_ID; a fresh id by default).
"""

from __future__ import annotations

import json
import secrets
from typing import Any

import click

import flightlog

from .hook import token_dir

DEFAULT_WAIT = 120.0  # seconds a permission prompt waits for an operator before denying


class Door:
    """The MCP server's run, registered on first use and shared by its tool calls."""

    def __init__(self, url: str | None, run_id: str, wait: float) -> None:
        self.client = flightlog.AsyncClient(url, token_dir=token_dir())
        self.run_id = run_id
        self.wait = wait
        self._run: flightlog.AsyncRun | None = None

    async def run(self) -> flightlog.AsyncRun:
        if self._run is None:
            self._run = await self.client.run(self.run_id)
        return self._run

    async def approval_prompt(self, tool_name: str, tool_input: dict[str, Any], tool_use_id: str) -> str:
        """Claude Code's answer for one tool use, as the JSON text its permission-prompt tool returns."""
        try:
            run = await self.run()
            decision = await run.gate(
                tool_name, tool_input, request_id=tool_use_id or None, timeout=self.wait
            )
        except flightlog.FlightlogError as e:
            return json.dumps({"behavior": "deny", "message": f"flightlog could not decide: {e}"})
        if decision.allowed:
            return json.dumps({"behavior": "allow", "updatedInput": tool_input})
        if decision.outcome == flightlog.WITHDRAWN:
            message = f"flightlog: no operator decided within {self.wait:g} s"
        else:
            message = f"flightlog: {decision.reason or decision.outcome}"
        return json.dumps({"behavior": "deny", "message": message})


def build(door: Door) -> Any:
    """The MCP server over `door`: its three tools."""
    try:
        from mcp.server.mcpserver import MCPServer
    except ImportError:  # the SDK before 2.0 named it FastMCP
        from mcp.server.fastmcp import FastMCP as MCPServer  # type: ignore[attr-defined,no-redef,unused-ignore]

    server = MCPServer(
        "flightlog",
        instructions="flightlog records this agent's run and puts an operator's approval in front of tools.",
        log_level="WARNING",  # stderr is the client's log: one line per HTTP request would drown it
    )

    @server.tool(
        name="approval_prompt",
        description="Ask flightlog's operators whether a tool may be used (Claude Code's "
        "--permission-prompt-tool). Answers JSON: behavior allow (with updatedInput) or deny (with message).",
        structured_output=False,
    )
    async def approval_prompt(tool_name: str, input: dict[str, Any], tool_use_id: str = "") -> str:
        return await door.approval_prompt(tool_name, input, tool_use_id)

    @server.tool(
        name="report",
        description="Record the run's progress in flightlog: a state and any JSON payload.",
        structured_output=False,
    )
    async def report(state: str, payload: Any = None) -> str:
        await (await door.run()).report(state, payload)
        return "recorded"

    @server.tool(
        name="finish",
        description="Finish the run in flightlog: status done, failed or blocked, and a summary.",
        structured_output=False,
    )
    async def finish(status: str = "done", summary: str = "") -> str:
        await (await door.run()).finish(status, summary)
        return f"finished: {status}"

    return server


def register(cli: click.Group) -> None:
    @cli.command("mcp")
    @click.option("--url", envvar="FLIGHTLOG_URL", help="The flightlog server (FLIGHTLOG_URL).")
    @click.option("--run", "run_id", envvar="FLIGHTLOG_RUN_ID", help="The run's id (default: mcp-<random>).")
    @click.option(
        "--wait",
        type=click.FloatRange(min=0),
        default=DEFAULT_WAIT,
        show_default=True,
        help="Seconds a permission prompt waits for an operator; then the tool use is denied.",
    )
    def mcp_cmd(url: str | None, run_id: str | None, wait: float) -> None:
        """Serve flightlog to an MCP client over stdio: a permission-prompt tool, report and finish.

        For Claude Code: one entry in .mcp.json, then `claude --permission-prompt-tool
        mcp__flightlog__approval_prompt`. The run is created with FLIGHTLOG_TOKEN (an enrolment
        credential) where the server asks for one; its token is kept in FLIGHTLOG_TOKEN_DIR.

        \b
        Example:
          FLIGHTLOG_URL=http://127.0.0.1:8080 flightlog mcp --run build-17
        """
        try:
            import mcp  # noqa: F401
        except ImportError:
            raise click.UsageError("flightlog mcp needs the MCP SDK: pip install 'flightlog[mcp]'") from None
        door = Door(url, run_id or f"mcp-{secrets.token_hex(6)}", wait)
        build(door).run("stdio")
