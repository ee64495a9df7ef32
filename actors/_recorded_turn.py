"""What a run's harness published after a point in the log, read back to be served again.

The steps are the origin run's HarnessEventRecorded events after the fork point, in order,
each with the id and data it was recorded with. A permission request the origin had asked
by then but that was not decided by then is asked again first: in the fork it goes through
the approval gate anew. Each permission request carries how the origin's ended (`approve`,
`reject`, `expired`, `error` when the request itself failed, or "" when it never ended). If
the origin was aborted after the fork point, the steps stop where its abort began: what its
harness published after that was its answer to an operator's abort, not a result.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from eventlog import EventLog
from projections import ApprovalRow, Views

from ._controller_decider import ABORTING
from ._errors import ForkError
from ._harness import PERMISSION_REQUEST

DECIDED = frozenset({"approve", "reject", "expired"})
DISCARDED = "discarded"  # the request's recording hook failed: the harness heard an error
ERROR = "error"  # how a permission request ends when publishing it raised


@dataclass(frozen=True, slots=True)
class RecordedStep:
    """One recorded harness event; for a permission request, how the origin's ended."""

    type: str
    id: str
    data: dict[str, Any] = field(default_factory=dict)
    decision: str = ""


@dataclass(frozen=True, slots=True)
class RecordedTurn:
    """The rest of a recorded run after `at_seq`: its session, prompt and harness events."""

    origin_run_id: str
    origin_stream: str
    at_seq: int
    session_id: str
    prompt: str
    steps: tuple[RecordedStep, ...]
    reasked: int = 0  # the first `reasked` steps are permission requests pending at the fork point
    aborted_seq: int = 0  # where the origin's abort began after `at_seq` (0: it was not aborted then)


def recorded_turn(
    log: EventLog, origin_run_id: str, origin_stream: str, at_seq: int, *, views: Views | None = None
) -> RecordedTurn:
    """Read the rest of run `origin_run_id` (recorded in `origin_stream`) after `at_seq`."""
    records = [r for r in log.read(origin_stream) if r.data.get("run_id") == origin_run_id]
    started = next((r for r in records if r.type == "AgentRunStarted"), None)
    if started is None:
        raise ForkError(f"no agent run {origin_run_id!r} in {origin_stream}")
    views = views or Views(log)
    outcomes = _Outcomes(views.approval_history(at=log.head().seq), origin_run_id)
    reasked: list[RecordedStep] = []
    rest: list[RecordedStep] = []
    aborted_seq = 0
    for r in records:
        d = r.data
        if r.seq > at_seq and r.type == "AgentRunStatusChanged" and d["status"] == ABORTING:
            aborted_seq = r.seq
            break
        if r.type != "HarnessEventRecorded":
            continue
        decision, decided_seq = outcomes.of(d["data"], r.seq) if d["type"] == PERMISSION_REQUEST else ("", 0)
        step = RecordedStep(d["type"], d["event_id"], dict(d["data"]), decision)
        if r.seq > at_seq:
            rest.append(step)
        elif d["type"] == PERMISSION_REQUEST and not (decided_seq and decided_seq <= at_seq):
            reasked.append(step)  # asked, not decided by the fork point: the fork asks again
    return RecordedTurn(
        origin_run_id,
        origin_stream,
        at_seq,
        started.data["session_id"],
        started.data["prompt"],
        (*reasked, *rest),
        len(reasked),
        aborted_seq,
    )


class _Outcomes:
    """The origin run's approvals, handed out in request order per tool call id."""

    def __init__(self, history: list[ApprovalRow], run_id: str) -> None:
        self._rows: dict[str, deque[ApprovalRow]] = {}
        for row in history:  # request order
            if row.run_id == run_id:
                self._rows.setdefault(row.tool_call_id, deque()).append(row)

    def of(self, data: dict[str, Any], seq: int) -> tuple[str, int]:
        """How the next permission request (recorded at `seq`) ended, and the seq where it did."""
        rows = self._rows.get(str(data.get("tool_call_id") or ""))
        if not rows:
            return ERROR, seq  # no approval was recorded for it: asking failed right away
        row = rows.popleft()
        if row.status in DECIDED:
            return row.status, row.decided_seq
        if row.status == DISCARDED:
            return ERROR, row.decided_seq
        return "", 0  # still open, or never decided: the origin's process stopped first
