"""The machinery of the event catalogue: the Event base, registration and upcasters."""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Any, ClassVar, TypeVar

from ._errors import UnknownEventType
from ._record import Record

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
E = TypeVar("E", bound="Event")


class Event:
    """Base of every catalogue event: a frozen, slotted dataclass with a type name and schema."""

    __slots__ = ()
    type_name: ClassVar[str] = ""
    schema: ClassVar[int] = 1


@dataclasses.dataclass(frozen=True, slots=True)
class _Entry:
    cls: type[Event]
    fields: tuple[str, ...]
    datetimes: frozenset[str]
    tuples: frozenset[str]
    # The event's fields as a dict, as `encode` stores them (see _to_data).
    data_of: Callable[[Any], dict[str, Any]]
    # Builds the event from stored data holding exactly its fields, or returns None (see
    # _from_data); None when the class has a __post_init__ that must run.
    make: Callable[[dict[str, Any]], Event | None] | None = None
    schema: int = 1  # cls.schema, one attribute lookup nearer for decode


_CATALOGUE: dict[str, _Entry] = {}
_UPCASTERS: dict[tuple[str, int], Upcaster] = {}


def event(type_name: str, schema: int = 1) -> Callable[[type[E]], type[E]]:
    """Register a frozen dataclass as the catalogue event `type_name` at `schema`."""

    def register(cls: type[E]) -> type[E]:
        if not dataclasses.is_dataclass(cls) or not cls.__dataclass_params__.frozen:
            raise TypeError(f"{cls.__name__} must be a frozen dataclass")
        if type_name in _CATALOGUE and _CATALOGUE[type_name].cls is not cls:
            raise ValueError(f"event type {type_name!r} is already registered")
        cls.type_name = type_name
        cls.schema = schema
        hints = typing.get_type_hints(cls)
        names = tuple(f.name for f in dataclasses.fields(cls))
        datetimes = frozenset(n for n in names if _is(hints[n], datetime))
        tuples = frozenset(n for n in names if _is(hints[n], tuple))
        make = None if hasattr(cls, "__post_init__") else _from_data(cls, names, datetimes, tuples)
        _CATALOGUE[type_name] = _Entry(cls, names, datetimes, tuples, _to_data(cls, names), make, schema)
        return cls

    return register


def _from_data(
    cls: type[E], names: tuple[str, ...], datetimes: frozenset[str], tuples: frozenset[str]
) -> Callable[[dict[str, Any]], E | None]:
    """A function building `cls` from a dict of exactly its fields, through its slots.

    A frozen dataclass's `__init__` stores each field with `object.__setattr__`; reading
    calls this once per record, and storing through the slots directly halves the cost.
    Datetime fields stored as ISO strings and tuple fields stored as lists are converted
    as `decode_data` converts them. It returns None when the data are not a dict of
    exactly these fields (a missing, extra or renamed key): the caller then builds the
    event with `cls(**data)`, which says why.
    """
    namespace: dict[str, Any] = {
        "_new": object.__new__,
        "_cls": cls,
        "_n": len(names),
        "_datetime": stored_datetime,
        "_tuple": stored_tuple,
    }
    stores = []
    for i, name in enumerate(names):
        namespace[f"_set{i}"] = getattr(cls, name).__set__
        value = f"d[{name!r}]"
        if name in datetimes:
            value = f"_datetime({value})"
        elif name in tuples:
            value = f"_tuple({value})"
        stores.append(f"        _set{i}(o, {value})")
    stores = stores or ["        pass"]
    source = "\n".join(
        [
            "def make(d):",
            "    if type(d) is not dict or len(d) != _n:",
            "        return None",
            "    o = _new(_cls)",
            "    try:",
            *stores,
            "    except KeyError:",
            "        return None",
            "    return o",
            "",
        ]
    )
    exec(source, namespace)  # unrolled, as dataclasses builds __init__; only field names go in
    make: Callable[[dict[str, Any]], E | None] = namespace["make"]
    make.__qualname__ = make.__name__ = f"{cls.__name__}_from_data"
    return make


def _to_data(cls: type, names: tuple[str, ...]) -> Callable[[Any], dict[str, Any]]:
    """A function giving an event's fields as a dict: one dict display of attribute reads,
    which costs less than half of `{n: getattr(event, n) for n in names}` (an append runs
    it once per event)."""
    items = ", ".join(f"{name!r}: e.{name}" for name in names)
    namespace: dict[str, Any] = {}
    exec(f"def data_of(e):\n    return {{{items}}}\n", namespace)  # only field names go in
    data_of: Callable[[Any], dict[str, Any]] = namespace["data_of"]
    data_of.__qualname__ = data_of.__name__ = f"{cls.__name__}_data"
    return data_of


def stored_datetime(value: Any) -> Any:
    """A datetime field as read: orjson writes ISO strings (UTC as "Z", which
    `fromisoformat` accepts from Python 3.11 on)."""
    return datetime.fromisoformat(value) if isinstance(value, str) else value


def stored_tuple(value: Any) -> Any:
    """A tuple field as read: JSON has lists only."""
    return tuple(value) if isinstance(value, list) else value


def upcaster(type_name: str, from_schema: int) -> Callable[[Upcaster], Upcaster]:
    """Register a function that turns `type_name` data at `from_schema` into `from_schema + 1`."""

    def register(fn: Upcaster) -> Upcaster:
        key = (type_name, from_schema)
        if key in _UPCASTERS:
            raise ValueError(f"an upcaster for {type_name} v{from_schema} is already registered")
        _UPCASTERS[key] = fn
        return fn

    return register


def is_catalogued(type_name: str) -> bool:
    return type_name in _CATALOGUE


def entry(type_name: str) -> _Entry:
    try:
        return _CATALOGUE[type_name]
    except KeyError:
        raise UnknownEventType(type_name) from None


def upcast(type_name: str, schema: int, target: int, data: dict[str, Any]) -> dict[str, Any]:
    """Run the upcasters that bring `data` from `schema` to `target`."""
    while schema < target:
        try:
            fn = _UPCASTERS[(type_name, schema)]
        except KeyError:
            raise UnknownEventType(f"{type_name} v{schema} (no upcaster to v{target})") from None
        data = fn(dict(data))
        schema += 1
    return data


def upcast_record(record: Record) -> Record:
    """`record` with its data at the catalogue's current schema (other types as they are)."""
    e = _CATALOGUE.get(record.type)
    if e is None or e.cls.schema == record.schema:
        return record
    data = upcast(record.type, record.schema, e.cls.schema, record.data)
    return record._replace(schema=e.cls.schema, data=data)


def catalogue() -> dict[str, type[Event]]:
    """Every registered event type, by name."""
    return {name: e.cls for name, e in sorted(_CATALOGUE.items())}


def _is(hint: Any, kind: type) -> bool:
    if hint is kind:
        return True
    origin = typing.get_origin(hint)
    if origin is kind:
        return True
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return any(_is(arg, kind) for arg in typing.get_args(hint) if arg is not type(None))
    return False
