"""The backend-independent event log: validation, group commit, follow and verify."""

from __future__ import annotations

import abc
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any

import orjson

from ._append import AppendRequest, Row, callers, encode_events, meta_bytes
from ._catalogue import Event
from ._chain import Sealer, make_hasher, make_sealer, record_from_row, walk_chain
from ._clock import Clock, SystemClock, to_micros
from ._errors import EventLogError, LogClosedError
from ._group import GroupCommit
from ._import import IMPORT_BATCH, ImportTarget, import_records
from ._recent import RecentCommits
from ._record import (
    ANY,
    APPROVAL_TYPES,
    RUN_START_TYPES,
    Expect,
    ExpectedVersion,
    Head,
    NewEvent,
    Record,
    VerifyResult,
    check_stream_name,
)

# One append of `append_many`: (stream, events, expect) or (stream, events, expect, meta).
Append = (
    tuple[str, Iterable[NewEvent | Event], ExpectedVersion]
    | tuple[str, Iterable[NewEvent | Event], ExpectedVersion, Mapping[str, Any] | None]
)

# How many rows a reader fetches per query: bounds memory, keeps read transactions short.
PAGE = 1000


class EventLog(GroupCommit):
    """An append-only, hash-chained log of events in streams.

    Thread-safe. Concurrent `append` calls are group-committed: the first caller to find no
    transaction in progress becomes the leader and writes every queued append in one
    transaction; each caller returns only after that transaction's COMMIT returned.
    """

    url: str

    def __init__(self, *, clock: Clock | None = None, hmac_key: bytes | None = None) -> None:
        self.clock: Clock = clock or SystemClock()
        self._hasher = make_hasher(hmac_key)
        self._sealer: Sealer | None = make_sealer(hmac_key)
        self._cond = threading.Condition(threading.Lock())
        self._queue: list[AppendRequest] = []
        self._leader = False
        self._appenders = 0  # callers in the last group and queued when it was written
        self._gathering = 0  # while a leader gathers: the queue length it waits for
        self._closed = False
        self._recent = RecentCommits()  # what this process committed last (see read_all)
        self._commits = threading.Condition(threading.Lock())
        self._wakeups = 0  # counts _wake_followers calls, guarded by _commits

    @property
    def keyed(self) -> bool:
        """Whether the log has an HMAC key (its chain, and the snapshots sealed with it, are keyed)."""
        return self._sealer is not None

    def seal(self, message: bytes) -> str | None:
        """A MAC of `message` under a key derived from the log's HMAC key; None when unkeyed."""
        return None if self._sealer is None else self._sealer(message)

    # -- writing ---------------------------------------------------------------------------

    def append(
        self,
        stream: str,
        events: Iterable[NewEvent | Event],
        expect: ExpectedVersion = ANY,
        *,
        meta: Mapping[str, Any] | None = None,
    ) -> list[Record]:
        """Append `events` to `stream` atomically if the stream's version satisfies `expect`.

        `meta` is stored with each catalogue event given as an `Event`, as `encode(event,
        meta=meta)` would store it, without building the NewEvent (a NewEvent keeps its own).
        """
        check_stream_name(stream)
        if not isinstance(expect, Expect) and (
            not isinstance(expect, int) or isinstance(expect, bool) or expect < 0
        ):
            raise ValueError(f"expect must be ANY, NO_STREAM, EXISTS or a version >= 0, got {expect!r}")
        req = AppendRequest(stream, encode_events(events, meta_bytes(meta)), expect)
        self._check_open()
        with self._cond:
            self._queue.append(req)
            if self._gathering and callers(self._queue) >= self._gathering:
                self._cond.notify_all()  # the leader gathering a group (see _gather)
            lead = not self._leader
            if not lead:
                req.wake = threading.Lock()
                req.wake.acquire()
            self._leader = True
        self._see_through(req, lead)
        if req.error is not None:
            raise req.error
        assert req.result is not None
        return req.result

    def append_many(self, appends: Sequence[Append]) -> list[list[Record] | EventLogError]:
        """Several `append`s from one thread, group-committed together; each one's records or error.

        Each is (stream, events, expect) or (stream, events, expect, meta), as `append` takes them.
        Each (stream, events, expect) succeeds or fails on its own (a ConcurrencyError, say), as
        if appended by a caller of its own; a failed transaction (a full disk) is the error of
        each append it held. This returns only after the commits holding the appends returned.
        """
        reqs = []
        for stream, events, expect, *meta in appends:
            check_stream_name(stream)
            encoded = encode_events(events, meta_bytes(meta[0] if meta else None))
            reqs.append(AppendRequest(stream, encoded, expect))
        self._check_open()
        if not reqs:
            return []
        with self._cond:
            lead = not self._leader
            for req in reqs[1:] if lead else reqs:
                req.wake = threading.Lock()
                req.wake.acquire()
            for req in reqs[1:]:
                req.joined = True
            self._queue.extend(reqs)
            if self._gathering and callers(self._queue) >= self._gathering:
                self._cond.notify_all()  # the leader gathering a group (see _gather)
            self._leader = True
        # As `append` for each request in turn: this thread is the caller of every one of them.
        for i, req in enumerate(reqs):
            try:
                self._see_through(req, lead and i == 0)
            except BaseException:
                for later in reqs[i + 1 :]:
                    self._abandon(later)
                raise
        out: list[list[Record] | EventLogError] = []
        for req in reqs:
            if req.error is not None and not isinstance(req.error, EventLogError):
                raise req.error
            out.append(req.error if req.error is not None else req.result)  # type: ignore[arg-type]
        return out

    def _wake_followers(self) -> None:
        """Tell waiting followers that something may have been committed."""
        with self._commits:
            self._wakeups += 1
            self._commits.notify_all()

    @abc.abstractmethod
    def _write_batch(self, batch: list[AppendRequest]) -> None:
        """Write `batch` in one transaction, setting each request's result or error."""

    def import_records(
        self,
        records: Iterable[Record],
        *,
        verify: bool = True,
        batch: int = IMPORT_BATCH,
        progress: Callable[[int], object] | None = None,
        dry_run: bool = False,
    ) -> Head:
        """Write stored records as they are (seq, version, event id, time, hashes) onto the head.

        The records must continue the chain where this log ends (an empty log, or one that
        ends at the seq before the first record): a gap, a broken link, a version out of
        order, a time going back, a reused event id, (with `verify`) a hash that does not
        recompute or a record that does not fit the event catalogue raises ImportRefusedError
        naming the seq. Records go in `batch` at a time,
        one transaction each, so only whole batches before the refused one stay written.
        `dry_run` checks everything and writes nothing. Returns the new head.
        """
        return import_records(
            self.head, self._hasher, records, self._import_session, verify=verify, batch=batch,
            progress=progress, dry_run=dry_run,
        )  # fmt: skip

    def _import_session(self, dry_run: bool) -> AbstractContextManager[ImportTarget]:
        """A context for one import transaction (or, for a dry run, for reads only)."""
        raise EventLogError(f"{type(self).__name__} cannot import records")

    # -- reading ---------------------------------------------------------------------------

    @abc.abstractmethod
    def _rows_after(self, after_seq: int, limit: int, to_seq: int | None) -> list[Row]:
        """Up to `limit` stored rows after `after_seq` up to `to_seq`, in seq order."""

    @abc.abstractmethod
    def _stream_rows(
        self, stream: str, from_version: int, to_version: int | None, limit: int
    ) -> list[Row]: ...

    def _records_after(
        self, after_seq: int, limit: int, to_seq: int | None, types: frozenset[str] | None
    ) -> tuple[list[Record], int | None]:
        """A page of records after `after_seq` (of `types` only, if given) and the seq the next
        page starts after, or None when this page is the last."""
        rows = self._rows_after(after_seq, limit, to_seq)
        more = rows[-1][0] if len(rows) == limit else None
        if types is not None:
            rows = [row for row in rows if row[3] in types]
        return list(map(record_from_row, rows)), more

    def _stream_records(
        self, stream: str, from_version: int, to_version: int | None, limit: int
    ) -> list[Record]:
        return list(map(record_from_row, self._stream_rows(stream, from_version, to_version, limit)))

    @abc.abstractmethod
    def head(self) -> Head:
        """The last seq and hash (seq 0 and the genesis hash for an empty log)."""

    @abc.abstractmethod
    def stream_version(self, stream: str) -> int:
        """The stream's current version; 0 when it does not exist."""

    def read(self, stream: str, from_version: int = 1, to_version: int | None = None) -> Iterator[Record]:
        """The stream's records from `from_version` to `to_version` (inclusive), in order."""
        check_stream_name(stream)
        version = max(from_version, 1)
        while True:
            records = self._stream_records(stream, version, to_version, PAGE)
            yield from records
            if len(records) < PAGE:
                return
            version = records[-1].version + 1

    def read_all(
        self, after_seq: int = 0, to_seq: int | None = None, *, types: Iterable[str] | None = None
    ) -> Iterator[Record]:
        """Every record after `after_seq` up to `to_seq` (inclusive), in seq order.

        With `types`, only records of those types (the database skips the others).
        """
        wanted = None if types is None else frozenset(types)
        more: int | None = after_seq
        # What this process committed last, from memory; then the database past it.
        recent = self._recent.after(after_seq, to_seq)
        for start in range(0, len(recent), PAGE):  # a page at a time, as from the database
            self._check_open()
            page = recent if len(recent) <= PAGE else recent[start : start + PAGE]
            yield from (page if wanted is None else [r for r in page if r.type in wanted])
        if recent:
            more = recent[-1].seq
            if to_seq is not None and more >= to_seq:
                return
        while more is not None:
            self._check_open()
            records, more = self._records_after(more, PAGE, to_seq, wanted)
            yield from records

    def _pages(self, after_seq: int, to_seq: int | None) -> Iterator[list[Row]]:
        while True:
            self._check_open()
            rows = self._rows_after(after_seq, PAGE, to_seq)
            if rows:
                yield rows
            if len(rows) < PAGE:
                return
            after_seq = rows[-1][0]

    def follow(
        self,
        after_seq: int = 0,
        *,
        stop: threading.Event | None = None,
        poll_interval: float = 0.05,
    ) -> Iterator[Record]:
        """Yield records after `after_seq` as they are committed, by this process or another.

        Ends when `stop` is set or the log is closed. Commits in this process wake it at
        once; other processes' commits are seen by a cheap poll of the head.
        """
        last = after_seq
        while not (stop is not None and stop.is_set()) and not self._closed:
            # Note the count before reading, so a wake-up between the read and the wait is not lost.
            with self._commits:
                seen = self._wakeups
            progressed = False
            try:
                for record in self.read_all(after_seq=last):
                    last = record.seq
                    progressed = True
                    yield record
                    if stop is not None and stop.is_set():
                        return
            except EventLogError:
                if self._closed:  # closed between two pages: end, as documented, not raise
                    return
                raise
            if not progressed:
                with self._commits:
                    if self._closed:
                        return
                    if self._wakeups == seen:
                        self._commits.wait(poll_interval)

    def run_starts(self, run_id: str) -> list[Record]:
        """The records that start the run `run_id`, in seq order: its AgentRunStarted and, for a
        fork, the ForkedFrom before it. They name the stream its history lives in.

        The SQL backends answer from an index, so this costs the records found, not the log.
        """
        return [r for r in self.read_all(types=RUN_START_TYPES) if r.data.get("run_id") == run_id]

    def approval_records(self, approval_id: str, to_seq: int | None = None) -> list[Record]:
        """The records of approval `approval_id`'s history (up to `to_seq`), in seq order: every
        record of an approval event type whose data names it, whatever its stream.

        The SQL backends answer from an index, so this costs the records found, not the log.
        """
        return [
            r
            for r in self.read_all(to_seq=to_seq, types=APPROVAL_TYPES)
            if r.data.get("approval_id") == approval_id
        ]

    def checkpoint(self) -> None:
        """Make the database file whole by itself (a plain copy of it has every commit); a
        no-op for a backend that keeps no write-ahead file beside it."""

    def seqs_containing(self, text: str, limit: int = 200) -> list[int]:
        """The seqs of the newest records (at most `limit`) whose data holds `text`, ignoring
        ASCII case. A scan of the payloads, not an index: it costs the log's size."""
        needle = text.lower()
        found = [r.seq for r in self.read_all() if needle in orjson.dumps(r.data).decode().lower()]
        return found[::-1][:limit]

    def seq_at(self, when: datetime) -> int:
        """The last seq recorded at or before `when` (0 if none), by a binary search over seq.

        recorded_at never decreases along seq, so the records up to a moment are a prefix of
        the log: about log2(head) point reads, whatever the log's size.
        """
        target = to_micros(when)
        lo, hi = 0, self.head().seq  # the answer is in [lo, hi]; seq lo is at or before `when`
        while lo < hi:
            mid = (lo + hi + 1) // 2
            rows = self._rows_after(mid - 1, 1, mid)
            if rows and rows[0][8] <= target:
                lo = mid
            else:
                hi = mid - 1
        return lo

    def verify(
        self, anchor: Head | tuple[int, str] | None = None, progress: Callable[[int], object] | None = None
    ) -> VerifyResult:
        """Walk the whole chain; with an anchor kept elsewhere also catch truncation and rewrites."""
        if anchor is not None and not isinstance(anchor, Head):
            anchor = Head(int(anchor[0]), str(anchor[1]))
        rows = (row for page in self._pages(0, None) for row in page)
        return walk_chain(rows, self._hasher, anchor, progress)

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        """Close the log; waiting followers end, later calls raise LogClosedError."""
        self._closed = True
        with self._commits:
            self._commits.notify_all()
        with self._cond:
            while self._leader:
                self._cond.wait()
            self._close_backend()

    @abc.abstractmethod
    def _close_backend(self) -> None: ...

    @property
    def closed(self) -> bool:
        return self._closed

    def _check_open(self) -> None:
        if self._closed:
            raise LogClosedError(f"{self.url}: the log is closed")

    def __enter__(self) -> EventLog:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.url}>"
