"""Per-run checkpoints as one process knows them: read from the store, checked, kept, written back.

Both kinds of run pages (`RunPages` for broker runs, `AgentPages` for controller runs) keep
their checkpoints this way: a checkpoint is a cache next to the log (the snapshot store's
`run_checkpoints`), one every `every` versions of a stream, made the first time a stream is
folded that far. One read from the store is trusted only once the record at its version has
its seq and hash (the caller checks that) and, on a keyed log, its MAC seals it.
"""

from __future__ import annotations

import bisect
import contextlib
import hmac
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

import orjson

from eventlog import EventLog, EventLogError, Record, RunCheckpointRow, SnapshotStore


class Point(Protocol):
    """A checkpoint: where it sits in its stream, and what it holds (`data()`)."""

    @property
    def version(self) -> int: ...

    @property
    def seq(self) -> int: ...

    @property
    def hash(self) -> str: ...

    def data(self) -> bytes: ...


P = TypeVar("P", bound=Point)


def sealed_message(stream: str, row: RunCheckpointRow) -> bytes:
    """What a per-run checkpoint's MAC covers: its stream, position, chain hash and content."""
    return orjson.dumps(
        ["flightlog run checkpoint", stream, row.version, row.seq, row.hash, row.data.decode()]
    )


@dataclass(slots=True)
class Known(Generic[P]):
    """One stream's checkpoints known to this process, by version; `trusted` ones were checked."""

    points: list[P] = field(default_factory=list)
    versions: list[int] = field(default_factory=list)
    trusted: set[int] = field(default_factory=set)

    def add(self, point: P, trusted: bool) -> None:
        i = bisect.bisect_left(self.versions, point.version)
        if i < len(self.versions) and self.versions[i] == point.version:
            self.points[i] = point
        else:
            self.points.insert(i, point)
            self.versions.insert(i, point.version)
        if trusted:
            self.trusted.add(point.version)

    def drop(self, point: P) -> None:
        i = bisect.bisect_left(self.versions, point.version)
        if i < len(self.versions) and self.versions[i] == point.version:
            del self.points[i], self.versions[i]
        self.trusted.discard(point.version)


class CheckpointCache(Generic[P]):
    """The checkpoints of the streams read lately (`streams` of them), each a `Known`.

    Thread-safe: `lock` guards every `Known` it hands out.
    """

    def __init__(
        self,
        log: EventLog,
        store: SnapshotStore | None,
        every: int,
        streams: int,
        parse: Callable[[RunCheckpointRow], P | None],
    ) -> None:
        self.log = log
        self.store = store
        self.every = every
        self.parse = parse
        self.lock = threading.Lock()
        self._streams: OrderedDict[str, Known[P]] = OrderedDict()
        self._limit = streams

    def known(self, stream: str) -> Known[P]:
        """The stream's checkpoints: from memory, or read from the store (not yet trusted)."""
        with self.lock:
            found = self._streams.get(stream)
            if found is not None:
                self._streams.move_to_end(stream)
                return found
        known: Known[P] = Known()
        for row in self.store.run_checkpoints(stream) if self.store is not None else []:
            point = self.parse(row)
            if point is not None and point.version % self.every == 0:
                known.add(point, trusted=False)
        with self.lock:
            found = self._streams.setdefault(stream, known)
            self._streams.move_to_end(stream)
            while len(self._streams) > self._limit:
                self._streams.popitem(last=False)
            return found

    def sealed(self, stream: str, point: P) -> bool:
        """Whether a stored checkpoint carries this log's MAC (always, on an unkeyed log)."""
        return Seals(self, stream).sealed(point)

    def keep(self, stream: str, known: Known[P], points: list[P]) -> None:
        """Trust `points` (made by this process's own fold) and store them, sealed."""
        with self.lock:
            for point in points:
                known.add(point, trusted=True)
        if self.store is None or self.store.readonly:
            return
        rows = []
        for p in points:
            row = RunCheckpointRow(stream, p.version, p.seq, p.hash, p.data())
            mac = self.log.seal(sealed_message(stream, row)) or ""
            rows.append(RunCheckpointRow(stream, p.version, p.seq, p.hash, row.data, mac))
        with contextlib.suppress(EventLogError):  # a cache that could not be written is only slower
            self.store.put_run_checkpoints(rows)

    def records(self, stream: str, first: int, to: int | None = None, size: int = 0) -> Iterator[Record]:
        """The stream's records from version `first` (to `to`), read a bounded stretch at a time:
        the first one `size` records when the caller knows about how many it needs."""
        step = size if size > 0 else self.every * 4
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


class Seals:
    """The MACs of one stream's stored checkpoints, read once for as many checks as asked."""

    def __init__(self, cache: CheckpointCache[Any], stream: str) -> None:
        self.cache = cache
        self.stream = stream
        self._rows: dict[int, RunCheckpointRow] | None = None

    def sealed(self, point: Point) -> bool:
        """Whether the stored checkpoint at `point`'s version is `point`, with this log's MAC
        (always, on an unkeyed log)."""
        log, store = self.cache.log, self.cache.store
        if not log.keyed:
            return True
        if self._rows is None:
            self._rows = {
                r.version: r for r in (store.run_checkpoints(self.stream) if store is not None else [])
            }
        row = self._rows.get(point.version)
        if row is None or row.data != point.data() or not row.mac:
            return False
        expected = log.seal(sealed_message(self.stream, row))
        return expected is not None and hmac.compare_digest(expected, row.mac)
