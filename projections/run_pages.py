"""A broker run's timeline a page at a time, as of any seq, from per-run checkpoints.

Every `every` versions of a run's stream a checkpoint keeps what the fold needs to go on
from there: the run's status, how many entries it had made and where its timeline starts,
and its open asks. A page of the timeline as of seq k is folded from the checkpoint nearest
below it, so it costs the page and the distance from that checkpoint, not the run's length.

Checkpoints are a cache next to the log (the snapshot store's `run_checkpoints`): made the
first time a run is read that far, and verified against the chain before use (the record at
a checkpoint's version must have its seq and hash; on a keyed log its MAC must seal it).
One that fails is ignored and the fold starts further back.
"""

from __future__ import annotations

import bisect
import contextlib
import hmac
import threading
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import orjson

from eventlog import EventLog, EventLogError, Record, RunCheckpointRow, SnapshotStore, Unreadable, readable

from .broker_timeline import BrokerFold
from .timeline import TimelineEntry

EVERY = 64  # versions of a run between two checkpoints
PAGE = 200  # entries in a page unless asked otherwise
MAX_PAGE = 1000
RUNS_CACHED = 256  # runs whose checkpoints are held in memory (the rest are read again when asked)


@dataclass(frozen=True, slots=True)
class RunCheckpoint:
    """The fold of a run's stream right after its record at `version` (log `seq`, chain `hash`)."""

    version: int
    seq: int
    hash: str
    status: str
    made: int
    base: int
    asks: tuple[tuple[str, str], ...] = ()

    def data(self) -> bytes:
        return orjson.dumps([self.status, self.made, self.base, self.asks])

    @classmethod
    def of(cls, row: RunCheckpointRow) -> RunCheckpoint | None:
        """The checkpoint a stored row holds, or None if the row is not one."""
        try:
            status, made, base, asks = orjson.loads(row.data)
            pairs = tuple((str(k), str(v)) for k, v in asks)
        except (orjson.JSONDecodeError, TypeError, ValueError):
            return None
        if not (isinstance(status, str) and isinstance(made, int) and isinstance(base, int)):
            return None
        return cls(row.version, row.seq, row.hash, status, made, base, pairs)


def sealed_message(stream: str, row: RunCheckpointRow) -> bytes:
    """What a per-run checkpoint's MAC covers: its stream, position, chain hash and content."""
    return orjson.dumps(
        ["flightlog run checkpoint", stream, row.version, row.seq, row.hash, row.data.decode()]
    )


@dataclass(frozen=True, slots=True)
class RunPage:
    """Entries `start` to `start + len(entries)` of a run's timeline as of `seq`, of `total`.

    `before` is the cursor of the page before this one (None on the first page): entries are
    positions in the timeline, which later records only append to, so a cursor stays good as
    the run goes on (a re-registration starts a new timeline).
    """

    run_id: str
    seq: int
    version: int
    status: str
    total: int
    start: int
    entries: tuple[TimelineEntry, ...]
    upto: int | None = None  # the position after the page's last (None: each position is an entry)

    @property
    def before(self) -> int | None:
        return self.start if self.start > 0 else None

    @property
    def end(self) -> int:
        """The position after the page: `start` plus what it spans (a gap shows no entry)."""
        return self.upto if self.upto is not None else self.start + len(self.entries)

    def to_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "seq": self.seq,
            "version": self.version,
            "status": self.status,
            "total": self.total,
            "start": self.start,
            "before": self.before,
            "entries": [e.to_dict() for e in self.entries],
        }


@dataclass(slots=True)
class _Run:
    """One run's checkpoints known to this process, by version; `trusted` ones were checked."""

    points: list[RunCheckpoint] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    trusted: set[int] = field(default_factory=set)

    def add(self, point: RunCheckpoint, trusted: bool) -> None:
        i = bisect.bisect_left(self.versions, point.version)
        if i < len(self.versions) and self.versions[i] == point.version:
            self.points[i] = point
        else:
            self.points.insert(i, point)
            self.versions.insert(i, point.version)
        if trusted:
            self.trusted.add(point.version)

    def drop(self, point: RunCheckpoint) -> None:
        i = bisect.bisect_left(self.versions, point.version)
        if i < len(self.versions) and self.versions[i] == point.version:
            del self.points[i], self.versions[i]
        self.trusted.discard(point.version)

    def made_at_or_below(self, made: int, i: int) -> int:
        """The index of the last checkpoint up to index `i` whose made count is at most `made`."""
        lo, hi = 0, i + 1
        while lo < hi:
            mid = (lo + hi) // 2
            if self.points[mid].made <= made:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1

    def at_or_below(self, seq: int) -> int:
        """The index of the last checkpoint at or below `seq` (-1: none)."""
        lo, hi = 0, len(self.points)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.points[mid].seq <= seq:
                lo = mid + 1
            else:
                hi = mid
        return lo - 1


class RunPages:
    """Pages of broker runs' timelines as of any seq, folded from per-run checkpoints.

    Thread-safe. `reads` counts the records folded (what a page costs), for tests and benches.
    """

    def __init__(
        self,
        log: EventLog,
        store: SnapshotStore | None,
        unreadable: Unreadable,
        *,
        every: int = EVERY,
        runs: int = RUNS_CACHED,
    ) -> None:
        self.log = log
        self.store = store
        self.unreadable = unreadable
        self.every = every
        self.reads = 0
        self._runs: OrderedDict[str, _Run] = OrderedDict()
        self._limit = runs
        self._lock = threading.Lock()

    def page(
        self, run_id: str, at: int | None = None, before: int | None = None, limit: int = PAGE
    ) -> RunPage | None:
        """Entries `before - limit` to `before` (default: the newest ones) of run `run_id`'s
        timeline as of seq `at` (default: now); None if the run had no record by then.

        ValueError if `before` is past the timeline's end or below 0, or `limit` below 1.
        """
        if limit < 1:
            raise ValueError("limit must be at least 1")
        stream = f"run-{run_id}"
        run = self._run(stream)
        k = 2**62 if at is None else at
        # One fold from the checkpoint below k keeps every entry made after that checkpoint:
        # the newest page usually lies among them, and then no second fold is needed.
        end = self._fold(stream, run, k, (-1, -1))
        if end is None:
            return None
        fold, last = end
        total = fold.total
        if before is not None and not 0 <= before <= total:
            raise ValueError(f"cursor {before} is outside the timeline (0 to {total} entries)")
        hi = total if before is None else before
        lo = max(0, hi - min(limit, MAX_PAGE))
        first = fold.made - len(fold.entries)  # the made-index of the first entry kept
        if lo == hi:
            entries: list[TimelineEntry] = []
        elif fold.base + lo >= first:
            entries = fold.entries[fold.base + lo - first : fold.base + hi - first]
        else:
            found = self._fold(stream, run, last.seq, (fold.base + lo, fold.base + hi))
            entries = found[0].entries if found is not None else []
        return RunPage(run_id, last.seq, last.version, fold.status, total, lo, tuple(entries))

    # -- folding --------------------------------------------------------------------------

    def _fold(
        self, stream: str, run: _Run, k: int, window: tuple[int, int] | None
    ) -> tuple[BrokerFold, Record] | None:
        """The fold of `stream` up to seq `k` and its last record (None if it has none by then).

        With no window, entries are only counted; with (-1, -1), those made after the checkpoint
        it starts from are kept. With another, the fold starts at the last
        checkpoint whose made count is at or below the window's start, and it stops once the
        window is full unless a permission in it may still be decided.
        """
        while True:
            with self._lock:
                i = run.at_or_below(k)
                if window is not None and window[0] >= 0:
                    i = run.made_at_or_below(window[0], i)
                point = run.points[i] if i >= 0 else None
                following = run.points[i + 1] if i + 1 < len(run.points) else None
                trusted = point is None or point.version in run.trusted
            if window == (-1, -1):  # every entry made after the checkpoint the fold starts from
                window = (point.made if point is not None else 0, 2**62)
            if point is None:
                fold = BrokerFold(window)
                first = 1
            else:
                fold = BrokerFold.resume(point.status, point.made, point.base, dict(point.asks), window)
                first = point.version
            to = following.version if following is not None and following.seq > k else None
            records = self._records(stream, first, to)
            head: Record | None = None
            if point is not None:
                head = next(records, None)
                if (
                    head is None
                    or head.seq != point.seq
                    or head.hash != point.hash
                    or not (trusted or self._sealed(stream, point))
                ):
                    with self._lock:
                        run.drop(point)  # stale or forged: never used again; fold from further back
                    continue
                if not trusted:
                    with self._lock:
                        run.trusted.add(point.version)
            return self._run_fold(stream, run, fold, records, k, window, head)

    def _run_fold(
        self,
        stream: str,
        run: _Run,
        fold: BrokerFold,
        records: Iterator[Record],
        k: int,
        window: tuple[int, int] | None,
        last: Record | None,
    ) -> tuple[BrokerFold, Record] | None:
        """Fold `records` (after the checkpoint whose record is `last`) up to seq `k`."""
        fresh: list[RunCheckpoint] = []
        with self._lock:
            known = set(run.versions)
        every = self.every
        folded = 0
        checked = False  # whether the full window was looked at for entries that may still change
        for r in readable(records, self.unreadable):
            if r.seq > k:
                break
            fold.apply(r)
            folded += 1
            last = r
            if r.version % every == 0 and r.version not in known:
                asks = tuple(sorted(fold.asks.items()))
                fresh.append(RunCheckpoint(r.version, r.seq, r.hash, fold.status, fold.made, fold.base, asks))
            if window is not None and not checked and fold.made >= window[1]:
                if not _undecided(fold):
                    break
                checked = True  # a permission in the window may be decided later: fold on to `k`
        self.reads += folded
        if fresh:
            self._keep(stream, run, fresh)
        return None if last is None else (fold, last)

    def _records(self, stream: str, first: int, to: int | None) -> Iterator[Record]:
        """The stream's records from version `first`, read a bounded stretch at a time."""
        step = self.every * 4
        while True:
            hi = first + step - 1 if to is None else min(to, first + step - 1)
            n = 0
            for r in self.log.read(stream, first, hi):
                n += 1
                yield r
            if n < hi - first + 1 or (to is not None and hi >= to):
                return
            first = hi + 1
            step = min(step * 4, 4096)

    # -- the checkpoints ------------------------------------------------------------------

    def _run(self, stream: str) -> _Run:
        with self._lock:
            run = self._runs.get(stream)
            if run is not None:
                self._runs.move_to_end(stream)
                return run
        run = _Run()
        for row in self.store.run_checkpoints(stream) if self.store is not None else []:
            point = RunCheckpoint.of(row)
            if point is not None and point.version % self.every == 0:
                run.add(point, trusted=False)
        with self._lock:
            found = self._runs.setdefault(stream, run)
            self._runs.move_to_end(stream)
            while len(self._runs) > self._limit:
                self._runs.popitem(last=False)
            return found

    def _sealed(self, stream: str, point: RunCheckpoint) -> bool:
        """Whether a stored checkpoint carries this log's MAC (always, on an unkeyed log)."""
        if not self.log.keyed:
            return True
        rows = self.store.run_checkpoints(stream) if self.store is not None else []
        row = next((r for r in rows if r.version == point.version), None)
        if row is None or row.data != point.data() or not row.mac:
            return False
        expected = self.log.seal(sealed_message(stream, row))
        return expected is not None and hmac.compare_digest(expected, row.mac)

    def _keep(self, stream: str, run: _Run, points: list[RunCheckpoint]) -> None:
        with self._lock:
            for point in points:
                run.add(point, trusted=True)
        if self.store is None or self.store.readonly:
            return
        rows = []
        for p in points:
            row = RunCheckpointRow(stream, p.version, p.seq, p.hash, p.data())
            mac = self.log.seal(sealed_message(stream, row)) or ""
            rows.append(RunCheckpointRow(stream, p.version, p.seq, p.hash, row.data, mac))
        with contextlib.suppress(EventLogError):  # a cache that could not be written is only slower
            self.store.put_run_checkpoints(rows)


def _undecided(fold: BrokerFold) -> bool:
    """Whether an entry the fold keeps may still change: a permission a later record may decide."""
    return any(pos >= 0 for pos in fold.permissions.values())
