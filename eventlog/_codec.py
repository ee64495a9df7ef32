"""The codec between stored records and catalogue events (orjson, upcasting on read)."""

from __future__ import annotations

from typing import Any

from ._catalogue import _CATALOGUE, Event, entry, stored_datetime, stored_tuple, upcast
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
    return e.cls.type_name, e.cls.schema, e.data_of(event)


def decode(record: Record) -> Event:
    """The catalogue event stored in `record`, upcast to the current schema."""
    e = _CATALOGUE.get(record.type)
    # The common case, inline: a read decodes every record, and the calls cost a third as
    # much as building the event.
    if e is not None and record.schema == e.schema and (make := e.make) is not None:
        made = make(record.data)
        if made is not None:
            return made
    return decode_data(record.type, record.schema, record.data)


def decode_data(type_name: str, schema: int, data: dict[str, Any]) -> Event:
    e = _CATALOGUE.get(type_name) or entry(type_name)  # one call fewer per record read
    if schema != e.cls.schema:
        data = upcast(type_name, schema, e.cls.schema, data)
    if e.datetimes or e.tuples:
        data = dict(data)
        for name in e.datetimes:
            if name in data:
                data[name] = stored_datetime(data[name])
        for name in e.tuples:
            if name in data:
                data[name] = stored_tuple(data[name])
    return e.cls(**data)
