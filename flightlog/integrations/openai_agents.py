"""The OpenAI Agents SDK through flightlog: function tools an operator decides, and the run's spans.

    @gated                          # needs_approval: an operator decides each call in flightlog
    @function_tool
    def deploy(env: str) -> str: ...

    add_trace_processor(FlightlogTracing())          # each span, reported to the current run
    result = await run_gated(agent, "ship it")       # Runner.run, denials answered to the model

`Approval` is a `needs_approval` callable: it files the call for a decision (its request id is
the call's id) and waits. An allowed call runs at once; any other stops the run with the call in
`result.interruptions`, as the SDK's human-in-the-loop does. `decide` settles interruptions from
flightlog (`state.approve`, or `state.reject` with the decision as the message the model gets),
and `run_gated` runs an agent, deciding and resuming until no call waits. `FlightlogTracing`, a
`TracingProcessor`, reports each span as it ends (`agents.agent`, `agents.generation`,
`agents.function`, `agents.turn`, …) and each trace's start (`agents.trace`). Everything goes to
the run given, or to the current run (the innermost `with client.run(...)`). Install with
`pip install 'flightlog[openai-agents]'`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, overload

try:
    from agents import Agent, FunctionTool, Runner, RunResult, RunResultStreaming, RunState, ToolApprovalItem
    from agents.run_context import RunContextWrapper
    from agents.tracing import Span, Trace, TracingProcessor
except ImportError as missing:  # pragma: no cover - the extra is not installed
    raise ImportError(
        f"flightlog.integrations.openai_agents needs the OpenAI Agents SDK ({missing}): "
        "pip install 'flightlog[openai-agents]'"
    ) from missing

import orjson

from .._client import Client, Run
from ._common import AnyRun, bounded, current_or_none, denial, gate_async, run_for

__all__ = ["SPAN_PREFIX", "TRACE", "Approval", "FlightlogTracing", "decide", "gated", "run_gated"]

TRACE = "agents.trace"
SPAN_PREFIX = "agents."  # a span's report state is this and its type: agents.function, agents.agent, …
_MAX_TRACES = 1024  # traces whose run is remembered (the oldest forgotten first)


class Approval:
    """A function tool's `needs_approval`: an operator decides each call of tool `tool` in flightlog.

    Called by the SDK with (context, arguments, call id), it files the call (request id: the
    call id) and waits: an allowed call needs no further approval (False); any other outcome
    (True) leaves the call in the run's interruptions, for `decide` to reject with the reason.
    `run`: the flightlog run (None: the current one when the call is made); `timeout`, `risk`:
    as `Run.gate`.
    """

    def __init__(
        self, tool: str, *, run: AnyRun | None = None, timeout: float | None = None, risk: str | None = None
    ) -> None:
        self.tool = tool
        self.run = run
        self.options: dict[str, Any] = {"timeout": timeout, "risk": risk}

    async def __call__(
        self, context: RunContextWrapper[Any], arguments: dict[str, Any], call_id: str
    ) -> bool:
        decision = await gate_async(run_for(self.run), self.tool, arguments, call_id or None, self.options)
        return not decision.allowed


@overload
def gated(tool: FunctionTool, **options: Any) -> FunctionTool: ...
@overload
def gated(tool: None = None, **options: Any) -> Callable[[FunctionTool], FunctionTool]: ...
def gated(tool: FunctionTool | None = None, **options: Any) -> Any:
    """Make each call of a function tool wait for an operator: `@gated` above `@function_tool`,
    `@gated(risk="high", timeout=60)`, or `gated(function_tool(fn))`. Options: `Approval`'s."""

    def gate(chosen: FunctionTool) -> FunctionTool:
        if not isinstance(chosen, FunctionTool):
            raise TypeError(f"gated takes a FunctionTool (put @gated above @function_tool), not {chosen!r}")
        chosen.needs_approval = Approval(chosen.name, **options)
        return chosen

    return gate if tool is None else gate(tool)


async def decide(
    result: RunResult | RunResultStreaming,
    *,
    run: AnyRun | None = None,
    timeout: float | None = None,
    risk: str | None = None,
) -> RunState[Any]:
    """The state of an interrupted run with each waiting call decided in flightlog.

    A call its `Approval` filed gets the decision already made (asked again under the same
    request id); any other interruption (`needs_approval=True`, an MCP tool's) is filed now
    with `timeout` and `risk`. Allowed calls are approved; the others are rejected with the
    decision (who, and why) as the text the model gets. Resume with `Runner.run(agent, state)`.
    """
    state = result.to_state()
    for item in result.interruptions:
        approval = _approval_of(item)
        chosen = run_for(run if approval is None or approval.run is None else approval.run)
        options = approval.options if approval is not None else {"timeout": timeout, "risk": risk}
        tool = approval.tool if approval is not None else str(item.tool_name or item.name or "tool")
        decision = await gate_async(chosen, tool, _arguments(item), item.call_id or None, options)
        if decision.allowed:
            state.approve(item)
        else:
            state.reject(item, rejection_message=denial(decision))
    return state


async def run_gated(agent: Agent[Any], input: Any, *, run: AnyRun | None = None, **runner: Any) -> RunResult:
    """`Runner.run(agent, input, **runner)`, each interruption decided in flightlog and resumed."""
    result = await Runner.run(agent, input, **runner)
    while result.interruptions:
        state = await decide(result, run=run)
        result = await Runner.run(agent, state, **runner)
    return result


def _approval_of(item: ToolApprovalItem) -> Approval | None:
    """The `Approval` of the function tool an interruption is a call of, if it has one."""
    for tool in getattr(item.agent, "tools", None) or ():
        if isinstance(tool, FunctionTool) and tool.name == item.tool_name:
            return tool.needs_approval if isinstance(tool.needs_approval, Approval) else None
    return None


def _arguments(item: ToolApprovalItem) -> Any:
    """A call's arguments as its Approval was given them: the parsed JSON object."""
    text = item.arguments
    if not text:
        return {}
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


class FlightlogTracing(TracingProcessor):
    """A tracing processor that reports each span of an agent run to flightlog as it ends.

    `run`: the flightlog run (None: the run current when a trace starts, else when its span
    starts; spans outside any run are left to the other processors). A span is reported as
    `agents.<type>` (`agent`, `generation`, `response`, `function`, `handoff`, `guardrail`,
    `turn`, `task`, `custom`, …) with its ids, times, error and data, each value cut to a few
    thousand characters. Reports are written as spans end, in the caller's thread: nothing is
    queued, so `force_flush` and `shutdown` have nothing to wait for. An asyncio run's reports
    go through a client of its own (the SDK calls processors synchronously).
    """

    def __init__(self, run: AnyRun | None = None) -> None:
        self.run = run
        self._traces: dict[str, AnyRun] = {}  # trace id -> its run (insertion order: oldest first)
        self._spans: dict[str, AnyRun] = {}  # span id -> its run, from its start to its end
        self._twins: dict[tuple[str, str, str], Run] = {}  # an asyncio run's (url, id, token) -> a sync run
        self._lock = threading.Lock()  # the SDK calls processors from any thread

    def on_trace_start(self, trace: Trace) -> None:
        run = self._run_for(trace.trace_id)
        if run is None:
            return
        with self._lock:
            self._traces[trace.trace_id] = run
            while len(self._traces) > _MAX_TRACES:
                del self._traces[next(iter(self._traces))]
        exported = trace.export() or {}
        payload = {
            "trace_id": trace.trace_id,
            "workflow": trace.name,
            "group_id": exported.get("group_id"),
            "metadata": bounded(exported.get("metadata")),
        }
        self._sync(run).report(TRACE, payload)

    def on_trace_end(self, trace: Trace) -> None:
        with self._lock:
            self._traces.pop(trace.trace_id, None)

    def on_span_start(self, span: Span[Any]) -> None:
        run = self._run_for(span.trace_id)
        if run is not None:
            with self._lock:
                self._spans[span.span_id] = run

    def on_span_end(self, span: Span[Any]) -> None:
        with self._lock:
            run = self._spans.pop(span.span_id, None)
        run = run or self._run_for(span.trace_id)
        exported = span.export()
        if run is None or not exported:
            return
        state, payload = span_report(exported)
        self._sync(run).report(state, payload)

    def force_flush(self) -> None:
        """Nothing is queued: each span was reported when it ended."""

    def shutdown(self) -> None:
        """Close the clients made for asyncio runs."""
        with self._lock:
            twins, self._twins = self._twins, {}
        for twin in twins.values():
            twin.client.close()

    def _run_for(self, trace_id: str) -> AnyRun | None:
        if self.run is not None:
            return self.run
        with self._lock:
            known = self._traces.get(trace_id)
        return known or current_or_none()

    def _sync(self, run: AnyRun) -> Run:
        """The run as a sync one: an asyncio run's client cannot be used outside its loop."""
        if isinstance(run, Run):
            return run
        key = (run.client.url, run.run_id, run.token)
        with self._lock:
            twin = self._twins.get(key)
            if twin is None:
                client = Client(run.client.url, timeout=run.client.timeout)
                twin = self._twins[key] = Run(client, run.run_id, run.token)
        return twin


def span_report(exported: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """A span (as `span.export()` gives it) as a report: its state and its payload."""
    data = dict(exported.get("span_data") or {})
    kind = str(data.pop("type", "span"))
    if kind == "custom" and isinstance(data.get("data"), Mapping) and data["data"].get("sdk_span_type"):
        inner = dict(data.pop("data"))
        kind = str(inner.pop("sdk_span_type"))
        data.pop("name", None)
        data.update(inner)
    payload: dict[str, Any] = {
        "trace_id": exported.get("trace_id"),
        "span_id": exported.get("id"),
        "parent_id": exported.get("parent_id"),
        "started_at": exported.get("started_at"),
        "ended_at": exported.get("ended_at"),
        "error": bounded(exported.get("error")),
    }
    payload.update({key: bounded(value) for key, value in data.items()})
    return SPAN_PREFIX + kind, payload
