"""Reading only some record types: the filter runs in the database, not in Python."""

from __future__ import annotations

from collections.abc import Iterator

from ._append import Row
from ._log import PAGE, EventLog
from ._sqlreads import COLUMNS, SQLReads


def typed_pages(
    log: EventLog, types: frozenset[str], after_seq: int, to_seq: int | None
) -> Iterator[list[Row]]:
    """Pages of the rows of `types` after `after_seq` up to `to_seq`, in seq order.

    A reader that wants a few types of a long range (time travel of some views) skips the
    others without building them: on the SQL backends the database filters them out.
    """
    if not isinstance(log, SQLReads):
        for page in log._pages(after_seq, to_seq):
            yield [row for row in page if row[3] in types]
        return
    names = sorted(types)
    marks = ",".join("?" * len(names))
    query = log._sql(
        f"SELECT {COLUMNS} FROM events WHERE seq > ? AND seq <= ? AND type IN ({marks}) ORDER BY seq LIMIT ?"
    )
    hi = to_seq if to_seq is not None else 2**62
    while True:
        log._check_open()
        rows = log._query(query, (after_seq, hi, *names, PAGE))
        if rows:
            yield rows
        if len(rows) < PAGE:
            return
        after_seq = rows[-1][0]
