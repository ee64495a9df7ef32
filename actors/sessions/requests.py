"""The requests of the session service's entry points, and the result of a delegate turn."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

ENTRY_CHAT: Final = "chat"
ENTRY_DELEGATE: Final = "delegate"
ENTRY_SCHEDULER: Final = "scheduler"
ENTRY_TASK: Final = "task"
ENTRY_GOAL_DECOMPOSITION: Final = "goal_decomposition"
ENTRY_COMPACTION: Final = "compaction"

# What a compaction turn sends; the harness answers with a `compaction` event carrying a
# `summary`, or else its last assistant message is taken as the summary.
COMPACT_PROMPT: Final = "/compact"


@dataclass(frozen=True, slots=True, kw_only=True)
class ChatRequest:
    """A foreground chat turn: an empty `session_id` starts a new session, any other resumes one.

    `kind`, when given, is required of a resumed session and given to a new one. A group
    turn (`group_id`) uses the group's own session, owned by the group.
    """

    session_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    project_id: str = ""
    channel: str = ""
    kind: str = ""
    group_id: str = ""
    message: str = ""
    system_prompt: str = ""
    excluded_tools: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class DelegateRequest:
    """A delegate turn on a child session: empty `session_id` creates one, any other resumes one."""

    session_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    project_id: str = ""
    task: str = ""
    system: str = ""
    excluded_tools: tuple[str, ...] = ()
    parent_session_id: str = ""


@dataclass(frozen=True, slots=True)
class DelegateResult:
    """The output of a delegate turn; `complete` when the turn succeeded."""

    session_id: str
    output: str
    complete: bool
    error: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class SchedulerChatRequest:
    """A scheduler turn under a trusted, scheduler-derived session id (created if missing)."""

    session_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    message: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class TaskChatRequest:
    """One worker turn on a task session; `extra_tools` and `excluded_tools` apply to it alone."""

    session_id: str = ""
    user_id: str = ""
    agent_id: str = ""
    project_id: str = ""
    message: str = ""
    extra_tools: tuple[str, ...] = ()
    excluded_tools: tuple[str, ...] = ()
