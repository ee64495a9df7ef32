"""Events of the operators' credentials (stream `operators-main`): who may act, and since when.

Only a token's SHA-256 digest is recorded, never the token. `by` names who made the change
(an operator's enrolled name, or `local:<user>` for a command run on the database file) and
`by_credential` the credential it was made with, so that who could act when is auditable.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ._catalogue import Event, event


@event("OperatorEnrolled")
@dataclass(frozen=True, slots=True)
class OperatorEnrolled(Event):
    """A named operator got a credential with a role; the token is kept only as its digest."""

    name: str
    credential_id: str
    role: str
    token_sha256: str
    by: str
    by_credential: str
    at: datetime


@event("OperatorRoleChanged")
@dataclass(frozen=True, slots=True)
class OperatorRoleChanged(Event):
    """An operator's credential was given another role."""

    name: str
    credential_id: str
    role: str
    by: str
    by_credential: str
    at: datetime


@event("OperatorRevoked")
@dataclass(frozen=True, slots=True)
class OperatorRevoked(Event):
    """An operator's credential stopped working: its sessions and API access end at once."""

    name: str
    credential_id: str
    reason: str
    by: str
    by_credential: str
    at: datetime
