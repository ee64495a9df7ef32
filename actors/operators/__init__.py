"""Operators: named credentials with roles, enrolled, re-roled and revoked as events."""

# Layering: actors.operators imports the actors shell (_aggregate, _errors) and eventlog; never a
# sibling subpackage or tools.

from .model import (
    ACTIONS,
    ADMIN,
    APPROVER,
    BOOTSTRAP,
    CONTROL,
    DECIDE,
    ENROL,
    ENROLLER,
    MANAGE,
    READ,
    ROLES,
    VIEWER,
    Credential,
    allows,
    bootstrap_credential,
    valid_name,
)
from .registry import Operators, new_operator_token, token_digest

__all__ = [
    "ACTIONS",
    "ADMIN",
    "APPROVER",
    "BOOTSTRAP",
    "CONTROL",
    "DECIDE",
    "ENROL",
    "ENROLLER",
    "MANAGE",
    "READ",
    "ROLES",
    "VIEWER",
    "Credential",
    "Operators",
    "allows",
    "bootstrap_credential",
    "new_operator_token",
    "token_digest",
    "valid_name",
]
