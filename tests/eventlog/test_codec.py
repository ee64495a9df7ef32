"""Codec round-trips: every catalogue event survives encode → append → read → decode.

Strategies are built from each event dataclass's type hints, so an event added to the
catalogue later is covered without touching this file; a hint the builder does not know
fails loudly instead of being skipped.
"""

from __future__ import annotations

import dataclasses
import types
import typing
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Optional

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eventlog
from eventlog import _catalogue, open_log
from eventlog.events import Event, catalogue, event

INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
# orjson writes NaN and infinities as null, so JSON can only carry finite floats.
FLOATS = st.floats(allow_nan=False, allow_infinity=False)
SCALARS: dict[Any, st.SearchStrategy[Any]] = {
    str: st.text(),
    bool: st.booleans(),
    int: INT64,
    float: FLOATS,
}
JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | INT64 | FLOATS | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
UNIONS = (typing.Union, types.UnionType)


def strategy_for(hint: Any) -> st.SearchStrategy[Any]:
    """The strategy for one field's type hint; TypeError for a hint the codec is not known to carry."""
    if hint in SCALARS:
        return SCALARS[hint]
    if hint is datetime:
        return st.datetimes(timezones=st.just(UTC))
    if hint is Any:
        return JSON
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in UNIONS:
        return st.one_of(*(st.none() if a is type(None) else strategy_for(a) for a in args))
    # Containers hold JSON values only: the codec restores top-level datetimes and tuples, not nested ones.
    if origin is tuple and len(args) == 2 and args[1] is Ellipsis and args[0] in SCALARS:
        return st.lists(SCALARS[args[0]], max_size=5).map(tuple)
    if origin is list and len(args) == 1 and (args[0] in SCALARS or args[0] is Any):
        return st.lists(strategy_for(args[0]), max_size=5)
    if origin is dict and len(args) == 2 and args[0] is str and (args[1] in SCALARS or args[1] is Any):
        return st.dictionaries(st.text(), strategy_for(args[1]), max_size=5)
    raise TypeError(f"no round-trip strategy for type hint {hint!r}")


def event_strategy(cls: type[Event]) -> st.SearchStrategy[Event]:
    """Instances of a catalogue event with every field drawn from its type hint."""
    hints = typing.get_type_hints(cls)
    fields = {}
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        try:
            fields[f.name] = strategy_for(hints[f.name])
        except TypeError as e:
            raise TypeError(f"{cls.__name__}.{f.name}: {e}") from None
    return st.builds(cls, **fields)


@event("CodecScalars")
@dataclass(frozen=True, slots=True)
class Scalars(Event):
    text: str
    count: int
    ratio: float
    flag: bool


@event("CodecTimes")
@dataclass(frozen=True, slots=True)
class Times(Event):
    at: datetime
    until: datetime | None
    since: Optional[datetime] = None  # noqa: UP045 - the typing.Optional spelling must work too


@event("CodecCollections", schema=3)
@dataclass(frozen=True, slots=True)
class Collections(Event):
    tags: tuple[str, ...]
    args: dict[str, Any]
    maybe_tags: tuple[str, ...] | None = None
    numbers: list[int] = dataclasses.field(default_factory=list)
    anything: Any = None


TEST_EVENTS = [Scalars, Times, Collections]
PRODUCT_EVENTS = {
    name: cls for name, cls in catalogue().items() if not cls.__module__.startswith(("tests.", "test_"))
}
NO_PRODUCT_EVENTS = pytest.param(
    None, marks=pytest.mark.skip(reason="the catalogue (eventlog.events) has no events yet")
)


@pytest.fixture(scope="module")
def memory_log():
    with open_log(":memory:") as log:
        yield log


def assert_round_trips(log: eventlog.EventLog, original: Event) -> None:
    stream = f"codec-{uuid.uuid4().hex}"
    written = log.append(stream, [original])
    (stored,) = log.read(stream)
    assert stored == written[0]
    assert (stored.type, stored.schema) == (type(original).type_name, type(original).schema)
    decoded = eventlog.decode(stored)
    assert type(decoded) is type(original)
    assert decoded == original
    for f in dataclasses.fields(original):  # type: ignore[arg-type]
        assert type(getattr(decoded, f.name)) is type(getattr(original, f.name)), f.name
    # The stored bytes are canonical: encoding the decoded event again stores identical data.
    assert eventlog.encode(decoded).data == eventlog.encode(original).data


ROUND_TRIP = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.mark.parametrize("cls", TEST_EVENTS, ids=lambda c: c.type_name)
@ROUND_TRIP
@given(data=st.data())
def test_test_events_round_trip(memory_log, cls, data):
    assert_round_trips(memory_log, data.draw(event_strategy(cls)))


@pytest.mark.parametrize(
    "cls", list(PRODUCT_EVENTS.values()) or [NO_PRODUCT_EVENTS], ids=lambda c: getattr(c, "type_name", "-")
)
@ROUND_TRIP
@given(data=st.data())
def test_every_catalogue_event_round_trips(memory_log, cls, data):
    assert_round_trips(memory_log, data.draw(event_strategy(cls)))


def slow_decode(record: eventlog.Record) -> Event:
    """What decode builds through the dataclass's own __init__ (the fast path's reference)."""
    e = _catalogue.entry(record.type)
    data = {
        name: _catalogue.stored_datetime(v)
        if name in e.datetimes
        else _catalogue.stored_tuple(v)
        if name in e.tuples
        else v
        for name, v in record.data.items()
    }
    return e.cls(**data)


@pytest.mark.parametrize(
    "cls", [*TEST_EVENTS, *PRODUCT_EVENTS.values()], ids=lambda c: getattr(c, "type_name", "-")
)
@ROUND_TRIP
@given(data=st.data())
def test_decode_builds_what_the_dataclass_init_builds(memory_log, cls, data):
    original = data.draw(event_strategy(cls))
    (record,) = memory_log.append(f"codec-{uuid.uuid4().hex}", [original])
    fast, reference = eventlog.decode(record), slow_decode(record)
    assert fast == reference
    assert repr(fast) == repr(reference)
    assert fast.__getstate__() == reference.__getstate__()  # every slot, in order
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        assert type(getattr(fast, f.name)) is type(getattr(reference, f.name)), f.name


def without(data: dict[str, Any], key: str) -> dict[str, Any]:
    return {k: v for k, v in data.items() if k != key}


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (
            lambda d: {k: v for k, v in d.items() if k != "count"},
            "missing 1 required positional argument: 'count'",
        ),
        (lambda d: {**d, "extra": 1}, "unexpected keyword argument 'extra'"),
        (
            lambda d: {**{k: v for k, v in d.items() if k != "count"}, "n": 1},
            "unexpected keyword argument 'n'",
        ),
        (lambda d: list(d.values()), "must be a mapping"),
    ],
    ids=["missing", "extra", "renamed", "not-a-dict"],
)
def test_data_that_do_not_fit_the_event_fail_as_the_dataclass_says(memory_log, change, message):
    (record,) = memory_log.append(f"codec-{uuid.uuid4().hex}", [Scalars("s", 1, 1.5, True)])
    bent = record._replace(data=change(record.data))
    with pytest.raises(TypeError, match=message):
        eventlog.decode(bent)


def test_the_catalogue_lists_the_test_events():
    # Guards the parametrization above: the builder really sees what @event registered.
    names = catalogue()
    for cls in TEST_EVENTS:
        assert names[cls.type_name] is cls


@pytest.fixture
def scratch_catalogue(monkeypatch):
    """Registrations made in the test are forgotten afterwards."""
    monkeypatch.setattr(_catalogue, "_CATALOGUE", dict(_catalogue._CATALOGUE))


@pytest.mark.usefixtures("scratch_catalogue")
@pytest.mark.parametrize(
    ("hint", "field"),
    [
        (frozenset[str], "members"),
        (tuple[datetime, ...], "stamps"),
        (tuple[int, str], "pair"),
        (dict[int, str], "by_number"),
        (bytes, "blob"),
    ],
)
def test_an_unsupported_hint_fails_loudly(hint, field):
    cls = dataclasses.make_dataclass(
        "Odd", [("ok", str), (field, hint)], bases=(Event,), frozen=True, slots=True
    )
    event(f"CodecOdd{field}")(cls)
    assert catalogue()[f"CodecOdd{field}"] is cls
    with pytest.raises(TypeError, match=rf"Odd\.{field}: no round-trip strategy"):
        event_strategy(cls)


def test_only_frozen_dataclasses_can_be_catalogue_events(scratch_catalogue):
    @dataclass(slots=True)
    class Mutable(Event):
        x: int

    with pytest.raises(TypeError, match="frozen dataclass"):
        event("CodecMutable")(Mutable)


def test_a_type_name_is_registered_once(scratch_catalogue):
    @dataclass(frozen=True, slots=True)
    class Another(Event):
        text: str

    with pytest.raises(ValueError, match="already registered"):
        event("CodecScalars")(Another)


def test_datetimes_decode_aware_in_utc(memory_log):
    at = datetime(2026, 3, 4, 5, 6, 7, 890123, tzinfo=UTC)
    memory_log.append("codec-time", [Times(at=at, until=None)])
    decoded = eventlog.decode(list(memory_log.read("codec-time"))[-1])
    assert decoded.at == at
    assert decoded.at.utcoffset() is not None
    assert decoded.at.utcoffset().total_seconds() == 0
