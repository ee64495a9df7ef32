"""Operators' credentials and roles: who may read, decide, control and manage."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Final

VIEWER: Final = "viewer"
APPROVER: Final = "approver"
ADMIN: Final = "admin"
ENROLLER: Final = "enroller"
ROLES: Final = (VIEWER, APPROVER, ADMIN, ENROLLER)

# What each role may do. A viewer reads; an approver also decides approvals; an admin also
# pushes control to runs and manages operators and runs. An enroller is the credential an
# orchestrator holds to create runs for the agents it starts, and may do nothing else.
READ: Final = "read"
DECIDE: Final = "decide"
CONTROL: Final = "control"
MANAGE: Final = "manage"
ENROL: Final = "enrol"
ACTIONS: Final = (READ, DECIDE, CONTROL, MANAGE, ENROL)
_ALLOWED: Final = {
    VIEWER: frozenset({READ}),
    APPROVER: frozenset({READ, DECIDE}),
    ADMIN: frozenset(ACTIONS),
    ENROLLER: frozenset({ENROL}),
}

# The credential of FLIGHTLOG_OPERATOR_TOKEN, the bootstrap admin; no enrolled operator may
# take its name, so the audit trail never confuses the two.
BOOTSTRAP: Final = "bootstrap"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._@+-]{0,63}")


def allows(role: str, action: str) -> bool:
    """Whether a credential of `role` may do `action` (one of ACTIONS)."""
    return action in _ALLOWED.get(role, frozenset())


def valid_name(name: str) -> bool:
    """Whether `name` may name an operator: 1 to 64 of letters, digits and `._@+-`, not `bootstrap`."""
    return bool(_NAME.fullmatch(name)) and name != BOOTSTRAP


@dataclass(frozen=True, slots=True)
class Credential:
    """One operator credential as the log says: its name, role, digest and lifetime."""

    name: str
    credential_id: str
    role: str
    token_sha256: str
    enrolled_at: datetime | None
    enrolled_by: str
    revoked_at: datetime | None = None
    revoked_by: str = ""

    @property
    def active(self) -> bool:
        return self.revoked_at is None

    def to_dict(self) -> dict[str, object]:
        """The credential as the API lists it (the digest is not shown)."""
        return {
            "name": self.name,
            "credential_id": self.credential_id,
            "role": self.role,
            "active": self.active,
            "enrolled_at": self.enrolled_at.isoformat() if self.enrolled_at else None,
            "enrolled_by": self.enrolled_by,
            "revoked_at": self.revoked_at.isoformat() if self.revoked_at else None,
            "revoked_by": self.revoked_by,
        }


def bootstrap_credential(token_sha256: str) -> Credential:
    """The bootstrap admin's credential, for the digest of FLIGHTLOG_OPERATOR_TOKEN."""
    return Credential(BOOTSTRAP, BOOTSTRAP, ADMIN, token_sha256, None, "FLIGHTLOG_OPERATOR_TOKEN")
