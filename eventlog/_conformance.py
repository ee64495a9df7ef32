"""Whether a stored record fits the event catalogue: what import refuses and verify reports.

A record of a catalogue type fits when its schema is the catalogue's or older with upcasters
up to it (never newer: a newer flightlog wrote that) and its data, upcast, is exactly the
event's fields, each of its declared type (`_shape`). A type outside the catalogue is a
user's own event (`deploy-42` / `DeployRequested`): it fits in any stream but flightlog's
own, whose categories are OWNED_CATEGORIES. Every record's data and meta are JSON objects.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple

import orjson

from ._catalogue import _CATALOGUE, upcast_record
from ._errors import OffCatalogueError, StreamNameError, UnknownEventType
from ._record import Record, check_stream_name
from ._shape import FITS, describe, quoted, shape_of

# The stream categories flightlog's actors write (`<category>-<id>`): every record in them
# must be a catalogue event. Forks live in `controller-fork-<id>`, the broker in `broker-main`,
# the operators' credentials in `operators-main`.
OWNED_CATEGORIES = frozenset(
    {"approval", "broker", "controller", "operators", "project", "run", "session", "tooloverrides"}
)
KEEP_FINDINGS = 5  # findings a check keeps to show (it counts them all)


class Finding(NamedTuple):
    """One record that does not fit the catalogue, and why."""

    seq: int
    stream: str
    type: str
    reason: str

    def __str__(self) -> str:
        return f"seq {self.seq}: {self.reason}"


def fit_record(record: Record) -> Record:
    """`record` with its data at its type's current schema; OffCatalogueError if it does not fit.

    Readers call it on every record they fold, so it checks what a fold relies on (the
    data) and no more: `record_fault` also checks the stream name and the meta.
    """
    # The common case first, in a few lookups: a catalogue event as this version writes it.
    data = record.data
    e = _CATALOGUE.get(record.type)
    if e is not None and type(data) is dict and record.schema == e.schema:
        fits = FITS.get(e.cls)
        if fits is not None and fits(data):
            return record
    return _fit(record)


def _fit(record: Record) -> Record:
    """`fit_record` for the rest: data that is no object, types outside the catalogue, older
    schemas (upcast, then checked), shapes not derived yet, and the reason of a misfit."""
    data = record.data
    if type(data) is not dict:
        raise _off(record, f"its data must be a JSON object, got {describe(data)}")
    e = _CATALOGUE.get(record.type)
    if e is None:
        category = record.stream.partition("-")[0]
        if category in OWNED_CATEGORIES:
            raise _off(
                record,
                f"type {quoted(record.type)} is not in the event catalogue, and {category}-<id> streams "
                "hold flightlog's events only",
            )
        return record
    cls = e.cls
    if record.schema != cls.schema:
        record = _upcast(record, cls.schema)
    fault = shape_of(cls, record.type).fault(record.data)
    if fault:
        raise _off(record, f"{record.type}: {fault}")
    return record


def record_fault(record: Record) -> str:
    """Why a stored record does not fit the catalogue (or is not a well-formed record), or ""."""
    try:
        check_stream_name(record.stream)
    except StreamNameError:
        return f"stream {quoted(record.stream)} is not <category>-<id> (a lower-case category)"
    fault = _meta_fault(record.meta_json)
    if fault:
        return fault
    try:
        fit_record(record)
    except OffCatalogueError as e:
        return e.reason
    return ""


@dataclass(frozen=True, slots=True)
class CatalogueCheck:
    """Records checked against the event catalogue: how many, how many do not fit, the first few."""

    checked: int
    off: int = 0
    first: tuple[Finding, ...] = ()

    @property
    def ok(self) -> bool:
        return self.off == 0

    def summary(self) -> str:
        """One line: all fit, or how many do not and the first few (seq and why)."""
        if self.ok:
            return f"all {self.checked} record(s) fit the event catalogue"
        shown = "; ".join(map(str, self.first))
        more = f"; {self.off - len(self.first)} more" if self.off > len(self.first) else ""
        return f"{self.off} record(s) do not fit the event catalogue: {shown}{more}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "checked": self.checked,
            "off_catalogue": self.off,
            "first": [f._asdict() for f in self.first],
        }


def check_catalogue(
    records: Iterable[Record], progress: Callable[[int], object] | None = None
) -> CatalogueCheck:
    """Check every record against the catalogue (`record_fault`); progress every 10,000 records."""
    checked = off = 0
    first: list[Finding] = []
    for record in records:
        reason = record_fault(record)
        if reason:
            off += 1
            if len(first) < KEEP_FINDINGS:
                first.append(Finding(record.seq, record.stream, record.type, reason))
        checked += 1
        if progress is not None and checked % 10_000 == 0:
            progress(checked)
    if progress is not None:
        progress(checked)
    return CatalogueCheck(checked, off, tuple(first))


def _upcast(record: Record, current: int) -> Record:
    schema = record.schema
    if type(schema) is not int or schema < 1:
        shown = schema if type(schema) is int else quoted(schema)
        raise _off(record, f"{record.type} schema {shown} is not a schema number")
    if schema > current:
        raise _off(
            record,
            f"{record.type} schema {schema} is newer than this flightlog knows (schema {current}): "
            "a newer flightlog wrote it",
        )
    try:
        return upcast_record(record)
    except UnknownEventType:
        raise _off(record, f"{record.type} schema {schema} has no upcaster to schema {current}") from None
    except (KeyError, TypeError, ValueError) as e:
        reason = f"{record.type} schema {schema} does not upcast to schema {current} ({type(e).__name__})"
        raise _off(record, reason) from None


def _meta_fault(meta_json: bytes) -> str:
    try:
        meta = orjson.loads(meta_json)
    except orjson.JSONDecodeError:
        return "its meta is not JSON"
    return "" if type(meta) is dict else f"its meta must be a JSON object, got {describe(meta)}"


def _off(record: Record, reason: str) -> OffCatalogueError:
    return OffCatalogueError(record.seq, record.stream, record.type, reason)
