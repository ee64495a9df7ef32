"""The time-travel reads that `flightlog runs`/`timeline` print and the operator API serves.

A moment is a seq, or an ISO time (UTC when it has no offset) naming the last seq recorded at
or before it. The payloads are what `--json` prints; the loaders turn a payload fetched from
a server back into the rows the commands render, so both modes print the same thing.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from eventlog import EventLog
from projections import (
    AgentRun,
    AgentRunsView,
    FinishStatus,
    FinishStatusView,
    RunMoment,
    RunRegistryView,
    RunRow,
    TimelineEntry,
    Views,
)

AT_HELP = "A seq, or an ISO time such as 2026-01-01T10:42:07Z."


def moment_seq(log: EventLog, text: str) -> int:
    """The seq a moment names; ValueError if it names none."""
    head = log.head().seq
    text = text.strip()
    if text.lstrip("-").isdigit():
        seq = int(text)
        if seq < 0 or seq > head:
            raise ValueError(f"seq {seq} is outside the log (seqs 0 to {head})")
        return seq
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"{text!r} is neither a seq nor an ISO time. {AT_HELP}") from None
    return log.seq_at(when if when.tzinfo else when.replace(tzinfo=UTC))


# -- runs --------------------------------------------------------------------------------------


def runs_payload(views: Views, seq: int) -> dict[str, Any]:
    """The broker's runs (each with its finish status) and the agent runs, as of `seq`."""
    broker = views.runs(at=seq)
    runs = []
    for r in broker:
        finish = views.finish_status(r.run_id, at=seq)
        runs.append({**r.to_dict(), "finish": finish.to_dict() if finish else None})
    return {"seq": seq, "runs": runs, "agent_runs": [r.to_dict() for r in views.agent_runs(at=seq)]}


def runs_from_payload(
    payload: dict[str, Any],
) -> tuple[list[RunRow], dict[str, FinishStatus | None], list[AgentRun]]:
    """The rows a runs payload describes (its JSON decoded): broker runs, finishes, agent runs."""
    broker = list(RunRegistryView().load(payload["runs"]).values())
    finishes = FinishStatusView().load([r["finish"] for r in payload["runs"] if r["finish"]])
    finish: dict[str, FinishStatus | None] = {r.run_id: finishes.get(r.run_id) for r in broker}
    agent = list(AgentRunsView().load(payload["agent_runs"]).values())
    return broker, finish, agent


# -- a run's timeline --------------------------------------------------------------------------


def timeline_payload(views: Views, run_id: str, seq: int | None, each: bool) -> dict[str, Any]:
    """A run's timeline as of `seq`, or (`each`) the run after each of its events."""
    if each:
        return {"run_id": run_id, "moments": [m.to_dict() for m in views.timeline_at_each_event(run_id)]}
    return {"run_id": run_id, "seq": seq, "entries": [e.to_dict() for e in views.timeline(run_id, at=seq)]}


def entry_from_dict(d: dict[str, Any]) -> TimelineEntry:
    """The entry `TimelineEntry.to_dict()` (as JSON) describes."""
    return TimelineEntry(
        d["id"], d["kind"], datetime.fromisoformat(d["at"]), d.get("role", ""), d.get("name", ""),
        d.get("text", ""), d.get("detail", ""), d.get("status", ""), d.get("seq", 0),
    )  # fmt: skip


def moment_from_dict(d: dict[str, Any]) -> RunMoment:
    """The moment `RunMoment.to_dict()` (as JSON) describes."""
    entries = tuple(entry_from_dict(e) for e in d["entries"])
    return RunMoment(d["seq"], datetime.fromisoformat(d["at"]), d["type"], d["status"], entries)
