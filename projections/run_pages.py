"""A broker run's timeline a page at a time, as of any seq, from per-run checkpoints.

Every `every` versions of a run's stream a checkpoint keeps what the fold needs to go on
from there: the run's status, how many entries it had made and where its timeline starts,
and its open asks. A page of the timeline as of seq k is folded from the checkpoint nearest
below it, so it costs the page and the distance from that checkpoint, not the run's length.

A page showing a permission must show its decision as of k, however far after the page that
came: each checkpoint also names the permission requests its stretch of versions records or
decides, and the fold goes on to k only through the stretches that name one the page shows.

Checkpoints are a cache next to the log (the snapshot store's `run_checkpoints`): made the
first time a run is read that far, and verified against the chain before use (the record at
a checkpoint's version must have its seq and hash; on a keyed log its MAC must seal it).
One that fails is ignored and the fold starts further back (or reads the stretch it sums up).
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson

from eventlog import EventLog, Record, RunCheckpointRow, SnapshotStore, Unreadable, readable

from ._checkpoint_cache import CheckpointCache, Known, Seals
from .broker_timeline import BrokerFold
from .timeline import TimelineEntry

EVERY = 64  # versions of a run between two checkpoints
PAGE = 200  # entries in a page unless asked otherwise
MAX_PAGE = 1000
RUNS_CACHED = 256  # runs whose checkpoints are held in memory (the rest are read again when asked)


@dataclass(frozen=True, slots=True)
class RunCheckpoint:
    """The fold of a run's stream right after its record at `version` (log `seq`, chain `hash`).

    It also sums up the stretch of versions from `since` to it: the request ids its permission
    records name (`touched`). A fold that only waits for a permission it shows to be decided
    skips a stretch that names none of those it shows. A checkpoint stored before these were
    kept has `touched` None: never skipped.
    """

    version: int
    seq: int
    hash: str
    status: str
    made: int
    base: int
    asks: tuple[tuple[str, str], ...] = ()
    since: int = 0
    touched: tuple[str, ...] | None = None

    def data(self) -> bytes:
        held: list[Any] = [self.status, self.made, self.base, self.asks]
        if self.touched is not None:
            held += [self.since, self.touched]
        return orjson.dumps(held)

    @classmethod
    def of(cls, row: RunCheckpointRow) -> RunCheckpoint | None:
        """The checkpoint a stored row holds, or None if the row is not one."""
        try:
            held = orjson.loads(row.data)
            status, made, base, asks = held[:4]
            pairs = tuple((str(k), str(v)) for k, v in asks)
            since, touched = held[4:] if len(held) > 4 else (0, None)
        except (orjson.JSONDecodeError, TypeError, ValueError, KeyError):
            return None
        if not (isinstance(status, str) and isinstance(made, int) and isinstance(base, int)):
            return None
        if touched is not None and not (
            isinstance(since, int)
            and 0 < since <= row.version
            and isinstance(touched, list)
            and all(isinstance(t, str) for t in touched)
        ):
            return None
        ids = tuple(touched) if touched is not None else None
        return cls(row.version, row.seq, row.hash, status, made, base, pairs, since, ids)


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
    return bisect.bisect_right(points, made, hi=i + 1, key=_made) - 1


def _at_or_below(points: list[RunCheckpoint], seq: int) -> int:
    """The index of the last checkpoint at or below `seq` (-1: none)."""
    return bisect.bisect_right(points, seq, key=_seq) - 1


def _made(point: RunCheckpoint) -> int:
    return point.made


def _seq(point: RunCheckpoint) -> int:
    return point.seq


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
        window is full; if a permission in it may still be decided, it goes on to k through the
        stretches that may decide one (`_settle`), reading no further than the checkpoint after k.
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
            complete = {p.version for p in run.points if p.touched is not None}
        every = self.every
        folded = 0
        touched: set[str] = set()  # the request ids named since the last grid version
        for r in readable(records, self.unreadable):
            if r.seq > k:
                break
            fold.apply(r)
            folded += 1
            last = r
            if r.type == "PermissionRequested" or r.type == "PermissionDecided":
                touched.add(r.data["request_id"])
            if r.version % every == 0:
                # The fold started on the grid (a checkpoint's version, or the stream's start),
                # so it has seen the whole stretch up to here.
                if r.version not in complete:
                    asks = tuple(sorted(fold.asks.items()))
                    ids = tuple(sorted(touched))
                    since = r.version - every + 1
                    point = RunCheckpoint(r.version, r.seq, r.hash, fold.status, fold.made, fold.base, asks)
                    fresh.append(dataclasses.replace(point, since=since, touched=ids))
                touched = set()
            if window is not None and fold.made >= window[1]:
                if _kept_permissions(fold):  # one may still be decided: on to k, where it may be
                    self._settle(stream, run, fold, r, k)
                break
        self.reads += folded
        if fresh:
            self.cache.keep(stream, run, fresh)
        return None if last is None else (fold, last)

    def _settle(self, stream: str, run: Known[RunCheckpoint], fold: BrokerFold, last: Record, k: int) -> None:
        """Fold on from `last` to seq `k` what may still change the entries `fold` keeps: a
        decision on a permission among them (none starts the timeline again: the window it keeps
        is in the timeline as of k). A stretch a checkpoint sums up as naming none of them is
        skipped unread.

        Past a skipped stretch the fold's counts fall behind: only its kept entries are used.
        """
        with self.cache.lock:
            stretches = {p.since: p for p in run.points if p.touched is not None and p.seq <= k}
        starts = sorted(stretches)
        kept = _kept_permissions(fold)
        v = last.version  # the last version folded or skipped
        folded = 0
        seals = Seals(self.cache, stream)
        while kept:
            i = bisect.bisect_left(starts, v + 1)
            nxt = stretches[starts[i]] if i < len(starts) else None
            if nxt is not None and nxt.since == v + 1:
                if kept.isdisjoint(nxt.touched or ()) and self._trust(run, nxt, seals):
                    v = nxt.version
                    continue
                hi: int | None = nxt.version
            else:  # on to where the next sum starts (or to k)
                hi = nxt.since - 1 if nxt is not None else None
            for r in readable(self.cache.records(stream, v + 1, hi), self.unreadable):
                if r.seq > k:
                    hi = None
                    break
                fold.apply(r)
                folded += 1
            if hi is None:
                break
            v = hi
            kept = _kept_permissions(fold)
        self.reads += folded

    def _trust(self, run: Known[RunCheckpoint], point: RunCheckpoint, seals: Seals) -> bool:
        """Whether `point` may be relied on: made or checked here, or its record has its seq and
        hash (and on a keyed log its MAC seals it); one that fails is dropped."""
        with self.cache.lock:
            if point.version in run.trusted:
                return True
        found = next(iter(self.log.read(seals.stream, point.version, point.version)), None)
        self.reads += 1
        ok = found is not None and found.seq == point.seq and found.hash == point.hash and seals.sealed(point)
        with self.cache.lock:
            if ok:
                run.trusted.add(point.version)
            else:
                run.drop(point)
        return ok


def _kept_permissions(fold: BrokerFold) -> set[str]:
    """The request ids of the permission entries the fold keeps: a later record may decide them."""
    return {rid for rid, pos in fold.permissions.items() if pos >= 0}
