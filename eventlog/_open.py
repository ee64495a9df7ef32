"""open_log: the one way to open a log, whatever the backend."""

from __future__ import annotations

import os

from ._clock import Clock
from ._log import EventLog


def open_log(
    target: str | os.PathLike[str],
    *,
    clock: Clock | None = None,
    hmac_key: bytes | None = None,
    synchronous: str = "FULL",
    readonly: bool = False,
) -> EventLog:
    """Open (creating if needed) the log at a path, ":memory:", or a "postgresql://" URL.

    With `readonly`, the log must exist already: nothing is created or migrated, and every
    write (append, import, snapshot) raises ReadOnlyDatabaseError.
    """
    url = os.fspath(target)
    if url.startswith(("postgresql://", "postgres://")):
        from ._postgres import PostgresLog

        return PostgresLog(url, clock=clock, hmac_key=hmac_key, readonly=readonly)
    from ._sqlite import SQLiteLog

    return SQLiteLog(url, clock=clock, hmac_key=hmac_key, synchronous=synchronous, readonly=readonly)
