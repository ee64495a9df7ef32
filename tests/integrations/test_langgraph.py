"""The LangGraph adapter against a real server and the real library, with a scripted model."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import tools_condition

import flightlog
from flightlog.integrations import langgraph as fl
from flightlog.integrations.checkpoints import resume_config, resume_point

from .conftest import OPERATOR_TOKEN, Operator, client, records, reports

pytestmark = pytest.mark.slow


class Agent:
    """A scripted model as a graph node: answers with the next message, keeps what it was shown."""

    def __init__(self, *script: AIMessage) -> None:
        self.script = list(script)
        self.seen: list[list[Any]] = []

    def __call__(self, state: MessagesState) -> dict[str, Any]:
        self.seen.append(list(state["messages"]))
        return {"messages": [self.script.pop(0)]}


def call(name: str, call_id: str, **args: Any) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": name, "args": args, "id": call_id}])


class Shipper:
    """The graph of these tests: the model runs the tests, then deploys; `calls` counts each tool."""

    def __init__(self, *script: AIMessage, **gate: Any) -> None:
        self.calls = {"run_tests": 0, "deploy": 0}
        calls = self.calls

        @tool
        def run_tests(path: str) -> str:
            """Run the test suite under path."""
            calls["run_tests"] += 1
            return "42 passed"

        @tool
        def deploy(env: str) -> str:
            """Deploy to env."""
            calls["deploy"] += 1
            return f"deployed to {env}"

        self.agent = Agent(*script)
        builder = StateGraph(MessagesState)
        builder.add_node("agent", self.agent)
        builder.add_node("tools", fl.gated_tools([run_tests, deploy], gate=["deploy"], **gate))
        builder.add_edge(START, "agent")
        builder.add_conditional_edges("agent", tools_condition)
        builder.add_edge("tools", "agent")
        self.saver = InMemorySaver()
        self.graph = builder.compile(checkpointer=self.saver)


def ship_script(prefix: str) -> list[AIMessage]:
    return [
        call("run_tests", f"{prefix}-1", path="tests"),
        call("deploy", f"{prefix}-2", env="prod"),
        AIMessage("shipped"),
    ]


def approve_all(tool: str, request_id: str) -> tuple[str, str]:
    return ("approve", "tests are green")


def reject_all(tool: str, request_id: str) -> tuple[str, str]:
    return ("reject", "not on a Friday")


def test_an_allowed_call_runs_and_each_step_and_checkpoint_is_on_the_timeline(served):
    shipper = Shipper(*ship_script("lg-ok"))
    config = {"configurable": {"thread_id": "lg-ok"}}
    with client(served) as c, c.run("lg-ok") as run, Operator(served, approve_all, "lg-ok") as alice:
        final = fl.invoke(shipper.graph, {"messages": [HumanMessage("ship it")]}, config)
    assert final["messages"][-1].content == "shipped"
    assert shipper.calls == {"run_tests": 1, "deploy": 1}
    assert alice.decided == {"lg-ok-2": "approve"}  # run_tests is not gated: nobody was asked

    got = reports(served, run.run_id)
    states = [state for state, _ in got]
    history = list(shipper.graph.get_state_history(config))  # newest first
    # Every checkpoint the graph saved is on the timeline, in order, with its step and parent.
    recorded = [p for s, p in got if s == fl.CHECKPOINT]
    assert [p["checkpoint_id"] for p in recorded] == [
        h.config["configurable"]["checkpoint_id"] for h in reversed(history)
    ]
    for payload, snapshot in zip(recorded, reversed(history), strict=True):
        assert payload["step"] == snapshot.metadata["step"]
        assert payload["next"] == list(snapshot.next)
        assert payload["parent_checkpoint_id"] == (
            snapshot.parent_config["configurable"]["checkpoint_id"] if snapshot.parent_config else None
        )
    # Each node's start and end, with the step it ran in; the checkpoint it produced names it.
    starts = [p for s, p in got if s == fl.NODE_START]
    ends = [p for s, p in got if s == fl.NODE_END]
    assert [(p["node"], p["step"]) for p in starts] == [
        ("agent", 1), ("tools", 2), ("agent", 3), ("tools", 4), ("agent", 5)
    ]  # fmt: skip
    assert [p["task_id"] for p in ends] == [p["task_id"] for p in starts]
    tool_message = {"type": "tool", "content": "42 passed", "name": "run_tests", "tool_call_id": "lg-ok-1"}
    assert ends[1]["result"]["messages"][0] == {**tool_message, "status": "success"}
    assert {p["step"]: p["nodes"] for p in recorded if p["nodes"]} == {
        1: ["agent"], 2: ["tools"], 3: ["agent"], 4: ["tools"], 5: ["agent"]
    }  # fmt: skip
    # The gate came before the deploy's start, and names the checkpoint its step started from.
    gate = next(p for s, p in got if s == fl.GATE)
    before_deploy = next(p for p in recorded if p["next"] == ["tools"] and p["step"] == 3)
    assert gate == {
        "thread_id": "lg-ok", "checkpoint_ns": "", "checkpoint_id": before_deploy["checkpoint_id"],
        "node": "tools", "step": 4, "tool": "deploy", "tool_call_id": "lg-ok-2", "request_id": "lg-ok-2",
    }  # fmt: skip
    tool_reports = [(s, p["tool"]) for s, p in got if s.startswith("tool.")]
    assert tool_reports == [
        ("tool.start", "run_tests"), ("tool.complete", "run_tests"),
        ("tool.start", "deploy"), ("tool.complete", "deploy"),
    ]  # fmt: skip
    assert states.index(fl.GATE) < states.index("tool.start", states.index(fl.GATE))
    assert served.run(run.run_id)["permission_requests"][0]["behavior"] == "allow"


def test_a_denied_call_does_not_run_and_the_model_is_told_who_said_no(served):
    shipper = Shipper(*ship_script("lg-no"), AIMessage("unused"))
    config = {"configurable": {"thread_id": "lg-no"}}
    with client(served) as c, c.run("lg-no"), Operator(served, reject_all, "lg-no", name="bob"):
        final = fl.invoke(shipper.graph, {"messages": [HumanMessage("ship it")]}, config)
    assert shipper.calls == {"run_tests": 1, "deploy": 0}
    answer = shipper.agent.seen[-1][-1]  # what the model was shown after asking to deploy
    assert isinstance(answer, ToolMessage)
    assert answer.status == "error"
    assert answer.tool_call_id == "lg-no-2"
    assert answer.content == "flightlog: deploy was not allowed (deny): rejected by bob: not on a Friday"
    assert final["messages"][-1].content == "shipped"  # the model went on, as scripted
    complete = [p for s, p in reports(served, "lg-no") if s == "tool.complete" and p["tool"] == "deploy"]
    assert complete == [
        {"tool": "deploy", "tool_use_id": "lg-no-2", "response": answer.content, "status": "denied"}
    ]


def test_parallel_calls_of_one_step_each_get_their_own_decision(served):
    both = AIMessage(
        "",
        tool_calls=[
            {"name": "deploy", "args": {"env": "staging"}, "id": "lg-par-1"},
            {"name": "deploy", "args": {"env": "prod"}, "id": "lg-par-2"},
        ],
    )
    shipper = Shipper(both, AIMessage("half shipped"))
    config = {"configurable": {"thread_id": "lg-par"}}

    def staging_only(tool: str, request_id: str) -> tuple[str, str]:
        return ("approve", "staging is fine") if request_id == "lg-par-1" else ("reject", "not prod")

    # The ToolNode runs the two calls in worker threads: each finds the run current in its own.
    with client(served) as c, c.run("lg-par"), Operator(served, staging_only, "lg-par") as alice:
        final = fl.invoke(shipper.graph, {"messages": [HumanMessage("ship both")]}, config)
    assert alice.decided == {"lg-par-1": "approve", "lg-par-2": "reject"}
    assert shipper.calls == {"run_tests": 0, "deploy": 1}
    answers = {m.tool_call_id: m for m in final["messages"] if isinstance(m, ToolMessage)}
    assert answers["lg-par-1"].content == "deployed to staging"
    assert answers["lg-par-2"].status == "error"
    assert answers["lg-par-2"].content.endswith("rejected by alice: not prod")
    gates = [p for s, p in reports(served, "lg-par") if s == fl.GATE]
    assert sorted(p["request_id"] for p in gates) == ["lg-par-1", "lg-par-2"]
    assert gates[0]["checkpoint_id"] == gates[1]["checkpoint_id"]  # one step, one checkpoint


def test_on_deny_raise_ends_the_graph_with_gate_denied(served):
    shipper = Shipper(*ship_script("lg-raise"), on_deny="raise")
    config = {"configurable": {"thread_id": "lg-raise"}}
    with (
        client(served) as c,
        c.run("lg-raise"),
        Operator(served, reject_all, "lg-raise"),
        pytest.raises(flightlog.GateDenied) as denied,
    ):
        fl.invoke(shipper.graph, {"messages": [HumanMessage("ship it")]}, config)
    assert denied.value.decision.outcome == "deny"
    assert denied.value.decision.request_id == "lg-raise-2"
    assert shipper.calls == {"run_tests": 1, "deploy": 0}


def test_the_graph_resumes_from_the_checkpoint_recorded_before_a_rejected_call(served):
    """The fork's ground: resumed at the recorded checkpoint, only the gated call runs again."""
    shipper = Shipper(*ship_script("lg-fork"), AIMessage("gave up"), AIMessage("shipped after all"))
    config = {"configurable": {"thread_id": "lg-fork"}}
    with client(served) as c, c.run("lg-fork"), Operator(served, reject_all, "lg-fork"):
        fl.invoke(shipper.graph, {"messages": [HumanMessage("ship it")]}, config)
    assert shipper.calls == {"run_tests": 1, "deploy": 0}
    approval_id = served.run("lg-fork")["permission_requests"][0]["approval_id"]

    with client(served) as c:
        resume = resume_config(c, "lg-fork", approval_id=approval_id)
    gate = next(p for s, p in reports(served, "lg-fork") if s == fl.GATE)
    assert resume == {
        "configurable": {"thread_id": "lg-fork", "checkpoint_ns": "", "checkpoint_id": gate["checkpoint_id"]}
    }
    # By its request id, or by the seq of any of its records, the same point.
    rows = records(served, "lg-fork")
    seqs = [
        r["seq"] for r in rows if r["type"] in ("PermissionRequested", "ApprovalDecided", "PermissionDecided")
    ]
    assert len(seqs) == 3
    for seq in seqs:
        assert resume_point(rows, seq=seq).config == resume
    point = resume_point(rows, request_id="lg-fork-2")
    assert (point.source, point.tool, point.approval_id) == ("gate", "deploy", approval_id)

    # Resumed in another run (the other decision), deploy runs; run_tests does not run again.
    shipper.agent.script = [AIMessage("shipped after all")]
    with client(served) as c, c.run("lg-fork-2"), Operator(served, approve_all, "lg-fork-2"):
        final = fl.invoke(shipper.graph, None, resume)
    assert shipper.calls == {"run_tests": 1, "deploy": 1}
    assert final["messages"][-1].content == "shipped after all"


def test_stream_yields_what_the_graph_yields_for_the_modes_asked(served):
    ours, theirs = Shipper(*ship_script("lg-stream")), Shipper(*ship_script("lg-stream"))
    config = {"configurable": {"thread_id": "lg-stream"}}
    start = {"messages": [HumanMessage("go")]}
    with client(served) as c, Operator(served, approve_all, "lg-stream", "lg-stream-plain"):
        with c.run("lg-stream"):
            recorded = list(fl.stream(ours.graph, start, config, stream_mode=["updates", "custom"]))
        with c.run("lg-stream-plain"):
            plain = list(theirs.graph.stream(start, config, stream_mode=["updates", "custom"]))
    assert [(mode, list(chunk)) for mode, chunk in recorded] == [(mode, list(chunk)) for mode, chunk in plain]
    assert [list(chunk) for _, chunk in recorded] == [["agent"], ["tools"], ["agent"], ["tools"], ["agent"]]
    assert len(reports(served, "lg-stream-plain")) == 5  # the gate's and the tools' own reports only


def test_async_graphs_gate_and_record_through_an_asyncio_run(served):
    shipper = Shipper(*ship_script("lg-async"))
    config = {"configurable": {"thread_id": "lg-async"}}

    async def main() -> Any:
        async with flightlog.AsyncClient(served.url, token=OPERATOR_TOKEN) as c, c.run("lg-async"):
            return await fl.ainvoke(shipper.graph, {"messages": [HumanMessage("ship it")]}, config)

    with Operator(served, approve_all, "lg-async") as alice:
        final = asyncio.run(main())
    assert final["messages"][-1].content == "shipped"
    assert shipper.calls == {"run_tests": 1, "deploy": 1}
    assert alice.decided == {"lg-async-2": "approve"}
    states = [s for s, _ in reports(served, "lg-async")]
    assert states.count(fl.CHECKPOINT) == 7
    assert states.count(fl.GATE) == 1


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_an_unreachable_server_ends_the_graph_with_a_typed_error_and_runs_nothing():
    shipper = Shipper(call("deploy", "lg-down-1", env="prod"))
    down = flightlog.Client(f"http://127.0.0.1:{closed_port()}", timeout=5)
    run = flightlog.Run(down, "lg-down", "0" * 64)  # as if registered before the server went away
    with pytest.raises(flightlog.ServerUnreachable, match="cannot be reached"):
        fl.invoke(
            shipper.graph,
            {"messages": [HumanMessage("ship it")]},
            {"configurable": {"thread_id": "d"}},
            run=run,
        )
    assert shipper.calls == {"run_tests": 0, "deploy": 0}


def test_a_gated_call_outside_any_run_is_refused_before_the_tool_runs():
    shipper = Shipper(call("deploy", "lg-none-1", env="prod"))
    with pytest.raises(flightlog.FlightlogError, match="no current run"):
        shipper.graph.invoke({"messages": [HumanMessage("ship it")]}, {"configurable": {"thread_id": "n"}})
    assert shipper.calls == {"run_tests": 0, "deploy": 0}
