"""The wire protocol as the SDK speaks it: request bodies and how answers become values or errors.

Both clients (sync and asyncio) build their requests and read their answers here, so they
differ only in how they wait.
"""

from __future__ import annotations

import math
import secrets
import traceback
import uuid
from typing import Any

import httpx
import orjson

from ._decision import Decision
from ._errors import STATUS_ERRORS, ServerError, ServerUnreachable

JSON = {"Content-Type": "application/json"}
# One long poll for a decision waits at most this long; a longer gate asks again.
WAIT_SLICE = 25.0
# Seconds an HTTP answer may take beyond the time the server was asked to wait.
ANSWER_MARGIN = 15.0
POLL_WAIT = 2.0  # seconds the server holds `/poll-control` when nothing is queued (as the seed)
SUMMARY_LIMIT = 1000  # characters of an exception kept in a `failed` finish's summary
DESCRIPTION_LIMIT = 200  # characters of a gated call shown as its request's one-line description


def new_id() -> str:
    """A fresh request or message id."""
    return uuid.uuid4().hex


def new_token() -> str:
    """A run token the SDK chooses when it registers a run itself (the wire allows it)."""
    return secrets.token_hex(32)


def dumps(value: Any) -> bytes:
    """Compact JSON; anything JSON cannot hold is shown as its `str()`."""
    return orjson.dumps(value, default=str, option=orjson.OPT_SORT_KEYS)


def body(value: dict[str, Any]) -> bytes:
    return orjson.dumps(value, default=str)


def transport_error(error: httpx.TransportError, url: str) -> ServerUnreachable:
    """The SDK's error for a request that never got an answer."""
    if isinstance(error, httpx.TimeoutException):
        return ServerUnreachable(f"flightlog at {url} did not answer in time ({type(error).__name__})")
    return ServerUnreachable(f"flightlog at {url} cannot be reached: {error}")


def answer(response: httpx.Response) -> Any:
    """The decoded JSON of a successful answer (None for an empty or plain-text one); else the error."""
    if response.status_code >= 400:
        raise status_error(response)
    content = response.content
    if not content or not response.headers.get("content-type", "").startswith("application/json"):
        return None
    return orjson.loads(content)


def status_error(response: httpx.Response) -> ServerError:
    message = response.text.strip()
    if response.headers.get("content-type", "").startswith("application/json"):
        try:
            decoded = orjson.loads(response.content)
        except orjson.JSONDecodeError:
            decoded = None
        if isinstance(decoded, dict) and isinstance(decoded.get("error"), str):
            message = decoded["error"]
    retry_after = _seconds(response.headers.get("retry-after"))
    kind = STATUS_ERRORS.get(response.status_code, ServerError)
    return kind(response.status_code, message, retry_after)


def _seconds(value: str | None) -> float | None:
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return seconds if math.isfinite(seconds) and seconds >= 0 else None


def permission_body(
    tool: str, arguments: Any, request_id: str, description: str | None, risk: str | None
) -> dict[str, Any]:
    """The `/permission_request` fields of a gated call (less the run's credentials)."""
    preview = dumps(arguments).decode() if arguments is not None else ""
    if description is None:
        shown = preview if len(preview) <= DESCRIPTION_LIMIT else preview[: DESCRIPTION_LIMIT - 1] + "…"
        description = f"{tool}({shown})" if preview else tool
    fields: dict[str, Any] = {
        "request_id": request_id,
        "tool_name": tool,
        "description": description,
        "input_preview": preview,
    }
    if risk:
        fields["risk"] = risk
    return fields


def decided(response: Any, tool: str) -> Decision | None:
    """The Decision in a `/permission_wait` answer; None while the request is pending."""
    if not isinstance(response, dict) or response.get("status") != "decided":
        return None
    return Decision.from_wire(response, tool)


def ask_payload(message_id: str, value: Any, from_run_id: str) -> dict[str, Any]:
    """The payload of an ask: an object's own fields, else the value as `message` (text) or `data`."""
    fields = _fields(value)
    return {**fields, "id": message_id, "expects_reply": True, "from_run_id": from_run_id}


def reply_payload(ask_id: str, value: Any, from_run_id: str) -> dict[str, Any]:
    """The payload of a reply to ask `ask_id`, built as an ask's."""
    return {**_fields(value), "reply_to": ask_id, "from_run_id": from_run_id}


def _fields(value: Any) -> dict[str, Any]:
    if isinstance(value, dict):
        return dict(value)
    if isinstance(value, str):
        return {"message": value}
    return {"data": value}


def failure_summary(error: BaseException) -> str:
    """One line for a run that failed with `error`: its type and message."""
    text = "".join(traceback.format_exception_only(type(error), error)).strip()
    text = " ".join(text.split())
    return text if len(text) <= SUMMARY_LIMIT else text[: SUMMARY_LIMIT - 1] + "…"
