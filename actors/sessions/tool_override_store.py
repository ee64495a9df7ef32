"""ToolOverrides: the agent seed's ToolOverrideStore over event-sourced override rows."""

from __future__ import annotations

from datetime import datetime

from eventlog import Clock, EventLog

from .._aggregate import Execute
from .._directory import Directory
from .tool_override_decider import (
    TOOL_OVERRIDES,
    ClearToolOverride,
    SetToolOverride,
    ToolOverridesActor,
    load,
    owner_of,
    owners_for,
)
from .tool_overrides import (
    ToolOverride,
    ToolOverrideDecision,
    ToolOverrideKey,
    filter_tool_enabled,
    resolve_tool_override,
)


class ToolOverrides:
    """Tool-visibility overrides: set and clear rows, fetch those that govern a (user, agent).

    A row is keyed by its tool, its scope and the ids that scope is keyed by (`system`: none,
    `system_agent`: the agent, `user`: the user, `user_agent`: both); ids a scope does not use
    are dropped, so there is one row per key. An unknown scope is refused before anything is
    recorded.
    """

    def __init__(self, log: EventLog, clock: Clock) -> None:
        self._log = log
        self.actors = Directory(lambda id: ToolOverridesActor.start(log, clock, TOOL_OVERRIDES, id), clock)

    def set(
        self, tool_name: str, scope: str, enabled: bool, *, user_id: str = "", agent_id: str = ""
    ) -> ToolOverride:
        """Upsert the row of `tool_name` in `scope`; return it as stored."""
        key = ToolOverrideKey.for_scope(tool_name, scope, user_id=user_id, agent_id=agent_id)
        row = ToolOverride(key.tool_name, key.scope, enabled, key.user_id, key.agent_id)
        self.actors.ask(owner_of(key), Execute(SetToolOverride(row), {"actor": user_id or "admin"}))
        return row

    def clear(self, tool_name: str, scope: str, *, user_id: str = "", agent_id: str = "") -> None:
        """Remove the row of `tool_name` in `scope`, if there is one."""
        key = ToolOverrideKey.for_scope(tool_name, scope, user_id=user_id, agent_id=agent_id)
        self.actors.ask(owner_of(key), Execute(ClearToolOverride(key), {"actor": user_id or "admin"}))

    def fetch(self, user_id: str, agent_id: str) -> list[ToolOverride]:
        """Every row that applies to `user_id` talking to `agent_id`: system, agent, user, both."""
        return [row for owner in owners_for(user_id, agent_id) for row in load(self._log, owner).rows]

    def resolve(
        self, user_id: str, agent_id: str, tool_name: str, default_enabled: bool
    ) -> ToolOverrideDecision:
        """Whether the tool is enabled for (user, agent), and which scope decided it."""
        return resolve_tool_override(default_enabled, tool_name, self.fetch(user_id, agent_id))

    def enabled(self, user_id: str, agent_id: str, tool_name: str, default_enabled: bool) -> bool:
        return filter_tool_enabled(default_enabled, tool_name, self.fetch(user_id, agent_id))

    def passivate(self, idle_since: datetime | None = None) -> int:
        """Stop the idle actors (unused since `idle_since`, if given); return how many."""
        return self.actors.passivate(idle_since)

    def close(self) -> None:
        self.actors.close()
