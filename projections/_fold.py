"""Folding records into views' states: which view reads which record type, and a fold of a
range of the log, or of each view from its own base up to a seq (`ViewRunner` folds live)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from eventlog import RECORD_ERRORS, EventLog, Record, Unreadable, fit_record

from ._view import View

Handlers = list[tuple[str, Callable[[Any, Record], Any]]]
Dispatch = dict[str, list[tuple[str, Callable[[Any, Record], Any]]]]
# type -> (the views' applies; the row keys to note)
Routes = dict[str, tuple[Handlers, tuple[tuple[Callable[[Any], None], str], ...]]]


def row_key(view: View) -> str:
    """The view's optional `row_key` ("" when it has none)."""
    return str(getattr(view, "row_key", "") or "")


def dispatch_table(views: Sequence[View]) -> Dispatch:
    """Record type -> the applies of the views that read it."""
    table: Dispatch = {}
    for view in views:
        for type_name in sorted(view.types):
            table.setdefault(type_name, []).append((view.name, view.apply))
    return table


def routing(
    dispatch: Dispatch, views: Sequence[View] = (), touched: dict[str, set[Any]] | None = None
) -> Routes:
    """Each handled type's views, and the row keys to note for the views in `touched` (one
    `(set.add, field)` per set)."""
    notes: dict[str, list[tuple[Callable[[Any], None], str]]] = {}
    for view in views:
        keys = (touched or {}).get(view.name)
        if keys is None:
            continue
        note = (keys.add, row_key(view))
        for type_name in view.types:
            found = notes.setdefault(type_name, [])
            if all(n[0] != note[0] for n in found):  # views sharing a set note once
                found.append(note)
    return {
        type_name: (handlers, tuple(notes.get(type_name, ()))) for type_name, handlers in dispatch.items()
    }


def fold_records(
    views: Sequence[View],
    records: Iterable[Record],
    states: dict[str, Any],
    unreadable: Unreadable | None = None,
) -> dict[str, Any]:
    """Fold `records` (in order) into `states`, upcasting old schemas first.

    A record that does not fit the catalogue, or that an apply fails on, is skipped and noted
    in `unreadable` (by default in a tally that logs it to `flightlog.records`).
    """
    routes = routing(dispatch_table(views))
    unreadable = unreadable if unreadable is not None else Unreadable(logged=True)
    for record in records:
        route = routes.get(record.type)
        if route is not None:
            try:
                record = fit_record(record)
                for name, apply in route[0]:
                    states[name] = apply(states[name], record)
            except RECORD_ERRORS as e:
                unreadable.note(record, e)
    return states


def fold_range(
    log: EventLog,
    views: Sequence[View],
    to_seq: int,
    after_seq: int = 0,
    states: dict[str, Any] | None = None,
    unreadable: Unreadable | None = None,
) -> dict[str, Any]:
    """Fold records (after_seq, to_seq] into `states` (fresh initial states when None)."""
    states = states if states is not None else {v.name: v.initial() for v in views}
    types = frozenset().union(*(v.types for v in views))
    records = log.read_all(after_seq=after_seq, to_seq=to_seq, types=types)
    return fold_records(views, records, states, unreadable)


def fold_from(
    log: EventLog,
    views: Sequence[View],
    bases: dict[str, tuple[int, Any]],
    to_seq: int,
    unreadable: Unreadable | None = None,
) -> dict[str, Any]:
    """Fold each view from its base `(seq, state)` (seq 0 and its initial state if absent) to `to_seq`.

    Views joining at later seqs are folded together from there, so each record is read once.
    """
    starts = {v.name: bases.get(v.name, (0, None))[0] for v in views}
    states: dict[str, Any] = {}
    active: list[View] = []
    marks = sorted(set(starts.values()))
    for i, mark in enumerate(marks):
        for view in views:
            if starts[view.name] == mark:
                base = bases.get(view.name)
                states[view.name] = base[1] if base is not None else view.initial()
                active.append(view)
        end = min(marks[i + 1] if i + 1 < len(marks) else to_seq, to_seq)
        if end > mark:
            fold_range(log, active, end, after_seq=mark, states=states, unreadable=unreadable)
    return states
