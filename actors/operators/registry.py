"""Operators: enrol, re-role and revoke named credentials, and tell who a token belongs to."""

from __future__ import annotations

import hashlib
import secrets
from typing import Any, cast

import pykka

from eventlog import Clock, EventLog

from .._aggregate import AggregateActor, Execute, GetState, Refresh
from .decider import OPERATORS, ChangeRole, EnrolOperator, OperatorsState, RevokeOperator
from .model import Credential

ASK_TIMEOUT = 30.0


def token_digest(token: str) -> str:
    """The SHA-256 hex digest under which a token is stored and compared."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def new_operator_token() -> str:
    """A fresh operator token: 256 random bits, as 64 lower-case hex digits."""
    return secrets.token_hex(32)


class Operators:
    """The operators' credentials over one log, always as fresh as the log.

    One actor owns the stream `operators-main`; every read first folds what other writers
    (the CLI on the database file, a second server) appended, so an enrolment or a revocation
    counts from the next request on, in every process.
    """

    def __init__(self, log: EventLog, clock: Clock) -> None:
        self._ref: pykka.ActorRef[Any] = AggregateActor.start(log, clock, OPERATORS, "main")

    def _state(self) -> OperatorsState:
        self._ref.ask(Refresh(), timeout=ASK_TIMEOUT)
        return cast(OperatorsState, self._ref.ask(GetState(), timeout=ASK_TIMEOUT))

    def _execute(self, command: object, by: str) -> OperatorsState:
        state, _ = self._ref.ask(Execute(command, {"actor": by}), timeout=ASK_TIMEOUT)
        return cast(OperatorsState, state)

    def enrol(
        self, name: str, role: str, *, by: str, by_credential: str = "", token: str | None = None
    ) -> tuple[Credential, str]:
        """Give `name` a new credential with `role`; return it and its token (shown only now).

        OperatorExistsError if `name` holds an active credential (revoke it first);
        OperatorValidationError for a bad name or role.
        """
        token = token or new_operator_token()
        digest = token_digest(token)
        credential_id = secrets.token_hex(6)
        state = self._execute(EnrolOperator(name, role, digest, credential_id, by, by_credential), by)
        return state.by_name[name], token

    def set_role(self, name: str, role: str, *, by: str, by_credential: str = "") -> Credential:
        """Give `name`'s active credential `role`; OperatorNotFoundError if it has none."""
        return self._execute(ChangeRole(name, role, by, by_credential), by).by_name[name]

    def revoke(self, name: str, *, by: str, by_credential: str = "", reason: str = "") -> Credential:
        """End `name`'s active credential at once; OperatorNotFoundError if it has none."""
        return self._execute(RevokeOperator(name, reason, by, by_credential), by).by_name[name]

    def list(self) -> list[Credential]:
        """Every operator's latest credential, active or revoked, in enrolment order."""
        return list(self._state().by_name.values())

    def get(self, name: str) -> Credential | None:
        return self._state().by_name.get(name)

    def credential(self, credential_id: str) -> Credential | None:
        """The credential with this id as it stands now (revoked ones too)."""
        return self._state().by_id.get(credential_id)

    def authenticate(self, token: str) -> Credential | None:
        """The active credential whose token this is, or None (digest to digest)."""
        if not token:
            return None
        return self._state().by_digest.get(token_digest(token))

    def close(self) -> None:
        if self._ref.is_alive():
            self._ref.stop()
