"""Golden fixtures: a small log as JSON lines, and the view dumps expected from it.

A fixture folder holds `events.jsonl` (records as `flightlog events --json` prints them),
`views/<view>.json` (each view's canonical dump, indented) and `timelines.json` (every
agent run's rendered timeline, for people to read and for the check to compare too).
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from datetime import datetime
from typing import Any

import orjson

from eventlog import EventLog, ManualClock, NewEvent
from projections import Views

from .._private import open_private
from .log import record_json

INDENT = orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS


class GoldenError(ValueError):
    """Raised when a fixture folder or its log is not what it should be."""


def export_lines(log: EventLog) -> Iterator[bytes]:
    for record in log.read_all():
        yield orjson.dumps(record_json(record)) + b"\n"


def import_lines(log: EventLog, clock: ManualClock, lines: Iterable[bytes | str]) -> int:
    """Append exported records to an empty `log` (opened with `clock`), checking every hash.

    The clock is set to each record's time before its append, so the new log's chain is
    the old one's: a record whose hash comes out different (edited data, another hash
    key) stops the import.
    """
    count = 0
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        obj = orjson.loads(line)
        when = datetime.fromisoformat(obj["recorded_at"])
        if when > clock.now():
            clock.set(when)
        new = NewEvent(obj["type"], obj["data"], obj.get("meta") or {}, obj["event_id"], obj.get("schema", 1))
        [record] = log.append(obj["stream"], [new], expect=int(obj["version"]) - 1)
        if "hash" in obj and record.hash != obj["hash"]:
            got, want = record.hash[:12], obj["hash"][:12]
            raise GoldenError(f"line {n}: seq {record.seq} hashes to {got}…, not {want}…")
        count += 1
    return count


def read_expected(folder: str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    """The expected view dumps (by view) and rendered timelines (None if the folder has none)."""
    views_dir = os.path.join(folder, "views")
    if not os.path.isdir(views_dir):
        raise GoldenError(f"{folder}: no views/ folder of expected dumps")
    expected = {}
    for name in sorted(os.listdir(views_dir)):
        if name.endswith(".json"):
            with open(os.path.join(views_dir, name), "rb") as f:
                expected[name[: -len(".json")]] = orjson.loads(f.read())
    timelines = None
    path = os.path.join(folder, "timelines.json")
    if os.path.exists(path):
        with open(path, "rb") as f:
            timelines = orjson.loads(f.read())
    return expected, timelines


def rendered_timelines(views: Views) -> dict[str, Any]:
    """Every agent run's timeline at the head, as JSON-able data."""
    head = views.log.head().seq
    out = {}
    for run in views.agent_runs(at=head):
        entries = [e.to_dict() for e in views.timeline(run.run_id, at=head)]
        out[run.run_id] = orjson.loads(orjson.dumps(entries))
    return out


def write_expected(folder: str, views: Views) -> list[str]:
    """Write the current dumps and timelines as the folder's expectations; returns the files written."""
    os.makedirs(os.path.join(folder, "views"), exist_ok=True)
    head = views.log.head().seq
    written = []
    for name in views.names:
        path = os.path.join(folder, "views", f"{name}.json")
        with open_private(path) as f:
            f.write(orjson.dumps(views.dump(name, at=head), option=INDENT) + b"\n")
        written.append(path)
    path = os.path.join(folder, "timelines.json")
    with open_private(path) as f:
        f.write(orjson.dumps(rendered_timelines(views), option=INDENT) + b"\n")
    written.append(path)
    return written
