"""The operator API's management of runs: create a run and hand out its token, revoke, re-key.

An admin or an enrolment credential (an orchestrator's) creates a run; the answer holds the
run's token, once — the log keeps only its digest — for the agent to register with. An
admin revokes a run's token (it stops working on every route at once; `DELETE` is the same,
the run and its history stay) or re-keys it (a new token, shown once; the old one stops).
Each act records the authenticated operator's name and credential.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actors import System
from actors.broker import MAX_REGISTERED_RUN_ID, ORIGIN_ENROLMENT, ORIGIN_OPERATOR, registration_error
from actors.operators import ENROL, ENROLLER, MANAGE

from .calls import call
from .principals import Handler, Operator, OperatorAuth
from .wire import Endpoint, WireError, json_error, json_response, parse_object, read_body, string_field

MAX_REASON = 500
Schema = dict[str, Any]
# The answers that carry a run's token: no cache may keep them.
_SECRET = {"Cache-Control": "no-store"}


class RunAdminRoutes:
    """Handlers of POST /api/v1/runs and of a run's revoke and rekey, over one System.

    Their routes go before the operator API's `/api/v1/runs/{run_id:path}`, which would
    otherwise take these paths; each matches only its own method, so a GET of the same
    path goes on to the route that reads.
    """

    def __init__(self, system: System, auth: OperatorAuth) -> None:
        self.system = system
        self.auth = auth

    def routes(self) -> list[Route]:
        def route(path: str, method: str, handler: Handler, action: str) -> Route:
            endpoint = Endpoint(self.auth.guard(handler, action), (method,), json_error)
            return Route(path, endpoint, methods=[method])

        return [
            route("/api/v1/runs", "POST", self.create, ENROL),
            route("/api/v1/runs/{run_id:path}/revoke", "POST", self.revoke, MANAGE),
            route("/api/v1/runs/{run_id:path}/rekey", "POST", self.rekey, MANAGE),
            route("/api/v1/runs/{run_id:path}", "DELETE", self.revoke, MANAGE),
        ]

    async def create(self, request: Request) -> Response:
        body = parse_object(await read_body(request))
        run_id = _text(body, "run_id")
        error = registration_error(run_id)
        if error is not None:
            raise WireError(400, str(error))
        operator: Operator = request.state.operator
        origin = ORIGIN_ENROLMENT if operator.role == ENROLLER else ORIGIN_OPERATOR

        def create() -> str:
            return self.system.broker.create_run(
                run_id, origin=origin, by=operator.name, by_credential=operator.credential_id
            )

        token = await call(create)
        return json_response({"run_id": run_id, "token": token}, 201, headers=_SECRET)

    async def revoke(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        raw = await read_body(request)
        reason = _text(parse_object(raw), "reason") if raw.strip() else ""
        if len(reason) > MAX_REASON or not reason.isprintable():
            raise WireError(400, f"reason must be printable text of at most {MAX_REASON} characters")
        operator: Operator = request.state.operator

        def revoke() -> None:
            self.system.broker.revoke_run(
                run_id, by=operator.name, by_credential=operator.credential_id, reason=reason
            )

        await call(revoke)
        return json_response({"run_id": run_id, "revoked": True})

    async def rekey(self, request: Request) -> Response:
        run_id = request.path_params["run_id"]
        operator: Operator = request.state.operator

        def rekey() -> str:
            broker = self.system.broker
            return broker.rekey_run(run_id, by=operator.name, by_credential=operator.credential_id)

        token = await call(rekey)
        return json_response({"run_id": run_id, "token": token}, headers=_SECRET)


def _text(body: dict[str, object], key: str) -> str:
    try:
        return string_field(body, key).strip()
    except WireError:
        raise WireError(400, f"{key} must be a string") from None


def run_admin_paths(op: Any, error: Schema, paths: dict[str, Schema]) -> dict[str, Schema]:
    """`paths` with these routes' operations added (built with the document's `op` helper).

    A path already there (`/api/v1/runs`, `/api/v1/runs/{run_id}`) keeps its other methods.
    """

    def run_param() -> Schema:
        return {"name": "run_id", "in": "path", "required": True, "schema": {"type": "string"}}

    def answer(description: str, schema: Schema) -> Schema:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    def body(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
        schema: Schema = {"type": "object", "properties": properties, "required": list(required)}
        return {"required": bool(required), "content": {"application/json": {"schema": schema}}}

    token: Schema = {
        "type": "object",
        "properties": {"run_id": {"type": "string"}, "token": {"type": "string"}},
        "required": ["run_id", "token"],
    }
    revoked: Schema = {
        "type": "object",
        "properties": {"run_id": {"type": "string"}, "revoked": {"type": "boolean"}},
        "required": ["run_id", "revoked"],
    }
    missing = {"404": answer("No such run", error)}
    revoke = op(
        "Revoke the run's token (admin): every route refuses it at once, until a re-key",
        {"200": answer("Revoked", revoked), "400": answer("A bad reason", error), **missing},
        parameters=[run_param()],
    )
    operations: dict[str, Schema] = {
        "/api/v1/runs": {
            "post": op(
                "Create a run (admin or enroller); the answer holds its token, shown only now, "
                "for its agent to register with",
                {
                    "201": answer("Created", token),
                    "400": answer(f"A bad run id (1 to {MAX_REGISTERED_RUN_ID} printable characters)", error),
                    "409": answer("The run exists", error),
                },
                requestBody=body({"run_id": {"type": "string"}}, ("run_id",)),
            )
        },
        "/api/v1/runs/{run_id}/revoke": {
            "post": {**revoke, "requestBody": body({"reason": {"type": "string"}})},
        },
        "/api/v1/runs/{run_id}/rekey": {
            "post": op(
                "Give the run a new token (admin), shown only now; the old one stops working",
                {"200": answer("Re-keyed", token), **missing},
                parameters=[run_param()],
            )
        },
        "/api/v1/runs/{run_id}": {"delete": {**revoke, "operationId": "revoke_run_delete"}},
    }
    merged = dict(paths)
    for path, methods in operations.items():
        merged[path] = {**merged.get(path, {}), **methods}
    return merged
