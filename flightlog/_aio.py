"""The asyncio client: `AsyncClient`, and `AsyncRun`, the same door as `Run` with `await`."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _protocol as wire
from ._client import DEFAULT_TIMEOUT
from ._config import Settings, TokenStore
from ._decision import Decision, Message
from ._errors import AskTimeout, Conflict, GateTimeout, ServerError, ServerUnreachable
from ._gating import bind_run, gated_call, unbind_run

F = TypeVar("F", bound=Callable[..., Any])


class AsyncClient:
    """`Client` for asyncio: the same settings, every call awaited. Many gates may wait at once."""

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        run_id: str | None = None,
        run_token: str | None = None,
        token_dir: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.settings = Settings.resolve(url, token, run_id, run_token, token_dir)
        self.url = self.settings.url
        self.timeout = timeout
        directory = self.settings.token_dir
        self.tokens = TokenStore(directory, self.url) if directory is not None else None
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=32)
        self._http = httpx.AsyncClient(base_url=self.url, timeout=timeout, transport=transport, limits=limits)

    def run(self, run_id: str | None = None, *, token: str | None = None) -> _Starting:
        """Register run `run_id` (or resume it), as `Client.run`: `async with client.run(...) as run:`
        finishes it on exit; `run = await client.run(...)` only registers it."""
        return _Starting(self, run_id, token)

    async def _start(self, run_id: str | None, token: str | None) -> AsyncRun:
        run_id = run_id or self.settings.run_id or wire.new_id()
        given = token or self.settings.run_token_for(run_id)
        tokens = self.tokens
        if tokens is None or given:
            return AsyncRun(self, run_id, await self._attach(run_id, given))
        # The lock is taken in a worker thread: tasks of this process wait there, not in the loop.
        fd = await asyncio.to_thread(tokens.lock, run_id)
        try:
            kept = tokens.get(run_id)
            try:
                attached = await self._attach(run_id, kept)
            except Conflict:
                if not kept:
                    raise
                tokens.forget(run_id)
                attached = await self._attach(run_id, "")
            if attached != kept:
                tokens.put(run_id, attached)
        finally:
            tokens.unlock(fd)
        return AsyncRun(self, run_id, attached)

    async def _attach(self, run_id: str, token: str) -> str:
        if token:
            await self.post("/register", {"run_id": run_id, "token": token})
            return token
        if self.settings.token:
            headers = {"Authorization": f"Bearer {self.settings.token}"}
            try:
                answer = await self.post("/api/v1/runs", {"run_id": run_id}, headers=headers)
                return str(answer["token"])
            except Conflict as e:
                raise Conflict(
                    e.status, f"run {run_id!r} exists: give its token (FLIGHTLOG_RUN_TOKEN) to resume it"
                ) from None
            except ServerError as e:
                if e.status not in (404, 405):
                    raise
        token = wire.new_token()
        answer = await self.post("/register", {"run_id": run_id, "token": token})
        return str(answer.get("token", token)) if isinstance(answer, dict) else token

    async def health(self) -> bool:
        try:
            return (await self._http.get("/health")).status_code == 200
        except httpx.TransportError:
            return False

    async def post(
        self, path: str, fields: dict[str, Any], *, wait: float = 0.0, headers: dict[str, str] | None = None
    ) -> Any:
        """As `Client.post`, awaited."""
        timeout = self.timeout + wait if wait else self.timeout
        try:
            response = await self._http.post(
                path, content=wire.body(fields), headers={**wire.JSON, **(headers or {})}, timeout=timeout
            )
        except httpx.TransportError as e:
            raise wire.transport_error(e, self.url) from e
        return wire.answer(response)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


class _Starting:
    """What `AsyncClient.run` returns: awaitable (the run), or an async context manager (finished on exit)."""

    def __init__(self, client: AsyncClient, run_id: str | None, token: str | None) -> None:
        self._start = (client, run_id, token)
        self._run: AsyncRun | None = None

    def __await__(self) -> Any:
        client, run_id, token = self._start
        return client._start(run_id, token).__await__()

    async def __aenter__(self) -> AsyncRun:
        client, run_id, token = self._start
        self._run = await client._start(run_id, token)
        return await self._run.__aenter__()

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._run is not None
        await self._run.__aexit__(t, e, tb)


class AsyncRun:
    """`Run` for asyncio: the same methods, awaited; gates of one run may wait concurrently."""

    def __init__(self, client: AsyncClient, run_id: str, token: str) -> None:
        self.client = client
        self.run_id = run_id
        self.token = token
        self.finished = False
        self._bindings: list[Any] = []

    async def _post(self, path: str, fields: dict[str, Any] | None = None, *, wait: float = 0.0) -> Any:
        body = {"run_id": self.run_id, "token": self.token, **(fields or {})}
        return await self.client.post(path, body, wait=wait)

    async def report(self, state: str, payload: Any = None) -> None:
        fields: dict[str, Any] = {"state": state}
        if payload is not None:
            fields["payload"] = payload
        await self._post("/report", fields)

    async def finish(
        self,
        status: str = "done",
        summary: str = "",
        *,
        files_changed: Iterable[str] = (),
        payload: Any = None,
    ) -> None:
        fields: dict[str, Any] = {"status": status, "summary": summary, "files_changed": list(files_changed)}
        if payload is not None:
            fields["payload"] = payload
        await self._post("/finish", fields)
        self.finished = True

    async def heartbeat(self) -> None:
        await self._post("/heartbeat")

    async def gate(
        self,
        tool: str,
        arguments: Any = None,
        *,
        timeout: float | None = None,
        risk: str | None = None,
        request_id: str | None = None,
        description: str | None = None,
        withdraw_on_timeout: bool = True,
    ) -> Decision:
        """As `Run.gate`, awaited."""
        request_id = await self.request(
            tool, arguments, risk=risk, request_id=request_id, description=description
        )
        return await self.decision(
            request_id, timeout=timeout, withdraw_on_timeout=withdraw_on_timeout, tool=tool
        )

    async def request(
        self,
        tool: str,
        arguments: Any = None,
        *,
        risk: str | None = None,
        request_id: str | None = None,
        description: str | None = None,
    ) -> str:
        request_id = request_id or wire.new_id()
        await self._post(
            "/permission_request", wire.permission_body(tool, arguments, request_id, description, risk)
        )
        return request_id

    async def decision(
        self,
        request_id: str,
        *,
        timeout: float | None = None,
        withdraw_on_timeout: bool = False,
        tool: str = "",
    ) -> Decision:
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = wire.WAIT_SLICE if deadline is None else min(wire.WAIT_SLICE, deadline - time.monotonic())
            if left <= 0:
                assert timeout is not None
                if withdraw_on_timeout:
                    return await self.withdraw(request_id, f"no decision within {timeout:g} s", tool=tool)
                raise GateTimeout(request_id, timeout)
            answer = await self._post(
                "/permission_wait", {"request_id": request_id, "timeout": left}, wait=left
            )
            found = wire.decided(answer, tool)
            if found is not None:
                return found

    async def withdraw(self, request_id: str, reason: str = "", *, tool: str = "") -> Decision:
        answer = await self._post("/permission_withdraw", {"request_id": request_id, "reason": reason})
        found = wire.decided(answer, tool)
        if found is None:
            raise ServerError(500, f"the withdrawal of {request_id!r} left it pending")
        return found

    def gated(self, tool: str | None = None, **options: Any) -> Callable[[F], F]:
        return gated_call(tool, options, run=self)

    async def ask(self, to_run_id: str, payload: Any, *, timeout: float | None = None) -> Message:
        message_id = wire.new_id()
        fields = {
            "from_run_id": self.run_id,
            "to_run_id": to_run_id,
            "type": "agent_message",
            "payload": wire.ask_payload(message_id, payload, self.run_id),
        }
        await self._post("/send", fields)
        deadline = None if timeout is None else time.monotonic() + timeout
        content = wire.body({"run_id": self.run_id, "token": self.token, "waiting_for": message_id})
        try:
            while True:
                left = (
                    wire.WAIT_SLICE if deadline is None else min(wire.WAIT_SLICE, deadline - time.monotonic())
                )
                if left <= 0:
                    raise AskTimeout(message_id, timeout)
                try:
                    got = await self.client._http.post(
                        "/wait_reply",
                        content=content,
                        headers=wire.JSON,
                        timeout=httpx.Timeout(self.client.timeout, read=left),
                    )
                except httpx.ReadTimeout:
                    continue
                except httpx.TransportError as e:
                    raise wire.transport_error(e, self.client.url) from e
                if got.status_code == 504:
                    raise AskTimeout(message_id, None)
                answer = wire.answer(got)
                if answer.get("cancelled"):
                    raise AskTimeout(message_id, timeout)
                return Message(message_id, "reply", str(answer.get("from_run_id", "")), answer.get("payload"))
        except AskTimeout:
            with contextlib.suppress(ServerError, ServerUnreachable):
                await self._post("/cancel_message", {"cancel_message_id": message_id})
            raise

    async def reply(self, message: Message | str, payload: Any, *, to_run_id: str = "") -> None:
        if isinstance(message, Message):
            ask_id, to_run_id = message.ask_id or message.id, to_run_id or message.from_run_id
        else:
            ask_id = message
        fields = {
            "from_run_id": self.run_id,
            "to_run_id": to_run_id,
            "type": "agent_message",
            "payload": wire.reply_payload(ask_id, payload, self.run_id),
        }
        await self._post("/send", fields)

    async def send(self, to_run_id: str, payload: Any, *, type: str = "agent_message") -> None:
        fields = {"from_run_id": self.run_id, "to_run_id": to_run_id, "type": type, "payload": payload}
        await self._post("/send", fields)

    async def messages(self) -> list[Message]:
        answer = await self._post("/poll-control", wait=wire.POLL_WAIT)
        return [Message.from_control(m) for m in answer or []]

    async def __aenter__(self) -> AsyncRun:
        self._bindings.append(bind_run(self))
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        unbind_run(self._bindings.pop())
        if self.finished:
            return
        if e is None:
            await self.finish("done")
            return
        try:
            await self.finish("failed", wire.failure_summary(e))
        except (ServerError, ServerUnreachable) as failed:
            e.add_note(f"flightlog: the run's failure could not be recorded: {failed}")
