"""How the CLI writes times, durations, latencies and digests in tables and lines."""

from __future__ import annotations

from datetime import UTC, datetime

SHORT_DIGEST = 12  # hex characters of a payload digest shown in tables


def when(at: datetime | None) -> str:
    if at is None:
        return "—"
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def duration(seconds: float) -> str:
    """`1h 02m`, `4m 07s`, `12s`; `expired` once the time is up."""
    if seconds <= 0:
        return "expired"
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{max(s, 1)}s"


def latency(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"
