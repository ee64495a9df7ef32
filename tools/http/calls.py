"""Blocking broker calls from the event loop: the thread pool, a run actor's answer, a long wait.

The broker's refusals raised inside become HTTP errors (`WireError`) here, for every wire
handler alike.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator
from typing import Any, Protocol, TypeVar

from starlette.concurrency import run_in_threadpool
from starlette.types import Receive

from actors import (
    BrokerError,
    ContentionError,
    ControlQueueFullError,
    OperatorOnlyError,
    RunAlreadyRegisteredError,
    RunNotFoundError,
)

from .wire import WireError

T = TypeVar("T")


async def call(
    fn: Callable[..., T], *args: Any, missing: tuple[int, str | None] = (404, "run not found")
) -> T:
    """Run a blocking broker call in the thread pool, its refusals turned into HTTP errors.

    `missing` is the answer to RunNotFoundError: a status and a message (None: the error's
    own text, `run not found: <id>`).
    """
    with refusals(missing):
        return await run_in_threadpool(fn, *args)


@contextlib.contextmanager
def refusals(missing: tuple[int, str | None] = (404, "run not found")) -> Iterator[None]:
    """The broker's refusals raised inside, turned into HTTP errors (`missing` as in `call`)."""
    try:
        yield
    except RunNotFoundError as e:
        status, message = missing
        raise WireError(status, message if message is not None else str(e)) from None
    except OperatorOnlyError as e:
        raise WireError(403, str(e), as_json=True) from None
    except RunAlreadyRegisteredError as e:
        raise WireError(409, str(e)) from None
    except ControlQueueFullError as e:
        raise WireError(429, str(e)) from None
    except ContentionError:
        raise WireError(503, "busy: try again") from None
    except (BrokerError, ValueError) as e:
        raise WireError(400, str(e)) from None


class Answerable(Protocol):
    """What the broker's non-blocking calls return (`actors.Broker.call_as_run` and the like)."""

    def result(self) -> Any: ...


async def answer(start: Callable[[Callable[[], object]], Answerable]) -> Any:
    """The result of a RunCall that `start(done)` begins, awaited without holding a thread.

    Its refusals are turned into HTTP errors as `call` turns them.
    """
    loop = asyncio.get_running_loop()
    answered: asyncio.Future[None] = loop.create_future()

    def done() -> None:
        # Called from the run actor's thread (or right here): hand over to the loop.
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(_settle, answered)

    with refusals():
        run_call = start(done)
    await answered
    with refusals():
        return run_call.result()


def _settle(answered: asyncio.Future[None]) -> None:
    if not answered.done():
        answered.set_result(None)


async def wait_unless_disconnected(event: asyncio.Event, receive: Receive, timeout: float) -> bool:
    """Wait up to `timeout` seconds for `event`; False as soon as the client disconnects.

    The body has been read in full, so the only message `receive` can still deliver is
    `http.disconnect`.
    """
    woke = asyncio.ensure_future(event.wait())
    gone = asyncio.ensure_future(receive())
    try:
        done, _ = await asyncio.wait({woke, gone}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        woke.cancel()
        gone.cancel()
    if gone not in done or gone.exception() is not None:
        return True
    return bool(gone.result().get("type") != "http.disconnect")
