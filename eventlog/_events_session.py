"""Events of agent sessions (`session-<id>`), projects (`project-<id>`) and tool overrides.

A session's stream holds its whole conversation: every turn's start, each harness event the
turn published, its end, and the summaries that compacted it. Tool overrides live in one
stream per owner (`tooloverrides-<owner>`): the system, an agent, a user, or a user and agent.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._catalogue import Event, event


@event("SessionCreated")
@dataclass(frozen=True, slots=True)
class SessionCreated(Event):
    """A session was created: its key, kind, channel, owner, agent, group and project."""

    session_id: str
    key: str
    kind: str
    channel: str
    user_id: str
    agent_id: str
    group_id: str
    project_id: str
    parent_id: str
    at: datetime


@event("SessionArchived")
@dataclass(frozen=True, slots=True)
class SessionArchived(Event):
    """The session was archived: it can no longer be resumed; its history stays."""

    session_id: str
    by_user: str
    at: datetime


@event("TurnStarted")
@dataclass(frozen=True, slots=True)
class TurnStarted(Event):
    """A turn began: the prompt sent to the harness as run `turn_id`, and its per-run options.

    `entry` names the entry point (chat, delegate, scheduler, task, goal_decomposition,
    compaction). Extra and excluded tools and a system prompt apply to this turn only.
    """

    session_id: str
    turn_id: str
    entry: str
    prompt: str
    extra_tools: tuple[str, ...]
    excluded_tools: tuple[str, ...]
    system_prompt: str
    at: datetime


@event("TurnEventRecorded")
@dataclass(frozen=True, slots=True)
class TurnEventRecorded(Event):
    """One event the harness published during the turn, as it arrived."""

    session_id: str
    turn_id: str
    type: str
    event_id: str
    data: dict[str, Any]
    at: datetime


@event("TurnFinished")
@dataclass(frozen=True, slots=True)
class TurnFinished(Event):
    """The turn ended: succeeded, failed or interrupted, with its last assistant output."""

    session_id: str
    turn_id: str
    status: str
    output: str
    error: str
    at: datetime


@event("SessionCompacted")
@dataclass(frozen=True, slots=True)
class SessionCompacted(Event):
    """The harness summarised the conversation; later turns build on `summary` and the tail."""

    session_id: str
    turn_id: str
    summary: str
    keep_tail: int
    at: datetime


@event("ProjectCreated")
@dataclass(frozen=True, slots=True)
class ProjectCreated(Event):
    """A project was created for a user under an agent (`is_default`: by ensure)."""

    project_id: str
    agent_id: str
    user_id: str
    name: str
    base_dir: str
    description: str
    is_default: bool
    at: datetime


@event("ProjectUpdated")
@dataclass(frozen=True, slots=True)
class ProjectUpdated(Event):
    """The project's name, base directory and description, after the update."""

    project_id: str
    name: str
    base_dir: str
    description: str
    at: datetime


@event("ProjectArchived")
@dataclass(frozen=True, slots=True)
class ProjectArchived(Event):
    """The project was archived: listed only when archived projects are asked for."""

    project_id: str
    at: datetime


@event("ProjectDeleted")
@dataclass(frozen=True, slots=True)
class ProjectDeleted(Event):
    """The project was deleted; its history stays in the log."""

    project_id: str
    at: datetime


@event("ToolOverrideSet")
@dataclass(frozen=True, slots=True)
class ToolOverrideSet(Event):
    """A tool was enabled or disabled in a scope (for the user and agent the scope is keyed by)."""

    tool_name: str
    scope: str
    user_id: str
    agent_id: str
    enabled: bool
    at: datetime


@event("ToolOverrideCleared")
@dataclass(frozen=True, slots=True)
class ToolOverrideCleared(Event):
    """A tool's override in a scope was removed: the next scope (or the default) decides again."""

    tool_name: str
    scope: str
    user_id: str
    agent_id: str
    at: datetime
