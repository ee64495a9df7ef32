"""Session identity: keys, kinds and channels, time-ordered ids, and compaction settings."""

from __future__ import annotations

import dataclasses
import secrets
import threading
import uuid
from typing import Final

from eventlog import Clock, to_micros

SESSION_KIND_MAIN: Final = "main"
SESSION_KIND_CHAT: Final = "chat"
SESSION_KIND_DELEGATE: Final = "delegate"
SESSION_KIND_TASK: Final = "task"
SESSION_KIND_SCHEDULER: Final = "scheduler"
SESSION_KINDS: Final = (
    SESSION_KIND_MAIN,
    SESSION_KIND_CHAT,
    SESSION_KIND_DELEGATE,
    SESSION_KIND_TASK,
    SESSION_KIND_SCHEDULER,
)
DEFAULT_SESSION_KIND: Final = SESSION_KIND_CHAT

SESSION_CHANNEL_WEB: Final = "web"
SESSION_CHANNEL_CLI: Final = "cli"
SESSION_CHANNEL_TELEGRAM: Final = "telegram"
SESSION_CHANNEL_DELEGATE: Final = "delegate"
SESSION_CHANNEL_TASK: Final = "task"
SESSION_CHANNEL_SCHEDULER: Final = "scheduler"
SESSION_CHANNEL_WEBHOOK: Final = "webhook"
SESSION_CHANNELS: Final = (
    SESSION_CHANNEL_WEB,
    SESSION_CHANNEL_CLI,
    SESSION_CHANNEL_TELEGRAM,
    SESSION_CHANNEL_DELEGATE,
    SESSION_CHANNEL_TASK,
    SESSION_CHANNEL_SCHEDULER,
    SESSION_CHANNEL_WEBHOOK,
)

# The channel context of a user's main session with an agent (registry convention).
MAIN_SESSION_CONTEXT: Final = "private"

DEFAULT_COMPACTION_MAX_TOKENS: Final = 80_000
DEFAULT_COMPACTION_KEEP_TAIL: Final = 6


def build_session_key(agent_id: str, platform: str, external_user_id: str, channel_context: str) -> str:
    """The key `agent:platform:external_user:context` of a platform user's session."""
    # Plain concatenation, as the seed: no escaping, so callers must not rely on
    # splitting a key back into its parts when an id itself contains a colon.
    return f"{agent_id}:{platform}:{external_user_id}:{channel_context}"


def build_user_session_key(agent_id: str, auth_user_id: str, channel_context: str) -> str:
    """The key `agent:user:auth_user:context`, shared by a linked user across platforms."""
    return f"{agent_id}:user:{auth_user_id}:{channel_context}"


def build_group_session_key(agent_id: str, group_id: str) -> str:
    """The key `agent:group:group` of the one session a group shares with an agent."""
    return f"{agent_id}:group:{group_id}"


def build_main_session_key(agent_id: str, user_id: str) -> str:
    """The key `agent:user:user:private` of a user's main session with an agent."""
    return build_user_session_key(agent_id, user_id, MAIN_SESSION_CONTEXT)


def default_channel(kind: str) -> str:
    """The channel a new session of `kind` gets when the request names none."""
    return _DEFAULT_CHANNELS.get(kind, SESSION_CHANNEL_WEB)


_DEFAULT_CHANNELS: Final = {
    SESSION_KIND_DELEGATE: SESSION_CHANNEL_DELEGATE,
    SESSION_KIND_TASK: SESSION_CHANNEL_TASK,
    SESSION_KIND_SCHEDULER: SESSION_CHANNEL_SCHEDULER,
}


@dataclasses.dataclass(frozen=True, slots=True)
class CompactionConfig:
    """When a session's history is compacted, and how much of its tail survives.

    `max_tokens`: compact once the estimated token count exceeds it; 0 means the default
    (80 000), a negative value disables automatic compaction (manual compaction still works).
    `keep_tail`: recent user turns kept verbatim; 0 means the default (6).
    """

    max_tokens: int = 0
    keep_tail: int = 0

    def with_defaults(self) -> CompactionConfig:
        """A copy with each zero field replaced by its default; every other value is kept."""
        return dataclasses.replace(
            self,
            max_tokens=self.max_tokens or DEFAULT_COMPACTION_MAX_TOKENS,
            keep_tail=self.keep_tail or DEFAULT_COMPACTION_KEEP_TAIL,
        )


def new_session_id(clock: Clock) -> str:
    """A fresh UUIDv7 (RFC 9562) string whose timestamp is `clock.now()`.

    Ids sort by time as strings and as UUIDs. Ids minted in the same millisecond are
    strictly increasing within a process, so a clock that stands still (a ManualClock in a
    test) still yields ordered, unique ids; after the clock moves backwards the ids follow it.
    """
    global _last_millis, _last_tail
    millis = to_micros(clock.now()) // 1000
    if not 0 <= millis < 1 << _TIME_BITS:
        raise ValueError(f"a UUIDv7 timestamp must lie between 1970 and 10889, got {millis} ms")
    with _last_lock:
        if millis == _last_millis:
            # RFC 9562 §6.2 method 2: step the random part by a random amount, so ids stay
            # ordered within the millisecond and still cannot be guessed from a neighbour.
            tail = _last_tail + 1 + secrets.randbits(_STEP_BITS)
        else:
            # A fresh millisecond starts in the lower half of the tail's range: the upper
            # half is headroom for 2**41 steps before an overflow could ever happen.
            tail = secrets.randbits(_TAIL_BITS - 1)
        if tail >> _TAIL_BITS:
            raise OverflowError("too many session ids minted within one millisecond")
        _last_millis, _last_tail = millis, tail
    rand_a, rand_b = tail >> _RAND_B_BITS, tail & ((1 << _RAND_B_BITS) - 1)
    value = millis << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b
    return str(uuid.UUID(int=value))


def uuid7_time_millis(value: str) -> int:
    """The Unix-epoch milliseconds stored in a UUIDv7 string."""
    parsed = uuid.UUID(value)
    if parsed.version != 7:
        raise ValueError(f"{value!r} is not a version 7 UUID")
    return parsed.int >> 80


_TIME_BITS: Final = 48
_RAND_B_BITS: Final = 62
_TAIL_BITS: Final = 12 + _RAND_B_BITS
_STEP_BITS: Final = 32
_last_lock = threading.Lock()
_last_millis = -1
_last_tail = 0
