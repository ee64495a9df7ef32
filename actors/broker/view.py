"""The broker's view of one run, folded from its stream (what `Broker.get_run` returns)."""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from eventlog import Record, readable

from .._aggregate import UNREADABLE
from .model import ControlMessage, Finish, PermissionState, Reply, Report, RunView

# The records a page of a run's history is made of (each report, finish, reply and request).
PAGED = frozenset({"RunReported", "RunFinished", "RunReplied", "PermissionRequested"})

# What `RunFold.apply` says of a record: it started the run afresh, or it is one of the run's
# paged records (counted), or neither.
REGISTERED, COUNTED, OTHER = 1, 2, 0


@dataclass(frozen=True, slots=True)
class RunPage:
    """A run's view whose reports, finishes, replies and permission requests are one page of
    them: the newest `limit` before a seq; with the run's counts and the cursor to older ones."""

    view: RunView
    counts: Counter[str]  # record type -> how many the run holds (since it was last registered)
    last_finish_status: str
    next_before: int | None  # the `before` of the next older page (None: this is the oldest)


class RunFold:
    """The fold of one run's stream but for its paged records: what its view shows besides them.

    `apply` takes the stream's readable records in order; the paged ones are counted (the
    caller keeps the page it wants) and `page` builds the view around a page of them. `paged`
    counts every paged record counted since the stream began and `paged_at_registration` those
    before the run's last registration (at version `registered`): their difference is the
    run's own.
    """

    __slots__ = (
        "counts", "decisions", "last_seen", "last_status", "paged", "paged_at_registration", "queue",
        "registered", "registered_at", "revoked", "view",
    )  # fmt: skip

    def __init__(self) -> None:
        self.view: RunView | None = None
        self.queue: list[ControlMessage] = []  # a list, as the seed's: message ids may repeat
        self.decisions: dict[str, str] = {}
        self.counts: Counter[str] = Counter()
        self.last_status = ""
        self.registered_at: datetime | None = None
        self.last_seen: datetime | None = None
        self.revoked = False
        self.registered = 0
        self.paged = 0
        self.paged_at_registration = 0

    def apply(self, r: Record) -> int:
        """Fold one record; REGISTERED, COUNTED (a paged record of the run) or OTHER."""
        d = r.data
        t = r.type
        if t == "RunRegistered":
            self.queue, self.decisions, self.counts, self.last_status = [], {}, Counter(), ""
            self.registered, self.paged_at_registration = r.version, self.paged
            self.registered_at = r.recorded_at if d["registered_at"] is not None else None
            self.last_seen = r.recorded_at
            self.revoked = False
            # Who created it: records older than these fields have none.
            self.view = RunView(
                d["run_id"], self.registered_at, self.last_seen, origin=d.get("origin", ""),
                created_by=d.get("by", ""), created_by_credential=d.get("by_credential", ""),
            )  # fmt: skip
            return REGISTERED
        if t == "RunDeleted":
            self.view = None
            return OTHER
        if self.view is None:
            return OTHER
        if t == "RunTokenRevoked" or t == "RunRekeyed":
            self.revoked = t == "RunTokenRevoked"  # an operator's act: the run was not seen
            return OTHER
        if t != "ControlQueued" and t != "ControlDelivered":
            self.last_seen = r.recorded_at
        if t == "RunRegistrationRefreshed":
            self.registered_at = r.recorded_at
        elif t == "ControlQueued":
            self.queue.append(
                ControlMessage(
                    d["message_id"], d["type"], d["run_id"], d["from_run_id"], d["payload"], r.recorded_at,
                    d.get("sent_by", ""),
                )
            )  # fmt: skip
        elif t == "ControlDelivered":
            taken = Counter(d["message_ids"])  # one delivery per listed id, oldest first
            kept = []
            for m in self.queue:
                if taken[m.id]:
                    taken[m.id] -= 1
                else:
                    kept.append(m)
            self.queue = kept
        elif t in PAGED:
            self.counts[t] += 1
            self.paged += 1
            if t == "RunFinished":
                self.last_status = d["status"]
            return COUNTED
        elif t == "PermissionDecided":
            self.decisions[d["request_id"]] = d["behavior"]
        return OTHER

    def page(self, page: Iterable[Record], paged: bool, next_before: int | None) -> RunPage | None:
        """The view with `page` (paged records, in order) as its history; None if the run is not
        registered. With `paged`, decisions are only those of the page's permission requests."""
        view, last_seen = self.view, self.last_seen
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
                    d["request_id"], d["tool_name"], d["description"], d["input_preview"], r.recorded_at,
                    d["approval_id"],
                )  # fmt: skip
        decisions = self.decisions
        if paged:  # only the page's requests: looked up, never the run's every decision walked
            decisions = {k: decisions[k] for k in permissions if k in decisions}
        folded = RunView(
            view.run_id, self.registered_at, last_seen, tuple(self.queue), tuple(reports), tuple(finishes),
            tuple(replies), permissions, dict(decisions), view.origin, view.created_by,
            view.created_by_credential, self.revoked,
        )  # fmt: skip
        return RunPage(folded, Counter(self.counts), self.last_status, next_before)


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
    fold = RunFold()
    page: deque[Record] = deque(maxlen=limit)
    older = 0  # paged records before `before` that fell off the page
    for r in readable(records, UNREADABLE):
        what = fold.apply(r)
        if what == REGISTERED:
            page.clear()
            older = 0
        elif what == COUNTED and (before is None or r.seq < before):
            if limit is not None and len(page) == limit:
                older += 1
            page.append(r)
    return fold.page(page, limit is not None, page[0].seq if older and page else None)
