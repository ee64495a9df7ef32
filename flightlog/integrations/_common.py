"""What the adapters share: the run a call belongs to, its gate, and report values kept small."""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from .._aio import AsyncRun
from .._client import Run
from .._decision import Decision
from .._errors import FlightlogError
from .._gating import _current, current_run

VALUE_LIMIT = 4000  # characters of a result, an input or an output kept in a report (as the hook)

# Whatever a run is given: a sync or an asyncio run, or None for the current one.
AnyRun = Run | AsyncRun


def run_for(run: AnyRun | None) -> AnyRun:
    """`run`, or the current run (the innermost `with client.run(...)`) when it is None."""
    return run if run is not None else current_run()


def current_or_none() -> AnyRun | None:
    """The current run, or None outside any `with client.run(...)`."""
    return _current.get()


def gate_now(
    run: AnyRun, tool: str, arguments: Any, request_id: str | None, options: dict[str, Any]
) -> Decision:
    """Gate a call from synchronous code: an asyncio run cannot wait here."""
    if isinstance(run, AsyncRun):
        raise FlightlogError(
            f"{tool} is gated from synchronous code: use a flightlog.Client run, or run the graph with "
            "its async methods"
        )
    return run.gate(tool, arguments, request_id=request_id, **options)


async def gate_async(
    run: AnyRun, tool: str, arguments: Any, request_id: str | None, options: dict[str, Any]
) -> Decision:
    """Gate a call from asyncio code: a sync run waits in a worker thread, never in the loop."""
    if isinstance(run, AsyncRun):
        return await run.gate(tool, arguments, request_id=request_id, **options)
    return await asyncio.to_thread(run.gate, tool, arguments, request_id=request_id, **options)


def report_now(run: AnyRun, state: str, payload: dict[str, Any]) -> None:
    """Report from synchronous code (an asyncio run's report is refused, as its gate is)."""
    if isinstance(run, AsyncRun):
        raise FlightlogError(f"{state} is reported from synchronous code: use a flightlog.Client run")
    run.report(state, payload)


async def report_async(run: AnyRun, state: str, payload: dict[str, Any]) -> None:
    if isinstance(run, AsyncRun):
        await run.report(state, payload)
    else:
        await asyncio.to_thread(run.report, state, payload)


def denial(decision: Decision) -> str:
    """What a model is told when its tool call is not allowed: the outcome, who said no, and why.

    The server's reason names the operator and carries their own words (`rejected by bob:
    not on a Friday`); without one, the decider is named here.
    """
    said = f"flightlog: {decision.tool or 'the call'} was not allowed ({decision.outcome})"
    if decision.reason:
        return f"{said}: {decision.reason}"
    return f"{said}: by {decision.decided_by}" if decision.decided_by else said


def bounded(value: Any, limit: int = VALUE_LIMIT) -> Any:
    """`value` as JSON can hold it (anything else as its `str()`), cut to `limit` characters.

    A value whose JSON is longer than `limit` becomes that JSON's first characters and "…", so a
    report stays far below the server's payload limit whatever a tool returned.
    """
    if isinstance(value, str):
        return value if len(value) <= limit else value[: limit - 1] + "…"
    if value is None or isinstance(value, bool | int | float):
        return value
    text = orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()
    if len(text) <= limit:
        return orjson.loads(text)
    return text[: limit - 1] + "…"
