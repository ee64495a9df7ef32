"""The harness protocol: what runs an agent turn for a controller, and the events it publishes."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

IMMEDIATE: Final = "immediate"
ENQUEUE: Final = "enqueue"
DELIVERIES: Final = (IMMEDIATE, ENQUEUE)

# The harness event types the controller ingests.
SESSION_IDLE: Final = "session.idle"
SESSION_ERROR: Final = "session.error"
SESSION_SHUTDOWN: Final = "session.shutdown"
SESSION_STARTED: Final = "session.started"
ASSISTANT_MESSAGE: Final = "assistant.message"
ASSISTANT_DELTA: Final = "assistant.delta"
ASSISTANT_IDLE: Final = "assistant.idle"
USER_MESSAGE: Final = "user.message"
TOOL_START: Final = "tool.start"
TOOL_COMPLETE: Final = "tool.complete"
PERMISSION_REQUEST: Final = "permission.request"
WARNING: Final = "warning"
COMPACTION: Final = "compaction"
TRUNCATION: Final = "truncation"
HARNESS_EVENT_TYPES: Final = frozenset(
    {
        SESSION_IDLE,
        SESSION_ERROR,
        SESSION_SHUTDOWN,
        SESSION_STARTED,
        ASSISTANT_MESSAGE,
        ASSISTANT_DELTA,
        ASSISTANT_IDLE,
        USER_MESSAGE,
        TOOL_START,
        TOOL_COMPLETE,
        PERMISSION_REQUEST,
        WARNING,
        COMPACTION,
        TRUNCATION,
    }
)


@dataclass(frozen=True, slots=True)
class HarnessEvent:
    """One event a harness publishes for a run (`id` de-duplicates; empty means always new)."""

    type: str
    run_id: str = ""
    id: str = ""
    data: dict[str, Any] = field(default_factory=dict)


Publish = Callable[[HarnessEvent], object]


class Harness(Protocol):
    """Runs the agent turn. The controller never holds a lock while calling it, so a harness may
    publish (even the terminal `session.idle`) synchronously from inside `send`."""

    def start(self, publish: Publish) -> str:
        """Open the agent session; return its session id."""
        ...

    def send(self, run_id: str, prompt: str, delivery: str) -> None:
        """Deliver a prompt to the run (`immediate` or `enqueue`)."""
        ...

    def abort(self, run_id: str) -> None:
        """Stop the run's turn; the harness publishes `session.idle` when it has stopped."""
        ...

    def close(self) -> None:
        """Release the session and everything it runs."""
        ...
