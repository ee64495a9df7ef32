"""The operator API under /api/v1/: runs, approvals, decisions, control pushes, chain verification.

Every request needs an operator's credential (`Authorization: Bearer <token>`, or the
console's session) whose role allows it: a viewer reads, an approver also decides, an admin
also pushes control and manages operators and runs. The server holds only digests. Errors
are JSON: `{"error": ...}` plus what the caller needs to act (the expiry of an expired
approval, the votes of a quorum approval).
"""

from __future__ import annotations

import re
from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actors import (
    ApprovalExpiredError,
    ApprovalHookError,
    ApprovalNotPendingError,
    ApprovalRecordingError,
    ApprovalResolution,
    ApprovalResolvingError,
    ApprovalValidationError,
    ControlMessage,
    DuplicateVoteError,
    QuorumPendingError,
    RunPage,
    RunView,
    System,
    make_token,
)
from actors.operators import CONTROL, DECIDE, READ
from eventlog import Head
from projections import LIST_PAGE, MAX_LIST_PAGE, ApprovalRow, FinishStatus, RunRow, Views

from .calls import call
from .console_reads import voters
from .fork_routes import ForkRoutes
from .integrity import Integrity
from .operator_admin import OperatorAdminRoutes
from .paging import page_query
from .principals import Handler, Operator, OperatorAuth
from .records import MAX_WAIT, RecordRoutes
from .run_admin import RunAdminRoutes
from .views import ViewRoutes
from .wire import (
    Endpoint,
    WireError,
    json_error,
    json_response,
    parse_object,
    raw_member,
    read_body,
    string_field,
)

_HASH = re.compile(r"[0-9a-f]{64}")
MAX_REASON = 500  # characters of a decision's reason, kept in the record's meta


class OperatorRoutes:
    """Handlers of the operator API over one System."""

    def __init__(self, system: System, auth: OperatorAuth, max_wait: float = MAX_WAIT) -> None:
        self.system = system
        self.auth = auth
        self.max_wait = max_wait  # the longest a long poll of this API holds (seconds)
        self.forks = ForkRoutes(system)
        self.operators = OperatorAdminRoutes(system, auth)

    def routes(self) -> list[Route]:
        def route(path: str, method: str, handler: Handler, action: str) -> Route:
            return Route(path, Endpoint(self.auth.guard(handler, action), (method,), json_error))

        def reads(handler: Handler) -> Handler:
            return self.auth.guard(handler, READ)

        return [
            *ViewRoutes(self.system, reads).routes(),  # before /runs/{run_id:path} takes them
            *RecordRoutes(self.system, reads, self.max_wait).routes(),
            *self.operators.routes(),
            *RunAdminRoutes(self.system, self.auth).routes(),  # before /runs/{run_id:path} takes them
            route("/api/v1/runs", "GET", self.runs, READ),
            route("/api/v1/runs/{run_id:path}/control", "POST", self.push_control, CONTROL),
            route("/api/v1/runs/{run_id:path}/fork", "POST", self.forks.fork, CONTROL),
            route("/api/v1/runs/{run_id:path}", "GET", self.run, READ),
            route("/api/v1/approvals", "GET", self.approvals, READ),
            route("/api/v1/approvals/history", "GET", self.history, READ),
            # Any operator may try; one whose role may not decide is refused, and the attempt kept.
            route("/api/v1/approvals/{approval_id}/{decision}", "POST", self.decide, READ),
            route("/api/v1/verify", "GET", self.verify, READ),
        ]

    # -- runs ----------------------------------------------------------------------------

    async def runs(self, request: Request) -> Response:
        after, limit = page_query(request.query_params)
        runs, more = await run_in_threadpool(summaries_page, self.system.views, after, limit)
        return json_response({"runs": runs, "next": more})

    async def run(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        limit = query_int(request, "limit", RUN_PAGE, 1, MAX_RUN_PAGE)
        before = query_int(request, "before", None, 1, None)
        page = await run_in_threadpool(self.system.broker.get_run_page, run_id, limit, before)
        if page is None:
            raise WireError(404, "run not found")
        return json_response(run_detail(page, limit, before))

    async def push_control(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        raw = await read_body(request)
        body = parse_object(raw)
        kind = string_field(body, "type")
        if not kind:
            raise WireError(400, "missing type")
        operator: Operator = request.state.operator
        message = ControlMessage(
            string_field(body, "id") or make_token(),
            kind,
            run_id,
            "",
            raw_member(raw, "payload"),
            sent_by=operator.label,
        )
        queued = await call(self.system.broker.push_control, run_id, message)
        return json_response({"queued": True, "message": queued.to_json()})

    # -- approvals -----------------------------------------------------------------------

    async def approvals(self, request: Request) -> Response:
        after, limit = page_query(request.query_params)
        try:
            page = await run_in_threadpool(self.system.approvals.pending_page, after, limit)
        except ValueError as e:
            raise WireError(400, str(e)) from None
        return json_response({"approvals": [pending_json(r) for r in page.rows], "next": page.next})

    async def history(self, request: Request) -> Response:
        after, limit = page_query(request.query_params)

        def load() -> dict[str, Any]:
            page = self.system.views.lists.history(after, limit)
            # A quorum approval names each voter with the credential that cast the vote.
            rows = [
                {**row.to_dict(), "voters": voters(self.system, row.id)} if row.votes else row.to_dict()
                for row in page.rows
            ]
            return {"approvals": rows, "next": page.next}

        return json_response(await run_in_threadpool(load))

    async def decide(self, request: Request) -> Response:
        approval_id = request.path_params["approval_id"]
        decision = request.path_params["decision"]
        if decision not in ("approve", "reject"):
            raise WireError(404, "not found")
        raw = await read_body(request)
        body = parse_object(raw) if raw.strip() else {}
        operator: Operator = request.state.operator
        # The decision is the authenticated operator's: a name in the body may only repeat it.
        try:
            named = string_field(body, "actor")
        except WireError:
            raise WireError(400, "actor must be a string") from None
        if named and named != operator.name:
            raise WireError(
                403,
                f"actor {named!r} is not the authenticated operator {operator.name!r}: "
                "each operator decides with their own credential (omit actor)",
            )
        actor, identity = operator.name, operator.credential_id
        try:
            reason = string_field(body, "reason").strip()
        except WireError:
            raise WireError(400, "reason must be a string") from None
        if len(reason) > MAX_REASON:
            raise WireError(413, f"reason is longer than {MAX_REASON} characters")
        if not operator.may(DECIDE):
            role = operator.role
            why = f"operator {operator.name!r} ({identity}) has the role {role}, which may not decide"
            try:
                await run_in_threadpool(
                    self.system.approvals.refuse_attempt, approval_id, decision, operator.label, why
                )
            except ApprovalNotPendingError:
                raise WireError(404, "approval not found") from None
            raise WireError(403, f"forbidden: {why}")
        try:
            resolution = await run_in_threadpool(
                lambda: self.system.approvals.resolve(
                    approval_id, decision, actor, identity=identity, reason=reason
                )
            )
        except QuorumPendingError as e:
            return json_response(
                {"approval_id": approval_id, "status": "pending", "votes": e.votes, "needed": e.needed}, 202
            )
        except ApprovalExpiredError as e:
            return json_response(
                {
                    "error": str(e),
                    "approval_id": approval_id,
                    "decision": "expired",
                    "expires_at": e.resolution.approval.expires_at,
                },
                409,
            )
        except ApprovalNotPendingError as e:
            row = await run_in_threadpool(self.system.views.approval, approval_id)
            if row is None:
                raise WireError(404, "approval not found") from None
            return json_response(
                {"error": str(e), "approval_id": approval_id, "decision": row.decision or row.status}, 409
            )
        except (DuplicateVoteError, ApprovalRecordingError, ApprovalResolvingError) as e:
            raise WireError(409, str(e)) from None
        except ApprovalValidationError as e:
            raise WireError(400, str(e)) from None
        except ApprovalHookError as e:
            # The outcome is recorded; only this process's hook failed afterwards.
            return json_response({"error": str(e), **resolution_json(e.resolution)}, 500)
        return json_response(resolution_json(resolution))

    # -- the log -------------------------------------------------------------------------

    async def verify(self, request: Request) -> Response:
        anchor = _anchor(request)
        result = await run_in_threadpool(self.system.log.verify, anchor)
        started: Integrity | None = getattr(request.app.state, "integrity", None)
        if started is None:
            return json_response(Integrity(result).to_dict())
        return json_response(Integrity(result, started.snapshots, started.catalogue).to_dict())


def _anchor(request: Request) -> Head | None:
    """The anchor of `?anchor_seq=N&anchor_hash=H` (both or neither), as `flightlog anchor` prints it."""
    seq, digest = request.query_params.get("anchor_seq"), request.query_params.get("anchor_hash")
    if seq is None and digest is None:
        return None
    if seq is None or digest is None or not seq.isdigit() or not _HASH.fullmatch(digest):
        raise WireError(400, "an anchor is anchor_seq (a seq) and anchor_hash (64 lower-case hex digits)")
    return Head(int(seq), digest)


def summaries_page(
    views: Views, after: int | None = None, limit: int = LIST_PAGE
) -> tuple[list[dict[str, Any]], int | None]:
    """The `run_summary` of registered runs in registration order after the cursor `after` (the
    seq that registered the last run of the page before), from the live views: no stream is read;
    and the cursor of the next page (None: this is the last).

    The cost is the page's, not the log's nor every run's (the registry's list index). Both views
    are read under the runner's lock, so they stand at the same seq.
    """

    def load(states: dict[str, Any]) -> tuple[list[dict[str, Any]], int | None]:
        page = views.lists.runs_page(states, after, limit)
        finishes: dict[str, FinishStatus] = states["finish_status"]
        return [row_summary(row, finishes.get(row.run_id)) for row in page.rows], page.next

    _, found = views.runner.read_states(load)
    return found


def live_summaries(views: Views) -> list[dict[str, Any]]:
    """Every registered run's `run_summary`, a page at a time from the live views."""
    out: list[dict[str, Any]] = []
    after: int | None = None
    while True:
        page, after = summaries_page(views, after, MAX_LIST_PAGE)
        out.extend(page)
        if after is None:
            return out


def row_summary(row: RunRow, finish: FinishStatus | None) -> dict[str, Any]:
    """`run_summary` of a run as the live views hold it (the same dict, without reading its stream)."""
    return {
        "run_id": row.run_id,
        "registered_at": row.registered_at,
        "last_seen": row.last_seen,
        "queue_depth": row.queue_depth,
        "report_count": row.reports,
        "finish_count": row.finishes,
        "reply_count": row.replies,
        "permission_request_count": row.permission_request_count,
        "last_finish_status": finish.last_status if finish is not None and finish.count else "",
    }


# Reports, finishes, replies and permission requests a run's detail shows by default (`?limit=`), at most.
RUN_PAGE = 200
MAX_RUN_PAGE = 1000


def pending_json(row: ApprovalRow) -> dict[str, Any]:
    """A pending approval as the seed lists it (an empty run, tool call or quorum flag left out),
    with the rest of its audit row: who asked, its seq, quorum, votes and refused attempts."""
    out = row.to_dict()
    for key in ("run_id", "tool_call_id", "requires_fleet_quorum"):
        if not out[key]:
            del out[key]
    return out


def query_int(request: Request, name: str, default: int | None, low: int, high: int | None) -> Any:
    """The query parameter `name` as an integer from `low` to `high` (400 otherwise), or `default`."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise WireError(400, f"{name} must be an integer") from None
    if value < low or (high is not None and value > high):
        bound = f"from {low} to {high}" if high is not None else f"at least {low}"
        raise WireError(400, f"{name} must be {bound}")
    return value


def run_summary(view: RunView) -> dict[str, Any]:
    """A run as the operator lists it: ids, times, queue depth and counts."""
    return {
        "run_id": view.run_id,
        "registered_at": view.registered_at,
        "last_seen": view.last_seen,
        "queue_depth": len(view.control_queue),
        "report_count": len(view.reports),
        "finish_count": len(view.finishes),
        "reply_count": len(view.replies),
        "permission_request_count": len(view.permission_requests),
        "last_finish_status": view.finishes[-1].status if view.finishes else "",
    }


def run_detail(page: RunPage, limit: int, before: int | None) -> dict[str, Any]:
    """The summary plus who created the run, the queue, and one page of its reports, finishes,
    replies and permission requests (the newest `limit` before seq `before`; `page.next_before`
    is the cursor to older ones)."""
    view, counts = page.view, page.counts
    return {
        "run_id": view.run_id,
        "registered_at": view.registered_at,
        "last_seen": view.last_seen,
        "queue_depth": len(view.control_queue),
        "report_count": counts["RunReported"],
        "finish_count": counts["RunFinished"],
        "reply_count": counts["RunReplied"],
        "permission_request_count": counts["PermissionRequested"],
        "last_finish_status": page.last_finish_status,
        "page": {"limit": limit, "before": before, "next_before": page.next_before},
        "origin": view.origin,
        "created_by": view.created_by,
        "created_by_credential": view.created_by_credential,
        "token_revoked": view.revoked,
        "control_queue": [m.to_json() for m in view.control_queue],
        "reports": [r.to_json() for r in view.reports],
        "finishes": [f.to_json() for f in view.finishes],
        "replies": [r.to_json() for r in view.replies],
        "permission_requests": [
            {
                "request_id": p.request_id,
                "tool_name": p.tool_name,
                "description": p.desc,
                "input_preview": p.preview,
                "created_at": p.created_at,
                "approval_id": p.approval_id,
                "behavior": view.permission_decisions.get(p.request_id, ""),
            }
            for p in view.permission_requests.values()
        ],
    }


def resolution_json(resolution: ApprovalResolution) -> dict[str, Any]:
    a = resolution.approval
    return {
        "approval_id": a.id,
        "decision": resolution.decision,
        "actor": resolution.actor,
        "identity": resolution.identity,
        "at": resolution.at,
        "run_id": a.run_id,
        "kind": a.kind,
        "title": a.title,
        "payload_sha256": a.payload_sha256,
    }
