"""Live lists a page at a time: registered runs, pending approvals and the approval history.

A page starts after a cursor (the seq of the last row of the page before) and costs the rows
it shows. The runs and pending approvals are rows of live views (dicts keyed by id); a
`ListIndex` keeps their keys in list order as the runner folds, so a page is a bisect and a
walk rather than a sort of every row. The approval history is not held live: its page is
read from the log's approval index (the requests after the cursor) and each approval is
folded from its own records.
"""

from __future__ import annotations

import bisect
import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Generic, TypeVar

from eventlog import APPROVAL_TYPES, RECORD_ERRORS, Clock, EventLog, Record, decode
from eventlog.events import ApprovalRequested

from ._runner import ViewRunner
from .approvals import PENDING, ApprovalRow
from .asks import PeerInfo
from .runs import RunRow

R = TypeVar("R")
Order = tuple[Any, ...]

LIST_PAGE = 200  # rows in a page unless asked otherwise
MAX_LIST_PAGE = 1000
_SLACK = 1024  # dead entries an index may hold beyond its live ones before it is rebuilt


@dataclass(frozen=True, slots=True)
class ListPage(Generic[R]):
    """Rows of a list in its order, and `next`: the cursor of the page after (None: none)."""

    rows: tuple[R, ...]
    next: int | None


class ListIndex:
    """The keys of one live view's rows in list order (`order(row)`), kept as the runner folds.

    Built on first use from the live state (one sort), then kept by a runner listener: the row
    a record of `types` makes gets an entry, in place (at the end, when its order is its seq).
    A removed row, or one whose order changed, leaves its old entry behind: a reader
    skips entries whose row is gone or no longer in that place, and the entries are rebuilt
    once the dead ones outnumber the live ones (plus some slack), so a walk past dead entries
    stays bounded by the live rows. Touched only under the runner's lock.
    """

    def __init__(
        self, runner: ViewRunner, view: str, types: frozenset[str], field: str, order: Callable[[Any], Order]
    ) -> None:
        self.runner = runner
        self.view = view
        self.types = types
        self.field = field
        self.order = order
        self.walked = 0  # entries looked at by pages (what a page costs), for tests
        self._entries: list[tuple[Order, str]] = []
        self._state: dict[str, Any] | None = None  # the live state the entries were built from

    def page(
        self, state: dict[str, Any], after: Order | None, limit: int, keep: Callable[[Any], bool]
    ) -> tuple[list[Any], bool]:
        """Up to `limit` live rows that `keep` accepts, in order after `after`; and whether more follow.

        Call with the view's live state, under the runner's lock (`ViewRunner.read`).
        """
        if self._state is not state:
            self._build(state)
        entries = self._entries
        i = 0 if after is None else bisect.bisect_right(entries, (after, "\U0010ffff"))
        rows: list[Any] = []
        order = self.order
        while i < len(entries):
            where, key = entries[i]
            i += 1
            self.walked += 1
            row = state.get(key)
            if row is None or order(row) != where or not keep(row):
                continue
            if len(rows) == limit:
                return rows, True
            rows.append(row)
        return rows, False

    def _build(self, state: dict[str, Any]) -> None:
        if self._state is None:
            self.runner.add_listener(self._note)
        self._state = state
        self._entries = sorted((self.order(row), key) for key, row in state.items())

    def _note(self, record: Record) -> None:
        """Runner listener: the row a record of `types` made gets its entry."""
        state = self._state
        if state is None or record.type not in self.types:
            return
        key = record.data.get(self.field)
        if not isinstance(key, str):
            return
        row = state.get(key)
        if row is None:
            return
        entry = (self.order(row), key)
        entries = self._entries
        if not entries or entries[-1] < entry:
            entries.append(entry)
        else:
            i = bisect.bisect_left(entries, entry)
            if i == len(entries) or entries[i] != entry:
                entries.insert(i, entry)
        if len(entries) > 2 * len(state) + _SLACK:
            self._build(state)


def registry_place(row: RunRow) -> Order:
    return (row.first_seq,)


def pending_place(row: ApprovalRow) -> Order:
    return (row.requested_at, row.requested_seq)


class Lists:
    """Pages of the live lists over one runner (`Views.lists`)."""

    def __init__(
        self, log: EventLog, runner: ViewRunner, clock: Clock, approval: Callable[[str], ApprovalRow | None]
    ) -> None:
        self.log = log
        self.runner = runner
        self.clock = clock
        self.approval = approval  # one approval and its outcome now (`Views.approval`)
        self.runs_index = ListIndex(
            runner, "run_registry", frozenset({"RunRegistered"}), "run_id", registry_place
        )
        self.pending_index = ListIndex(
            runner, "pending_approvals", frozenset({"ApprovalRequested"}), "approval_id", pending_place
        )

    def runs(
        self, after: int | None = None, limit: int = LIST_PAGE
    ) -> ListPage[tuple[RunRow, PeerInfo | None]]:
        """Registered runs in registration order after the one registered at seq `after`, each
        with what it says about itself (for `/sessions`)."""

        def read(states: dict[str, Any]) -> tuple[ListPage[RunRow], dict[str, PeerInfo]]:
            page = self.runs_page(states, after, limit)
            peers = states["peers"]
            return page, {r.run_id: peers[r.run_id] for r in page.rows if r.run_id in peers}

        _, (page, peers) = self.runner.read_states(read)
        return ListPage(tuple((r, peers.get(r.run_id)) for r in page.rows), page.next)

    def runs_page(
        self, states: dict[str, Any], after: int | None, limit: int = LIST_PAGE
    ) -> ListPage[RunRow]:
        """Registered runs in registration order after the one registered at seq `after`, from
        the live `states` (call under the runner's lock: `ViewRunner.read_states`)."""
        place = None if after is None else (after,)
        rows, more = self.runs_index.page(states["run_registry"], place, _limit(limit), _always)
        return ListPage(tuple(rows), rows[-1].first_seq if more else None)

    def pending(
        self, after: int | None = None, limit: int = LIST_PAGE, now: datetime | None = None
    ) -> ListPage[ApprovalRow]:
        """Pending approvals, oldest request first, after the one requested at seq `after`;
        those past their deadline at `now` (default: the clock's now) are left out.

        ValueError if `after` is not the seq of an approval's request.
        """
        limit = _limit(limit)
        place = None if not after else self._requested_place(after)  # 0: from the start, as no cursor
        when = now or self.clock.now()

        def keep(row: ApprovalRow) -> bool:
            return row.status == PENDING and when < row.expires_at

        rows, more = self.runner.read(
            "pending_approvals", lambda state: self.pending_index.page(state, place, limit, keep)
        )
        return ListPage(tuple(rows), rows[-1].requested_seq if more else None)

    def pending_total(self, now: datetime | None = None) -> int:
        """How many approvals are pending and not past their deadline at `now` (a count of the open ones)."""
        when = now or self.clock.now()

        def count(state: dict[str, ApprovalRow]) -> int:
            return sum(1 for r in state.values() if r.status == PENDING and when < r.expires_at)

        return self.runner.read("pending_approvals", count)

    def history(self, after: int | None = None, limit: int = LIST_PAGE) -> ListPage[ApprovalRow]:
        """Approvals in request order after the one requested at seq `after`, with their outcomes:
        the requests are read from the log's approval index, each approval from its own records."""
        limit = _limit(limit)
        rows: list[ApprovalRow] = []
        for record in self._requests(after or 0):
            if len(rows) == limit:
                return ListPage(tuple(rows), rows[-1].requested_seq)
            row = self.approval(str(record.data["approval_id"]))
            if row is not None:
                rows.append(row)
        return ListPage(tuple(rows), None)

    def _requests(self, after: int) -> Iterator[Record]:
        for record in self.log.read_all(after_seq=after, types=APPROVAL_TYPES):
            if record.type == ApprovalRequested.type_name:
                yield record

    def _requested_place(self, seq: int) -> Order:
        for record in self.log.read_all(after_seq=seq - 1, to_seq=seq):
            if record.type == ApprovalRequested.type_name:
                with contextlib.suppress(*RECORD_ERRORS):
                    request = decode(record)
                    if isinstance(request, ApprovalRequested):
                        return (request.requested_at, seq)
        raise ValueError(f"after must be the cursor of a previous page: seq {seq} is no approval's request")


def _always(row: Any) -> bool:
    return True


def _limit(limit: int) -> int:
    if limit < 1:
        raise ValueError("limit must be at least 1")
    return min(limit, MAX_LIST_PAGE)
