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


class RecentCommits:
    """Consecutive records committed by this process, the newest KEEP to 2 * KEEP of them;
    thread-safe."""

    def __init__(self, keep: int = KEEP) -> None:
        self._keep = keep
        self._lock = threading.Lock()
        self._records: list[Record] = []

    def add(self, records: Iterable[Record]) -> None:
        """Note records just committed, in seq order; records at old seqs (an idempotent
        retry's originals) are not new and are left out."""
        records = list(records)
        if not records:
            return
        with self._lock:
            kept = self._records
            nxt = kept[-1].seq + 1 if kept else None
            if nxt is not None and [r.seq for r in records] == list(range(nxt, nxt + len(records))):
                kept.extend(records)  # the common case: one group, continuing the window
                records = []
            for record in records:
                last = kept[-1].seq if kept else None
                if last is not None and record.seq <= last:
                    continue
                if last is not None and record.seq != last + 1:
                    kept = []  # a gap: someone else committed in between
                kept.append(record)
            if len(kept) > 2 * self._keep:  # trimmed now and then, not at every commit
                del kept[: len(kept) - self._keep]
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
