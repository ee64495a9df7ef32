"""Backend-independent pieces of an append: encoding, chaining and idempotent retries."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import orjson

from ._catalogue import _CATALOGUE, Event, is_catalogued
from ._chain import Hasher
from ._codec import encode, event_fields
from ._conformance import fit_record
from ._errors import ConcurrencyError, EventShapeError, IdempotencyConflict, OffCatalogueError
from ._record import ExpectedVersion, NewEvent, Record, event_key, new_event_keys

_SORT = orjson.OPT_SORT_KEYS
_NO_META = orjson.dumps({}, option=_SORT)


@dataclass(slots=True)
class EncodedEvent:
    """An event whose data and meta are already canonical JSON bytes."""

    type: str
    schema: int
    data_json: bytes
    meta_json: bytes
    event_id: str
    event_key: bytes | str  # how a backend with binary ids stores it (see _record.event_key)


@dataclass(slots=True)
class AppendRequest:
    """One caller's append, waiting in the group-commit queue."""

    stream: str
    events: list[EncodedEvent]
    expect: ExpectedVersion
    result: list[Record] | None = None
    error: BaseException | None = None
    done: bool = False
    # Held while the caller waits; released when the request is done or the caller must lead.
    wake: threading.Lock | None = None
    promoted: bool = False
    # The next waiter of the same group, woken by this caller once it is awake itself.
    chain: threading.Lock | None = None
    abandoned: bool = False  # its caller stopped waiting (an interrupt)
    # Queued by the caller of the request before it (append_many): not another caller.
    joined: bool = False


def right_sized(data: bytes) -> bytes:
    """A copy of `data` in a buffer of its own size, for bytes that are kept.

    orjson (3.12 and later) returns its output in the buffer it wrote into, ~4 KiB however
    short the text (tests/eventlog/test_json_buffers.py); the copy costs ~0.35 µs (timeit).
    """
    return bytes(memoryview(data))


def meta_bytes(meta: Mapping[str, Any] | None) -> bytes:
    """The canonical JSON of an append's `meta` (None: `{}`), as a NewEvent's is stored.

    Right-sized: every record of the append keeps it.
    """
    return _NO_META if not meta else right_sized(orjson.dumps(meta, option=_SORT))


def check_catalogue_shape(new: NewEvent) -> None:
    """A NewEvent named like a catalogue event must carry that event's fields, each of its type,
    at a schema this version knows (readers rely on it: `fit_record` checks what is stored)."""
    if not is_catalogued(new.type):
        return
    try:
        data = orjson.loads(orjson.dumps(new.data))  # as stored
        fit_record(Record(0, "", 0, new.type, int(new.schema), data, _NO_META, "", 0, "", ""))
    except OffCatalogueError as e:
        raise EventShapeError(new.type, e.reason) from e
    except (TypeError, ValueError) as e:
        raise EventShapeError(new.type, str(e)) from e


def encode_events(events: Iterable[NewEvent | Event], meta_json: bytes = _NO_META) -> list[EncodedEvent]:
    """The events as stored; `meta_json` (canonical JSON) is the meta of each catalogue `Event`
    (a NewEvent carries its own)."""
    out: list[EncodedEvent] = []
    ids: set[str] | None = None  # the ids so far, made once a NewEvent may repeat one
    keys: Iterator[bytes] | None = None
    batch = events if isinstance(events, list) else list(events)
    dumps = orjson.dumps
    for i, ev in enumerate(batch):
        if isinstance(ev, Event):
            # The bytes encode(ev) would give, without building the NewEvent in between,
            # inline: a batch append runs this once per event. A fresh id cannot repeat one
            # in the batch; it is noted in case a NewEvent later does.
            e = _CATALOGUE.get(type(ev).type_name)
            if e is None:
                type_name, schema, data = event_fields(ev)  # raises UnknownEventType
            else:
                type_name, schema, data = e.cls.type_name, e.cls.schema, e.data_of(ev)
            if keys is None:
                keys = iter(new_event_keys(len(batch) - i))
            key = next(keys)
            event_id = f"{key[:4].hex()}-{key[4:10].hex('-', 2)}-{key[10:].hex()}"  # uuid_text
            if ids is not None:
                ids.add(event_id)
            out.append(EncodedEvent(type_name, schema, dumps(data, option=_SORT), meta_json, event_id, key))
            continue
        new = ev if isinstance(ev, NewEvent) else encode(ev)
        if not isinstance(new, NewEvent):
            raise TypeError(f"cannot append {type(ev).__name__}: not a NewEvent or catalogue event")
        if ids is None:
            ids = {e.event_id for e in out}
        # Caught here, not by UNIQUE(event_id): that would fail the whole group-commit transaction.
        if str(new.event_id) in ids:
            raise ValueError(f"event_id {new.event_id} appears twice in one batch")
        event_id = str(new.event_id)
        ids.add(event_id)
        check_catalogue_shape(new)
        out.append(
            EncodedEvent(
                new.type,
                int(new.schema),
                dumps(new.data, option=_SORT),
                meta_bytes(new.meta),  # every record of it keeps its meta bytes
                event_id,
                event_key(event_id),
            )
        )
    return out


Row = tuple[int, str, int, str, int, bytes, bytes, str, int, str, str]


def chain_rows(
    stream: str,
    start_version: int,
    events: Sequence[EncodedEvent],
    head_seq: int,
    head_hash: str,
    recorded_us: int,
    hasher: Hasher,
) -> list[Row]:
    """The rows to insert for `events`, chained onto (head_seq, head_hash)."""
    rows: list[Row] = []
    seq, prev = head_seq, head_hash
    version = start_version
    dumps = orjson.dumps
    for ev in events:
        seq += 1
        version += 1
        type_name, schema, data, meta, event_id = ev.type, ev.schema, ev.data_json, ev.meta_json, ev.event_id
        # canonical_bytes, inline (an append runs this once per event); test_chain checks both agree.
        header = dumps([seq, stream, version, type_name, schema, event_id, recorded_us])
        h = hasher(prev, header + b"\x1e" + data + b"\x1e" + meta)
        rows.append((seq, stream, version, type_name, schema, data, meta, event_id, recorded_us, prev, h))
        prev = h
    return rows


def rows_to_records(rows: Iterable[Row]) -> list[Record]:
    loads = orjson.loads
    # tuple.__new__ builds the Record without NamedTuple's Python-level __new__.
    return [
        _new_tuple(Record, (s, st, v, t, sc, loads(d), m if type(m) is bytes else bytes(m), e, r, p, h))
        for s, st, v, t, sc, d, m, e, r, p, h in rows
    ]


_new_tuple = tuple.__new__


def resolve_retry(stream: str, events: Sequence[EncodedEvent], stored: dict[str, Row]) -> list[Record] | None:
    """Match a re-append against the stored rows with the same event ids.

    Returns the original records when every event is already stored with the same content,
    None when none of them is stored, and raises IdempotencyConflict otherwise.
    """
    if not stored:
        return None
    matched: list[Row] = []
    for ev in events:
        row = stored.get(ev.event_id)
        if row is None:
            raise IdempotencyConflict(
                ev.event_id if matched else next(iter(stored)),
                "only part of the batch is stored",
            )
        if row[1] != stream:
            raise IdempotencyConflict(ev.event_id, f"stored in stream {row[1]!r}")
        if row[3] != ev.type or bytes(row[5]) != ev.data_json or row[4] != ev.schema:
            raise IdempotencyConflict(ev.event_id, "type or data differ")
        if bytes(row[6]) != ev.meta_json:
            raise IdempotencyConflict(ev.event_id, "meta differs")
        matched.append(row)
    versions = [r[2] for r in matched]
    if versions != list(range(versions[0], versions[0] + len(versions))):
        raise IdempotencyConflict(events[0].event_id, "stored events are not one batch in this order")
    return rows_to_records(matched)


def settle_refused(req: AppendRequest, version: int, retry: Callable[[], list[Record] | None]) -> None:
    """Settle a request whose expected version failed: the original records of an idempotent
    retry, or a ConcurrencyError; an IdempotencyConflict is this caller's error, not the group's."""
    try:
        req.result = retry()
        if req.result is None:
            req.error = ConcurrencyError(req.stream, req.expect, version)
    except IdempotencyConflict as e:
        req.error = e


def callers(requests: list[AppendRequest]) -> int:
    """How many callers queued these requests (an append_many's requests are one caller's)."""
    return sum(1 for r in requests if not r.joined)
