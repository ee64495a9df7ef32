"""Tool overrides: which tools an agent may use, decided from admin and user rows."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Final

from .._errors import InvalidToolOverrideScopeError

TOOL_OVERRIDE_SCOPE_SYSTEM: Final = "system"
TOOL_OVERRIDE_SCOPE_SYSTEM_AGENT: Final = "system_agent"
TOOL_OVERRIDE_SCOPE_USER: Final = "user"
TOOL_OVERRIDE_SCOPE_USER_AGENT: Final = "user_agent"
TOOL_OVERRIDE_SCOPES: Final = (
    TOOL_OVERRIDE_SCOPE_SYSTEM,
    TOOL_OVERRIDE_SCOPE_SYSTEM_AGENT,
    TOOL_OVERRIDE_SCOPE_USER,
    TOOL_OVERRIDE_SCOPE_USER_AGENT,
)
TOOL_OVERRIDE_ORIGIN_DEFAULT: Final = "default"

# The sandbox tool set: always enabled, whatever any row or default says, so that no
# override can leave an agent unable to work in its own workspace.
CORE_TOOLS: Final = ("bash", "read", "write", "edit")

# The scopes keyed by a user id and by an agent id; `system` is keyed by neither.
_USER_SCOPES: Final = frozenset({TOOL_OVERRIDE_SCOPE_USER, TOOL_OVERRIDE_SCOPE_USER_AGENT})
_AGENT_SCOPES: Final = frozenset({TOOL_OVERRIDE_SCOPE_SYSTEM_AGENT, TOOL_OVERRIDE_SCOPE_USER_AGENT})


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOverrideKey:
    """The identity of one override row: tool, scope, and the owner ids the scope is keyed by."""

    tool_name: str
    scope: str
    user_id: str = ""
    agent_id: str = ""

    @classmethod
    def for_scope(
        cls, tool_name: str, scope: str, *, user_id: str = "", agent_id: str = ""
    ) -> ToolOverrideKey:
        """The key of `tool_name` in `scope`, keeping only the ids that scope is keyed by.

        A `system` row stored with a stray user id would never be found for anyone else;
        dropping ids the scope does not use keeps one row per (tool, scope, owner).
        """
        validate_scope(scope)
        return cls(
            tool_name=tool_name,
            scope=scope,
            user_id=user_id if scope in _USER_SCOPES else "",
            agent_id=agent_id if scope in _AGENT_SCOPES else "",
        )


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOverride:
    """One persisted tool-visibility row: a tool enabled or disabled in a scope.

    `user_id` and `agent_id` name the row's owner where its scope is keyed by them; the
    precedence rules read only `tool_name`, `scope` and `enabled`.
    """

    tool_name: str
    scope: str
    enabled: bool
    user_id: str = ""
    agent_id: str = ""

    @property
    def key(self) -> ToolOverrideKey:
        """The row's identity, without its enabled bit."""
        return ToolOverrideKey(self.tool_name, self.scope, self.user_id, self.agent_id)

    def applies_to(self, user_id: str, agent_id: str) -> bool:
        """Whether the row is one of those that govern `user_id` talking to `agent_id`."""
        if self.scope not in TOOL_OVERRIDE_SCOPES:
            return False
        if self.scope in _USER_SCOPES and self.user_id != user_id:
            return False
        return not (self.scope in _AGENT_SCOPES and self.agent_id != agent_id)


@dataclasses.dataclass(frozen=True, slots=True)
class ToolOverrideDecision:
    """Whether a tool is enabled, and the scope (or `default`) that decided it."""

    enabled: bool
    origin: str


# The names the rest of flightlog uses for the same two values.
ToolOverrideRow = ToolOverride
ToolOverrideResolution = ToolOverrideDecision


def is_core_tool_name(name: str) -> bool:
    """Whether `name` is one of the sandbox tools no override can touch."""
    return name in CORE_TOOLS


def validate_scope(scope: str) -> str:
    """Return `scope` if it is one of the four override scopes; raise otherwise."""
    if scope not in TOOL_OVERRIDE_SCOPES:
        raise InvalidToolOverrideScopeError(scope)
    return scope


def resolve_tool_override(
    default_enabled: bool, tool_name: str, rows: Iterable[ToolOverride]
) -> ToolOverrideDecision:
    """Decide whether `tool_name` is enabled, given its default and the applicable rows.

    The v0.60.0 precedence: core tools are always on; an admin row (`system_agent`, else
    `system`) that disables wins over everything; then a user row (`user_agent`, else
    `user`) decides; then an enabling admin row; then the default. Within one scope the
    first row for the tool wins. Rows for other tools, and rows of unknown scopes, are
    ignored. The caller passes only the rows that apply to the (user, agent) at hand.
    """
    if is_core_tool_name(tool_name):
        return ToolOverrideDecision(enabled=True, origin=TOOL_OVERRIDE_ORIGIN_DEFAULT)
    first_by_scope: dict[str, ToolOverride] = {}
    for row in rows:
        if row.tool_name == tool_name:
            first_by_scope.setdefault(row.scope, row)
    # "System agent beats system": the more specific admin row is the admin row, even
    # when it enables a tool that `system` disables (a later release caps it instead).
    admin = first_by_scope.get(TOOL_OVERRIDE_SCOPE_SYSTEM_AGENT) or first_by_scope.get(
        TOOL_OVERRIDE_SCOPE_SYSTEM
    )
    if admin is not None and not admin.enabled:
        return ToolOverrideDecision(enabled=False, origin=admin.scope)
    user = first_by_scope.get(TOOL_OVERRIDE_SCOPE_USER_AGENT) or first_by_scope.get(TOOL_OVERRIDE_SCOPE_USER)
    if user is not None:
        return ToolOverrideDecision(enabled=user.enabled, origin=user.scope)
    if admin is not None:
        return ToolOverrideDecision(enabled=True, origin=admin.scope)
    return ToolOverrideDecision(enabled=default_enabled, origin=TOOL_OVERRIDE_ORIGIN_DEFAULT)


def filter_tool_enabled(default_enabled: bool, tool_name: str, rows: Iterable[ToolOverride]) -> bool:
    """Whether `tool_name` is enabled: the `enabled` bit of `resolve_tool_override`."""
    return resolve_tool_override(default_enabled, tool_name, rows).enabled
