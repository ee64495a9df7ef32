"""The runner: folds records into a set of views, live from a checkpoint or up to any seq."""

from __future__ import annotations

import bisect
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any, TypeVar

from eventlog import RECORD_ERRORS, EventLog, EventLogError, Record, SnapshotStore, Unreadable, fit_record

from ._bulk import bulk
from ._checkpoints import Checkpoints
from ._fold import dispatch_table, fold_from, routing, row_key
from ._snapshots import AUTO, Rejected, SnapshotWriter, hash_at, load_snapshot, newest_valid, resolve_store
from ._view import View, dump_chunks

T = TypeVar("T")

SNAPSHOT_EVERY = 100_000  # seqs between stored snapshots (multiples of it, whatever the start)
FOLD_BYTES_PER_EVENT = 150  # folding one record costs about as much as loading this much snapshot
# A view is stored again once its dump is at most this many bytes per event folded since its
# last snapshot. Loading a snapshot costs about as much as folding 1/FOLD_BYTES_PER_EVENT of
# its size in records, so a snapshot is only worth writing when it will save many times that.
SNAPSHOT_BYTES_PER_EVENT = 4
CHECKPOINT_EVERY = 2_500  # seqs between in-memory checkpoints of the dict-of-rows views
CHECKPOINT_BUDGET = 2_000_000  # rows all in-memory checkpoints may hold together (deltas count)
# Checkpoints more than CHECKPOINT_RECENT seqs behind the newest are kept one per
# CHECKPOINT_COARSE seqs (travel there folds at most that many records); none is kept beyond
# CHECKPOINT_HORIZON (travel there starts from the nearest stored snapshot). A 40-run server's
# checkpoints hold ~45 KB per checkpoint, so they stop growing with its log.
CHECKPOINT_RECENT = 20_000
CHECKPOINT_COARSE = 10_000
CHECKPOINT_HORIZON = 1_000_000


class ViewRunner:
    """Keeps a set of views current from the log; thread-safe.

    `catch_up()` reads everything after the checkpoint, so a view is current with respect to
    every commit that finished before the call, from this process or another. Readers use
    `read(name, fn)`, which runs `fn` on the state under the runner's lock (states are
    folded in place, so they are never handed out unguarded).

    Snapshots: the first catch-up starts each view from its newest stored snapshot (of the
    view's current version, taken of this very history) and folds on from there. While
    folding, at each multiple of `snapshot_every` the runner stores a snapshot of every view
    whose last one is old enough to be worth it: a view whose dump is S bytes is stored again
    once S / `snapshot_bytes_per_event` seqs have passed, which bounds the cost of
    snapshots to that many bytes of dump per folded event, however large states grow (a
    start-up then folds at most about as many records as the snapshot it loads is large).
    It also keeps in-memory checkpoints of the `checkpoint_views` (dicts of frozen rows)
    every `checkpoint_every` seqs, so `fold_until` starts from whichever is nearest: the
    live state, an in-memory checkpoint, a stored snapshot, or seq 0.

    A stored snapshot is used only if it passes `snapshot_fault` (on this chain, content
    matching its digest, sealed when the log is keyed); one that fails is noted in
    `rejected` and never read again, and a new one is stored when the fold passes its seq.

    A record is folded only if it fits the event catalogue (upcast to its current schema
    first); one that does not, or that a view's apply fails on, is skipped and noted in
    `unreadable`. Such a record changes no view, unless an apply fails after another view
    applied it, which a record that fits the catalogue never causes but a bug in a view might.
    """

    def __init__(
        self,
        log: EventLog,
        views: Sequence[View],
        *,
        snapshots: SnapshotStore | None = AUTO,
        snapshot_every: int = SNAPSHOT_EVERY,
        snapshot_bytes_per_event: int = SNAPSHOT_BYTES_PER_EVENT,
        keep_snapshots: int | None = None,
        checkpoint_every: int = CHECKPOINT_EVERY,
        checkpoint_budget: int = CHECKPOINT_BUDGET,
        checkpoint_views: Iterable[str] = (),
    ) -> None:
        self.log = log
        self.views = {v.name: v for v in views}
        self.store = resolve_store(log, snapshots)
        self.snapshot_every = snapshot_every
        self.snapshot_bytes_per_event = snapshot_bytes_per_event
        self.keep_snapshots = keep_snapshots
        writer = SnapshotWriter(self.store, keep_snapshots, log.seal) if self.store is not None else None
        self._writer = writer
        self._stored: dict[str, tuple[int, int]] | None = None  # view -> (seq, size) of its newest
        self._listing: dict[tuple[str, int], list[tuple[int, int]]] | None = None  # for fold_until
        self.snapshot_error: EventLogError | None = None  # why storing snapshots stopped, if it did
        self.restored: dict[str, int] = {}  # view -> seq of the snapshot the first catch-up used
        self.rejected: Rejected = {}  # snapshots not trusted, and why (not yet stored anew)
        self.rebuilt: Rejected = {}  # rejected snapshots since stored anew
        self.unreadable = Unreadable()  # records every fold here skipped
        self._memory_views = [self.views[n] for n in checkpoint_views if n in self.views]
        # Views that name the row each record changes (`row_key`) have those keys noted as
        # they fold, so their checkpoints need not compare every row. Views keyed by the same
        # field share a set (a key noted for another view only makes a delta a little larger).
        by_field: dict[str, set[Any]] = {}
        self._touched: dict[str, set[Any]] = {
            v.name: by_field.setdefault(row_key(v), set()) for v in self._memory_views if row_key(v)
        }
        self._dispatch = dispatch_table(views)
        self._states: dict[str, Any] = {v.name: v.initial() for v in views}
        self._checkpoint = 0
        self._started = False
        self._memory = Checkpoints(
            checkpoint_every,
            checkpoint_budget,
            recent=CHECKPOINT_RECENT,
            coarse=CHECKPOINT_COARSE,
            horizon=CHECKPOINT_HORIZON,
        )
        self._lock = threading.RLock()
        self._listeners: list[Callable[[Record], object]] = []

    @property
    def checkpoint(self) -> int:
        return self._checkpoint

    @property
    def started(self) -> bool:
        """Whether the runner has caught up at least once (and so follows the log)."""
        return self._started

    @property
    def checkpoints(self) -> Checkpoints:
        return self._memory

    def add_listener(self, fn: Callable[[Record], object]) -> None:
        """Call `fn(record)` for each record the runner folds (under its lock, in seq order)."""
        with self._lock:
            self._listeners.append(fn)

    # -- following the log -----------------------------------------------------------------

    def catch_up(self) -> int:
        """Fold every record committed after the checkpoint; return the new checkpoint."""
        with self._lock, bulk():
            if not self._started:
                self._started = True
                self._restore()
            self.feed(self.log.read_all(after_seq=self._checkpoint))
            self.flush()
            return self._checkpoint

    def _restore(self) -> None:
        """Start every view from its newest valid snapshot, then fold them all to the newest of those."""
        if self.store is None or self._checkpoint > 0:
            return
        bases: dict[str, tuple[int, Any]] = {}
        for view in self.views.values():
            snap = newest_valid(self.log, self.store, view, rejected=self.rejected)
            if snap is not None:
                bases[view.name] = (snap.seq, load_snapshot(view, snap))
                self.restored[view.name] = snap.seq
        if not bases:
            return
        target = max(seq for seq, _ in bases.values())
        self._states = fold_from(self.log, list(self.views.values()), bases, target, self.unreadable)
        self._checkpoint = target
        if self._storing() and self.rejected:
            self._rebuild(target)

    def feed(self, records: Iterable[Record]) -> None:
        """Fold records in seq order; records at or before the checkpoint are skipped."""
        with self._lock:
            routes = routing(self._dispatch, list(self.views.values()), self._touched)
            states, listeners = self._states, self._listeners
            fit, unreadable = fit_record, self.unreadable
            cp = self._checkpoint
            mark = self._next_mark(cp)
            try:
                for record in records:
                    seq = record.seq
                    if seq != cp + 1:
                        if seq <= cp:
                            continue
                        # A gap: someone handed us a later record first. Read the missing ones.
                        self._checkpoint = cp
                        self.feed(self.log.read_all(after_seq=cp, to_seq=seq - 1))
                        cp = self._checkpoint
                        mark = self._next_mark(cp)
                    route = routes.get(record.type)
                    if route is not None:  # one lookup: the views, and the row keys to note
                        try:
                            record = fit(record)
                            for note, field in route[1]:
                                note(record.data.get(field))
                            for name, apply in route[0]:
                                states[name] = apply(states[name], record)
                        except RECORD_ERRORS as e:
                            unreadable.note(record, e)
                    cp = seq
                    if listeners:
                        self._checkpoint = cp
                        for fn in listeners:
                            fn(record)
                    if seq >= mark:
                        self._checkpoint = cp
                        self._at_mark(record)
                        mark = self._next_mark(seq)
            finally:
                self._checkpoint = cp

    def _next_mark(self, seq: int) -> int:
        if not self._storing():
            return self._memory.next_after(seq)
        snap = (seq // self.snapshot_every + 1) * self.snapshot_every
        rebuild = min((s for _, _, s in self.rejected if s > seq), default=snap)
        return min(snap, rebuild, self._memory.next_after(seq))

    def _storing(self) -> bool:
        return (
            self.store is not None
            and not self.store.readonly
            and self.snapshot_error is None
            and (self._writer is None or self._writer.error is None)
            and self.snapshot_every > 0
        )

    def _at_mark(self, record: Record) -> None:
        seq = record.seq
        if self._memory.due(seq) and self._memory_views:
            states = {v.name: self._states[v.name] for v in self._memory_views}
            self._memory.add(seq, states, self._touched)
        if self._storing() and seq % self.snapshot_every == 0:
            stored = self._stored_index()
            due = [
                name
                for name in self.views
                if (seq - stored.get(name, (0, 0))[0]) * self.snapshot_bytes_per_event
                >= stored.get(name, (0, 0))[1]
            ]
            self.write_snapshots(due, record.hash)
        if self._storing() and self.rejected:
            self._rebuild(seq, record.hash)

    def _rebuild(self, seq: int, chain_hash: str | None = None) -> None:
        """Store anew the rejected snapshots at `seq`, the checkpoint (of the views' current versions)."""
        keys = [k for k in self.rejected if k[2] == seq and k[0] in self.views]
        names = [name for name, version, _ in keys if self.views[name].version == version]
        if names:
            self.write_snapshots(names, chain_hash)
        for key in keys:
            self.rebuilt[key] = self.rejected.pop(key)

    def _stored_index(self) -> dict[str, tuple[int, int]]:
        """Each view's newest stored snapshot (of its version): (seq, size of its JSON)."""
        if self._stored is None:
            self._stored = {}
            try:
                found = self.store.list() if self.store is not None else []
            except EventLogError:
                found = []
            for snap in found:
                view = self.views.get(snap.name)
                trusted = (snap.name, snap.version, snap.seq) not in self.rejected
                if (
                    view is not None
                    and snap.version == view.version
                    and snap.seq <= self._checkpoint
                    and trusted
                ):
                    self._stored[snap.name] = (snap.seq, snap.size)
        return self._stored

    def write_snapshots(self, names: Iterable[str] | None = None, chain_hash: str | None = None) -> int:
        """Store a snapshot of the named views (all by default) at the checkpoint; returns how many.

        Each state is dumped here; hashing, compressing and writing happen on the writer's
        thread. `flush()` waits for them; every catch-up ends with one.
        """
        with self._lock:
            if self._writer is None or self._checkpoint == 0 or self.snapshot_error is not None:
                return 0
            seq = self._checkpoint
            chain_hash = chain_hash or hash_at(self.log, seq)
            if chain_hash is None:
                return 0
            stored = self._stored_index()
            count = 0
            for name in names if names is not None else list(self.views):
                view = self.views[name]
                chunks = list(dump_chunks(view, self._states[name]))
                self._writer.submit(name, view.version, seq, chain_hash, chunks)
                stored[name] = (seq, sum(map(len, chunks)))
                self._listing = None
                count += 1
            return count

    def flush(self) -> None:
        """Wait until every snapshot handed to the writer is stored (or has failed)."""
        if self._writer is not None:
            self._writer.flush()
            if self._writer.error is not None and self.snapshot_error is None:
                self.snapshot_error = self._writer.error

    # -- reading ---------------------------------------------------------------------------

    def read(self, name: str, fn: Callable[[Any], T]) -> T:
        """`fn(state)` for the named view, computed under the lock after catching up."""
        with self._lock:
            self.catch_up()
            return fn(self._states[name])

    def read_states(self, fn: Callable[[dict[str, Any]], T]) -> tuple[int, T]:
        """The checkpoint and `fn(states)` over every view, computed under the lock after catching up."""
        with self._lock:
            seq = self.catch_up()
            return seq, fn(self._states)

    def _stored_below(self, view: View, seq: int) -> tuple[int, int] | None:
        """The newest stored snapshot of `view` at or below `seq`, as (seq, size), from a listing."""
        if self.store is None:
            return None
        with self._lock:
            if self._listing is None:
                self._listing = {}
                try:
                    found = self.store.list()
                except EventLogError:
                    found = []
                for snap in found:
                    if not snap.pruned:
                        self._listing.setdefault((snap.name, snap.version), []).append((snap.seq, snap.size))
            entries = self._listing.get((view.name, view.version), [])
            i = bisect.bisect_right(entries, (seq, 2**62)) - 1
            return entries[i] if i >= 0 else None

    def read_state(self, name: str, fn: Callable[[Any], T]) -> T:
        """`fn(state)` for the named view as folded so far (no catch-up), under the lock."""
        with self._lock:
            return fn(self._states[name])

    def fold_until(self, seq: int, names: Iterable[str] | None = None) -> dict[str, Any]:
        """Fresh states of the named views as they were right after `seq`.

        Each view starts from the nearest base at or below `seq` (the live state, an
        in-memory checkpoint, a stored snapshot, or its initial state) and folds on to `seq`:
        the cost is the distance from that base, not the size of the log.
        """
        chosen = [self.views[n] for n in (names if names is not None else self.views)]
        bases: dict[str, tuple[int, Any]] = {}
        with self._lock:
            for view in chosen:
                if self._checkpoint <= seq:
                    bases[view.name] = (self._checkpoint, view.copy(self._states[view.name]))
                else:
                    found = self._memory.restore(seq, view.name)  # a fresh copy already
                    if found is not None:
                        bases[view.name] = found
        with bulk():
            for view in chosen:
                start = bases.get(view.name, (0, None))[0]
                stored = self._stored_below(view, seq)
                # Loading a snapshot costs about its size; folding, the records it skips.
                if stored is None or (stored[0] - start) * FOLD_BYTES_PER_EVENT <= stored[1]:
                    continue
                snap = None
                if self.store is not None:  # this runs outside the lock: what it finds is merged under it
                    with self._lock:
                        rejected = dict(self.rejected)
                    before = len(rejected)
                    snap = newest_valid(self.log, self.store, view, seq, rejected=rejected)
                    if len(rejected) > before:
                        with self._lock:
                            self.rejected.update({k: v for k, v in rejected.items() if k not in self.rebuilt})
                if snap is not None and snap.seq > start:
                    bases[view.name] = (snap.seq, load_snapshot(view, snap))
            return fold_from(self.log, chosen, bases, seq, self.unreadable)
