"""The stored record, the event to append, expected versions, heads and verify results."""

from __future__ import annotations

import enum
import os
import re
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import orjson

from ._clock import from_micros
from ._errors import StreamNameError

# The records that start a run and name the stream its history lives in; the SQL backends
# index them by run id (`EventLog.run_starts`).
RUN_START_TYPES = ("AgentRunStarted", "ForkedFrom")
RUN_START_FILTER = "type IN (" + ", ".join(f"'{t}'" for t in RUN_START_TYPES) + ")"
# The records of approvals' histories; the SQL backends index them by seq (so
# `read_all(types=APPROVAL_TYPES)` reads those records, not the log) and by approval id
# (`EventLog.approval_records`).
APPROVAL_TYPES = (
    "ApprovalRequested",
    "ApprovalPublished",
    "ApprovalDiscarded",
    "ApprovalVoted",
    "ApprovalDecided",
    "ApprovalDecisionRefused",
    "ApprovalAttemptRefused",
)
APPROVAL_FILTER = "type IN (" + ", ".join(f"'{t}'" for t in APPROVAL_TYPES) + ")"
GENESIS_HASH = "0" * 64


class Expect(enum.Enum):
    """What an append expects of the stream's current version, besides an exact number."""

    ANY = "any"
    NO_STREAM = "no_stream"
    EXISTS = "exists"


ANY = Expect.ANY
NO_STREAM = Expect.NO_STREAM
EXISTS = Expect.EXISTS

ExpectedVersion = int | Expect


def expectation_holds(expect: ExpectedVersion, actual: int) -> bool:
    """Whether a stream at version `actual` satisfies `expect`."""
    if expect is Expect.ANY:
        return True
    if expect is Expect.NO_STREAM:
        return actual == 0
    if expect is Expect.EXISTS:
        return actual > 0
    return actual == expect


_STREAM_RE = re.compile(r"^[a-z][a-z0-9_]*-.*$", re.DOTALL)


def check_stream_name(stream: str) -> str:
    """Return `stream` if it is `<category>-<id>`, else raise StreamNameError."""
    if not isinstance(stream, str) or not _STREAM_RE.match(stream) or len(stream) > 512:
        raise StreamNameError(f"stream name must be '<category>-<id>' (lower-case category), got {stream!r}")
    return stream


def new_event_id() -> str:
    """A fresh UUIDv7 (RFC 9562) in its canonical text form; see `new_event_key`."""
    return uuid_text(new_event_key())


def new_event_key() -> bytes:
    """The 16 bytes of a fresh UUIDv7: 48 bits of Unix milliseconds, then 74 random bits.

    Time-ordered ids keep inserts into the unique index on `event_id` at the end of the
    b-tree; random (v4) ids touch a different index page per event, which made a batch
    append write several times as many pages. The wall clock here only orders ids: nothing
    reads a time back from an event id (recorded_at comes from the injected Clock).
    """
    return new_event_keys(1)[0]


def new_event_keys(n: int) -> list[bytes]:
    """`n` fresh UUIDv7s (see `new_event_key`), with one clock read and one call for the
    random bits of them all: a batch append takes an id per event."""
    ms = (time.time_ns() // 1_000_000) << 80
    rand = _random_bytes(10 * n)
    from_bytes = int.from_bytes
    return [
        ((ms | from_bytes(rand[i : i + 10], "big")) & _V7_CLEAR | _V7_SET).to_bytes(16, "big")
        for i in range(0, 10 * n, 10)
    ]


_POOL_SIZE = 4096
_pool = [b""]  # random bytes not yet handed out
_pool_lock = threading.Lock()


def _random_bytes(n: int) -> bytes:
    """`n` bytes from the OS's CSPRNG, drawn a few KiB at a time.

    One os.urandom call per append was one more point where the appending thread gave up
    the GIL and had to win it back: with many threads appending, that wait showed as an
    eighth of the time. A child process starts with an empty pool (see below), so no two
    processes hand out the same bytes.
    """
    with _pool_lock:
        buf = _pool[0]
        if len(buf) < n:
            buf = os.urandom(max(_POOL_SIZE, n))
        _pool[0] = buf[n:]
    return buf[:n]


def _empty_pool() -> None:
    _pool[0] = b""


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_empty_pool)


def uuid_text(raw: bytes) -> str:
    """16 bytes as a UUID's canonical text: lower-case hex, hyphenated 8-4-4-4-12."""
    # The middle three groups are 6 bytes in pairs: one hex call with a separator, which
    # costs a quarter less than slicing the whole hex five ways.
    return f"{raw[:4].hex()}-{raw[4:10].hex('-', 2)}-{raw[10:].hex()}"


def event_key(event_id: str) -> bytes | str:
    """How `event_id` is stored: a UUID's 16 bytes if it is in canonical form, else the text,
    so that every id reads back exactly as it was given."""
    if len(event_id) == 36:
        try:
            raw = bytes.fromhex(event_id.replace("-", ""))
        except ValueError:
            return event_id
        if len(raw) == 16 and uuid_text(raw) == event_id:
            return raw
    return event_id


_V7_CLEAR = ~(0xF << 76 | 0x3 << 62)  # the version and variant bits
_V7_SET = 0x7 << 76 | 0x2 << 62  # version 7, variant RFC 4122/9562


@dataclass(frozen=True, slots=True)
class NewEvent:
    """An event to append: a type name, its data and meta, and its idempotency key."""

    type: str
    data: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)
    event_id: str = field(default_factory=new_event_id)
    schema: int = 1


class NotJSON(bytes):
    """Stored data that is not JSON, as read: no event fits it, so every reader skips its record."""


def lenient_loads(raw: bytes | str) -> Any:
    """Stored data parsed, or NotJSON when a hand edit left something else in the row."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError:
        return NotJSON(raw.encode() if isinstance(raw, str) else raw)


class Record(NamedTuple):
    """One stored event.

    A NamedTuple rather than a dataclass: reading a million records builds a million of
    these, and tuple construction is the cheapest immutable value Python has. `meta` and
    `recorded_at` are decoded on access, since most readers never look at them.
    """

    seq: int
    stream: str
    version: int
    type: str
    schema: int
    data: dict[str, Any]
    meta_json: bytes
    event_id: str
    recorded_us: int
    prev_hash: str
    hash: str

    @property
    def meta(self) -> dict[str, Any]:
        value: dict[str, Any] = orjson.loads(self.meta_json)
        return value

    @property
    def recorded_at(self) -> datetime:
        return from_micros(self.recorded_us)

    @property
    def category(self) -> str:
        return self.stream.split("-", 1)[0]

    @property
    def stream_id(self) -> str:
        return self.stream.split("-", 1)[1]


class Head(NamedTuple):
    """The log's last position and hash: an anchor to keep outside the database."""

    seq: int
    hash: str


@dataclass(frozen=True, slots=True)
class VerifyResult:
    """The outcome of walking the hash chain."""

    ok: bool
    checked: int
    first_bad_seq: int | None = None
    reason: str = ""
    head: Head | None = None
