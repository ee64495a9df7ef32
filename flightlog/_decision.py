"""What the SDK hands back: a gate's decision, and a message between runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

ALLOW: Final = "allow"
DENY: Final = "deny"
EXPIRED: Final = "expired"
WITHDRAWN: Final = "withdrawn"
# The approval's recorded decision -> the gate's outcome.
_OUTCOMES = {"approve": ALLOW, "reject": DENY, "expired": EXPIRED, "withdrawn": WITHDRAWN}


@dataclass(frozen=True, slots=True)
class Decision:
    """The one outcome of a gated tool call: allowed or not, who decided, and why.

    `outcome` is `allow`, `deny` (an operator rejected it), `expired` (nobody decided before
    the server's deadline) or `withdrawn` (the run gave the request up). A Decision is true
    when the call is allowed, so `if run.gate(...):` reads as it should.
    """

    allowed: bool
    outcome: str
    decided_by: str
    reason: str
    approval_id: str
    request_id: str
    tool: str = ""

    def __bool__(self) -> bool:
        return self.allowed

    @classmethod
    def from_wire(cls, answer: dict[str, Any], tool: str = "") -> Decision:
        """The decision a `/permission_wait` or `/permission_withdraw` answer with status `decided` names."""
        decision = str(answer.get("decision", ""))
        behavior = str(answer.get("behavior", ""))
        outcome = _OUTCOMES.get(decision, ALLOW if behavior == ALLOW else DENY)
        return cls(
            allowed=behavior == ALLOW and outcome == ALLOW,
            outcome=outcome,
            decided_by=str(answer.get("decided_by", "")),
            reason=str(answer.get("reason", "")),
            approval_id=str(answer.get("approval_id", "")),
            request_id=str(answer.get("request_id", "")),
            tool=tool,
        )


@dataclass(frozen=True, slots=True)
class Message:
    """A message a run received (an ask, a reply, an operator's control message).

    `payload` is the message's JSON payload as sent; `body` is what the sender passed to
    `ask` or `reply` (the payload's `data` or `message`, else the payload itself).
    """

    id: str
    type: str
    from_run_id: str
    payload: Any
    created_at: str = ""

    @property
    def expects_reply(self) -> bool:
        """Whether this is an ask: its sender waits for `run.reply(message, ...)`."""
        return isinstance(self.payload, dict) and self.payload.get("expects_reply") is True

    @property
    def ask_id(self) -> str:
        """The id a reply to this ask must name ("" if it is not an ask)."""
        if not self.expects_reply:
            return ""
        return str(self.payload.get("id", ""))

    @property
    def body(self) -> Any:
        payload = self.payload
        if isinstance(payload, dict):
            for key in ("data", "message"):
                if key in payload:
                    return payload[key]
        return payload

    @classmethod
    def from_control(cls, message: dict[str, Any]) -> Message:
        """A message as `/poll-control` lists it."""
        return cls(
            id=str(message.get("id", "")),
            type=str(message.get("type", "")),
            from_run_id=str(message.get("from_run_id", "")),
            payload=message.get("payload"),
            created_at=str(message.get("created_at", "")),
        )
