"""Importing stored records as they are: the same seq, versions, event ids, times and hashes.

An import continues the chain where the log ends: each record must carry the next seq, the
head's hash as its prev_hash, the next version of its stream, a time no earlier than the
head's, (when verifying) a hash that recomputes from its content, and content that fits the
event catalogue (`record_fault`: a crafted record with a recomputed chain is still refused).
Records are written in batches, one transaction each; a batch that breaks any rule is not
written at all.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Iterator
from contextlib import AbstractContextManager
from typing import Any

import orjson

from ._append import Row
from ._chain import Hasher, canonical_bytes
from ._conformance import record_fault
from ._errors import EventLogError, ImportRefusedError
from ._record import GENESIS_HASH, Head, Record, check_stream_name
from ._sqlreads import COLUMNS

IMPORT_BATCH = 1000  # records per transaction

Query = Callable[[str, tuple[Any, ...]], list[Any]]


class ImportTarget:
    """The reads and the insert of one import session, over a backend's connection.

    SQL is written with `?` marks; `mark` is the backend's placeholder.
    """

    def __init__(self, query: Query, insert: Callable[[str, list[Any]], object] | None, mark: str = "?"):
        self._query = query
        self._insert = insert
        self._mark = mark
        self.last_seq = 0  # the last seq inserted in this session (0: none)

    def _sql(self, text: str) -> str:
        return text if self._mark == "?" else text.replace("?", self._mark)

    def head(self) -> tuple[int, str, int]:
        """The log's last (seq, hash, recorded_us), or (0, genesis, 0) when it is empty."""
        rows = self._query("SELECT seq, hash, recorded_at FROM events ORDER BY seq DESC LIMIT 1", ())
        return (int(rows[0][0]), str(rows[0][1]), int(rows[0][2])) if rows else (0, GENESIS_HASH, 0)

    def stream_version(self, stream: str) -> int:
        rows = self._query(self._sql("SELECT MAX(version) FROM events WHERE stream = ?"), (stream,))
        return int(rows[0][0] or 0) if rows else 0

    def stored(self, event_ids: list[str]) -> dict[str, int]:
        """Which of these event ids the log already holds, and at which seq."""
        marks = ",".join("?" * len(event_ids))
        query = self._sql(f"SELECT event_id, seq FROM events WHERE event_id IN ({marks})")
        return {str(e): int(s) for e, s in self._query(query, tuple(event_ids))}

    def insert(self, rows: list[Row]) -> None:
        assert self._insert is not None, "a dry run never inserts"
        marks = ",".join("?" * 11)
        self._insert(self._sql(f"INSERT INTO events ({COLUMNS}) VALUES ({marks})"), rows)
        self.last_seq = rows[-1][0]


class _Refused(Exception):
    def __init__(self, seq: int, reason: str) -> None:
        super().__init__(reason)
        self.seq = seq
        self.reason = reason


class ChainCheck:
    """Follows the chain through the records to import, from the end of the log they continue."""

    def __init__(self, head: tuple[int, str, int], hasher: Hasher, verify: bool) -> None:
        self.seq, self.hash, self.recorded_us = head
        self.start = self.seq
        self.hasher = hasher
        self.verify = verify
        self.versions: dict[str, int] = {}

    def rows(self, records: list[Record], target: ImportTarget) -> list[Row]:
        """The rows of `records`, checked in order; raises _Refused at the first bad one."""
        rows: list[Row] = []
        seen: dict[str, int] = {}
        for record in records:
            row = self._row(record, target)
            if row[7] in seen:
                raise _Refused(row[0], f"event_id {row[7]} appears twice (also at seq {seen[row[7]]})")
            seen[row[7]] = row[0]
            rows.append(row)
        stored = target.stored(list(seen)) if seen else {}
        if stored:
            first = min(stored, key=lambda event_id: seen[event_id])
            raise _Refused(seen[first], f"event_id {first} is already stored (at seq {stored[first]})")
        return rows

    def _row(self, r: Record, target: ImportTarget) -> Row:
        seq = r.seq
        if seq != self.seq + 1:
            if self.seq == self.start:
                raise _Refused(
                    seq,
                    f"the log ends at seq {self.seq} but the records start at seq {seq}: import into an "
                    "empty log, or into one that ends where the records start",
                )
            if seq > self.seq + 1:
                raise _Refused(self.seq + 1, f"seq {self.seq + 1} is missing (the next record is seq {seq})")
            raise _Refused(seq, f"seq {seq} comes again after seq {self.seq}")
        if r.prev_hash != self.hash:
            where = "the log's head" if self.seq == self.start else "the previous record"
            raise _Refused(seq, f"its prev_hash is not the hash of seq {self.seq} ({where})")
        try:
            check_stream_name(r.stream)
            data_json = orjson.dumps(r.data, option=orjson.OPT_SORT_KEYS)
        except (EventLogError, TypeError, ValueError) as e:
            raise _Refused(seq, str(e)) from None
        version = self.versions.get(r.stream)
        if version is None:
            version = target.stream_version(r.stream)
        if r.version != version + 1:
            reason = f"stream {r.stream!r} is at version {version}, the record is version {r.version}"
            raise _Refused(seq, reason)
        if r.recorded_us < self.recorded_us:
            raise _Refused(seq, "recorded_at is earlier than the previous record's")
        meta_json = bytes(r.meta_json)
        if self.verify:
            body = canonical_bytes(
                seq, r.stream, r.version, r.type, r.schema, data_json, meta_json, r.event_id, r.recorded_us
            )
            if self.hasher(self.hash, body) != r.hash:
                raise _Refused(seq, "hash does not match the record's content")
        fault = record_fault(r)
        if fault:
            raise _Refused(seq, fault)
        self.seq, self.hash, self.recorded_us = seq, r.hash, r.recorded_us
        self.versions[r.stream] = r.version
        return (seq, r.stream, r.version, r.type, r.schema, data_json, meta_json, r.event_id,
                r.recorded_us, r.prev_hash, r.hash)  # fmt: skip


def _batches(records: Iterable[Record], size: int) -> Iterator[list[Record]]:
    it = iter(records)
    while batch := list(itertools.islice(it, size)):
        yield batch


def import_records(
    head_of: Callable[[], Head],
    hasher: Hasher,
    records: Iterable[Record],
    session: Callable[[bool], AbstractContextManager[ImportTarget]],
    *,
    verify: bool,
    batch: int,
    progress: Callable[[int], object] | None,
    dry_run: bool,
) -> Head:
    """Check and write `records` in batches through `session(dry_run)`; the log's new head.

    `head_of` reads the log's head; `hasher` is the log's chain hasher.
    """
    if batch < 1:
        raise ValueError(f"batch must be at least 1, got {batch}")
    check: ChainCheck | None = None
    done = imported = 0
    head = head_of().seq
    try:
        if dry_run:
            with session(True) as target:
                for chunk in _batches(records, batch):
                    check = check or ChainCheck(target.head(), hasher, verify)
                    check.rows(chunk, target)
                    done += len(chunk)
                    if progress is not None:
                        progress(done)
        else:
            for chunk in _batches(records, batch):
                with session(False) as target:
                    now = target.head()
                    if check is None:
                        check = ChainCheck(now, hasher, verify)
                    elif now[:2] != (check.seq, check.hash):
                        moved = f"another writer appended to the log (it is now at seq {now[0]})"
                        raise _Refused(chunk[0].seq, moved)
                    target.insert(check.rows(chunk, target))
                imported += len(chunk)
                head = check.seq
                if progress is not None:
                    progress(imported)
    except _Refused as e:
        raise ImportRefusedError(e.seq, e.reason, head=head, imported=imported) from None
    return Head(check.seq, check.hash) if check is not None else head_of()
