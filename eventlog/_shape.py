"""The shape of a catalogue event's stored data, derived from its dataclass's type hints.

A stored event is JSON: a `str` field holds a string, an `int` an integer (never true or
false), a `float` any number, a `bool` true or false, a `datetime` an ISO 8601 string with
an offset (as the codec writes it), a `tuple[X, ...]` or `list[X]` a list of X, a
`dict[str, X]` an object of X, `X | None` null too and `Any` anything. A field with a default
may be missing (a record written before the field was added). A hint outside these raises
TypeError when the shape is first asked for: a new kind of field needs a check written here.
"""

from __future__ import annotations

import dataclasses
import threading
import types
import typing
from collections.abc import Callable
from datetime import datetime
from typing import Any, NamedTuple

Check = Callable[[Any], bool]


class FieldCheck(NamedTuple):
    """How one field's stored value is checked, and what it should be, in words."""

    check: Check
    expected: str
    # The check as an expression of `{v}` (the value) for a shape's unrolled test (see
    # `_unrolled`), or "" when that test calls `check`.
    inline: str = ""


@dataclasses.dataclass(frozen=True, slots=True)
class Shape:
    """What the stored data of one catalogue event at its current schema must look like."""

    type_name: str
    fields: dict[str, FieldCheck]
    required: frozenset[str]
    # Whether data (a JSON object) fit, in one unrolled expression: readers test every record
    # they fold, and a loop over the fields calling a check for each cost twice as much.
    fits: Callable[[dict[str, Any]], bool] = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "fits", _unrolled(self.type_name, self.fields, self.required))

    def fault(self, data: dict[str, Any]) -> str:
        """Why `data` (a JSON object) is not this event's data, or "" when it is."""
        return "" if self.fits(data) else self._why(data)

    def _why(self, data: dict[str, Any]) -> str:
        """The first fault in the order the event declares its fields (whatever the data's order):
        a key it has no field for, else a required field missing, else a value of the wrong kind."""
        extra = sorted(name for name in data if name not in self.fields)
        if extra:
            return f"{quoted(extra[0])} is not a field of {self.type_name}"
        missing = [name for name in self.fields if name in self.required and name not in data]
        if missing:
            return f"{', '.join(missing)} {'is' if len(missing) == 1 else 'are'} missing"
        for name, field in self.fields.items():
            if name in data and not field.check(data[name]):
                return f"{name} must be {field.expected}, got {describe(data[name])}"
        return ""


def _unrolled(
    type_name: str, fields: dict[str, FieldCheck], required: frozenset[str]
) -> Callable[[Any], bool]:
    """`fits(d)`: whether `d` has every required field, no unknown key and each value of its kind,
    as one expression (built as dataclasses builds `__init__`; only field names go in)."""
    namespace: dict[str, Any] = {"_iso": datetime.fromisoformat, "_numbers": (float, int)}
    count = "".join(f" + ({name!r} in d)" for name in fields if name not in required)
    terms = [f"len(d) == {len(required)}{count}"]
    for i, (name, field) in enumerate(fields.items()):
        value = f"d[{name!r}]"
        if field.inline:
            test = field.inline.format(v=value)
        else:
            namespace[f"_check{i}"] = field.check
            test = f"_check{i}({value})"
        terms.append(test if name in required else f"({name!r} not in d or {test})")
    body = "\n            and ".join(terms)
    source = (
        "def fits(d):\n"
        "    try:\n"
        f"        return (\n            {body}\n        )\n"
        "    except (KeyError, TypeError, ValueError):  # a field missing, a time that is none\n"
        "        return False\n"
    )
    exec(source, namespace)
    fits: Callable[[Any], bool] = namespace["fits"]
    fits.__qualname__ = fits.__name__ = f"{type_name}_fits"
    return fits


_SHAPES: dict[type, Shape] = {}
FITS: dict[type, Callable[[Any], bool]] = {}  # each derived shape's `fits`, for readers' fast path
_LOCK = threading.Lock()


def shape_of(cls: type, type_name: str) -> Shape:
    """The shape of catalogue event `cls`, derived on first use and kept."""
    found = _SHAPES.get(cls)
    if found is None:
        with _LOCK:
            found = _SHAPES.get(cls)
            if found is None:
                found = _SHAPES[cls] = _derive(cls, type_name)
                FITS[cls] = found.fits
    return found


def _derive(cls: type, type_name: str) -> Shape:
    hints = typing.get_type_hints(cls)
    fields: dict[str, FieldCheck] = {}
    required = set()
    for f in dataclasses.fields(cls):
        try:
            fields[f.name] = field_check(hints[f.name], top=True)
        except TypeError as e:
            raise TypeError(f"{cls.__name__}.{f.name}: {e}") from None
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            required.add(f.name)
    return Shape(type_name, fields, frozenset(required))


_UNIONS = (typing.Union, types.UnionType)


def field_check(hint: Any, *, top: bool = False) -> FieldCheck:
    """The check of a value stored for type hint `hint`; TypeError for a hint the codec does not carry.

    Datetimes and tuples are restored by the codec at the top of a field only (`top`).
    """
    if hint is Any:
        return FieldCheck(_anything, "anything", "True")
    if hint in _SCALARS:
        return _SCALARS[hint]
    if hint is datetime and top:
        return FieldCheck(_is_time, "an ISO 8601 time with an offset", "_iso({v}).tzinfo is not None")
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in _UNIONS and type(None) in args:
        others = [a for a in args if a is not type(None)]
        inner = field_check(others[0] if len(others) == 1 else typing.Union[tuple(others)], top=top)  # noqa: UP007
        inline = "({v} is None or " + inner.inline + ")" if inner.inline else ""
        return FieldCheck(_or_none(inner.check), f"{inner.expected} or null", inline)
    if origin in _UNIONS:
        checks = [field_check(a, top=top) for a in args]
        return FieldCheck(_any_of([c.check for c in checks]), " or ".join(c.expected for c in checks))
    sequence = origin is tuple and top and len(args) == 2 and args[1] is Ellipsis
    if sequence or (origin is list and len(args) == 1):
        item = field_check(args[0])
        inline = "type({v}) is list" if args[0] is Any else ""
        return FieldCheck(_list_of(item.check), f"a list of {_plural(item.expected)}", inline)
    if origin is dict and len(args) == 2 and args[0] is str:
        value = field_check(args[1])
        if args[1] is Any:
            return FieldCheck(_object_of(value.check), "an object", "type({v}) is dict")
        return FieldCheck(_object_of(value.check), f"an object of {_plural(value.expected)}")
    raise TypeError(f"no stored shape for type hint {hint!r}")


def describe(value: Any) -> str:
    """A stored JSON value's kind, in words (never the value: it may be long or hostile)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bytes):
        return "bytes that are not JSON"  # NotJSON: what a row holding no JSON reads as
    return type(value).__name__


def quoted(text: object, limit: int = 80) -> str:
    """Stored text as a reason may show it: quoted, in ASCII with every control and non-ASCII
    character escaped, cut at `limit` characters. Reasons reach terminals and HTTP headers."""
    text = str(text)
    return ascii(text[:limit]) + ("..." if len(text) > limit else "")


def _anything(value: Any) -> bool:
    return True


def _is_str(value: Any) -> bool:
    return type(value) is str


def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_bool(value: Any) -> bool:
    return type(value) is bool


def _is_number(value: Any) -> bool:
    return type(value) is float or type(value) is int


def _is_time(value: Any) -> bool:
    if type(value) is not str:
        return False
    try:
        return datetime.fromisoformat(value).tzinfo is not None
    except ValueError:
        return False


_SCALARS: dict[Any, FieldCheck] = {
    str: FieldCheck(_is_str, "a string", "type({v}) is str"),
    int: FieldCheck(_is_int, "an integer", "type({v}) is int"),
    bool: FieldCheck(_is_bool, "true or false", "type({v}) is bool"),
    float: FieldCheck(_is_number, "a number", "type({v}) in _numbers"),
}


def _or_none(check: Check) -> Check:
    return lambda value: value is None or check(value)


def _any_of(checks: list[Check]) -> Check:
    return lambda value: any(check(value) for check in checks)


def _list_of(check: Check) -> Check:
    if check is _anything:
        return lambda value: type(value) is list
    return lambda value: type(value) is list and all(map(check, value))


def _object_of(check: Check) -> Check:
    if check is _anything:
        return lambda value: type(value) is dict
    return lambda value: type(value) is dict and all(map(check, value.values()))


def _plural(expected: str) -> str:
    """'a string' -> 'strings', 'an object' -> 'objects', 'a string or null' -> 'strings or null'."""
    article, _, rest = expected.partition(" ")
    if article not in ("a", "an") or not rest:
        return expected
    noun, _, tail = rest.partition(" ")
    return f"{noun}s {tail}".rstrip()
