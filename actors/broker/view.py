"""The broker's view of one run, folded from its stream (what `Broker.get_run` returns)."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass

from eventlog import Record, readable

from .._aggregate import UNREADABLE
from .model import ControlMessage, Finish, PermissionState, Reply, Report, RunView

# The records a page of a run's history is made of (each report, finish, reply and request).
PAGED = frozenset({"RunReported", "RunFinished", "RunReplied", "PermissionRequested"})


@dataclass(frozen=True, slots=True)
class RunPage:
    """A run's view whose reports, finishes, replies and permission requests are one page of
    them: the newest `limit` before a seq; with the run's counts and the cursor to older ones."""

    view: RunView
    counts: Counter[str]  # record type -> how many the run holds (since it was last registered)
    last_finish_status: str
    next_before: int | None  # the `before` of the next older page (None: this is the oldest)


def fold_run_view(records: Iterable[Record]) -> RunView | None:
    """The run's current view from its stream's records, or None if it is not registered.

    Records that do not fit the event catalogue are skipped (and noted in UNREADABLE).
    """
    page = fold_run_page(records)
    return page.view if page is not None else None


def fold_run_page(
    records: Iterable[Record], limit: int | None = None, before: int | None = None
) -> RunPage | None:
    """`fold_run_view` whose history holds only the newest `limit` reports, finishes, replies
    and permission requests (together) recorded before seq `before`: memory O(limit)."""
    view: RunView | None = None
    queue: list[ControlMessage] = []  # a list, as the seed's: message ids may repeat
    page: deque[Record] = deque(maxlen=limit)
    decisions: dict[str, str] = {}
    counts: Counter[str] = Counter()
    last_status = ""
    older = 0  # paged records before `before` that fell off the page
    registered_at = last_seen = None
    revoked = False
    for r in readable(records, UNREADABLE):
        d = r.data
        t = r.type
        if t == "RunRegistered":
            queue, decisions, counts, last_status, older = [], {}, Counter(), "", 0
            page.clear()
            registered_at = r.recorded_at if d["registered_at"] is not None else None
            last_seen = r.recorded_at
            revoked = False
            # Who created it: records older than these fields have none.
            view = RunView(
                d["run_id"], registered_at, last_seen, origin=d.get("origin", ""),
                created_by=d.get("by", ""), created_by_credential=d.get("by_credential", ""),
            )  # fmt: skip
            continue
        if t == "RunDeleted":
            view = None
            continue
        if view is None:
            continue
        if t == "RunTokenRevoked" or t == "RunRekeyed":
            revoked = t == "RunTokenRevoked"  # an operator's act: the run was not seen
            continue
        last_seen = r.recorded_at if t != "ControlQueued" and t != "ControlDelivered" else last_seen
        if t == "RunRegistrationRefreshed":
            registered_at = r.recorded_at
        elif t == "ControlQueued":
            queue.append(
                ControlMessage(
                    d["message_id"],
                    d["type"],
                    d["run_id"],
                    d["from_run_id"],
                    d["payload"],
                    r.recorded_at,
                    d.get("sent_by", ""),
                )
            )
        elif t == "ControlDelivered":
            taken = Counter(d["message_ids"])  # one delivery per listed id, oldest first
            kept = []
            for m in queue:
                if taken[m.id]:
                    taken[m.id] -= 1
                else:
                    kept.append(m)
            queue = kept
        elif t in PAGED:
            counts[t] += 1
            if t == "RunFinished":
                last_status = d["status"]
            if before is None or r.seq < before:
                if limit is not None and len(page) == limit:
                    older += 1
                page.append(r)
        elif t == "PermissionDecided":
            decisions[d["request_id"]] = d["behavior"]
    if view is None or last_seen is None:
        return None
    reports: list[Report] = []
    finishes: list[Finish] = []
    replies: list[Reply] = []
    permissions: dict[str, PermissionState] = {}
    for r in page:
        d = r.data
        if r.type == "RunReported":
            reports.append(Report(d["run_id"], d["state"], d["payload"]))
        elif r.type == "RunFinished":
            finishes.append(
                Finish(d["run_id"], d["status"], d["summary"], tuple(d["files_changed"]), d["payload"])
            )
        elif r.type == "RunReplied":
            replies.append(Reply(d["run_id"], d["to"], d["payload"]))
        else:
            permissions[d["request_id"]] = PermissionState(
                d["request_id"],
                d["tool_name"],
                d["description"],
                d["input_preview"],
                r.recorded_at,
                d["approval_id"],
            )
    if limit is not None:
        decisions = {k: v for k, v in decisions.items() if k in permissions}
    folded = RunView(
        view.run_id,
        registered_at,
        last_seen,
        tuple(queue),
        tuple(reports),
        tuple(finishes),
        tuple(replies),
        permissions,
        decisions,
        view.origin,
        view.created_by,
        view.created_by_credential,
        revoked,
    )
    return RunPage(folded, counts, last_status, page[0].seq if older and page else None)
