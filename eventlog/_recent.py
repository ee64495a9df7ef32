"""The records this process committed last, kept for its own readers of the log's tail.

The follower of a busy server reads back every commit just after it was made, to route it:
one SELECT and one JSON decode per record, for records the committing thread already holds.
The group-commit leader hands each committed group here, and `EventLog.read_all` serves a
read that starts inside this window from memory, then reads on from the database past its
end (another process's commits, or this process's not kept here). Only a run of consecutive
seqs is kept: a commit that does not continue it (another process wrote in between) starts
it again, so a read served from here holds exactly what the database holds at those seqs.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

from ._record import Record

# Records kept: KEEP to 2 * KEEP. The follower reads a few commits behind at most, so a short
# window serves nearly all its reads; 2,048 held ~20 MiB more in `bench soak --quick` (a
# record pins its decoded data), 256 about 2.5.
KEEP = 256
# And bytes of their text kept: KEEP_BYTES to 2 * KEEP_BYTES. A window of records counted
# only by number holds whatever they carry (512 reports of 1 MiB were half a GiB); a large
# record past it is read from the database like any other.
KEEP_BYTES = 4 << 20


class RecentCommits:
    """Consecutive records committed by this process, the newest KEEP to 2 * KEEP of them;
    thread-safe."""

    def __init__(self, keep: int = KEEP, keep_bytes: int = KEEP_BYTES) -> None:
        self._keep = keep
        self._keep_bytes = keep_bytes
        self._lock = threading.Lock()
        self._records: list[Record] = []
        self._bytes = 0  # the weight of `_records` (see `_weight`)

    def add(self, records: Iterable[Record]) -> None:
        """Note records just committed, in seq order; records at old seqs (an idempotent
        retry's originals) are not new and are left out."""
        records = list(records)
        if not records:
            return
        weight = sum(map(_weight, records))
        with self._lock:
            kept = self._records
            nxt = kept[-1].seq + 1 if kept else None
            if nxt is not None and [r.seq for r in records] == list(range(nxt, nxt + len(records))):
                kept.extend(records)  # the common case: one group, continuing the window
                self._bytes += weight
                records = []
            for record in records:
                last = kept[-1].seq if kept else None
                if last is not None and record.seq <= last:
                    continue
                if last is not None and record.seq != last + 1:
                    kept = []  # a gap: someone else committed in between
                    self._bytes = 0
                kept.append(record)
                self._bytes += _weight(record)
            # Trimmed now and then, not at every commit.
            if len(kept) > 2 * self._keep or self._bytes > 2 * self._keep_bytes:
                start, held = len(kept), 0
                while start > 0 and len(kept) - start < self._keep:
                    held += _weight(kept[start - 1])
                    if held > self._keep_bytes:
                        break
                    start -= 1
                del kept[:start]
                self._bytes = sum(map(_weight, kept))
            self._records = kept

    def after(self, after_seq: int, to_seq: int | None) -> list[Record]:
        """The kept records after `after_seq` (up to `to_seq`) if the window holds seq
        `after_seq + 1`; else none (read the database)."""
        with self._lock:
            kept = self._records
            if not kept:
                return []
            start = after_seq + 1 - kept[0].seq
            if start < 0 or start >= len(kept):
                return []
            end = len(kept) if to_seq is None else max(start, min(len(kept), to_seq + 1 - kept[0].seq))
            return kept[start:end]

    def clear(self) -> None:
        with self._lock:
            self._records = []
            self._bytes = 0


def _weight(record: Record) -> int:
    """About the bytes a record pins: its meta and the text of its data's top-level strings
    (where payloads are); a small constant for the rest."""
    data = record.data
    text = sum(len(v) for v in data.values() if type(v) is str) if type(data) is dict else 0
    return 256 + len(record.meta_json) + text
