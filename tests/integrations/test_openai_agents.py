"""The OpenAI Agents SDK adapter against a real server and the real SDK, with its scripted model."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from agents import Agent, Runner, function_tool, set_trace_processors
from agents.exceptions import UserError
from agents.testing import ScriptedModel, assistant_message, function_call
from agents.tracing import get_trace_provider

import flightlog
from flightlog.integrations.openai_agents import FlightlogTracing, decide, gated, run_gated, span_report

from .conftest import OPERATOR_TOKEN, Operator, client, head_seq, records, reports

pytestmark = pytest.mark.slow


@pytest.fixture
def tracing() -> Iterator[FlightlogTracing]:
    """flightlog's processor as the only one (no export to OpenAI), the SDK's own put back after."""
    provider: Any = get_trace_provider()
    before = list(provider._multi_processor._processors)
    processor = FlightlogTracing()
    set_trace_processors([processor])
    try:
        yield processor
    finally:
        set_trace_processors(before)
        processor.shutdown()


class Shipper:
    """An agent whose scripted model runs the tests, then deploys; `calls` counts each tool."""

    def __init__(self, prefix: str, *, deploy_gate: str = "gated", tail: int = 1) -> None:
        self.calls = {"run_tests": 0, "deploy": 0}
        calls = self.calls

        @function_tool
        def run_tests(path: str) -> str:
            """Run the test suite under path."""
            calls["run_tests"] += 1
            return "42 passed"

        def deploy(env: str) -> str:
            """Deploy to env."""
            calls["deploy"] += 1
            return f"deployed to {env}"

        tool = gated(function_tool(deploy)) if deploy_gate == "gated" else function_tool(deploy)
        if deploy_gate == "sdk":
            tool.needs_approval = True  # the SDK's own flag: decide() files it when it stops the run
        script: list[Any] = [
            [function_call("run_tests", {"path": "tests"}, call_id=f"{prefix}-1")],
            [function_call("deploy", {"env": "prod"}, call_id=f"{prefix}-2")],
        ]
        script += [[assistant_message("shipped")]] * tail
        self.model = ScriptedModel(script, emit_traces=True)
        self.agent = Agent(name="shipper", instructions="Ship it.", model=self.model, tools=[run_tests, tool])

    def shown_last(self) -> Any:
        """The last input item the model was shown."""
        return self.model.calls[-1].input[-1]


def approve_all(tool: str, request_id: str) -> tuple[str, str]:
    return ("approve", "tests are green")


def reject_all(tool: str, request_id: str) -> tuple[str, str]:
    return ("reject", "not on a Friday")


def test_an_allowed_call_runs_without_stopping_the_run(served, tracing):
    shipper = Shipper("oa-ok")
    with client(served) as c, c.run("oa-ok"), Operator(served, approve_all, "oa-ok") as alice:
        result = asyncio.run(run_gated(shipper.agent, "ship it"))
    assert result.final_output == "shipped"
    assert result.interruptions == []
    assert shipper.calls == {"run_tests": 1, "deploy": 1}
    assert alice.decided == {"oa-ok-2": "approve"}  # run_tests is not gated: nobody was asked
    assert shipper.shown_last()["output"] == "deployed to prod"


def test_a_denied_call_does_not_run_and_the_model_is_told_who_said_no(served, tracing):
    shipper = Shipper("oa-no")
    with client(served) as c, c.run("oa-no"), Operator(served, reject_all, "oa-no", name="bob"):
        result = asyncio.run(run_gated(shipper.agent, "ship it"))
    assert shipper.calls == {"run_tests": 1, "deploy": 0}
    shown = shipper.shown_last()
    assert shown["type"] == "function_call_output"
    assert shown["call_id"] == "oa-no-2"
    assert shown["output"] == "flightlog: deploy was not allowed (deny): rejected by bob: not on a Friday"
    assert result.final_output == "shipped"
    # One request, decided once: asked again by decide(), the decision made was the answer.
    requests = served.run("oa-no")["permission_requests"]
    assert [(r["request_id"], r["behavior"]) for r in requests] == [("oa-no-2", "deny")]


def test_without_decide_a_denied_call_is_an_interruption_as_the_sdk_has_them(served, tracing):
    shipper = Shipper("oa-stop")
    with client(served) as c, c.run("oa-stop") as run, Operator(served, reject_all, "oa-stop"):
        result = asyncio.run(Runner.run(shipper.agent, "ship it"))
        assert [item.call_id for item in result.interruptions] == ["oa-stop-2"]
        assert result.final_output is None
        state = asyncio.run(decide(result, run=run))
        resumed = asyncio.run(Runner.run(shipper.agent, state))
    assert resumed.final_output == "shipped"
    assert shipper.calls == {"run_tests": 1, "deploy": 0}


@pytest.mark.parametrize(("policy", "ran"), [(approve_all, 1), (reject_all, 0)])
def test_decide_files_the_calls_the_sdk_stopped_on_its_own(served, tracing, policy, ran):
    run_id = f"oa-sdk-{ran}"
    shipper = Shipper(run_id, deploy_gate="sdk")
    with client(served) as c, c.run(run_id), Operator(served, policy, run_id) as operator:
        result = asyncio.run(run_gated(shipper.agent, "ship it", max_turns=5))
    assert operator.decided == {f"{run_id}-2": "approve" if ran else "reject"}
    assert shipper.calls == {"run_tests": 1, "deploy": ran}
    assert result.final_output == "shipped"


def test_the_tracing_processor_reports_each_span_of_the_run(served, tracing):
    shipper = Shipper("oa-trace")
    with client(served) as c, c.run("oa-trace"), Operator(served, approve_all, "oa-trace"):
        asyncio.run(run_gated(shipper.agent, "ship it"))
    got = reports(served, "oa-trace")
    states = [s for s, _ in got]
    assert states[0] == "agents.trace"
    assert got[0][1]["workflow"] == "Agent workflow"
    # Each span reported once, as it ended: the run's task, its agent, three turns and their
    # generations, the two function calls (each turn's own, inside it).
    spans = {p["span_id"]: (s, p) for s, p in got if s != "agents.trace"}
    assert len(spans) == len(got) - 1
    kinds = [s for s, _ in spans.values()]
    assert sorted(set(kinds)) == [
        "agents.agent",
        "agents.function",
        "agents.generation",
        "agents.task",
        "agents.turn",
    ]
    assert kinds.count("agents.turn") == kinds.count("agents.generation") == 3
    functions = [p for s, p in spans.values() if s == "agents.function"]
    assert [(p["name"], p["input"], p["output"]) for p in functions] == [
        ("run_tests", '{"path":"tests"}', "42 passed"),
        ("deploy", '{"env":"prod"}', "deployed to prod"),
    ]
    for function in functions:
        assert spans[function["parent_id"]][0] == "agents.turn"
    agent = next(p for s, p in spans.values() if s == "agents.agent")
    assert (agent["name"], agent["tools"]) == ("shipper", ["run_tests", "deploy"])
    assert all(p["trace_id"] == got[0][1]["trace_id"] for _, p in spans.values())
    # The gated call was filed after run_tests ended, and deploy's span ended after its decision.
    order = [
        "gate" if r["type"] == "PermissionDecided" else orjson.loads(r["data"]["payload"]).get("name")
        for r in records(served, "oa-trace")
        if r["type"] == "PermissionDecided" or r["data"].get("state") == "agents.function"
    ]
    assert order == ["run_tests", "gate", "deploy"]


def test_spans_outside_any_run_are_left_alone(served, tracing):
    @function_tool
    def noop() -> str:
        """Do nothing."""
        return "done"

    model = ScriptedModel([[function_call("noop", {}, call_id="alone-1")], [assistant_message("hello")]])
    agent = Agent(name="greeter", model=model, tools=[noop])
    head = head_seq(served)
    assert asyncio.run(Runner.run(agent, "hi")).final_output == "hello"
    assert head_seq(served) == head  # nothing was written: no run to write it to


def test_an_asyncio_run_gates_and_is_traced(served, tracing):
    shipper = Shipper("oa-async")

    async def main() -> Any:
        async with flightlog.AsyncClient(served.url, token=OPERATOR_TOKEN) as c, c.run("oa-async"):
            return await run_gated(shipper.agent, "ship it")

    with Operator(served, approve_all, "oa-async"):
        result = asyncio.run(main())
    assert result.final_output == "shipped"
    assert shipper.calls == {"run_tests": 1, "deploy": 1}
    states = [s for s, _ in reports(served, "oa-async")]
    assert states.count("agents.function") == 2


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_ends_the_run_with_a_typed_error_and_runs_nothing():
    shipper = Shipper("oa-down")
    down = flightlog.Client(f"http://127.0.0.1:{closed_port()}", timeout=5)
    run = flightlog.Run(down, "oa-down", "0" * 64)  # as if registered before the server went away
    shipper.agent.tools[1].needs_approval.run = run
    # The SDK wraps what a tool's approval raised in its UserError; the cause is the SDK's own.
    with pytest.raises(UserError, match="cannot be reached") as failed:
        asyncio.run(Runner.run(shipper.agent, "ship it"))
    assert isinstance(failed.value.__cause__, flightlog.ServerUnreachable)
    assert shipper.calls == {"run_tests": 1, "deploy": 0}


def test_a_span_report_flattens_the_sdk_custom_spans():
    state, payload = span_report(
        {
            "id": "span_1", "trace_id": "trace_1", "parent_id": None, "started_at": "a", "ended_at": "b",
            "span_data": {"type": "custom", "name": "turn", "data": {"sdk_span_type": "turn", "turn": 2}},
            "error": {"message": "x" * 10_000},
        }
    )  # fmt: skip
    assert state == "agents.turn"
    assert payload["turn"] == 2
    assert payload["span_id"] == "span_1"
    assert len(payload["error"]) == 4000  # cut, as every value
