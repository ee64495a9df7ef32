"""Clocks: the only source of time for everything that records or decides."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Protocol, runtime_checkable


@runtime_checkable
class Clock(Protocol):
    """A source of aware UTC datetimes."""

    def now(self) -> datetime: ...


class SystemClock:
    """The wall clock, in UTC."""

    def now(self) -> datetime:
        return datetime.now(UTC)


class ManualClock:
    """A clock that moves only when told to; safe to share between threads."""

    def __init__(self, start: datetime | None = None) -> None:
        start = start or datetime(2026, 1, 1, tzinfo=UTC)
        if start.tzinfo is None:
            raise ValueError("ManualClock needs an aware datetime")
        self._now = start.astimezone(UTC)
        self._lock = threading.Lock()

    def now(self) -> datetime:
        with self._lock:
            return self._now

    def advance(self, seconds: float = 0.0, **delta: float) -> datetime:
        """Move the clock forward by `seconds` (or timedelta keywords) and return the new time."""
        step = timedelta(seconds=seconds, **delta)
        if step < timedelta(0):
            raise ValueError("a clock never moves backwards")
        with self._lock:
            self._now += step
            return self._now

    def set(self, when: datetime) -> None:
        """Jump to `when`, which must not be earlier than now."""
        when = when.astimezone(UTC)
        with self._lock:
            if when < self._now:
                raise ValueError("a clock never moves backwards")
            self._now = when


def to_micros(when: datetime) -> int:
    """Microseconds since the Unix epoch for an aware datetime."""
    if when.tzinfo is None:
        raise ValueError("naive datetimes are ambiguous; pass an aware UTC datetime")
    delta = when - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def from_micros(micros: int) -> datetime:
    """The aware UTC datetime for microseconds since the Unix epoch."""
    return _EPOCH + timedelta(microseconds=micros)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
