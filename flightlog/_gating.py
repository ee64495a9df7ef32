"""Gated tool functions: `@flightlog.gate(...)` and `@run.gated(...)`, and the current run.

A `with client.run(...)` block makes its run the current one (a context variable, so each
thread and asyncio task sees its own); `flightlog.gate` gates calls in whichever run is
current when the function is called.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ._errors import FlightlogError, GateDenied

if TYPE_CHECKING:
    from ._aio import AsyncRun
    from ._client import Run

F = TypeVar("F", bound=Callable[..., Any])
_current: contextvars.ContextVar[Run | AsyncRun | None] = contextvars.ContextVar(
    "flightlog_run", default=None
)


def bind_run(run: Run | AsyncRun) -> contextvars.Token[Run | AsyncRun | None]:
    """Make `run` the current run; the token undoes it."""
    return _current.set(run)


def unbind_run(token: contextvars.Token[Run | AsyncRun | None]) -> None:
    try:
        _current.reset(token)
    except ValueError:  # left in another context (a generator, a callback): clear it there
        _current.set(None)


def current_run() -> Run | AsyncRun:
    """The run of the innermost `with client.run(...)` block around this call."""
    run = _current.get()
    if run is None:
        raise FlightlogError("no current run: call gated functions inside `with client.run(...)`")
    return run


def gate(tool: Any = None, /, **options: Any) -> Any:
    """Decorate a tool function so that every call waits for an operator's decision first.

    `@flightlog.gate`, `@flightlog.gate("deploy")` or `@flightlog.gate(risk="high",
    timeout=60)`: the call's arguments are filed with the tool's name (the function's, by
    default) in the current run; the function runs if allowed, else GateDenied is raised.
    Options are those of `Run.gate`. Works on plain and async functions.
    """
    if callable(tool):
        return gated_call(None, options)(tool)
    return gated_call(tool, options)


def gated_call(
    tool: str | None, options: dict[str, Any], run: Run | AsyncRun | None = None
) -> Callable[[F], F]:
    """The decorator of `gate` and `Run.gated` (`run`: always that run, else the current one)."""

    def decorate(fn: F) -> F:
        name = tool or fn.__name__
        signature = inspect.signature(fn)

        def arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            return dict(bound.arguments)

        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def gated_async(*args: Any, **kwargs: Any) -> Any:
                from ._aio import AsyncRun

                chosen = run or current_run()
                if isinstance(chosen, AsyncRun):
                    decision = await chosen.gate(name, arguments(args, kwargs), **options)
                else:
                    decision = await asyncio.to_thread(chosen.gate, name, arguments(args, kwargs), **options)
                if not decision.allowed:
                    raise GateDenied(decision)
                return await fn(*args, **kwargs)

            return cast(F, gated_async)

        @functools.wraps(fn)
        def gated_sync(*args: Any, **kwargs: Any) -> Any:
            from ._aio import AsyncRun

            chosen = run or current_run()
            if isinstance(chosen, AsyncRun):
                raise FlightlogError(f"{name} is not async: gate it in a `with client.run(...)` block")
            decision = chosen.gate(name, arguments(args, kwargs), **options)
            if not decision.allowed:
                raise GateDenied(decision)
            return fn(*args, **kwargs)

        return cast(F, gated_sync)

    return decorate
