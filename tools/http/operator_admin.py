"""The operator API's management of operators: enrol, list, change a role, revoke; and `me`.

Only an admin manages operators. A new operator's token is in the answer to its enrolment
and nowhere else (the log keeps its digest); revoking ends the operator's console sessions
and API access at once.
"""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from actors import (
    OperatorExistsError,
    OperatorNotFoundError,
    OperatorValidationError,
    System,
)
from actors.operators import MANAGE, READ, ROLES, Credential

from .principals import Handler, Operator, OperatorAuth
from .wire import (
    Endpoint,
    WireError,
    by_method,
    json_error,
    json_response,
    parse_object,
    read_body,
    string_field,
)

MAX_REASON = 500
Schema = dict[str, Any]


class OperatorAdminRoutes:
    """Handlers of /api/v1/operators and /api/v1/me over one System."""

    def __init__(self, system: System, auth: OperatorAuth) -> None:
        self.system = system
        self.auth = auth

    def routes(self) -> list[Route]:
        def route(path: str, method: str, handler: Handler, action: str = MANAGE) -> Route:
            return Route(path, Endpoint(self.auth.guard(handler, action), (method,), json_error))

        return [
            route("/api/v1/me", "GET", self.me, READ),
            Route(
                "/api/v1/operators",
                Endpoint(
                    by_method(
                        {
                            "GET": self.auth.guard(self.list, MANAGE),
                            "POST": self.auth.guard(self.enrol, MANAGE),
                        }
                    ),
                    ("GET", "POST"),
                    json_error,
                ),
            ),
            route("/api/v1/operators/{name}/role", "POST", self.set_role),
            route("/api/v1/operators/{name}/revoke", "POST", self.revoke),
            route("/api/v1/operators/{name}", "DELETE", self.revoke),
        ]

    async def me(self, request: Request) -> Response:
        operator: Operator = request.state.operator
        return json_response(
            {"name": operator.name, "credential_id": operator.credential_id, "role": operator.role}
        )

    async def list(self, request: Request) -> Response:
        rows = await run_in_threadpool(self.system.operators.list)
        return json_response({"operators": [c.to_dict() for c in rows]})

    async def enrol(self, request: Request) -> Response:
        body = parse_object(await read_body(request))
        name, role = _text(body, "name"), _text(body, "role") or "approver"
        operator: Operator = request.state.operator

        def enrol() -> tuple[Credential, str]:
            return self.system.operators.enrol(
                name, role, by=operator.name, by_credential=operator.credential_id
            )

        try:
            credential, token = await run_in_threadpool(enrol)
        except OperatorExistsError as e:
            raise WireError(409, str(e)) from None
        except OperatorValidationError as e:
            raise WireError(400, str(e)) from None
        # The body carries the new operator's secret: no cache may keep it.
        return json_response(
            {**credential.to_dict(), "token": token}, 201, headers={"Cache-Control": "no-store"}
        )

    async def set_role(self, request: Request) -> Response:
        body = parse_object(await read_body(request))
        name, role = request.path_params["name"], _text(body, "role")
        operator: Operator = request.state.operator

        def change() -> Credential:
            return self.system.operators.set_role(
                name, role, by=operator.name, by_credential=operator.credential_id
            )

        return json_response((await _managed(change)).to_dict())

    async def revoke(self, request: Request) -> Response:
        raw = await read_body(request)
        body = parse_object(raw) if raw.strip() else {}
        name, reason = request.path_params["name"], _text(body, "reason")
        if len(reason) > MAX_REASON or not reason.isprintable():
            raise WireError(400, f"reason must be printable text of at most {MAX_REASON} characters")
        operator: Operator = request.state.operator

        def revoke() -> Credential:
            credential = self.system.operators.revoke(
                name, by=operator.name, by_credential=operator.credential_id, reason=reason
            )
            self.auth.sessions.end_credential(credential.credential_id)
            return credential

        return json_response((await _managed(revoke)).to_dict())


async def _managed(change: object) -> Credential:
    try:
        result: Credential = await run_in_threadpool(change)  # type: ignore[arg-type]
    except OperatorNotFoundError as e:
        raise WireError(404, str(e)) from None
    except OperatorValidationError as e:
        raise WireError(400, str(e)) from None
    return result


def _text(body: dict[str, object], key: str) -> str:
    try:
        return string_field(body, key).strip()
    except WireError:
        raise WireError(400, f"{key} must be a string") from None


def operator_admin_paths(op: Any, error: Schema) -> dict[str, Schema]:
    """The OpenAPI paths of these routes, built with the document's `op` helper."""

    def name_param() -> Schema:
        return {"name": "name", "in": "path", "required": True, "schema": {"type": "string"}}

    credential: Schema = {
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "credential_id": {"type": "string"},
            "role": {"type": "string", "enum": list(ROLES)},
            "active": {"type": "boolean"},
            "enrolled_at": {"type": ["string", "null"]},
            "enrolled_by": {"type": "string"},
            "revoked_at": {"type": ["string", "null"]},
            "revoked_by": {"type": "string"},
        },
    }
    me = {"type": "object", "properties": {k: {"type": "string"} for k in ("name", "credential_id", "role")}}

    def body(properties: dict[str, Schema], required: tuple[str, ...] = ()) -> Schema:
        schema: Schema = {"type": "object", "properties": properties, "required": list(required)}
        return {"required": bool(required), "content": {"application/json": {"schema": schema}}}

    def answer(description: str, schema: Schema) -> Schema:
        return {"description": description, "content": {"application/json": {"schema": schema}}}

    changed = {
        "200": answer("The credential as it is now", credential),
        "404": answer("No such operator", error),
    }
    return {
        "/api/v1/me": {
            "get": op("The authenticated operator: name, credential, role", {"200": answer("Me", me)})
        },
        "/api/v1/operators": {
            "get": op(
                "Every operator's latest credential (admin)",
                {
                    "200": answer(
                        "Operators",
                        {
                            "type": "object",
                            "properties": {"operators": {"type": "array", "items": credential}},
                        },
                    )
                },
            ),
            "post": op(
                "Enrol an operator (admin); the answer holds its token, shown only now",
                {
                    "201": answer(
                        "Enrolled",
                        {
                            **credential,
                            "properties": {**credential["properties"], "token": {"type": "string"}},
                        },
                    ),
                    "400": answer("A bad name or role", error),
                    "409": answer("The name holds an active credential", error),
                },
                requestBody=body(
                    {"name": {"type": "string"}, "role": {"type": "string", "enum": list(ROLES)}}, ("name",)
                ),
            ),
        },
        "/api/v1/operators/{name}/role": {
            "post": op(
                "Give an operator another role (admin)",
                {**changed, "400": answer("A bad role", error)},
                parameters=[name_param()],
                requestBody=body({"role": {"type": "string", "enum": list(ROLES)}}, ("role",)),
            )
        },
        "/api/v1/operators/{name}/revoke": {
            "post": op(
                "Revoke an operator's credential at once (admin)",
                {**changed, "400": answer("A bad reason", error)},
                parameters=[name_param()],
                requestBody=body({"reason": {"type": "string"}}),
            )
        },
        "/api/v1/operators/{name}": {
            "delete": op(
                "Revoke an operator's credential at once (admin)", changed, parameters=[name_param()]
            )
        },
    }
