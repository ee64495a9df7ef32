"""Records a reader skipped: they do not fit the catalogue, or a fold could not apply them.

A reader never dies on a stored record. It folds only what `fit_record` accepts and notes
the rest here, with the errors a bad record can raise while it is applied; whoever shows
the reader's answer also says how many records it left out.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Iterator

from ._conformance import KEEP_FINDINGS, Finding, fit_record
from ._errors import EventLogError, OffCatalogueError
from ._record import Record
from ._shape import quoted

# What a bad record can raise in a fold: a missing key, a value of the wrong type or form,
# and the log's own errors (the codec's UnknownEventType, OffCatalogueError). Anything else
# is a bug in the fold and propagates.
RECORD_ERRORS: tuple[type[Exception], ...] = (KeyError, TypeError, ValueError, EventLogError)
# Distinct seqs a tally remembers, so that a record met by several folds counts once; past
# it the count is a lower bound (a tally's memory stays bounded on any log).
REMEMBERED = 10_000
LOGGER = logging.getLogger("flightlog.records")


class Unreadable:
    """A thread-safe tally of skipped records: how many (each seq once) and the first few.

    With `logged`, each record is also logged once as a warning (logger `flightlog.records`)
    when first noted: for readers whose answers nobody shows a count with (actors, say).
    """

    def __init__(self, *, logged: bool = False) -> None:
        self._lock = threading.Lock()
        self._seqs: set[int] = set()
        self._first: list[Finding] = []
        self._overflowed = False
        self._logger = LOGGER if logged else None

    def note(self, record: Record, error: BaseException | str) -> None:
        """Count `record` as skipped because of `error` (an exception or a reason)."""
        if isinstance(error, OffCatalogueError):
            reason = error.reason
        elif isinstance(error, BaseException):
            reason = f"{quoted(record.type)}: {type(error).__name__}: {quoted(error)}"
        else:
            reason = error
        with self._lock:
            if record.seq in self._seqs:
                return
            if len(self._seqs) >= REMEMBERED:
                self._overflowed = True
                return
            self._seqs.add(record.seq)
            finding = Finding(record.seq, record.stream, record.type, reason)
            if len(self._first) < KEEP_FINDINGS:
                self._first.append(finding)
        if self._logger is not None:
            self._logger.warning(
                "flightlog: skipped seq %d (%s): %s", record.seq, quoted(record.stream), reason
            )

    @property
    def count(self) -> int:
        """How many distinct records were skipped (at least, once past REMEMBERED)."""
        with self._lock:
            return len(self._seqs)

    @property
    def first(self) -> tuple[Finding, ...]:
        with self._lock:
            return tuple(self._first)

    def summary(self) -> str:
        """One line: how many records were skipped and the first few (seq and why); "" if none."""
        with self._lock:
            count, first, more = len(self._seqs), list(self._first), self._overflowed
        if not count:
            return ""
        many = f"more than {count}" if more else str(count)
        return (
            f"{many} record(s) could not be read and were left out: "
            + "; ".join(map(str, first))
            + ("; ..." if count > len(first) else "")
        )


def readable(records: Iterable[Record], unreadable: Unreadable) -> Iterator[Record]:
    """The records that fit the catalogue (upcast to its current schemas); the rest noted in `unreadable`."""
    for record in records:
        try:
            fitted = fit_record(record)
        except OffCatalogueError as e:
            unreadable.note(record, e)
            continue
        yield fitted
