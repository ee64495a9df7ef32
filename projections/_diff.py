"""Diffs: what was added, removed and changed between two moments of a view."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson


@dataclass(frozen=True, slots=True)
class Change:
    """One item present at both moments, with the fields whose values differ."""

    key: str
    before: dict[str, Any]
    after: dict[str, Any]
    fields: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"key": self.key, "fields": list(self.fields), "before": self.before, "after": self.after}


@dataclass(frozen=True, slots=True)
class Diff:
    """The difference between a view at seq `a` and at seq `b` (items as plain dicts)."""

    view: str
    a: int
    b: int
    added: list[dict[str, Any]] = field(default_factory=list)
    removed: list[dict[str, Any]] = field(default_factory=list)
    changed: list[Change] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.added or self.removed or self.changed)

    def to_dict(self) -> dict[str, Any]:
        return {
            "view": self.view,
            "a": self.a,
            "b": self.b,
            "added": self.added,
            "removed": self.removed,
            "changed": [c.to_dict() for c in self.changed],
        }


def diff_items(
    view: str, a: int, b: int, before: Sequence[dict[str, Any]], after: Sequence[dict[str, Any]], key: str
) -> Diff:
    """Match items by `key`: new keys are added, missing ones removed, others compared field by field.

    Items keep the order they had (added and changed in `after`'s order, removed in `before`'s).
    """
    old = {str(item[key]): item for item in before}
    new = {str(item[key]): item for item in after}
    added = [item for k, item in new.items() if k not in old]
    removed = [item for k, item in old.items() if k not in new]
    changed = []
    for k, item in new.items():
        prev = old.get(k)
        if prev is None or prev == item:
            continue
        fields = tuple(sorted(f for f in prev.keys() | item.keys() if prev.get(f) != item.get(f)))
        changed.append(Change(k, prev, item, fields))
    return Diff(view, a, b, added, removed, changed)


def apply_diff(before: Sequence[dict[str, Any]], diff: Diff, key: str) -> list[dict[str, Any]]:
    """The items `diff` says there are at its later moment, given the items at its earlier one.

    Kept and changed items stay in `before`'s order, added ones follow in the order they were
    added; a view that orders its items (a timeline by time, then seq) sorts the result again.
    """
    gone = {str(item[key]) for item in diff.removed}
    now = {c.key: c.after for c in diff.changed}
    kept = [now.get(str(item[key]), item) for item in before if str(item[key]) not in gone]
    return [*kept, *diff.added]


def text_diff(
    expected: Any, actual: Any, *, limit: int = 60, labels: tuple[str, str] = ("expected", "actual")
) -> str:
    """A unified diff of two JSON-able values as indented, key-sorted JSON (at most `limit` lines)."""
    option = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS
    a = orjson.dumps(expected, option=option).decode().splitlines()
    b = orjson.dumps(actual, option=option).decode().splitlines()
    lines = list(difflib.unified_diff(a, b, labels[0], labels[1], lineterm="", n=2))
    if len(lines) > limit:
        lines = [*lines[:limit], f"… {len(lines) - limit} more diff lines"]
    return "\n".join(lines)


Rows = Callable[[int], list[dict[str, Any]]]  # a view's items at a seq, as plain dicts


class Diffable(Protocol):
    """The views a diff reads (`Views`), each as of a seq."""

    def timeline(self, run_id: str, at: int) -> Iterable[Any]: ...
    def runs(self, at: int) -> Iterable[Any]: ...
    def state(self, name: str, at: int) -> Any: ...
    def pending_approvals(self, at: int) -> Iterable[Any]: ...
    def approval_history(self, at: int) -> Iterable[Any]: ...
    def agent_runs(self, at: int) -> Iterable[Any]: ...
    def sessions(self, at: int) -> Iterable[Any]: ...
    def projects(self, at: int) -> Iterable[Any]: ...


def diffable(views: Diffable, view: str, args: Sequence[str]) -> tuple[Rows, str]:
    """How to read `view`'s items (narrowed to `args` where given) at a seq, and their key field."""

    def rows(fetch: Callable[[int], Iterable[Any]]) -> Rows:
        return lambda seq: [r.to_dict() for r in fetch(seq)]

    if view == "timeline":
        if len(args) != 1:
            raise ValueError("diff('timeline', run_id, a=…, b=…) takes one run id")
        return rows(lambda seq: views.timeline(args[0], seq)), "seq"
    table: dict[str, tuple[Callable[[int], Iterable[Any]], str]] = {
        "runs": (views.runs, "run_id"),
        "run_registry": (views.runs, "run_id"),
        "finish_status": (lambda seq: _values(views.state("finish_status", seq)), "run_id"),
        "pending_approvals": (views.pending_approvals, "id"),
        "approval_history": (views.approval_history, "id"),
        "agent_runs": (views.agent_runs, "run_id"),
        "sessions": (views.sessions, "session_id"),
        "projects": (views.projects, "id"),
    }
    if view not in table:
        raise ValueError(f"no diff for view {view!r}; one of: timeline, {', '.join(table)}")
    fetch, key = table[view]
    if args:
        wanted = set(args)
        full = fetch
        fetch = lambda seq: [r for r in full(seq) if getattr(r, key, None) in wanted]  # noqa: E731
    return rows(fetch), key


def _values(state: dict[str, Any]) -> list[Any]:
    return [state[k] for k in sorted(state)]
