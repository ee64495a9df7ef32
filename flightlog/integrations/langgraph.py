"""LangGraph through flightlog: gated tool calls, and each step and checkpoint on the run's timeline.

    tools = gated_tools([run_tests, deploy], gate=["deploy"])   # a ToolNode
    result = invoke(graph, {"messages": [...]}, config)         # graph.invoke, recorded

`ToolGate` wraps a `ToolNode`'s tool calls (`wrap_tool_call`): a gated call is filed for an
operator's decision (its request id is the tool call's id) and runs only if allowed; otherwise the
model gets the decision as the tool's result (or `GateDenied` is raised, `on_deny="raise"`). Right
before filing, it reports the checkpoint the step started from (`langgraph.gate`), so that a fork
can resume the graph there (`flightlog.integrations.checkpoints`). Each call it lets through is
reported as `tool.start` and `tool.complete`, as the Claude Code hook reports tools.

`stream` and `invoke` (and `astream`, `ainvoke`) run a compiled graph as its own methods do and
report each node's start and end (`langgraph.node.start`, `langgraph.node.end`) and each
checkpoint a super-step produced (`langgraph.checkpoint`). Everything is reported to the run given,
or to the current run (the innermost `with client.run(...)`). Install with
`pip install 'flightlog[langgraph]'`.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Literal

try:
    from langchain_core.messages import AIMessage, BaseMessage, ToolMessage
    from langgraph.prebuilt import ToolNode
    from langgraph.prebuilt.tool_node import ToolCallRequest
    from langgraph.pregel import Pregel
    from langgraph.types import Command
except ImportError as missing:  # pragma: no cover - the extra is not installed
    raise ImportError(
        f"flightlog.integrations.langgraph needs LangGraph ({missing}): pip install 'flightlog[langgraph]'"
    ) from missing

from .._errors import GateDenied
from ._common import AnyRun, bounded, denial, gate_async, gate_now, report_async, report_now, run_for
from .checkpoints import (
    CHECKPOINT,
    GATE,
    NODE_END,
    NODE_START,
    ResumePoint,
    ResumePointNotFound,
    resume_config,
    resume_point,
)

__all__ = [
    "CHECKPOINT",
    "GATE",
    "NODE_END",
    "NODE_START",
    "TOOL_COMPLETE",
    "TOOL_START",
    "ResumePoint",
    "ResumePointNotFound",
    "ToolGate",
    "ainvoke",
    "astream",
    "gated_tools",
    "invoke",
    "resume_config",
    "resume_point",
    "stream",
]

TOOL_START = "tool.start"
TOOL_COMPLETE = "tool.complete"
Result = ToolMessage | Command[Any]
OnDeny = Literal["message", "raise"]


class ToolGate:
    """A `ToolNode` tool-call wrapper that gates calls through flightlog and reports each call.

    `tools`: the names of the tools gated (None: every tool); the others run at once, reported.
    `run`: the flightlog run (None: the current run when the call is made). `timeout`, `risk`:
    as `Run.gate`. `on_deny`: `"message"` answers the model with the decision as the tool's
    result (a ToolMessage with status `error`), `"raise"` raises GateDenied out of the graph.
    The instance is the sync wrapper; `awrap` is the async one.
    """

    def __init__(
        self,
        tools: Iterable[str] | None = None,
        *,
        run: AnyRun | None = None,
        timeout: float | None = None,
        risk: str | None = None,
        on_deny: OnDeny = "message",
    ) -> None:
        if on_deny not in ("message", "raise"):
            raise ValueError(f"on_deny must be 'message' or 'raise', not {on_deny!r}")
        self.tools = None if tools is None else frozenset(tools)
        self.run = run
        self.options: dict[str, Any] = {"timeout": timeout, "risk": risk}
        self.on_deny = on_deny

    def gates(self, tool: str) -> bool:
        return self.tools is None or tool in self.tools

    def __call__(self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Result]) -> Result:
        run = run_for(self.run)
        call = _Call(request)
        if self.gates(call.tool):
            report_now(run, GATE, call.gate_report())
            decision = gate_now(run, call.tool, call.arguments, call.request_id, self.options)
            if not decision.allowed:
                report_now(run, TOOL_COMPLETE, call.denied_report(decision))
                if self.on_deny == "raise":
                    raise GateDenied(decision)
                return call.denied(decision)
        report_now(run, TOOL_START, call.start_report())
        try:
            result = execute(request)
        except Exception as e:
            report_now(run, TOOL_COMPLETE, call.failed_report(e))
            raise
        report_now(run, TOOL_COMPLETE, call.complete_report(result))
        return result

    async def awrap(
        self, request: ToolCallRequest, execute: Callable[[ToolCallRequest], Awaitable[Result]]
    ) -> Result:
        run = run_for(self.run)
        call = _Call(request)
        if self.gates(call.tool):
            await report_async(run, GATE, call.gate_report())
            decision = await gate_async(run, call.tool, call.arguments, call.request_id, self.options)
            if not decision.allowed:
                await report_async(run, TOOL_COMPLETE, call.denied_report(decision))
                if self.on_deny == "raise":
                    raise GateDenied(decision)
                return call.denied(decision)
        await report_async(run, TOOL_START, call.start_report())
        try:
            result = await execute(request)
        except Exception as e:
            await report_async(run, TOOL_COMPLETE, call.failed_report(e))
            raise
        await report_async(run, TOOL_COMPLETE, call.complete_report(result))
        return result


def gated_tools(
    tools: Sequence[Any],
    *,
    gate: Iterable[str] | None = None,
    run: AnyRun | None = None,
    timeout: float | None = None,
    risk: str | None = None,
    on_deny: OnDeny = "message",
    **tool_node: Any,
) -> ToolNode:
    """A `ToolNode` over `tools` whose calls go through a `ToolGate` (`gate`: the names gated,
    None for all); other keywords are the ToolNode's."""
    wrapper = ToolGate(gate, run=run, timeout=timeout, risk=risk, on_deny=on_deny)
    return ToolNode(tools, wrap_tool_call=wrapper, awrap_tool_call=wrapper.awrap, **tool_node)


class _Call:
    """One tool call a ToolNode is about to run, and where in the graph it is."""

    def __init__(self, request: ToolCallRequest) -> None:
        call = request.tool_call
        self.tool = str(call["name"])
        self.arguments = call.get("args")
        self.call_id = call.get("id") or None
        self.request_id = self.call_id
        runtime = getattr(request, "runtime", None)
        config: Mapping[str, Any] = getattr(runtime, "config", None) or {}
        configurable = config.get("configurable") or {}
        metadata = config.get("metadata") or {}
        thread = configurable.get("thread_id")
        # The root graph's checkpoint this step started from (a task's own namespace is its node's).
        checkpoints = configurable.get("checkpoint_map") or {}
        self.where = {
            "thread_id": None if thread is None else str(thread),
            "checkpoint_ns": "",
            "checkpoint_id": checkpoints.get("") or configurable.get("checkpoint_id"),
            "node": metadata.get("langgraph_node"),
            "step": metadata.get("langgraph_step"),
        }

    def gate_report(self) -> dict[str, Any]:
        return {**self.where, "tool": self.tool, "tool_call_id": self.call_id, "request_id": self.request_id}

    def start_report(self) -> dict[str, Any]:
        return {"tool": self.tool, "input": bounded(self.arguments), "tool_use_id": self.call_id}

    def complete_report(self, result: Result) -> dict[str, Any]:
        if isinstance(result, ToolMessage):
            response, status = bounded(result.content), result.status
        else:
            response, status = bounded(_plain(result)), "success"
        return {"tool": self.tool, "tool_use_id": self.call_id, "response": response, "status": status}

    def failed_report(self, error: BaseException) -> dict[str, Any]:
        text = bounded(f"{type(error).__name__}: {error}")
        return {"tool": self.tool, "tool_use_id": self.call_id, "response": text, "status": "error"}

    def denied_report(self, decision: Any) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "tool_use_id": self.call_id,
            "response": denial(decision),
            "status": "denied",
        }

    def denied(self, decision: Any) -> ToolMessage:
        return ToolMessage(
            content=denial(decision), name=self.tool, tool_call_id=self.call_id or "", status="error"
        )


# -- the steps of a graph run -------------------------------------------------------------------


def stream(
    graph: Pregel[Any, Any, Any, Any],
    input: Any,
    config: Mapping[str, Any] | None = None,
    *,
    run: AnyRun | None = None,
    stream_mode: str | Sequence[str] | None = None,
    subgraphs: bool = False,
    **kwargs: Any,
) -> Iterator[Any]:
    """`graph.stream(input, config, ...)`, each chunk as it yields it, the steps reported as they pass."""
    chosen = run_for(run)
    steps = _Steps(config, subgraphs)
    modes, asked = _modes(graph, stream_mode, kwargs)

    def chunks() -> Iterator[Any]:
        for chunk in graph.stream(input, config, stream_mode=asked, subgraphs=subgraphs, **kwargs):  # type: ignore[arg-type]
            for state, payload in steps.reports(chunk):
                report_now(chosen, state, payload)
            if steps.mode in modes:
                yield steps.shaped(modes)

    return chunks()


async def astream(
    graph: Pregel[Any, Any, Any, Any],
    input: Any,
    config: Mapping[str, Any] | None = None,
    *,
    run: AnyRun | None = None,
    stream_mode: str | Sequence[str] | None = None,
    subgraphs: bool = False,
    **kwargs: Any,
) -> AsyncIterator[Any]:
    """`graph.astream(...)`, as `stream`."""
    chosen = run_for(run)
    steps = _Steps(config, subgraphs)
    modes, asked = _modes(graph, stream_mode, kwargs)
    async for chunk in graph.astream(input, config, stream_mode=asked, subgraphs=subgraphs, **kwargs):  # type: ignore[arg-type]
        for state, payload in steps.reports(chunk):
            await report_async(chosen, state, payload)
        if steps.mode in modes:
            yield steps.shaped(modes)


def invoke(
    graph: Pregel[Any, Any, Any, Any],
    input: Any,
    config: Mapping[str, Any] | None = None,
    *,
    run: AnyRun | None = None,
    **kwargs: Any,
) -> Any:
    """`graph.invoke(input, config)`: the final state (with `__interrupt__` when interrupted), recorded."""
    outcome = _Outcome()
    for mode, data in stream(graph, input, config, run=run, stream_mode=["updates", "values"], **kwargs):
        outcome.add(mode, data)
    return outcome.value()


async def ainvoke(
    graph: Pregel[Any, Any, Any, Any],
    input: Any,
    config: Mapping[str, Any] | None = None,
    *,
    run: AnyRun | None = None,
    **kwargs: Any,
) -> Any:
    """`graph.ainvoke(...)`, as `invoke`."""
    outcome = _Outcome()
    async for mode, data in astream(
        graph, input, config, run=run, stream_mode=["updates", "values"], **kwargs
    ):
        outcome.add(mode, data)
    return outcome.value()


class _Outcome:
    """What `graph.invoke` returns, gathered from the `updates` and `values` chunks as it does."""

    def __init__(self) -> None:
        self.latest: Any = None
        self.interrupts: list[Any] = []

    def add(self, mode: str, data: Any) -> None:
        if mode == "updates" and isinstance(data, dict) and data.get("__interrupt__") is not None:
            self.interrupts.extend(data["__interrupt__"])
        elif mode == "values":
            self.latest = data

    def value(self) -> Any:
        if not self.interrupts:
            return self.latest
        if isinstance(self.latest, dict):
            return {**self.latest, "__interrupt__": self.interrupts}
        return {"__interrupt__": self.interrupts}


def _modes(
    graph: Pregel[Any, Any, Any, Any], stream_mode: str | Sequence[str] | None, kwargs: dict[str, Any]
) -> tuple[list[str] | str, list[str]]:
    """The caller's stream modes (a str: one mode, chunks unwrapped), and the modes asked of the graph."""
    version = kwargs.pop("version", "v1")
    if version != "v1":
        raise ValueError(f"flightlog records streams of version 'v1', not {version!r}")
    chosen = stream_mode if stream_mode is not None else getattr(graph, "stream_mode", "values")
    modes: list[str] | str = chosen if isinstance(chosen, str) else list(chosen)
    wanted = [modes] if isinstance(modes, str) else modes
    return modes, list(dict.fromkeys([*wanted, "tasks", "checkpoints"]))


class _Steps:
    """Reads a graph's stream: the reports each chunk makes, and the chunk as the caller asked it."""

    def __init__(self, config: Mapping[str, Any] | None, subgraphs: bool) -> None:
        thread = ((config or {}).get("configurable") or {}).get("thread_id")
        self.thread_id = None if thread is None else str(thread)
        self.subgraphs = subgraphs
        self.step_of: dict[str, int] = {}  # task id -> the super-step it runs in
        self.ran: dict[tuple[str, int], list[str]] = {}  # (namespace, step) -> the nodes that ended
        self.namespace: tuple[str, ...] = ()
        self.mode = ""
        self.data: Any = None

    def reports(self, chunk: Any) -> list[tuple[str, dict[str, Any]]]:
        if self.subgraphs:
            self.namespace, self.mode, self.data = chunk
        else:
            self.mode, self.data = chunk
        where: dict[str, Any] = {"thread_id": self.thread_id}
        if self.namespace:
            where["namespace"] = "|".join(self.namespace)
        if self.mode == "checkpoints":
            return [(CHECKPOINT, self._checkpoint(self.data, where))]
        if self.mode == "tasks":
            return [self._task(self.data, where)]
        return []

    def shaped(self, modes: list[str] | str) -> Any:
        """The chunk as `graph.stream` yields it for the caller's modes."""
        if isinstance(modes, str):
            return (self.namespace, self.data) if self.subgraphs else self.data
        return (self.namespace, self.mode, self.data) if self.subgraphs else (self.mode, self.data)

    def _checkpoint(self, data: Mapping[str, Any], where: dict[str, Any]) -> dict[str, Any]:
        configurable = (data.get("config") or {}).get("configurable") or {}
        parent = ((data.get("parent_config") or {}).get("configurable") or {}).get("checkpoint_id")
        metadata = data.get("metadata") or {}
        step = metadata.get("step")
        if isinstance(step, int):
            for task in data.get("tasks") or ():
                self.step_of[str(task.get("id"))] = step + 1
        namespace = where.get("namespace", "")
        thread = configurable.get("thread_id")
        return {
            **where,
            "thread_id": self.thread_id if thread is None else str(thread),
            "checkpoint_ns": configurable.get("checkpoint_ns", ""),
            "checkpoint_id": configurable.get("checkpoint_id"),
            "parent_checkpoint_id": parent,
            "step": step,
            "source": metadata.get("source"),
            "next": list(data.get("next") or ()),
            "nodes": self.ran.pop((namespace, step), []) if isinstance(step, int) else [],
        }

    def _task(self, data: Mapping[str, Any], where: dict[str, Any]) -> tuple[str, dict[str, Any]]:
        task_id = str(data.get("id", ""))
        node = str(data.get("name", ""))
        step = self.step_of.get(task_id)
        fields = {**where, "node": node, "task_id": task_id, "step": step}
        if "input" in data:  # a task's start; its end carries result, error and interrupts
            return NODE_START, {**fields, "triggers": [str(t) for t in data.get("triggers") or ()]}
        if step is not None:
            self.ran.setdefault((where.get("namespace", ""), step), []).append(node)
        self.step_of.pop(task_id, None)
        error = data.get("error")
        interrupts = [bounded(_plain(getattr(i, "value", i))) for i in data.get("interrupts") or ()]
        return NODE_END, {
            **fields,
            "result": bounded(_plain(data.get("result"))),
            "error": None if error is None else bounded(f"{type(error).__name__}: {error}"),
            "interrupts": interrupts,
        }


def _plain(value: Any) -> Any:
    """A node's result as a report shows it: messages as their type, content and tool calls."""
    if isinstance(value, BaseMessage):
        shown: dict[str, Any] = {"type": value.type, "content": value.content}
        if isinstance(value, AIMessage) and value.tool_calls:
            shown["tool_calls"] = [
                {"name": c["name"], "args": c["args"], "id": c.get("id")} for c in value.tool_calls
            ]
        if isinstance(value, ToolMessage):
            shown.update(name=value.name, tool_call_id=value.tool_call_id, status=value.status)
        return shown
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value
