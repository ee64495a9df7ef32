"""Stored records as the export format writes them, and which records tell of one run.

`record_json` is the one JSON shape of a record: `events --json`, `export`, and the operator
API's `/api/v1/events` all write it (docs/export-format.md describes it field by field).
"""

from __future__ import annotations

from collections.abc import Iterator

from eventlog import EventLog, Record


def record_json(r: Record) -> dict[str, object]:
    """A stored record as `events --json` and `export` write it. Data or meta that is not JSON
    (only a hand edit stores that) is written as its text: shown, and refused by import."""
    try:
        meta: object = r.meta
    except ValueError:
        meta = r.meta_json.decode("utf-8", "replace")
    return {
        "seq": r.seq,
        "stream": r.stream,
        "version": r.version,
        "type": r.type,
        "schema": r.schema,
        "data": r.data.decode("utf-8", "replace") if isinstance(r.data, bytes) else r.data,
        "meta": meta,
        "event_id": r.event_id,
        "recorded_at": r.recorded_at.isoformat(),
        "prev_hash": r.prev_hash,
        "hash": r.hash,
    }


def run_streams(log: EventLog, run_id: str) -> list[str]:
    """The streams of run `run_id`: its broker stream `run-<id>`, the controller stream its
    AgentRunStarted is in, and the stream of each approval it requested; [] for no such run."""
    streams: list[str] = []
    if log.stream_version(f"run-{run_id}"):
        streams.append(f"run-{run_id}")
    streams += sorted({r.stream for r in log.run_starts(run_id)} - set(streams))
    if streams:
        approvals = log.read_all(types=("ApprovalRequested",))
        streams += sorted({r.stream for r in approvals if r.data.get("run_id") == run_id} - set(streams))
    return streams


def run_records(log: EventLog, streams: list[str], after: int = 0) -> Iterator[Record]:
    """Every record of `streams` after seq `after`, whole streams, in seq order."""
    records = sorted((r for s in streams for r in log.read(s) if r.seq > after), key=lambda r: r.seq)
    yield from records
