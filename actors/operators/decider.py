"""The operators aggregate (stream `operators-main`) as a pure decider."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

from eventlog import Event
from eventlog.events import OperatorEnrolled, OperatorRevoked, OperatorRoleChanged

from .._aggregate import Decision
from .._broker_errors import OperatorExistsError, OperatorNotFoundError, OperatorValidationError
from .model import ROLES, Credential, valid_name


@dataclass(frozen=True, slots=True)
class OperatorsState:
    """Every credential ever enrolled, by name (its latest) and by token digest (active ones)."""

    by_name: dict[str, Credential] = field(default_factory=dict)
    by_digest: dict[str, Credential] = field(default_factory=dict)
    by_id: dict[str, Credential] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class EnrolOperator:
    name: str
    role: str
    token_sha256: str
    credential_id: str
    by: str
    by_credential: str


@dataclass(frozen=True, slots=True)
class ChangeRole:
    name: str
    role: str
    by: str
    by_credential: str


@dataclass(frozen=True, slots=True)
class RevokeOperator:
    name: str
    reason: str
    by: str
    by_credential: str


def _role(role: str) -> str:
    if role not in ROLES:
        raise OperatorValidationError(f"role must be one of {', '.join(ROLES)}, not {role!r}")
    return role


def _active(state: OperatorsState, name: str) -> Credential:
    current = state.by_name.get(name)
    if current is None or not current.active:
        raise OperatorNotFoundError(name)
    return current


def decide(state: OperatorsState, c: object, now: datetime) -> Decision:
    if isinstance(c, EnrolOperator):
        if not valid_name(c.name):
            raise OperatorValidationError(
                f"operator name {c.name!r}: 1 to 64 letters, digits or ._@+- (and not 'bootstrap')"
            )
        current = state.by_name.get(c.name)
        if current is not None and current.active:
            raise OperatorExistsError(c.name)
        if c.credential_id in state.by_id or any(
            known.token_sha256 == c.token_sha256 for known in state.by_id.values()
        ):
            raise OperatorValidationError("that token or credential id is already in use; try again")
        role = _role(c.role)
        return Decision(
            [OperatorEnrolled(c.name, c.credential_id, role, c.token_sha256, c.by, c.by_credential, now)]
        )
    if isinstance(c, ChangeRole):
        current = _active(state, c.name)
        role = _role(c.role)
        if role == current.role:
            return Decision()
        return Decision(
            [OperatorRoleChanged(c.name, current.credential_id, role, c.by, c.by_credential, now)]
        )
    if isinstance(c, RevokeOperator):
        current = _active(state, c.name)
        return Decision(
            [OperatorRevoked(c.name, current.credential_id, c.reason, c.by, c.by_credential, now)]
        )
    raise TypeError(f"unknown operators command {type(c).__name__}")


def evolve(state: OperatorsState, e: Event) -> OperatorsState:
    if isinstance(e, OperatorEnrolled):
        credential = Credential(e.name, e.credential_id, e.role, e.token_sha256, e.at, e.by)
        return _with(state, credential)
    current = state.by_id.get(getattr(e, "credential_id", ""))
    if current is None:
        return state
    if isinstance(e, OperatorRoleChanged):
        return _with(state, dataclasses.replace(current, role=e.role))
    if isinstance(e, OperatorRevoked):
        return _with(state, dataclasses.replace(current, revoked_at=e.at, revoked_by=e.by))
    return state


def _with(state: OperatorsState, credential: Credential) -> OperatorsState:
    """The state with `credential` as its name's latest, indexed by digest only while active."""
    by_digest = dict(state.by_digest)
    if credential.active:
        by_digest[credential.token_sha256] = credential
    else:
        by_digest.pop(credential.token_sha256, None)
    return OperatorsState(
        {**state.by_name, credential.name: credential},
        by_digest,
        {**state.by_id, credential.credential_id: credential},
    )


class OperatorsAggregate:
    category = "operators"

    def initial(self, id: str) -> OperatorsState:
        return OperatorsState()

    def decide(self, state: OperatorsState, command: object, now: datetime) -> Decision:
        return decide(state, command, now)

    def evolve(self, state: OperatorsState, event: Event) -> OperatorsState:
        return evolve(state, event)


OPERATORS = OperatorsAggregate()
