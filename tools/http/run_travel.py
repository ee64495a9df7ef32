"""A broker run's console page, live or as of any seq, at the cost of the page it shows.

The timeline comes a page at a time from `Views.run_page` (folded from the run's nearest
checkpoint), the header from the run's first record and its record at the moment, the
approvals from the page's permission entries, and "what changed since" from the same window
of entries now plus the first page of those added after the moment. Nothing here reads the
run's whole stream.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from actors import System
from eventlog import APPROVAL_TYPES, Record, from_micros
from projections import ApprovalRow, RunPage, diff_items

from .console_reads import event_json

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
    """The seq of a broker run's `step`-th record (1-based), or None if it has none such."""
    for r in system.log.read(f"run-{run_id}", step, step):
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
    now = views.run_page(run_id, None, before if at is None else None, limit)
    if now is None:
        return None
    stream = f"run-{run_id}"
    first = next(iter(system.log.read(stream, 1, 1)))
    live = at is None or at >= now.seq
    if live:
        page, at = now, now.seq
    else:
        assert at is not None
        found = views.run_page(run_id, at, before, limit)
        page = found if found is not None else _empty(now.run_id, at)
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
        "since": _since(system, run_id, page, now.seq, limit) if not live else _nothing(),
    }


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


def _since(system: System, run_id: str, then: RunPage, head: int, limit: int) -> dict[str, Any]:
    """What changed between `then` (a page) and `head`: its window now, and the first entries added."""
    views = system.views
    now_total = views.run_page(run_id, head, None, 1)
    total = now_total.total if now_total is not None else 0
    end = min(then.start + len(then.entries), total)  # a re-registration since starts a new timeline
    window = views.run_page(run_id, head, end, max(end - then.start, 1)) if end > then.start else None
    added = []
    if total > then.total:
        upto = min(total, then.total + limit)
        found = views.run_page(run_id, head, upto, upto - then.total)
        added = list(found.entries) if found is not None else []
    after = [e.to_dict() for e in (window.entries if window is not None else ())] + [
        e.to_dict() for e in added
    ]
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
