"""`flightlog mcp` through the MCP SDK's own client, over stdio."""

from __future__ import annotations

import asyncio
import json
import os
import sys

import pytest

from .conftest import OPERATOR_TOKEN, Served

mcp = pytest.importorskip("mcp", reason="the MCP SDK: pip install -e '.[mcp]'")

pytestmark = pytest.mark.slow
RUN = "mcp-agent"


def test_the_permission_prompt_tool_answers_claude_codes_json_and_the_run_is_recorded(
    served: Served, tmp_path
):
    env = {
        **os.environ,
        "FLIGHTLOG_URL": served.url,
        "FLIGHTLOG_TOKEN": OPERATOR_TOKEN,
        "FLIGHTLOG_TOKEN_DIR": str(tmp_path / "tokens"),
    }
    params = mcp.StdioServerParameters(
        command=sys.executable, args=["-m", "tools.cli", "mcp", "--run", RUN, "--wait", "60"], env=env
    )

    async def decide_when_filed(request_id: str, decision: str, operator: str) -> None:
        # Asked until the request shows, each answer pacing the next question.
        while request_id not in (pending := await asyncio.to_thread(served.pending, RUN)):
            pass
        response = await asyncio.to_thread(served.decide, pending[request_id], decision, operator)
        assert response.status_code == 200, response.text

    async def prompt(session, tool_use_id: str, tool_input: dict) -> dict:
        arguments = {"tool_name": "Bash", "input": tool_input, "tool_use_id": tool_use_id}
        result = await session.call_tool("approval_prompt", arguments)
        assert not getattr(result, "is_error", getattr(result, "isError", False)), result
        (content,) = result.content
        return json.loads(content.text)

    async def main() -> tuple[list[str], dict, dict]:
        async with mcp.stdio_client(params) as (read, write), mcp.ClientSession(read, write) as session:
            await session.initialize()
            tools = sorted(t.name for t in (await session.list_tools()).tools)
            await session.call_tool("report", {"state": "started", "payload": {"step": 1}})
            allowed, denied, _, _ = await asyncio.gather(
                prompt(session, "toolu_A", {"command": "make test"}),
                prompt(session, "toolu_B", {"command": "make deploy"}),
                decide_when_filed("toolu_A", "approve", "alice"),
                decide_when_filed("toolu_B", "reject", "bob"),
            )
            await session.call_tool("finish", {"status": "done", "summary": "all checked"})
            return tools, allowed, denied

    tools, allowed, denied = asyncio.run(main())
    assert tools == ["approval_prompt", "finish", "report"]
    assert allowed == {"behavior": "allow", "updatedInput": {"command": "make test"}}
    assert denied == {"behavior": "deny", "message": "flightlog: rejected by bob"}
    run = served.run(RUN)
    assert run["reports"][0]["payload"] == {"step": 1}
    assert (run["finishes"][-1]["status"], run["finishes"][-1]["summary"]) == ("done", "all checked")
