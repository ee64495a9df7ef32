"""The synchronous client: `Client`, and `Run`, one agent run's door to flightlog."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Callable, Iterable
from types import TracebackType
from typing import Any, TypeVar

import httpx

from . import _protocol as wire
from ._config import Settings, TokenStore
from ._decision import Decision, Message
from ._errors import AskTimeout, Conflict, GateTimeout, ServerError, ServerUnreachable
from ._gating import bind_run, gated_call, unbind_run

F = TypeVar("F", bound=Callable[..., Any])
DEFAULT_TIMEOUT = 30.0  # seconds for an ordinary request's answer


class Client:
    """A connection to one flightlog server, configured from arguments or the environment.

    `url` (FLIGHTLOG_URL, default http://127.0.0.1:8080); `token`, an enrolment or operator
    credential that may create runs (FLIGHTLOG_TOKEN); `run_id` and `run_token`, the run
    this process was started for and its token (FLIGHTLOG_RUN_ID, FLIGHTLOG_RUN_TOKEN);
    `token_dir`, a folder where run tokens are kept so that a restarted process resumes
    its run (FLIGHTLOG_TOKEN_DIR; none by default). Thread-safe: gates may wait in many
    threads at once.
    """

    def __init__(
        self,
        url: str | None = None,
        *,
        token: str | None = None,
        run_id: str | None = None,
        run_token: str | None = None,
        token_dir: str | os.PathLike[str] | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.settings = Settings.resolve(url, token, run_id, run_token, token_dir)
        self.url = self.settings.url
        self.timeout = timeout
        directory = self.settings.token_dir
        self.tokens = TokenStore(directory, self.url) if directory is not None else None
        limits = httpx.Limits(max_connections=None, max_keepalive_connections=32)
        self._http = httpx.Client(base_url=self.url, timeout=timeout, transport=transport, limits=limits)

    # -- runs ------------------------------------------------------------------------------

    def run(self, run_id: str | None = None, *, token: str | None = None) -> Run:
        """Register run `run_id` (or resume it) and return it; `with` it to have it finished.

        With a token (this argument, the environment's, or one kept in `token_dir`) the run
        registers with it; else the enrolment credential creates it; else it registers itself
        at `/register`, where the server allows that. Conflict if it exists under another token.
        """
        run_id = run_id or self.settings.run_id or wire.new_id()
        given = token or self.settings.run_token_for(run_id)
        if self.tokens is None or given:
            return Run(self, run_id, self._attach(run_id, given))
        with self.tokens.claim(run_id):
            kept = self.tokens.get(run_id)
            try:
                attached = self._attach(run_id, kept)
            except Conflict:
                if not kept:
                    raise
                self.tokens.forget(run_id)  # a token of an earlier run of that name
                attached = self._attach(run_id, "")
            if attached != kept:
                self.tokens.put(run_id, attached)
        return Run(self, run_id, attached)

    def _attach(self, run_id: str, token: str) -> str:
        if token:
            self.post("/register", {"run_id": run_id, "token": token})
            return token
        if self.settings.token:
            created = self._create(run_id)
            if created:
                return created
        token = wire.new_token()
        answer = self.post("/register", {"run_id": run_id, "token": token})
        return str(answer.get("token", token)) if isinstance(answer, dict) else token

    def _create(self, run_id: str) -> str:
        """The token of run `run_id` created with the enrolment credential ("" if the server cannot)."""
        headers = {"Authorization": f"Bearer {self.settings.token}"}
        try:
            answer = self.post("/api/v1/runs", {"run_id": run_id}, headers=headers)
        except Conflict as e:
            raise Conflict(
                e.status, f"run {run_id!r} exists: give its token (FLIGHTLOG_RUN_TOKEN) to resume it"
            ) from None
        except ServerError as e:
            if e.status in (404, 405):  # a server without run enrolment: register instead
                return ""
            raise
        return str(answer["token"])

    def health(self) -> bool:
        """Whether the server answers `/health`."""
        try:
            return self._http.get("/health").status_code == 200
        except httpx.TransportError:
            return False

    # -- plumbing --------------------------------------------------------------------------

    def post(
        self, path: str, fields: dict[str, Any], *, wait: float = 0.0, headers: dict[str, str] | None = None
    ) -> Any:
        """POST `fields` as JSON to `path`; the decoded answer, or the SDK's error for it.

        `wait` is how long the server may hold the request (a long poll) before answering.
        """
        timeout = self.timeout + wait if wait else self.timeout
        try:
            response = self._http.post(
                path, content=wire.body(fields), headers={**wire.JSON, **(headers or {})}, timeout=timeout
            )
        except httpx.TransportError as e:
            raise wire.transport_error(e, self.url) from e
        return wire.answer(response)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Run:
    """One agent run: report progress, gate tool calls, talk to other runs, finish.

    As a context manager it finishes the run on exit: `done`, or `failed` with the summary
    of the exception that ended the block (which still propagates). Inside the block it is
    the current run of `flightlog.gate`.
    """

    def __init__(self, client: Client, run_id: str, token: str) -> None:
        self.client = client
        self.run_id = run_id
        self.token = token
        self.finished = False
        self._bindings: list[Any] = []

    def _post(self, path: str, fields: dict[str, Any] | None = None, *, wait: float = 0.0) -> Any:
        return self.client.post(
            path, {"run_id": self.run_id, "token": self.token, **(fields or {})}, wait=wait
        )

    # -- the record ------------------------------------------------------------------------

    def report(self, state: str, payload: Any = None) -> None:
        """Record progress: a state (`tool.start`, `thinking`, …) and any JSON value."""
        fields: dict[str, Any] = {"state": state}
        if payload is not None:
            fields["payload"] = payload
        self._post("/report", fields)

    def finish(
        self,
        status: str = "done",
        summary: str = "",
        *,
        files_changed: Iterable[str] = (),
        payload: Any = None,
    ) -> None:
        """Record the run's final word: `done`, `failed` or `blocked`, with a summary."""
        fields: dict[str, Any] = {"status": status, "summary": summary, "files_changed": list(files_changed)}
        if payload is not None:
            fields["payload"] = payload
        self._post("/finish", fields)
        self.finished = True

    def heartbeat(self) -> None:
        self._post("/heartbeat")

    # -- the gate --------------------------------------------------------------------------

    def gate(
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
        """File the call `tool(arguments)` for an operator's decision and wait for it.

        `timeout`: seconds to wait (None: until the server's deadline expires the request).
        When it passes with no decision the request is withdrawn and the Decision says
        `withdrawn` (or GateTimeout is raised, the request left open, with
        `withdraw_on_timeout=False`). `risk` may raise the risk the server derives from the
        tool's name, never lower it. Filing the same `request_id` again with the same call
        (a restarted agent) waits for that request's decision instead of filing a new one.
        """
        request_id = self.request(tool, arguments, risk=risk, request_id=request_id, description=description)
        return self.decision(request_id, timeout=timeout, withdraw_on_timeout=withdraw_on_timeout, tool=tool)

    def request(
        self,
        tool: str,
        arguments: Any = None,
        *,
        risk: str | None = None,
        request_id: str | None = None,
        description: str | None = None,
    ) -> str:
        """File the call for a decision without waiting; return its request id."""
        request_id = request_id or wire.new_id()
        self._post(
            "/permission_request", wire.permission_body(tool, arguments, request_id, description, risk)
        )
        return request_id

    def decision(
        self,
        request_id: str,
        *,
        timeout: float | None = None,
        withdraw_on_timeout: bool = False,
        tool: str = "",
    ) -> Decision:
        """Wait for the decision on request `request_id` (one made while nobody waited comes at once)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = wire.WAIT_SLICE if deadline is None else min(wire.WAIT_SLICE, deadline - time.monotonic())
            if left <= 0:
                assert timeout is not None
                if withdraw_on_timeout:
                    return self.withdraw(request_id, f"no decision within {timeout:g} s", tool=tool)
                raise GateTimeout(request_id, timeout)
            answer = self._post("/permission_wait", {"request_id": request_id, "timeout": left}, wait=left)
            found = wire.decided(answer, tool)
            if found is not None:
                return found

    def withdraw(self, request_id: str, reason: str = "", *, tool: str = "") -> Decision:
        """Give request `request_id` up; the Decision it ends with (a decision made first stands)."""
        answer = self._post("/permission_withdraw", {"request_id": request_id, "reason": reason})
        found = wire.decided(answer, tool)
        if found is None:
            raise ServerError(500, f"the withdrawal of {request_id!r} left it pending")
        return found

    def gated(self, tool: str | None = None, **options: Any) -> Callable[[F], F]:
        """Decorate a tool function: each call is gated first; GateDenied unless allowed."""
        return gated_call(tool, options, run=self)

    # -- other runs ------------------------------------------------------------------------

    def ask(self, to_run_id: str, payload: Any, *, timeout: float | None = None) -> Message:
        """Ask run `to_run_id` and wait for its reply (AskTimeout, the ask cancelled, if none in time)."""
        message_id = wire.new_id()
        fields = {
            "from_run_id": self.run_id,
            "to_run_id": to_run_id,
            "type": "agent_message",
            "payload": wire.ask_payload(message_id, payload, self.run_id),
        }
        self._post("/send", fields)
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                left = (
                    wire.WAIT_SLICE if deadline is None else min(wire.WAIT_SLICE, deadline - time.monotonic())
                )
                if left <= 0:
                    raise AskTimeout(message_id, timeout)
                try:
                    # The server holds the wait until the reply (or the ask's own deadline):
                    # the client gives up after `left` and asks again, the ask still open.
                    got = self.client._http.post(
                        "/wait_reply",
                        content=wire.body(
                            {"run_id": self.run_id, "token": self.token, "waiting_for": message_id}
                        ),
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
                self._post("/cancel_message", {"cancel_message_id": message_id})
            raise

    def reply(self, message: Message | str, payload: Any, *, to_run_id: str = "") -> None:
        """Answer an ask (a Message, or its ask id with `to_run_id`, the asker)."""
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
        self._post("/send", fields)

    def send(self, to_run_id: str, payload: Any, *, type: str = "agent_message") -> None:
        """Send run `to_run_id` a message that expects no reply."""
        fields = {"from_run_id": self.run_id, "to_run_id": to_run_id, "type": type, "payload": payload}
        self._post("/send", fields)

    def messages(self) -> list[Message]:
        """Take the messages queued for this run (asks, messages, control), waiting a moment if none."""
        answer = self._post("/poll-control", wait=wire.POLL_WAIT)
        return [Message.from_control(m) for m in answer or []]

    # -- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> Run:
        self._bindings.append(bind_run(self))
        return self

    def __exit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        unbind_run(self._bindings.pop())
        if self.finished:
            return
        if e is None:
            self.finish("done")
            return
        # The exception that ended the block propagates; a failure to record it must not mask it.
        try:
            self.finish("failed", wire.failure_summary(e))
        except (ServerError, ServerUnreachable) as failed:
            e.add_note(f"flightlog: the run's failure could not be recorded: {failed}")
