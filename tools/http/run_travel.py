"""A run's console page, live or as of any seq, at the cost of the page it shows.

The timeline comes a page at a time from `Views.run_page` (folded from the run's nearest
checkpoint), the header from the run's first record and its record at the moment, the
approvals from the page's permission entries (a broker run's) or from the log's approval
index over the run's own span (a controller run's), and "what changed since" from the same
window of entries now plus the first page of those added after the moment. Nothing here
reads the run's whole stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import System
from eventlog import APPROVAL_TYPES, Record, from_micros
from projections import AgentRun, ApprovalRow, RunPage, TimelineEntry, diff_items

from .console_reads import event_json, run_header

DEFAULT_PAGE = 200
MAX_PAGE = 1000
NEAR = 16  # how far after an approval's request its run's permission record is looked for


def page_params(params: Any) -> tuple[int | None, int]:
    """The `before` cursor and `limit` a request names; ValueError names the bad one."""
    raw_before, raw_limit = params.get("before") or "", params.get("limit") or ""
    if raw_before and not raw_before.isdigit():
        raise ValueError("before must be a cursor from a previous page (a whole number)")
    if raw_limit and not raw_limit.isdigit():
        raise ValueError("limit must be a whole number")
    limit = min(max(int(raw_limit), 1), MAX_PAGE) if raw_limit else DEFAULT_PAGE
    return (int(raw_before) if raw_before else None), limit


def step_seq(system: System, run_id: str, step: int) -> int | None:
    """The seq of a run's `step`-th record (1-based: a broker run's own stream's, a controller
    run's its controller stream's from its first), or None if it has none such."""
    if step > 2**62:  # past any stream's version
        return None
    row = system.views.agent_run(run_id)
    stream, version = f"run-{run_id}", step
    if row is not None:
        span = run_span(system, row)
        if span is None or step < 1:
            return None
        stream, version = row.stream, span[0].version + step - 1
        if span[1] is not None and version >= span[1].version:
            return None
    for r in system.log.read(stream, version, version):
        return r.seq
    return None


def broker_travel(
    system: System,
    run_id: str,
    at: int | None,
    before: int | None,
    limit: int,
    approval: Callable[[ApprovalRow], dict[str, Any]],
) -> dict[str, Any] | None:
    """The travel payload of a broker run (None if it has no record); ValueError for a bad cursor."""
    views = system.views
    found = _pages(system, run_id, at, before, limit)
    if found is None:
        return None
    now, page, at = found
    stream = f"run-{run_id}"
    first = next(iter(system.log.read(stream, 1, 1)))
    live = page is now
    before_start = at < first.seq
    entries = [e.to_dict() for e in page.entries]
    approvals = []
    for e in page.entries:
        if e.kind == "permission" and e.detail:
            row = views.approval(e.detail, None if live else at)
            if row is not None:
                approvals.append(approval(row))
    last = _record(system, stream, page.version) if page.version else None
    shown = [first] if not before_start else []
    if last is not None and last.seq != first.seq:
        shown.append(last)
    actors = {e["actor"] for e in map(event_json, shown) if e["actor"]}
    actors.update(views.approval_actors(run_id) if live else (n for a in approvals for n in _names(a)))
    header = {
        "kind": "broker",
        "title": run_id,
        "started_at": None if before_start else from_micros(first.recorded_us),
        "last_activity": from_micros(last.recorded_us) if last is not None else None,
        "actors": sorted(actors),
        "forks": [],
        "forked_from": _forked_from(system, stream),
    }
    return {
        "run_id": run_id,
        "kind": "broker",
        "header": header,
        "steps": now.version,
        "first_seq": first.seq,
        "step": page.version,
        "at": at,
        "live": live,
        "before_start": before_start,
        "status": page.status or ("not started" if before_start else ""),
        "moment": views.moment(at) if at else None,
        "entries": entries,
        "total": page.total,
        "start": page.start,
        "before": page.before,
        "approvals": approvals,
        # An earlier page (`before`) adds entries to the page shown; what changed came with that page.
        "since": _since(system, run_id, page, now, limit) if not live and before is None else _nothing(),
    }


def _pages(
    system: System, run_id: str, at: int | None, before: int | None, limit: int
) -> tuple[RunPage, RunPage, int] | None:
    """The run now, the page shown (the same when live) and its seq; None if the run has no record.

    Travelled, the run now is read for its head alone (its seq, steps and entries), a page of
    one entry: the page shown is the one as of `at`.
    """
    views = system.views
    now = views.run_page(run_id, None, before if at is None else None, limit if at is None else 1)
    if now is None:
        return None
    if at is None:
        return now, now, now.seq
    if at >= now.seq:  # the head or past it: live, the newest page (a cursor names none here)
        found = views.run_page(run_id, None, None, limit)
        return (found, found, found.seq) if found is not None else None
    page = views.run_page(run_id, at, before, limit)
    return now, page if page is not None else _empty(now.run_id, at), at


def agent_travel(
    system: System,
    row: AgentRun,
    at: int | None,
    before: int | None,
    limit: int,
    approval: Callable[[ApprovalRow], dict[str, Any]],
) -> dict[str, Any] | None:
    """The travel payload of a controller run (None if it has no record); ValueError for a bad
    cursor. Its steps are its controller stream's records from its first to its last (the one
    before its session's next run started), as a broker run's are its own stream's."""
    views = system.views
    run_id = row.run_id
    found = _pages(system, run_id, at, before, limit)
    if found is None:
        return None
    now, page, at = found
    first = _at_seq(system, row.first_seq)
    if first is None:
        return None
    live = page is now
    before_start = at < first.seq
    rows = run_approvals(system, row, None if live else at)
    approvals = [approval(a) for a in rows]
    last = _record(system, row.stream, page.version) if page.version else None
    shown = [] if before_start else [first]
    if last is not None and last.seq != first.seq:
        shown.append(last)
    names = views.approval_actors(run_id) if live else [n for a in approvals for n in _names(a)]
    return {
        "run_id": run_id,
        "kind": "agent",
        "header": run_header(system, run_id, shown, names),
        "steps": now.version - first.version + 1,
        "first_seq": first.seq,
        "step": max(page.version - first.version + 1, 0),
        "at": at,
        "live": live,
        "before_start": before_start,
        "status": page.status or ("not started" if before_start else ""),
        "moment": views.moment(at) if at else None,
        "entries": [e.to_dict() for e in page.entries],
        "total": page.total,
        "start": page.start,
        "before": page.before,
        "approvals": approvals,
        # An earlier page (`before`) adds entries to the page shown; what changed came with that page.
        "since": _since(system, run_id, page, now, limit) if not live and before is None else _nothing(),
    }


def agent_events(system: System, row: AgentRun, offset: int, limit: int) -> dict[str, Any] | None:
    """A page of a controller run's event history: its steps from `offset` (0-based) on."""
    span = run_span(system, row)
    if span is None:
        return None
    start, following = span
    last = following.version - 1 if following is not None else system.log.stream_version(row.stream)
    lo = start.version + max(offset, 0)
    hi = min(lo + max(limit, 1) - 1, last)
    page = [r for r in system.log.read(row.stream, lo, hi) if r.data.get("run_id", row.run_id) == row.run_id]
    return {"run_id": row.run_id, "total": last - start.version + 1, "offset": offset,
            "events": [event_json(r) for r in page]}  # fmt: skip


def run_span(system: System, row: AgentRun) -> tuple[Record, Record | None] | None:
    """A controller run's first record, and the first of its session's next run (None while
    it is the newest): its steps are the stream's records from the one to just before the other."""
    first = _at_seq(system, row.first_seq)
    if first is None:
        return None

    def following(state: dict[str, AgentRun]) -> int | None:
        return min(
            (r.first_seq for r in state.values()
             if r.stream == row.stream and r.session_id == row.session_id and r.first_seq > row.first_seq),
            default=None,
        )  # fmt: skip

    after = system.views.runner.read("agent_runs", following)
    return first, (_at_seq(system, after) if after is not None else None)


def run_approvals(system: System, row: AgentRun, at: int | None) -> list[ApprovalRow]:
    """A controller run's approvals (as of `at`): those requested between its first record and
    its session's next run, read from the log's approval index over that span alone."""
    span = run_span(system, row)
    if span is None:
        return []
    first, following = span
    upto = following.seq if following is not None else at
    if at is not None:
        upto = min(upto, at) if upto is not None else at
    views = system.views
    out = []
    for r in system.log.read_all(after_seq=first.seq - 1, to_seq=upto, types=APPROVAL_TYPES):
        if r.type == "ApprovalRequested" and r.data.get("run_id") == row.run_id:
            found = views.approval(str(r.data["approval_id"]), at)
            if found is not None:
                out.append(found)
    return out


def _at_seq(system: System, seq: int) -> Record | None:
    for r in system.log.read_all(after_seq=seq - 1, to_seq=seq):
        return r
    return None


def _forked_from(system: System, stream: str) -> dict[str, Any] | None:
    """A broker run's provenance: the run and approval it was forked at (its second record says so)."""
    opening = next(iter(system.log.read(stream, 2, 2)), None)
    if opening is None or opening.type != "RunForked":
        return None
    d = opening.data
    return {
        "run_id": d["origin_run_id"],
        "fork_seq": d["at_seq"],
        "title": d["origin_run_id"],
        "approval_id": d["approval_id"],
        "decision": d["decision"],
        "recorded": d["recorded"],
        "decided_by": d["decided_by"],
    }


def _since(system: System, run_id: str, then: RunPage, now: RunPage, limit: int) -> dict[str, Any]:
    """What changed between `then` (a page) and `now` (the run at its head): `then`'s window
    now, and the first entries added."""
    views = system.views
    head, total = now.seq, now.total
    end = min(then.end, total)  # a re-registration since starts a new timeline
    upto = min(total, then.total + limit) if total > then.total else end
    window: list[TimelineEntry] = []
    added: list[TimelineEntry] = []
    if end == then.total and upto > then.start:
        # The newest page then: its window and the entries added after it are one stretch now,
        # folded once; those made after `then` are the added ones.
        found = views.run_page(run_id, head, upto, upto - then.start)
        for e in found.entries if found is not None else ():
            (added if e.seq > then.seq else window).append(e)
    else:
        if end > then.start:
            found = views.run_page(run_id, head, end, end - then.start)
            window = list(found.entries) if found is not None else []
        if total > then.total:
            found = views.run_page(run_id, head, upto, upto - then.total)
            added = list(found.entries) if found is not None else []
    after = [e.to_dict() for e in (*window, *added)]
    diff = diff_items("timeline", then.seq, head, [e.to_dict() for e in then.entries], after, "seq")
    out = diff.to_dict()
    out["added_total"] = max(total - then.total, 0)
    return out


def _nothing() -> dict[str, Any]:
    return {"added": [], "removed": [], "changed": [], "added_total": 0}


def _names(a: dict[str, Any]) -> list[str]:
    return [n for n in (*a.get("votes", ()), a.get("actor", "")) if n]


def _empty(run_id: str, at: int) -> RunPage:
    return RunPage(run_id, at, 0, "", 0, 0, ())


def _record(system: System, stream: str, version: int) -> Record | None:
    for r in system.log.read(stream, version, version):
        return r
    return None


def permission_tool(system: System, a: ApprovalRow) -> str:
    """The tool a run's permission approval is for: its permission record, found a few seqs
    after the approval's request (where the broker records it), or "" if not there."""
    if not a.run_id or not a.requested_seq:
        return ""
    for r in system.log.read_all(after_seq=a.requested_seq, to_seq=a.requested_seq + NEAR):
        if r.type == "PermissionRequested" and r.data.get("approval_id") == a.id:
            return str(r.data["tool_name"])
    return ""


def approvals_changed(system: System, since: int) -> bool:
    """Whether any approval's record was appended after seq `since` (an indexed read)."""
    return next(iter(system.log.read_all(after_seq=since, types=APPROVAL_TYPES)), None) is not None
