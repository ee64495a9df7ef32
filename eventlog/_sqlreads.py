"""The read queries the SQL backends share; each backend supplies `_query` and its placeholder."""

from __future__ import annotations

import abc

from ._append import Row
from ._chain import record_from_row
from ._record import APPROVAL_FILTER, APPROVAL_TYPES, GENESIS_HASH, Head, Record

COLUMNS = "seq, stream, version, type, schema, data, meta, event_id, recorded_at, prev_hash, hash"
# Higher than any version a stream can reach: "to the end of the stream" in one query shape.
NO_UPPER_BOUND = 2**62
_APPROVAL_TYPES = frozenset(APPROVAL_TYPES)


class SQLReads(abc.ABC):
    """`_rows_after`, `_stream_rows`, `head` and `stream_version` over an `events` table."""

    PLACEHOLDER = "?"
    DATA_TEXT = "CAST(data AS TEXT)"  # the stored data as text, in this backend's SQL
    FIND = "instr"  # the position of a substring (0: absent), in this backend's SQL

    @abc.abstractmethod
    def _query(self, query: str, params: tuple[object, ...] = ()) -> list[Row]: ...

    def _sql(self, query: str) -> str:
        return query if self.PLACEHOLDER == "?" else query.replace("?", self.PLACEHOLDER)

    def _rows_after(self, after_seq: int, limit: int, to_seq: int | None) -> list[Row]:
        if to_seq is None:
            query = f"SELECT {COLUMNS} FROM events WHERE seq > ? ORDER BY seq LIMIT ?"
            return self._query(self._sql(query), (after_seq, limit))
        query = f"SELECT {COLUMNS} FROM events WHERE seq > ? AND seq <= ? ORDER BY seq LIMIT ?"
        return self._query(self._sql(query), (after_seq, to_seq, limit))

    def _records_after(
        self, after_seq: int, limit: int, to_seq: int | None, types: frozenset[str] | None
    ) -> tuple[list[Record], int | None]:
        """A page of records; with `types` the database skips the others (time travel of some
        views reads a few types of a long range without building the rest)."""
        if types is None:
            rows = self._rows_after(after_seq, limit, to_seq)
        else:
            rows = self._typed_rows_after(types, after_seq, limit, to_seq)
        return list(map(record_from_row, rows)), rows[-1][0] if len(rows) == limit else None

    def _typed_rows_after(
        self, types: frozenset[str], after_seq: int, limit: int, to_seq: int | None, columns: str = COLUMNS
    ) -> list[Row]:
        hi = to_seq if to_seq is not None else NO_UPPER_BOUND
        if types == _APPROVAL_TYPES:  # the filter word for word: the approvals' index answers
            query = (
                f"SELECT {columns} FROM events WHERE seq > ? AND seq <= ? AND {APPROVAL_FILTER} "
                "ORDER BY seq LIMIT ?"
            )
            return self._query(self._sql(query), (after_seq, hi, limit))
        names = sorted(types)
        marks = ",".join("?" * len(names))
        query = (
            f"SELECT {columns} FROM events WHERE seq > ? AND seq <= ? AND type IN ({marks}) "
            "ORDER BY seq LIMIT ?"
        )
        return self._query(self._sql(query), (after_seq, hi, *names, limit))

    def _stream_rows(self, stream: str, from_version: int, to_version: int | None, limit: int) -> list[Row]:
        hi = to_version if to_version is not None else NO_UPPER_BOUND
        query = (
            f"SELECT {COLUMNS} FROM events WHERE stream = ? AND version >= ? AND version <= ? "
            "ORDER BY version LIMIT ?"
        )
        return self._query(self._sql(query), (stream, from_version, hi, limit))

    def seqs_containing(self, text: str, limit: int = 200) -> list[int]:
        """The seqs of the newest records (at most `limit`) whose data holds `text`, ignoring
        ASCII case. A scan of the payloads in the database, not an index: it costs the log's
        size, and no record is decoded."""
        query = (
            f"SELECT seq FROM events WHERE {self.FIND}(lower({self.DATA_TEXT}), ?) > 0 "
            "ORDER BY seq DESC LIMIT ?"
        )
        return [row[0] for row in self._query(self._sql(query), (text.lower(), limit))]

    def head(self) -> Head:
        """The last seq and hash (seq 0 and the genesis hash for an empty log)."""
        rows = self._query("SELECT seq, hash FROM events ORDER BY seq DESC LIMIT 1")
        return Head(rows[0][0], rows[0][1]) if rows else Head(0, GENESIS_HASH)

    def stream_version(self, stream: str) -> int:
        """The stream's current version; 0 when it does not exist."""
        rows = self._query(self._sql("SELECT MAX(version) FROM events WHERE stream = ?"), (stream,))
        return int(rows[0][0] or 0)
