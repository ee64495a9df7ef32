"""The approval gate's values: requests, approvals, resolutions, decisions and actor keys."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

import orjson

from projections import ApprovalRow

APPROVE: Final = "approve"
REJECT: Final = "reject"
EXPIRED: Final = "expired"
# The requester gave its request up before anyone decided it (a run, over `/permission_withdraw`).
WITHDRAWN: Final = "withdrawn"
DECISIONS: Final = (APPROVE, REJECT, EXPIRED, WITHDRAWN)
RISKS: Final = ("low", "medium", "high")
# Which approvals only an operator may decide (`flightlog serve --operator-decides`): "high"
# (the default) is every high-risk request, "all" every request. Any other answer, a run's own
# `/permission` above all, is recorded as a refused attempt and the approval stays pending.
OPERATOR_DECIDES: Final = ("high", "all")


def needs_operator(risk: str, policy: str = "high") -> bool:
    """Whether only an operator may decide an approval of `risk` under `policy` (unknown risk: yes)."""
    if policy not in OPERATOR_DECIDES:
        raise ValueError(f"operator-decides policy must be one of {', '.join(OPERATOR_DECIDES)}")
    return policy == "all" or risk not in ("low", "medium")


@dataclass(frozen=True, slots=True)
class ApprovalActorKeys:
    """The canonical actor keys recorded in approval history."""

    operator: str = "operator"
    runtime: str = "runtime"
    timeout: str = "timeout"
    abort: str = "abort"
    web_operator: str = "web-operator"


_KEYS = ApprovalActorKeys()


def approval_actor_state() -> ApprovalActorKeys:
    """The actor keys used in persisted approval history."""
    return _KEYS


@dataclass(frozen=True, slots=True)
class ApprovalRequest:
    """What a harness or tool asks an operator to authorize; the payload is hashed, never stored."""

    kind: str
    title: str
    detail: str
    risk: str
    run_id: str = ""
    tool_call_id: str = ""
    payload: Any = None
    requires_fleet_quorum: bool = False


@dataclass(frozen=True, slots=True)
class Approval:
    """The operator-visible form of a request: its payload digest, never the payload."""

    id: str
    run_id: str
    tool_call_id: str
    kind: str
    title: str
    detail: str
    risk: str
    payload_sha256: str
    requires_fleet_quorum: bool
    requested_at: datetime
    expires_at: datetime

    def to_dict(self) -> dict[str, Any]:
        """The seed's JSON shape (empty run_id, tool_call_id and quorum flag omitted)."""
        out: dict[str, Any] = {"id": self.id}
        if self.run_id:
            out["run_id"] = self.run_id
        if self.tool_call_id:
            out["tool_call_id"] = self.tool_call_id
        out.update(
            kind=self.kind,
            title=self.title,
            detail=self.detail,
            risk=self.risk,
            payload_sha256=self.payload_sha256,
        )
        if self.requires_fleet_quorum:
            out["requires_fleet_quorum"] = True
        out.update(requested_at=self.requested_at.isoformat(), expires_at=self.expires_at.isoformat())
        return out


@dataclass(frozen=True, slots=True)
class ApprovalResolution:
    """One approval's terminal outcome and the actor that caused it."""

    approval: Approval
    decision: str
    actor: str
    at: datetime
    identity: str = ""


def payload_digest(payload: Any) -> str:
    """Lower-hex SHA-256 of the payload's canonical JSON (compact, keys sorted; None → null).

    Raises TypeError (orjson's JSONEncodeError) when the payload cannot be encoded.
    """
    data = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
    # orjson writes NaN and infinities as null, which would give {"x": nan} the digest of
    # {"x": None}; JSON has no such numbers, so (as in Go) they cannot be encoded at all.
    if b"null" in data and _has_non_finite(payload):
        raise TypeError("unsupported value: NaN and infinities have no JSON encoding")
    return hashlib.sha256(data).hexdigest()


def _has_non_finite(value: Any) -> bool:
    if isinstance(value, float):
        return not math.isfinite(value)
    if isinstance(value, dict):
        return any(_has_non_finite(v) for v in value.values())
    if isinstance(value, list | tuple):
        return any(_has_non_finite(v) for v in value)
    return False


def to_approval(row: ApprovalRow) -> Approval:
    """The approval a pending-approvals row shows."""
    return Approval(
        row.id,
        row.run_id,
        row.tool_call_id,
        row.kind,
        row.title,
        row.detail,
        row.risk,
        row.payload_sha256,
        row.requires_fleet_quorum,
        row.requested_at,
        row.expires_at,
    )
