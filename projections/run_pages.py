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

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from eventlog import EventLog, Record, RunCheckpointRow, SnapshotStore, Unreadable, readable

from ._checkpoint_cache import CheckpointCache, Known
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


def _made_at_or_below(points: list[RunCheckpoint], made: int, i: int) -> int:
    """The index of the last checkpoint up to index `i` whose made count is at most `made`."""
    lo, hi = 0, i + 1
    while lo < hi:
        mid = (lo + hi) // 2
        if points[mid].made <= made:
            lo = mid + 1
        else:
            hi = mid
    return lo - 1


def _at_or_below(points: list[RunCheckpoint], seq: int) -> int:
    """The index of the last checkpoint at or below `seq` (-1: none)."""
    lo, hi = 0, len(points)
    while lo < hi:
        mid = (lo + hi) // 2
        if points[mid].seq <= seq:
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
        self.unreadable = unreadable
        self.reads = 0
        self.cache: CheckpointCache[RunCheckpoint] = CheckpointCache(
            log, store, every, runs, RunCheckpoint.of
        )

    @property
    def every(self) -> int:
        """Versions of a run between two checkpoints."""
        return self.cache.every

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
        run = self.cache.known(stream)
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
            # The entries before those kept come from a second fold, up to them only (on to k
            # while one it holds may still be decided); the rest are the ones kept.
            upto = min(fold.base + hi, first)
            found = self._fold(stream, run, last.seq, (fold.base + lo, upto))
            entries = found[0].entries if found is not None else []
            entries += fold.entries[: max(0, fold.base + hi - first)]
        return RunPage(run_id, last.seq, last.version, fold.status, total, lo, tuple(entries))

    # -- folding --------------------------------------------------------------------------

    def _fold(
        self, stream: str, run: Known[RunCheckpoint], k: int, window: tuple[int, int] | None
    ) -> tuple[BrokerFold, Record] | None:
        """The fold of `stream` up to seq `k` and its last record (None if it has none by then).

        With no window, entries are only counted; with (-1, -1), those made after the checkpoint
        it starts from are kept. With another, the fold starts at the last
        checkpoint whose made count is at or below the window's start, and it stops once the
        window is full unless a permission in it may still be decided (reading no further than
        the checkpoint after k).
        """
        while True:
            with self.cache.lock:
                below = i = _at_or_below(run.points, k)
                if window is not None and window[0] >= 0:
                    i = _made_at_or_below(run.points, window[0], i)
                point = run.points[i] if i >= 0 else None
                following = run.points[below + 1] if below + 1 < len(run.points) else None
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
            # A bounded window needs about a record per entry up to its end (most records make
            # one): read that much at first, not a stretch of thousands it stops short of.
            size = 0
            if window is not None and window[1] < 2**62:
                size = window[1] - (point.made if point is not None else 0) + 2
            records = self.cache.records(stream, first, to, size)
            head: Record | None = None
            if point is not None:
                head = next(records, None)
                if (
                    head is None
                    or head.seq != point.seq
                    or head.hash != point.hash
                    or not (trusted or self.cache.sealed(stream, point))
                ):
                    with self.cache.lock:
                        run.drop(point)  # stale or forged: never used again; fold from further back
                    continue
                if not trusted:
                    with self.cache.lock:
                        run.trusted.add(point.version)
            return self._run_fold(stream, run, fold, records, k, window, head)

    def _run_fold(
        self,
        stream: str,
        run: Known[RunCheckpoint],
        fold: BrokerFold,
        records: Iterator[Record],
        k: int,
        window: tuple[int, int] | None,
        last: Record | None,
    ) -> tuple[BrokerFold, Record] | None:
        """Fold `records` (after the checkpoint whose record is `last`) up to seq `k`."""
        fresh: list[RunCheckpoint] = []
        with self.cache.lock:
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
            self.cache.keep(stream, run, fresh)
        return None if last is None else (fold, last)


def _undecided(fold: BrokerFold) -> bool:
    """Whether an entry the fold keeps may still change: a permission a later record may decide."""
    return any(pos >= 0 for pos in fold.permissions.values())
