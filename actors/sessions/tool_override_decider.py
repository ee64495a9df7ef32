"""The tool-override aggregate: one stream per owner (the system, an agent, a user, a user and agent).

The owner of a row is what its scope is keyed by, so the rows that govern one (user, agent)
pair live in exactly four streams, and setting or clearing one row touches exactly one.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final
from urllib.parse import quote

import orjson

from eventlog import Event, EventLog, Record
from eventlog.events import ToolOverrideCleared, ToolOverrideSet

from .._aggregate import AggregateActor, Decision, Execute, folded
from .tool_overrides import (
    TOOL_OVERRIDE_SCOPE_SYSTEM,
    TOOL_OVERRIDE_SCOPE_SYSTEM_AGENT,
    TOOL_OVERRIDE_SCOPE_USER,
    TOOL_OVERRIDE_SCOPES,
    ToolOverride,
    ToolOverrideKey,
    validate_scope,
)

# Owner ids are percent-encoded into the stream id; ids too long for a stream name are hashed.
_MAX_OWNER: Final = 400


def owner_of(key: ToolOverrideKey) -> str:
    """The stream id of the rows sharing `key`'s scope and owner, e.g. `user_agent/u1/a1`."""
    scope = validate_scope(key.scope)
    if scope == TOOL_OVERRIDE_SCOPE_SYSTEM:
        return scope
    if scope == TOOL_OVERRIDE_SCOPE_SYSTEM_AGENT:
        ids = [key.agent_id]
    elif scope == TOOL_OVERRIDE_SCOPE_USER:
        ids = [key.user_id]
    else:
        ids = [key.user_id, key.agent_id]
    owner = "/".join([scope, *(quote(i, safe="") for i in ids)])
    if len(owner) <= _MAX_OWNER:
        return owner
    return f"{scope}/sha256:{hashlib.sha256(orjson.dumps(ids)).hexdigest()}"


def owners_for(user_id: str, agent_id: str) -> list[str]:
    """The four owners whose rows govern `user_id` talking to `agent_id`, in scope order."""
    return [
        owner_of(ToolOverrideKey.for_scope("", scope, user_id=user_id, agent_id=agent_id))
        for scope in TOOL_OVERRIDE_SCOPES
    ]


@dataclass(frozen=True, slots=True)
class ToolOverridesState:
    """One owner's rows, in the order their tools were first set."""

    id: str
    rows: tuple[ToolOverride, ...] = ()

    def row(self, tool_name: str) -> ToolOverride | None:
        return next((r for r in self.rows if r.tool_name == tool_name), None)


@dataclass(frozen=True, slots=True)
class SetToolOverride:
    row: ToolOverride


@dataclass(frozen=True, slots=True)
class ClearToolOverride:
    key: ToolOverrideKey


ToolOverrideCommand = SetToolOverride | ClearToolOverride


def decide(state: ToolOverridesState, command: ToolOverrideCommand, now: datetime) -> Decision:
    """An upsert or a removal; setting the same value again, or clearing nothing, records nothing."""
    if isinstance(command, SetToolOverride):
        r = command.row
        validate_scope(r.scope)
        existing = state.row(r.tool_name)
        if existing is not None and existing.enabled == r.enabled:
            return Decision()
        return Decision([ToolOverrideSet(r.tool_name, r.scope, r.user_id, r.agent_id, r.enabled, now)])
    k = command.key
    validate_scope(k.scope)
    if state.row(k.tool_name) is None:
        return Decision()
    return Decision([ToolOverrideCleared(k.tool_name, k.scope, k.user_id, k.agent_id, now)])


def evolve(state: ToolOverridesState, event: Event) -> ToolOverridesState:
    """The state after one recorded event."""
    if isinstance(event, ToolOverrideSet):
        row = ToolOverride(event.tool_name, event.scope, event.enabled, event.user_id, event.agent_id)
        if state.row(event.tool_name) is None:
            return dataclasses.replace(state, rows=(*state.rows, row))
        rows = tuple(row if r.tool_name == event.tool_name else r for r in state.rows)
        return dataclasses.replace(state, rows=rows)
    if isinstance(event, ToolOverrideCleared):
        return dataclasses.replace(state, rows=tuple(r for r in state.rows if r.tool_name != event.tool_name))
    return state


def load(log: EventLog, owner: str) -> ToolOverridesState:
    """Fold one owner's stream as it is now."""
    state = TOOL_OVERRIDES.initial(owner)
    for record in log.read(f"{TOOL_OVERRIDES.category}-{owner}"):
        state = folded(state, record, evolve)
    return state


class ToolOverridesAggregate:
    category = "tooloverrides"

    def initial(self, id: str) -> ToolOverridesState:
        return ToolOverridesState(id)

    def decide(self, state: ToolOverridesState, command: ToolOverrideCommand, now: datetime) -> Decision:
        return decide(state, command, now)

    def evolve(self, state: ToolOverridesState, event: Event) -> ToolOverridesState:
        return evolve(state, event)


TOOL_OVERRIDES = ToolOverridesAggregate()


class ToolOverridesActor(AggregateActor[ToolOverridesState]):
    # The first row of an owner is decided without reading its (empty) stream.
    lazy_start = True

    def creates(self, message: object) -> bool:
        return isinstance(message, Execute)

    def execute(self, command: Any, meta: dict[str, Any] | None = None) -> tuple[Any, list[Record]]:
        # "Nothing to record" must be decided on the latest state: a cache another process has
        # moved past would otherwise swallow a change (an append would conflict; a no-op cannot).
        if self.loaded:
            self.refresh()
        return super().execute(command, meta)
