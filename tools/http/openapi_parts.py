"""The pieces the OpenAPI document is built of: schema helpers, and the answers every limit gives.

Each limit a principal can reach answers the same way on every route that has it (see
docs/security.md): a body or field over its size is 413, a rate or a count over its bound 429
(with `Retry-After` where waiting helps), a storage fault 503 with `Retry-After`.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

TEXT = {"text/plain": {"schema": {"type": "string"}}}


def ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def strings(*names: str) -> dict[str, Schema]:
    return {name: {"type": "string"} for name in names}


def obj(properties: dict[str, Schema], required: tuple[str, ...] = (), **extra: Any) -> Schema:
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    out.update(extra)
    return out


def text(description: str) -> Schema:
    return {"description": description, "content": TEXT}


def json_answer(description: str, schema: Schema) -> Schema:
    return {"description": description, "content": {"application/json": {"schema": schema}}}


def body(schema: Schema) -> Schema:
    return {"required": True, "content": {"application/json": {"schema": schema}}}


def page_parameters(what: str, most: int = 1000, default: int = 200) -> list[Schema]:
    """The `after` cursor and `limit` of a paged list."""
    return [
        {
            "name": "after",
            "in": "query",
            "required": False,
            "description": f"The `next` of the page before: the {what} after it (absent: from the start)",
            "schema": {"type": "integer", "minimum": 0, "maximum": 2**62},
        },
        {
            "name": "limit",
            "in": "query",
            "required": False,
            "description": f"At most this many (default {default}; more than {most} is read as {most})",
            "schema": {"type": "integer", "minimum": 1},
        },
    ]


NEXT: Schema = {
    "type": ["integer", "null"],
    "description": "The cursor of the next page, to pass as `after`; null on the last page",
}


# -- the limits' answers ---------------------------------------------------------------------

RETRY_AFTER: Schema = {
    "description": "Whole seconds to wait before the same request can be admitted",
    "schema": {"type": "integer", "minimum": 1},
}


def retry_after(description: str, content: Schema | None = None) -> Schema:
    """An answer carrying a `Retry-After` header (plain text unless `content` says otherwise)."""
    return {"description": description, "content": content or TEXT, "headers": {"Retry-After": RETRY_AFTER}}


def json_retry_after(description: str) -> Schema:
    """A JSON `{"error": ...}` answer carrying `Retry-After`."""
    return retry_after(description, {"application/json": {"schema": ref("Error")}})


BODY_TOO_LARGE = "`request body too large` (over 1 MiB)"
FIELD_TOO_LARGE = (
    "`request body too large` (over 1 MiB), or a field over its bound, named in the message: "
    "a payload over `--max-payload` (64 KiB), a text field over `--max-text` (4 KiB)"
)
RATE = (
    "over the run's write rate (`--events-per-second`, `--burst`): Retry-After says when a write is admitted"
)
STORAGE = json_retry_after("Storage failed (disk full, read-only, unreachable): the cause, and Retry-After")


STORAGE_FREE = frozenset({"/health", "/openapi.json"})  # answered without touching storage


def with_storage_faults(paths: dict[str, Schema]) -> dict[str, Schema]:
    """Every operation of `paths` that reads or writes the log, with the 503 a storage fault
    answers (in place; also returned)."""
    for path, item in paths.items():
        if path in STORAGE_FREE:
            continue
        for operation in item.values():
            if isinstance(operation, dict) and "responses" in operation:
                operation["responses"].setdefault("503", STORAGE)
    return paths
