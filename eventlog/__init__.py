"""The append-only, hash-chained event log: flightlog's only source of truth."""

# Layering: eventlog is the bottom layer. It imports nothing from projections, actors or
# tools (a test enforces this); everything else builds on it.

from . import events
from ._catalogue import Event, upcast_record
from ._clock import Clock, ManualClock, SystemClock, from_micros, to_micros
from ._codec import decode, encode
from ._conformance import OWNED_CATEGORIES, CatalogueCheck, Finding, check_catalogue, fit_record, record_fault
from ._cursors import Cursor, CursorStore, cursor_store
from ._errors import (
    ConcurrencyError,
    CorruptDatabaseError,
    DiskFullError,
    EventLogError,
    EventShapeError,
    IdempotencyConflict,
    ImportRefusedError,
    LogClosedError,
    NotALogError,
    OffCatalogueError,
    ReadOnlyDatabaseError,
    SnapshotsUnsupported,
    StorageError,
    StreamNameError,
    UnknownEventType,
)
from ._log import EventLog
from ._open import open_log
from ._record import (
    ANY,
    APPROVAL_TYPES,
    EXISTS,
    GENESIS_HASH,
    NO_STREAM,
    Expect,
    ExpectedVersion,
    Head,
    NewEvent,
    Record,
    VerifyResult,
)
from ._sessions import SessionRow, SessionStore, session_store
from ._snapshot import RunCheckpointRow, Snapshot, SnapshotStore
from ._snapshots import snapshot_store
from ._unreadable import RECORD_ERRORS, Unreadable, readable

__all__ = [
    "ANY",
    "APPROVAL_TYPES",
    "EXISTS",
    "GENESIS_HASH",
    "NO_STREAM",
    "OWNED_CATEGORIES",
    "RECORD_ERRORS",
    "CatalogueCheck",
    "Clock",
    "ConcurrencyError",
    "CorruptDatabaseError",
    "Cursor",
    "CursorStore",
    "DiskFullError",
    "Event",
    "EventLog",
    "EventLogError",
    "EventShapeError",
    "Expect",
    "ExpectedVersion",
    "Finding",
    "Head",
    "IdempotencyConflict",
    "ImportRefusedError",
    "LogClosedError",
    "ManualClock",
    "NewEvent",
    "NotALogError",
    "OffCatalogueError",
    "ReadOnlyDatabaseError",
    "Record",
    "RunCheckpointRow",
    "SessionRow",
    "SessionStore",
    "Snapshot",
    "SnapshotStore",
    "SnapshotsUnsupported",
    "StorageError",
    "StreamNameError",
    "SystemClock",
    "UnknownEventType",
    "Unreadable",
    "VerifyResult",
    "check_catalogue",
    "cursor_store",
    "decode",
    "encode",
    "events",
    "fit_record",
    "from_micros",
    "open_log",
    "readable",
    "record_fault",
    "session_store",
    "snapshot_store",
    "to_micros",
    "upcast_record",
]
