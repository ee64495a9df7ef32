"""Every view of a log as plain tables in a SQLite file, for Datasette or any SQL tool.

One table per view, one row per item: scalar fields are columns, nested ones JSON text, times
ISO 8601 text. The timeline is one row per entry of each agent run's rendered timeline, agent
activity one row per (user, agent), and approval actors one row per (run, actor). `_meta` says
which seq the tables show, the hash at that seq, whether the chain verified, and when the
tables were written.
"""

from __future__ import annotations

import dataclasses
import sqlite3
from collections.abc import Mapping
from typing import Any

import orjson
from sqlite_utils import Database

from projections import (
    AgentRun,
    ApprovalRow,
    FinishStatus,
    Project,
    RunRow,
    SessionRow,
    TimelineEntry,
    Views,
)
from projections.timeline import render

from .._private import create_private

META = "_meta"
# The row type of each view that lists rows (its dump is `[row.to_dict() ...]`).
ROW_TYPES: dict[str, type] = {
    "pending_approvals": ApprovalRow,
    "approval_history": ApprovalRow,
    "run_registry": RunRow,
    "finish_status": FinishStatus,
    "agent_runs": AgentRun,
    "sessions": SessionRow,
    "projects": Project,
    "timeline": TimelineEntry,  # one row per entry of each agent run, after run_id and position
}
# Each view's primary key, for tools that link rows (Datasette does).
KEYS: dict[str, tuple[str, ...]] = {
    "pending_approvals": ("id",),
    "approval_history": ("id",),
    "run_registry": ("run_id",),
    "finish_status": ("run_id",),
    "agent_runs": ("run_id",),
    "sessions": ("session_id",),
    "projects": ("id",),
    "timeline": ("run_id", "position"),
    "agent_activity": ("user_id", "agent_id"),
    "approval_actors": ("run_id", "actor"),
}


class ViewsDatabaseError(ValueError):
    """Raised when the output file cannot take the views (it is an event log, say)."""


def view_tables(views: Views) -> tuple[int, dict[str, list[dict[str, Any]]]]:
    """The seq the views were folded to, and each view's rows at that seq."""
    seq = views.catch_up()
    runner = views.runner
    tables: dict[str, list[dict[str, Any]]] = {}
    for name in views.names:
        if name in runner.views and name != "timeline":
            tables[name] = rows_of(name, runner.read_state(name, runner.views[name].dump))
        elif name not in runner.views:  # folded from the log when read
            tables[name] = rows_of(name, views.dump(name, at=seq))
    if "timeline" in runner.views:
        run_ids = [row["run_id"] for row in tables.get("agent_runs", [])]

        def entries(state: Any) -> list[dict[str, Any]]:
            return [
                _plain({"run_id": run_id, "position": i, **entry.to_dict()})
                for run_id in run_ids
                for i, entry in enumerate(render(state, run_id), 1)
            ]

        tables["timeline"] = runner.read_state("timeline", entries)
    return seq, tables


def rows_of(name: str, dump: Any) -> list[dict[str, Any]]:
    """A view's dump as table rows."""
    if name == "agent_activity" and isinstance(dump, Mapping):
        return [{"user_id": u, "agent_id": a, "last_active": at} for u, a, at in _plain(dump["last"])]
    if name == "approval_actors" and isinstance(dump, Mapping):  # who decided for each run
        return [{"run_id": run_id, "actor": actor} for run_id, actors in dump["actors"] for actor in actors]
    if isinstance(dump, Mapping):
        return [{"key": str(k), "value": v} for k, v in _plain(dict(dump)).items()]
    return [row if isinstance(row, dict) else {"value": row} for row in _plain(list(dump))]


def _plain(value: Any) -> Any:
    """JSON-shaped data: datetimes as ISO text, tuples as lists."""
    return orjson.loads(orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS))


def declared_columns(name: str) -> dict[str, type]:
    """The columns a view's table always has, from its row type (so an empty table has them too)."""
    if name == "agent_activity":
        return {"user_id": str, "agent_id": str, "last_active": str}
    if name == "approval_actors":
        return {"run_id": str, "actor": str}
    row = ROW_TYPES.get(name)
    if row is None:
        return {}
    columns = {"run_id": str, "position": int} if name == "timeline" else {}
    for field in dataclasses.fields(row):
        base = str(field.type).split("|")[0].strip()
        columns[field.name] = int if base in ("int", "bool") else float if base == "float" else str
    return columns


def _columns(name: str, rows: list[dict[str, Any]]) -> dict[str, type]:
    """The declared columns, then any other the rows have, typed by their first non-null value."""
    columns: dict[str, type] = declared_columns(name)
    for row in rows:
        for column, value in row.items():
            if columns.get(column, type(None)) is type(None):
                columns[column] = type(None) if value is None else _kind(value)
    return {column: str if kind is type(None) else kind for column, kind in columns.items()}


def _kind(value: Any) -> type:
    if isinstance(value, bool | int):
        return int
    return float if isinstance(value, float) else str


def write_tables(
    path: str,
    tables: Mapping[str, list[dict[str, Any]]],
    meta: dict[str, Any],
    *,
    shown_as: str | None = None,
) -> list[str]:
    """Replace the view tables and `_meta` in the SQLite file at `path`; returns the table names.

    `shown_as` is the name errors give the file (`path` may be a temporary copy of it).
    """
    name = shown_as or path
    try:
        create_private(path)  # before SQLite makes it with the umask's mode
    except OSError as e:
        raise ViewsDatabaseError(f"cannot write {name}: {e.strerror or e}") from e
    try:
        return _write_tables(path, name, tables, meta)
    except sqlite3.DatabaseError as e:
        raise ViewsDatabaseError(f"cannot write the views to {name}: {e}") from e


def _write_tables(
    path: str, name: str, tables: Mapping[str, list[dict[str, Any]]], meta: dict[str, Any]
) -> list[str]:
    db = Database(path)
    try:
        if db["events"].exists():
            raise ViewsDatabaseError(f"{name} holds an event log; write the views to another file")
        for name, rows in tables.items():
            keys = KEYS.get(name, ())
            columns = _columns(name, rows) or {"value": str}
            table = db.table(name)
            table.drop(ignore=True)
            table.create(columns, pk=keys if len(keys) > 1 else keys[0] if keys else None)
            if rows:
                table.insert_all(rows)
        db.table(META).drop(ignore=True)
        db.table(META).insert(meta)
    finally:
        db.close()
    return [*tables, META]
