"""The eventlog exception tree.

EventLogError
├── ConcurrencyError        expected version did not match; nothing written
├── IdempotencyConflict     an event_id was reused with different content
├── UnknownEventType        a record's type is not in the catalogue (codec)
├── OffCatalogueError       a stored record does not fit the catalogue (also ValueError)
├── StreamNameError         a stream name is not `<category>-<id>` (also ValueError)
├── LogClosedError          the log was used after close()
├── SnapshotsUnsupported    the backend has no snapshot store (also NotImplementedError)
├── ImportRefusedError      imported records do not continue the chain; the batch was not written
└── StorageError            the database could not be opened, read or written
    ├── CorruptDatabaseError    not a database, or a damaged page
    ├── NotALogError            a database, but not a flightlog log (refused unchanged)
    ├── ReadOnlyDatabaseError   the file or its folder cannot be written
    └── DiskFullError           the disk filled up; the batch was rolled back
"""

from __future__ import annotations


class EventLogError(Exception):
    """Raised when the event log refuses or fails an operation."""


class ConcurrencyError(EventLogError):
    """Raised when an append's expected version does not match the stream's version."""

    def __init__(self, stream: str, expected: object, actual: int) -> None:
        super().__init__(f"stream {stream!r} is at version {actual}, expected {_describe(expected)}")
        self.stream = stream
        self.expected = expected
        self.actual = actual


class IdempotencyConflict(EventLogError):
    """Raised when an event_id already stored is appended again with different content."""

    def __init__(self, event_id: str, reason: str) -> None:
        super().__init__(f"event_id {event_id} already stored with different content: {reason}")
        self.event_id = event_id


class UnknownEventType(EventLogError):
    """Raised when a record's type has no class in the event catalogue."""

    def __init__(self, type_name: str) -> None:
        super().__init__(f"unknown event type {type_name!r}")
        self.type_name = type_name


class OffCatalogueError(EventLogError, ValueError):
    """Raised when a stored record does not fit the event catalogue: a schema this version does
    not know, data not of its event's shape, or a type not in the catalogue in flightlog's own
    streams. Readers skip such a record; import refuses it."""

    def __init__(self, seq: int, stream: str, type_name: str, reason: str) -> None:
        super().__init__(f"seq {seq} ({stream}): {reason}")
        self.seq = seq
        self.stream = stream
        self.type_name = type_name
        self.reason = reason


class EventShapeError(EventLogError, ValueError):
    """Raised when a NewEvent uses a catalogue type name but its data do not fit that event."""

    def __init__(self, type_name: str, reason: str) -> None:
        super().__init__(f"{type_name}: data do not match the catalogue event: {reason}")
        self.type_name = type_name


class StreamNameError(EventLogError, ValueError):
    """Raised when a stream name is not of the form `<category>-<id>`."""


class LogClosedError(EventLogError):
    """Raised when a closed log is used."""


class SnapshotsUnsupported(EventLogError, NotImplementedError):
    """Raised when a log's backend cannot store snapshots (views then always fold from seq 0)."""


class ImportRefusedError(EventLogError):
    """Raised when records to import do not continue the log's chain where it ends.

    `seq` is the first record refused, `head` the log's last seq afterwards and `imported`
    how many records were written before it: whole batches only, each in its own transaction.
    """

    def __init__(self, seq: int, reason: str, *, head: int, imported: int) -> None:
        done = (
            f"{imported} record(s) were imported before it, up to seq {head}"
            if imported
            else "nothing was imported"
        )
        super().__init__(f"import refused at seq {seq}: {reason}; {done}")
        self.seq = seq
        self.reason = reason
        self.head = head
        self.imported = imported


class StorageError(EventLogError):
    """Raised when the database cannot be opened, read or written; carries the path and cause."""

    def __init__(self, path: str, cause: str) -> None:
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause


class CorruptDatabaseError(StorageError):
    """Raised when the file is not a database or one of its pages is damaged."""


class NotALogError(StorageError):
    """Raised when a database holds another schema than flightlog's (read-only: or none); left unchanged."""

    def __init__(self, path: str) -> None:
        super().__init__(path, "not a flightlog log")
        self.args = (f"not a flightlog log: {path}",)

    def __str__(self) -> str:
        return f"not a flightlog log: {self.path}"


class ReadOnlyDatabaseError(StorageError):
    """Raised when the database or its folder cannot be written."""


class DiskFullError(StorageError):
    """Raised when the disk is full; the batch that hit it was rolled back."""


def _describe(expected: object) -> str:
    name = getattr(expected, "name", None)
    return str(name) if name else f"version {expected}"
