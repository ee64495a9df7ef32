"""The event that opens a forked run's stream (`controller-fork-<id>`)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from ._catalogue import Event, event


@event("ForkedFrom")
@dataclass(frozen=True, slots=True)
class ForkedFrom(Event):
    """This stream starts as a copy of another run's history up to a position in the log.

    The origin's events up to and including `at_seq` follow it, re-addressed to `run_id`;
    the origin stream itself is never touched.
    """

    run_id: str
    origin_run_id: str
    origin_stream: str
    at_seq: int
    actor: str
    reason: str
    at: datetime
