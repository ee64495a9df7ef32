"""Fast paths for folds: positional constructors of frozen rows, and record times."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from eventlog import Record, from_micros

T = TypeVar("T")


def positional(cls: type[T]) -> Callable[..., T]:
    """A constructor taking every field of the frozen, slotted dataclass `cls` positionally.

    It stores each field through its slot, as the generated `__init__` does, but without
    the per-field `object.__setattr__` call a frozen `__init__` makes: half the cost, and a
    fold builds a row per record. Only for dataclasses without `__post_init__` or defaults
    computed at construction; a test checks the rows equal those `cls(...)` builds.
    """
    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__") or not hasattr(cls, "__slots__"):
        raise TypeError(f"{cls.__name__} is not a plain slotted dataclass")
    names = [f.name for f in dataclasses.fields(cls)]
    namespace: dict[str, Any] = {"_new": object.__new__, "_cls": cls}
    for i, name in enumerate(names):
        namespace[f"_set{i}"] = getattr(cls, name).__set__
    params = ", ".join(f"a{i}" for i in range(len(names)))
    stores = "".join(f"    _set{i}(o, a{i})\n" for i in range(len(names)))
    source = f"def new({params}):\n    o = _new(_cls)\n{stores}    return o\n"
    exec(source, namespace)  # unrolled, as dataclasses builds __init__; only field names go in
    new: Callable[..., T] = namespace["new"]
    new.__qualname__ = new.__name__ = f"{cls.__name__}_positional"
    new.__doc__ = f"{cls.__name__}({', '.join(names)}), built positionally."
    return new


_last_time: tuple[int, datetime] = (-1, from_micros(0))


def recorded_at(record: Record) -> datetime:
    """`record.recorded_at`, reusing the last result: records of one commit share their time."""
    global _last_time
    last = _last_time  # one read and one write of a tuple: safe when threads fold at once
    if last[0] == record.recorded_us:
        return last[1]
    at = from_micros(record.recorded_us)
    _last_time = (record.recorded_us, at)
    return at
