"""The broker's wire values: control messages, reports, finishes, replies and envelopes.

Payloads are raw JSON text (`str`) or None when absent, like the seed's json.RawMessage;
`to_json()` gives the seed's field names, omitting what the seed omits when empty.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

FINISH_KINDS = frozenset({"done", "failed", "blocked"})

# Control types only the operator side sends (`/push-control` with the operator token, the
# operator API, the console, the CLI, the approval gate's own permission notices): agents
# take them as an operator's word, so a run may never send them to a run (`/send`, `send_to`).
# Anything else between runs (`agent_message`, its ask/reply payloads) stays open.
OPERATOR_CONTROL_TYPES = frozenset(
    {
        "permission_decision",  # the approval gate's answer to a permission request
        "cancel",
        "continue",
        "add_context",
        "request_status",
        "steer",  # the operator API's and the bench's push
        "stop",
        "abort",
        "interrupt",
        "prompt",
    }
)


def operator_only(kind: str) -> bool:
    """Whether a control type may reach a run only from the operator side (case and spaces ignored)."""
    return kind.strip().lower() in OPERATOR_CONTROL_TYPES


# How a run came to be (RunRegistered.origin; "" in records older than the field).
ORIGIN_OPERATOR = "operator"  # an operator created it through the API
ORIGIN_ENROLMENT = "enrolment"  # an enrolment credential (an orchestrator's) created it
ORIGIN_SELF = "self"  # its agent registered it at /register, on a server open to that
ORIGIN_LOCAL = "local"  # in process: the Python API, or a command on the database file
ORIGINS = (ORIGIN_OPERATOR, ORIGIN_ENROLMENT, ORIGIN_SELF, ORIGIN_LOCAL)

_ZERO_TIME = "0001-01-01T00:00:00Z"  # Go's zero time.Time, as the seed serialises it


def make_token() -> str:
    """16 cryptographically random bytes as 32 lower-case hex characters."""
    return secrets.token_hex(16)


def token_digest(token: str) -> str:
    """The SHA-256 hex digest under which a token is stored and compared."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def raw_json(payload: Any) -> str | None:
    """Raw JSON text for a payload: bytes/str already JSON, any other JSON value encoded, None absent."""
    if payload is None:
        return None
    if isinstance(payload, bytes | bytearray | memoryview):
        text = bytes(payload).decode("utf-8")
    elif isinstance(payload, str):
        text = payload
    else:
        return payload_text(payload)
    orjson.loads(text)  # raises orjson.JSONDecodeError (a ValueError) when it is not JSON
    return text


def payload_text(payload: Any) -> str | None:
    """A payload as the wire stores it, JSON text: a str is that text already (as the wire's raw
    member), None is absent, and any other JSON value (object, array, number, bool) is encoded.

    TypeError when the value cannot be JSON.
    """
    if payload is None or type(payload) is str:
        return payload
    if isinstance(payload, bytes | bytearray | memoryview):
        return bytes(payload).decode("utf-8")
    try:
        return orjson.dumps(payload).decode()
    except orjson.JSONEncodeError as e:
        raise TypeError(f"payload must be a JSON value: {e}") from None


def _text_payload(message: Any) -> None:
    """Store a message's payload as JSON text (frozen dataclasses: through object.__setattr__)."""
    payload = message.payload
    if payload is not None and type(payload) is not str:
        object.__setattr__(message, "payload", payload_text(payload))


def _time(value: datetime | None) -> str:
    return _ZERO_TIME if value is None else value.isoformat().replace("+00:00", "Z")


def _payload(out: dict[str, Any], payload: str | None) -> None:
    if payload:  # omitempty on a RawMessage: only an absent/empty payload is left out
        out["payload"] = orjson.Fragment(payload.encode())


@dataclass(frozen=True, slots=True)
class Envelope:
    """The broker's internal generic message form (never on the wire)."""

    from_run_id: str = ""
    to_run_id: str = ""
    to: str = ""
    kind: str = ""
    correlation_id: str = ""
    payload: str | None = None
    created_at: datetime | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"from_run_id": self.from_run_id, "to_run_id": self.to_run_id}
        if self.to:
            out["to"] = self.to
        out["kind"] = self.kind
        if self.correlation_id:
            out["correlation_id"] = self.correlation_id
        _payload(out, self.payload)
        out["created_at"] = _time(self.created_at)
        return out


@dataclass(frozen=True, slots=True)
class ControlMessage:
    """A message queued for a run's agent: from an operator, or from another run."""

    id: str
    type: str
    run_id: str
    from_run_id: str = ""
    payload: str | None = None
    created_at: datetime | None = None
    sent_by: str = ""  # the operator who pushed it (`name (credential id)`); not on the wire

    def __post_init__(self) -> None:
        _text_payload(self)

    def to_envelope(self) -> Envelope:
        return Envelope(
            to_run_id=self.run_id,
            kind=self.type,
            correlation_id=self.id,
            payload=self.payload,
            created_at=self.created_at,
        )

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"id": self.id, "type": self.type, "run_id": self.run_id}
        if self.from_run_id:
            out["from_run_id"] = self.from_run_id
        _payload(out, self.payload)
        out["created_at"] = _time(self.created_at)
        return out


@dataclass(frozen=True, slots=True)
class Report:
    """Progress from a run's agent."""

    run_id: str
    state: str
    payload: str | None = None  # JSON text; any other JSON value given is stored as its text

    def __post_init__(self) -> None:
        _text_payload(self)

    def to_envelope(self) -> Envelope:
        return Envelope(from_run_id=self.run_id, kind=self.state, payload=self.payload)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": self.run_id, "state": self.state}
        _payload(out, self.payload)
        return out


@dataclass(frozen=True, slots=True)
class Finish:
    """A run's final word: done, failed or blocked (as given over HTTP)."""

    run_id: str
    status: str
    summary: str = ""
    files_changed: tuple[str, ...] = ()
    payload: str | None = None  # JSON text; any other JSON value given is stored as its text

    def __post_init__(self) -> None:
        _text_payload(self)

    def to_envelope(self) -> Envelope:
        return Envelope(from_run_id=self.run_id, kind=self.status or "done", payload=self.payload)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": self.run_id, "status": self.status, "summary": self.summary}
        if self.files_changed:
            out["files_changed"] = list(self.files_changed)
        _payload(out, self.payload)
        return out


@dataclass(frozen=True, slots=True)
class Reply:
    """A run's reply to someone."""

    run_id: str
    to: str
    payload: str | None = None  # JSON text; any other JSON value given is stored as its text

    def __post_init__(self) -> None:
        _text_payload(self)

    def to_envelope(self) -> Envelope:
        return Envelope(from_run_id=self.run_id, to=self.to, payload=self.payload)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"run_id": self.run_id, "to": self.to}
        _payload(out, self.payload)
        return out


@dataclass(frozen=True, slots=True)
class AgentMessage:
    """The payload of an `agent_message` control message between runs."""

    from_: str = ""
    from_run_id: str = ""
    message: str = ""
    role: str = ""

    def to_json(self) -> dict[str, Any]:
        return {
            "from": self.from_,
            "from_run_id": self.from_run_id,
            "message": self.message,
            "role": self.role,
        }


@dataclass(frozen=True, slots=True)
class PermissionState:
    """A permission request relayed from a run to the operator (an approval of kind `permission`)."""

    request_id: str
    tool_name: str
    desc: str
    preview: str
    created_at: datetime
    approval_id: str = ""


@dataclass(frozen=True, slots=True)
class RunView:
    """A run as the broker knows it (the seed's RunState, without its token)."""

    run_id: str
    registered_at: datetime | None
    last_seen: datetime
    control_queue: tuple[ControlMessage, ...] = ()
    reports: tuple[Report, ...] = ()
    finishes: tuple[Finish, ...] = ()
    replies: tuple[Reply, ...] = ()
    permission_requests: dict[str, PermissionState] = field(default_factory=dict)
    permission_decisions: dict[str, str] = field(default_factory=dict)
    # Who created the run (RunRegistered's origin, by and by_credential; "" for old records).
    origin: str = ""
    created_by: str = ""
    created_by_credential: str = ""
    revoked: bool = False  # its token was revoked and not re-keyed since: it authenticates nothing
