"""The codec between stored records and catalogue events (orjson, upcasting on read)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from ._catalogue import _CATALOGUE, Event, entry, upcast
from ._record import NewEvent, Record, new_event_id


def encode(event: Event, *, meta: dict[str, Any] | None = None, event_id: str | None = None) -> NewEvent:
    """The NewEvent that stores a catalogue event."""
    type_name, schema, data = event_fields(event)
    return NewEvent(
        type=type_name,
        data=data,
        meta=meta or {},
        event_id=event_id or new_event_id(),
        schema=schema,
    )


def event_fields(event: Event) -> tuple[str, int, dict[str, Any]]:
    """A catalogue event's type name, schema and data, as `encode` stores them."""
    e = entry(type(event).type_name)
    return e.cls.type_name, e.cls.schema, {name: getattr(event, name) for name in e.fields}


def decode(record: Record) -> Event:
    """The catalogue event stored in `record`, upcast to the current schema."""
    e = _CATALOGUE.get(record.type)
    # The common case, inline: a read decodes every record, and the calls cost a third as
    # much as building the event.
    if e is not None and record.schema == e.cls.schema and not (e.datetimes or e.tuples):
        return e.cls(**record.data)
    return decode_data(record.type, record.schema, record.data)


def decode_data(type_name: str, schema: int, data: dict[str, Any]) -> Event:
    e = _CATALOGUE.get(type_name) or entry(type_name)  # one call fewer per record read
    if schema != e.cls.schema:
        data = upcast(type_name, schema, e.cls.schema, data)
    if e.datetimes or e.tuples:
        data = dict(data)
        for name in e.datetimes:
            value = data.get(name)
            if isinstance(value, str):
                data[name] = _parse_datetime(value)
        for name in e.tuples:
            value = data.get(name)
            if isinstance(value, list):
                data[name] = tuple(value)
    return e.cls(**data)


def _parse_datetime(value: str) -> datetime:
    # orjson writes UTC as "Z"; fromisoformat accepts it from Python 3.11 on.
    return datetime.fromisoformat(value)
