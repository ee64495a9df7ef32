"""A controller run's timeline a page at a time, as of any seq, from per-run checkpoints.

Every `every` versions of a controller stream a checkpoint (`AgentCheckpoint`) keeps what the
timeline fold needs to go on from there, and none of the entries: so a page of a run's
timeline as of seq k is folded from the checkpoint nearest below the page's first entry, and
costs the page and the distance from that checkpoint to k, not the stream's length. (The fold
goes on to k whatever the page holds: any later record may still complete a tool call shown
there.) Checkpoints are kept with the broker runs' (the snapshot store's `run_checkpoints`),
made the first time a stream is read that far and verified against the chain before use.

Positions in a run's timeline are its session's slots, which records only ever append, so a
cursor stays good as the run goes on. A slot no longer shown (a streamed message replaced by
its final text, another run's unfinished stream) leaves a gap: a page may hold fewer entries
than its limit. A page's entries are in time order, as the whole timeline's are; a record that
names a run the checkpoint does not know (no controller writes one) makes the fold start from
the stream's beginning instead.
"""

from __future__ import annotations

from collections.abc import Callable

from eventlog import EventLog, SnapshotStore, Unreadable, readable

from ._checkpoint_cache import CheckpointCache
from .agent_fold import AgentCheckpoint, AgentFold, UnknownRun
from .agent_runs import AgentRun
from .run_pages import EVERY, MAX_PAGE, PAGE, RUNS_CACHED, RunPage

Choose = Callable[[list[AgentCheckpoint]], AgentCheckpoint | None]


def _made(point: AgentCheckpoint, session_id: str) -> int:
    found = point.session(session_id)
    return found.made if found is not None else 0


class AgentPages:
    """Pages of controller runs' timelines as of any seq, folded from per-run checkpoints.

    Thread-safe. `reads` counts the records folded (what a page costs), for tests and benches.
    """

    def __init__(
        self,
        log: EventLog,
        store: SnapshotStore | None,
        unreadable: Unreadable,
        *,
        every: int = EVERY,
        streams: int = RUNS_CACHED,
    ) -> None:
        self.log = log
        self.unreadable = unreadable
        self.reads = 0
        self.cache: CheckpointCache[AgentCheckpoint] = CheckpointCache(
            log, store, every, streams, AgentCheckpoint.of
        )

    @property
    def every(self) -> int:
        """Versions of a stream between two checkpoints."""
        return self.cache.every

    @every.setter
    def every(self, value: int) -> None:
        self.cache.every = value

    def page(
        self,
        run: AgentRun,
        at: int | None = None,
        before: int | None = None,
        limit: int = PAGE,
        settled: int | None = None,
    ) -> RunPage | None:
        """Entries `before - limit` to `before` (default: the newest) of `run`'s timeline as of
        seq `at` (default: now); None if the run had no record by then.

        A run's timeline ends where the next run of its session started: positions past it are
        the later runs', and no later record changes its entries. `settled`, when known, is the
        seq of the run's last status change: one before that start means the fold may stop
        there. ValueError if `before` is outside the timeline, or `limit` below 1.
        """
        if limit < 1:
            raise ValueError("limit must be at least 1")
        k = 2**62 if at is None else at
        if run.first_seq > k:
            return None
        stream, sid, rid = run.stream, run.session_id, run.run_id

        def running(point: AgentCheckpoint) -> bool:  # the run's timeline has not ended there yet
            found = point.session(sid)
            return point.seq < run.first_seq or (found is not None and found.latest == rid)

        def first(points: list[AgentCheckpoint]) -> AgentCheckpoint | None:
            return next((p for p in reversed(points) if p.seq <= k and running(p)), None)

        fold, start = self._fold(stream, (rid, sid), k, first, settled)
        if fold.last is None:
            return None
        total = 0 if not fold.order else fold.ended if fold.ended is not None else fold.made()
        if before is not None and not 0 <= before <= total:
            raise ValueError(f"cursor {before} is outside the timeline (0 to {total} entries)")
        hi = total if before is None else before
        lo = max(0, hi - min(limit, MAX_PAGE))
        if lo >= start:
            entries = fold.entries(lo, hi)
        else:

            def below(points: list[AgentCheckpoint]) -> AgentCheckpoint | None:
                fits = (p for p in reversed(points) if p.seq <= k and running(p) and _made(p, sid) <= lo)
                return next(fits, None)

            entries = self._fold(stream, (rid, sid), k, below, settled, (lo, hi))[0].entries(lo, hi)
        # A run whose session went on to its next run stays at its last step.
        last = fold.end if fold.ended is not None and fold.end is not None else fold.last
        status = fold.status.get(rid, "")
        return RunPage(rid, last.seq, last.version, status, total, lo, tuple(entries), hi)

    # -- folding --------------------------------------------------------------------------

    def _fold(
        self,
        stream: str,
        target: tuple[str, str],
        k: int,
        choose: Choose,
        settled: int | None,
        window: tuple[int, int] | None = None,
    ) -> tuple[AgentFold, int]:
        """The stream folded up to seq `k` from the checkpoint `choose` picks (or its start),
        and the number of the target session's slots before that checkpoint (those not held).

        It stops where the target's session started its next run if the target's status was
        settled before (`settled`): nothing after changes the target's page. With a `window`
        of slots (for its entries alone), it also stops once they are all made and none can
        change any more: no tool call among them still running, no streamed message still open.
        """
        known = self.cache.known(stream)
        use_points = True
        while True:
            with self.cache.lock:
                point = choose(list(known.points)) if use_points else None
                trusted = point is None or point.version in known.trusted
                versions = set(known.versions)
            fold = AgentFold(stream, target, point)
            records = self.cache.records(stream, point.version if point is not None else 1)
            if point is not None:
                head = next(records, None)
                if (
                    head is None
                    or head.seq != point.seq
                    or head.hash != point.hash
                    or not (trusted or self.cache.sealed(stream, point))
                ):
                    with self.cache.lock:
                        known.drop(point)  # stale or forged: never used again
                    continue
                with self.cache.lock:
                    known.trusted.add(point.version)
                fold.last = head
            fresh: list[AgentCheckpoint] = []
            folded = 0
            look = 0  # records until the window is looked at again
            try:
                for r in readable(records, self.unreadable):
                    if r.seq > k:
                        break
                    fold.apply(r)
                    folded += 1
                    if fold.next is not None and settled is not None and settled < fold.next.seq:
                        break
                    if window is not None and fold.made() >= window[1]:
                        look -= 1
                        if look <= 0:
                            if fold.settled(*window):
                                break
                            look = self.every
                    if r.version % self.every == 0 and r.version not in versions:
                        fresh.append(fold.checkpoint(r))
            except UnknownRun:
                self.reads += folded
                use_points = False  # a run the checkpoint does not know: from the start
                continue
            self.reads += folded
            if fresh:
                self.cache.keep(stream, known, fresh)
            return fold, _made(point, target[1]) if point is not None else 0
