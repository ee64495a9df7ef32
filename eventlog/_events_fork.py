"""The events that open a forked run's stream: `controller-fork-<id>` (ForkedFrom) and a broker
run's `run-<id>` (RunForked).

ForkedFrom schema 1 had no changed decision; its upcaster reads such a fork as one that
changed none (every field of it "").
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from ._catalogue import Event, event, upcaster


@event("ForkedFrom", schema=2)
@dataclass(frozen=True, slots=True)
class ForkedFrom(Event):
    """This stream starts as a copy of another run's history up to a position in the log.

    The origin's events up to and including `at_seq` follow it, re-addressed to `run_id`;
    the origin stream itself is never touched. A fork at an approval names it
    (`approval_id`, the origin's) and the decision the fork takes there instead of the
    recorded one (`decision`), decided in the fork's re-drive by `decided_by` with the
    credential `identity` (who asked for the fork); all "" for a fork at a seq.
    """

    run_id: str
    origin_run_id: str
    origin_stream: str
    at_seq: int
    actor: str
    reason: str
    at: datetime
    approval_id: str = ""
    decision: str = ""
    decided_by: str = ""
    identity: str = ""


@upcaster("ForkedFrom", 1)
def _forked_from_v1(data: dict[str, Any]) -> dict[str, Any]:
    """A fork recorded before forks could change a decision: it changed none."""
    return {**data, "approval_id": "", "decision": "", "decided_by": "", "identity": ""}


@event("RunForked")
@dataclass(frozen=True, slots=True)
class RunForked(Event):
    """This broker run starts as a copy of another's history, forked at one of its approvals.

    It follows the run's RunRegistered; the origin's reports, replies and permission
    requests before the approval's request (`at_seq` is the last seq copied) follow it,
    re-addressed to `run_id`. The approval's request `request_id` is then filed again in
    this run and decided `decision` by `decided_by` (credential `identity`), who asked for
    the fork; `recorded` is how the origin's approval `approval_id` ended. The run's agent
    goes on from there, live.
    """

    run_id: str
    origin_run_id: str
    origin_stream: str
    at_seq: int
    approval_id: str
    request_id: str
    decision: str
    recorded: str
    decided_by: str
    identity: str
    actor: str
    reason: str
    at: datetime
