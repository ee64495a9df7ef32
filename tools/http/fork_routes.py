"""`POST /api/v1/runs/{run_id}/fork`: fork a run at a seq or at one of its approvals, and re-drive
the fork if asked.

The same machinery as `flightlog fork … [--redrive]`: `fork_run` records the fork at once;
a re-drive serves the origin's recording in a background thread of this server, and the
fork's approvals wait for an operator in the console (or the approval timeout), exactly as
they would beside `flightlog redrive`. A fork is re-driven once.

At an approval (`at_approval`, and `decision`: by default the other one) the fork takes that
decision there, recorded as the authenticated operator's (`actors.fork_at_approval`). An
agent run's fork is re-driven here only while the recording has what follows (the recorded
decision): past a changed one a live agent goes on, which this server does not start
(`flightlog redrive DB FORK --command …`). A broker run's fork is a new run whose agent goes on
by itself: the answer carries its token, once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response

from actors import (
    ActorsError,
    ApprovalFork,
    ApprovalNotInRunError,
    ApprovalStillPendingError,
    System,
    approval_to_change,
    fork_at_approval,
)
from actors.broker import ORIGIN_OPERATOR
from actors.operators import DECIDE

from .._forks import ForkError, fork_run, redrive
from .principals import Operator
from .wire import WireError, json_response, parse_object, read_body

MAX_ID = 200  # characters of an approval id
_SECRET = {"Cache-Control": "no-store"}  # an answer that carries a run's token: no cache keeps it

MAX_REASON = 500
MAX_FAILURES = 100
logger = logging.getLogger("flightlog.forks")


class ForkRoutes:
    """The fork handler over one System; re-drives run in threads it starts and names."""

    def __init__(self, system: System) -> None:
        self.system = system
        self._lock = threading.Lock()
        self.redriving: dict[str, threading.Thread] = {}  # fork run id -> its re-drive, while it runs
        self.failures: dict[str, str] = {}  # fork run id -> why its re-drive stopped early (the latest few)

    async def fork(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        body = parse_object(await read_body(request))
        if "at_approval" in body:
            return await self._fork_at_approval(request, run_id, body)
        at = body.get("at")
        if isinstance(at, bool) or not isinstance(at, int):
            raise WireError(400, "at must be a seq (an integer), or name an approval in at_approval")
        reason, then_redrive = _reason_and_redrive(body)
        operator: Operator = request.state.operator
        actor = f"operator:{operator.label}"

        def record() -> dict[str, Any]:
            try:
                fork = fork_run(
                    self.system.log, run_id, at, actor=actor, reason=reason, views=self.system.views
                )
            except ForkError as e:
                status = 404 if "no agent run" in str(e) else 400
                raise WireError(status, str(e)) from None
            if then_redrive:
                self._start(fork.run_id, actor)
            return {"fork": fork.to_dict(), "redrive": "started" if then_redrive else None}

        return json_response(await run_in_threadpool(record), 201)

    async def _fork_at_approval(self, request: Request, run_id: str, body: dict[str, Any]) -> Response:
        approval_id, decision = body["at_approval"], body.get("decision")
        if not isinstance(approval_id, str) or not 0 < len(approval_id) <= MAX_ID:
            raise WireError(400, f"at_approval must name an approval (an id of at most {MAX_ID} characters)")
        if "at" in body:
            raise WireError(400, "fork at a seq (at) or at an approval (at_approval), not both")
        if decision is not None and decision not in ("approve", "reject"):
            raise WireError(400, "decision must be approve or reject (or left out: the other one)")
        reason, then_redrive = _reason_and_redrive(body)
        operator: Operator = request.state.operator
        if not operator.may(DECIDE):
            raise WireError(
                403, f"forbidden: a fork at an approval decides it, which the role {operator.role} may not"
            )
        named = body.get("actor", operator.name)
        if named != operator.name:
            raise WireError(
                403,
                f"actor {named!r} is not the authenticated operator {operator.name!r}: the fork's decision "
                "is the operator's who asks for it (omit actor)",
            )
        actor = f"operator:{operator.label}"

        def record() -> dict[str, Any]:
            try:
                if then_redrive:
                    self._redrivable(run_id, approval_id, decision)
                fork = fork_at_approval(
                    self.system, run_id, approval_id, decision, decided_by=operator.name,
                    identity=operator.credential_id, actor=actor, origin=ORIGIN_OPERATOR,
                    by_credential=operator.credential_id, reason=reason,
                )  # fmt: skip
            except ApprovalNotInRunError as e:
                raise WireError(404, str(e)) from None
            except ApprovalStillPendingError as e:
                raise WireError(409, str(e)) from None
            except ForkError as e:
                raise WireError(400, str(e)) from None
            if then_redrive:
                self._start(fork.run_id, actor)
            return _approval_fork(fork, then_redrive)

        out = await run_in_threadpool(record)
        return json_response(out, 201, headers=_SECRET if "token" in out else None)

    def _redrivable(self, run_id: str, approval_id: str, decision: str | None) -> None:
        """ForkError unless the fork asked for can be re-driven here, from the recording alone."""
        if self.system.views.agent_run(run_id) is None:
            raise ForkError(
                "a broker run's fork is not re-driven: its own agent goes on, started on the new run "
                "with the token the answer holds (leave redrive out)"
            )
        row, decision = approval_to_change(self.system, run_id, approval_id, decision)
        if decision != row.status:
            raise ForkError(
                f"past the changed decision ({decision}; the recording holds {row.status}) a live agent goes "
                "on, which this server does not start: record the fork, then `flightlog redrive DB FORK "
                "--command CMD` beside the log"
            )

    def _start(self, fork_run_id: str, actor: str) -> None:
        def drive() -> None:
            try:
                redrive(self.system, fork_run_id, actor=actor)
            except ActorsError as e:  # the fork's stream says what happened to its run; keep why here
                self._failed(fork_run_id, e)
            except Exception as e:  # noqa: BLE001 - the server stopped under it, or a bug: see below
                # Its System closed (an actor or the log gone) while it ran, or a bug: one line on
                # the server's log, never a thread's traceback.
                self._failed(fork_run_id, e)
                logger.warning("the re-drive of fork %s stopped: %s: %s", fork_run_id, type(e).__name__, e)
            finally:
                with self._lock:
                    self.redriving.pop(fork_run_id, None)

        thread = threading.Thread(target=drive, name=f"redrive-{fork_run_id[:8]}", daemon=True)
        with self._lock:
            self.redriving[fork_run_id] = thread
        thread.start()

    def _failed(self, fork_run_id: str, e: Exception) -> None:
        """Keep why a re-drive stopped early (the latest MAX_FAILURES)."""
        with self._lock:
            self.failures[fork_run_id] = f"{type(e).__name__}: {e}"
            while len(self.failures) > MAX_FAILURES:
                del self.failures[next(iter(self.failures))]

    def wait(self, timeout: float) -> None:
        """Wait for the re-drives running now (tests, and a server that stops)."""
        with self._lock:
            threads = list(self.redriving.values())
        for thread in threads:
            thread.join(timeout)


def _reason_and_redrive(body: dict[str, Any]) -> tuple[str, bool]:
    """A fork body's `reason` (printable, bounded) and `redrive` flag; 400 for either one bad."""
    reason = body.get("reason", "")
    if not isinstance(reason, str) or len(reason) > MAX_REASON or not reason.isprintable():
        raise WireError(400, f"reason must be printable text of at most {MAX_REASON} characters")
    then_redrive = body.get("redrive", False)
    if not isinstance(then_redrive, bool):
        raise WireError(400, "redrive must be true or false")
    return reason, then_redrive


def _approval_fork(fork: ApprovalFork, then_redrive: bool) -> dict[str, Any]:
    out: dict[str, Any] = {"fork": fork.to_dict(), "redrive": "started" if then_redrive else None}
    if fork.token:
        out["token"] = fork.token  # shown only now: the log keeps its digest
    return out


def fork_paths(op: Callable[..., dict[str, Any]], error: dict[str, Any]) -> dict[str, Any]:
    """The OpenAPI path of the fork endpoint; `op` builds an operator operation."""
    reason = {"type": "string", "maxLength": MAX_REASON, "description": "Why, for the record."}
    redrive = {"type": "boolean", "description": "Re-drive the fork from the origin's recording."}
    at_seq = {
        "type": "object",
        "properties": {
            "at": {
                "type": "integer",
                "minimum": 1,
                "description": "Copy the origin's history up to this seq.",
            },
            "reason": reason,
            "redrive": redrive,
        },
        "required": ["at"],
    }
    at_approval = {
        "type": "object",
        "properties": {
            "at_approval": {
                "type": "string",
                "minLength": 1,
                "maxLength": MAX_ID,
                "description": "Fork at this decided approval of the run, which the fork decides as "
                "`decision` says, as the authenticated operator (who must be allowed to decide).",
            },
            "decision": {
                "type": "string",
                "enum": ["approve", "reject"],
                "description": "The decision the fork takes there (default: the other one than recorded).",
            },
            "reason": reason,
            "redrive": {
                "type": "boolean",
                "description": "An agent run's fork only, taking the recorded decision: re-drive it from the "
                "recording (a changed decision goes on live: `flightlog redrive --command`).",
            },
        },
        "required": ["at_approval"],
    }
    body = {"oneOf": [at_seq, at_approval]}
    fork = {
        "type": "object",
        "properties": {
            "fork": {
                "type": "object",
                "description": "run_id, stream, origin_run_id, origin_stream, at_seq, copied, seq; at an "
                "approval also kind (agent or broker), approval_id, decision, recorded (how the origin's "
                "ended), decided_by, fork_approval_id (a broker fork's approval, decided now), request_id",
            },
            "redrive": {"type": ["string", "null"], "description": "started, or null"},
            "token": {
                "type": "string",
                "description": "A broker run's fork: the new run's token, for its agent, shown only now",
            },
        },
        "required": ["fork"],
    }

    def failed(description: str) -> dict[str, Any]:
        return {"description": description, "content": {"application/json": {"schema": error}}}

    return {
        "/api/v1/runs/{run_id}/fork": {
            "post": op(
                "Fork a run at a seq or at one of its approvals, decided otherwise (`flightlog fork`), and "
                "re-drive the fork from its recording",
                {
                    "201": {"description": "The fork", "content": {"application/json": {"schema": fork}}},
                    "400": failed("A bad body, or a seq or approval the run cannot be forked at"),
                    "403": failed("The operator may not fork (control), or not decide (at an approval)"),
                    "404": failed("No such agent run, or no such approval of the run"),
                    "409": failed("The approval is still pending: it has no decision to change yet"),
                },
                parameters=[{"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}],
                requestBody={"required": True, "content": {"application/json": {"schema": body}}},
            )
        }
    }
