"""Broker runs' details a page at a time: each run's stream folded once, then caught up.

A run's detail (`GET /api/v1/runs/{id}`) is its summary and one page of its history. The
summary is a `RunFold` kept per run (for the runs read lately), caught up with the records
appended since the version it reached, once the record it stopped at is found again with the
same hash (otherwise it is folded afresh). The page is read backwards from the stream's end,
or from the cursor, and only as far as it reaches; a mark every `EVERY` versions (the seq
there, and how many paged records the fold had counted by then) places a cursor and tells
whether older records remain, without reading them. So once a run has been folded, a request
costs its new records and its page, not the run's length.
"""

from __future__ import annotations

import bisect
import threading
from array import array
from collections import OrderedDict, deque
from collections.abc import Iterator
from dataclasses import dataclass, field

from eventlog import EventLog, Record, readable

from .._aggregate import UNREADABLE
from .view import PAGED, RunFold, RunPage

EVERY = 64  # versions of a run's stream between two marks
RUNS = 64  # runs whose folds are held
BUDGET = 32 * 2**20  # about the bytes held over all of them (the rest are folded again when asked)
_DECISION_BYTES = 120  # a decision held: its request id, behaviour and dict slot, about
_MESSAGE_BYTES = 200  # a queued message held, besides its payload, about


@dataclass(slots=True)
class _Run:
    """One run's fold, where it stopped (`version`, `hash`), and its marks."""

    fold: RunFold = field(default_factory=RunFold)
    version: int = 0
    hash: str = ""
    versions: array[int] = field(default_factory=lambda: array("q"))
    seqs: array[int] = field(default_factory=lambda: array("q"))
    paged: array[int] = field(default_factory=lambda: array("q"))  # the fold's `paged` at each mark
    lock: threading.Lock = field(default_factory=threading.Lock)
    weight: int = 0

    def reset(self) -> None:
        self.fold, self.version, self.hash = RunFold(), 0, ""
        self.versions, self.seqs, self.paged = array("q"), array("q"), array("q")

    def mark(self, r: Record) -> None:
        self.versions.append(r.version)
        self.seqs.append(r.seq)
        self.paged.append(self.fold.paged)

    def weigh(self) -> int:
        fold = self.fold
        queued = sum(_MESSAGE_BYTES + len(m.payload or "") for m in fold.queue)
        return _DECISION_BYTES * len(fold.decisions) + queued + 24 * len(self.versions)


class RunDetails:
    """Broker runs' summaries with one page of their history, from folds kept per run.

    Thread-safe: requests for one run take turns; other runs' go on at once. `reads` counts the
    records read (folded or paged), for tests and benches.
    """

    def __init__(self, log: EventLog, *, runs: int = RUNS, budget: int = BUDGET, every: int = EVERY) -> None:
        self.log = log
        self.every = every
        self.reads = 0
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._limit = runs
        self._budget = budget
        self._held = 0
        self._lock = threading.Lock()

    def page(self, run_id: str, limit: int, before: int | None = None) -> RunPage | None:
        """The run with the newest `limit` of its paged records recorded before seq `before`
        (what `fold_run_page` answers for its whole stream); None if it is not registered."""
        if limit < 1:
            raise ValueError("limit must be at least 1")
        stream = f"run-{run_id}"
        run = self._run(stream)
        with run.lock:
            self._catch_up(stream, run)
            fold = run.fold
            if fold.view is None:
                page = None
            else:
                records, older = self._page(stream, run, limit, before)
                page = fold.page(records, True, records[0].seq if older and records else None)
            self._weigh(stream, run)
        return page

    # -- the fold -------------------------------------------------------------------------

    def _run(self, stream: str) -> _Run:
        with self._lock:
            run = self._runs.get(stream)
            if run is None:
                run = self._runs[stream] = _Run()
            self._runs.move_to_end(stream)
            return run

    def _weigh(self, stream: str, run: _Run) -> None:
        """Count the run's new weight, then let go of the least recently read runs over the bounds."""
        weight = run.weigh()
        with self._lock:
            if self._runs.get(stream) is run:
                self._held += weight - run.weight
            run.weight = weight
            while self._runs and (len(self._runs) > self._limit or self._held > self._budget):
                _, dropped = self._runs.popitem(last=False)
                self._held -= dropped.weight

    def _catch_up(self, stream: str, run: _Run) -> None:
        """Fold the records appended since the run's fold stopped (all of them, the first time)."""
        records = self.log.read(stream, max(run.version, 1))
        if run.version:
            again = next(records, None)
            self.reads += 1
            if again is None or again.version != run.version or again.hash != run.hash:
                run.reset()  # not the history it folded (a log put back from a copy): afresh
                records = self.log.read(stream)
        every = self.every
        fold = run.fold
        n = 0
        try:
            for r in readable(_tracked(records, run), UNREADABLE):
                fold.apply(r)
                n += 1
                if r.version % every == 0:
                    run.mark(r)
        except BaseException:
            run.reset()  # stopped between a record noted and its fold: never trusted again
            raise
        finally:
            self.reads += n

    # -- the page -------------------------------------------------------------------------

    def _page(self, stream: str, run: _Run, limit: int, before: int | None) -> tuple[list[Record], bool]:
        """The newest `limit` paged records since the run's registration recorded before seq
        `before`, oldest first, and whether older ones remain."""
        registered = run.fold.registered
        top = run.version
        if before is not None:
            i = bisect.bisect_left(run.seqs, before)  # the first mark not before the cursor
            if i < len(run.seqs):
                top = run.versions[i] - 1
        found: deque[Record] = deque()
        hi = top
        # Up to a mark's distance of the first stretch may lie at or after the cursor.
        step = limit + 16 + (self.every if before is not None else 0)
        while len(found) < limit and hi > registered:
            lo = max(registered + 1, hi - step + 1)
            chunk = [
                r
                for r in readable(self.log.read(stream, lo, hi), UNREADABLE)
                if r.type in PAGED and (before is None or r.seq < before)
            ]
            self.reads += hi - lo + 1
            for r in reversed(chunk):
                found.appendleft(r)
                if len(found) == limit:
                    break
            # The next stretch: what is still wanted, at the share of paged records seen so far.
            wanted = (limit - len(found)) * (hi - lo + 1) // max(len(chunk), 1)
            step = min(max(wanted + 16, 16), 4096)
            hi = lo - 1
        if len(found) < limit:
            return list(found), False
        return list(found), self._older(stream, run, found[0].version)

    def _older(self, stream: str, run: _Run, below: int) -> bool:
        """Whether the run has a paged record between its registration and version `below`: told
        by the last mark below it when that mark has counted one, else read after that mark."""
        fold = run.fold
        floor = fold.registered
        j = bisect.bisect_right(run.versions, below - 1) - 1
        if j >= 0 and run.versions[j] > floor:
            if run.paged[j] > fold.paged_at_registration:
                return True
            floor = run.versions[j]
        if below - 1 <= floor:
            return False
        self.reads += below - 1 - floor
        return any(r.type in PAGED for r in readable(self.log.read(stream, floor + 1, below - 1), UNREADABLE))


def _tracked(records: Iterator[Record], run: _Run) -> Iterator[Record]:
    """`records`, noting on `run` the version and hash of each as it passes (readable or not)."""
    for r in records:
        run.version, run.hash = r.version, r.hash
        yield r
