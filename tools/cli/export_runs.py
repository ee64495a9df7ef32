"""`flightlog export --run ID`, `--server URL` and `--otlp URL`: part of a log, a server's log, or
its runs as OpenTelemetry traces.

`--run` keeps the whole streams that tell of one run (its `run-<id>`, the controller stream
its AgentRunStarted is in, its approvals'), so each line is a record exactly as stored and
checks on its own (docs/export-format.md). `--server` reads the same lines through the
operator API (`/api/v1/events`). `--otlp` sends the runs (or the one run) to a collector as
traces, instead of writing lines; span and trace ids come from the log, so sending twice
gives the same ids.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click
import orjson

from eventlog import EventLog, Record
from projections.traces import trace_spans

from .._output import UsageFailure, console, emit_json, open_db, shown
from .._records import run_records, run_streams
from ..feeds import OtelMissing, OtlpSender
from .outputs import refuse_log_file, written
from .remote import OperatorClient

PAGE = 2000
LineOf = Callable[[Record], bytes]  # a record's export line (export.record_line)
RecordOf = Callable[[bytes, int], Record]  # the record of an export line (export.record_from_line)


def export_part(
    db: str | None,
    server: str | None,
    run_id: str | None,
    otlp: str | None,
    after: int,
    output: str | None,
    as_json: bool,
    codec: tuple[LineOf, RecordOf],
) -> None:
    """Export (to lines or to a collector) from DB or a server, the whole log or one run; `codec`
    is export's record-to-line and line-to-record pair."""
    line_of, record_of = codec
    if (db is None) == (server is None):
        raise click.UsageError("give a database (DB) or --server URL, not both")
    sender = None
    if otlp is not None:
        try:
            sender = OtlpSender(otlp)
        except OtelMissing as e:
            raise UsageFailure(str(e)) from None
        except ValueError as e:
            raise click.BadParameter(str(e), param_hint="--otlp") from None
    if server is not None:
        client = OperatorClient(server)
        records = _server_records(client, run_id, after, record_of)
        _summarise(_export(records, run_id, sender, output, line_of), output, as_json)
        return
    assert db is not None
    refuse_log_file(output, db, "--output")
    log = open_db(db, readonly=True)
    try:
        records = _local_records(log, run_id, after)
        summary = _export(records, run_id, sender, output, line_of)
    finally:
        log.close()
    _summarise(summary, output, as_json)


def _local_records(log: EventLog, run_id: str | None, after: int) -> Iterator[Record]:
    if run_id is None:
        return log.read_all(after_seq=after)
    streams = run_streams(log, run_id)
    if not streams:
        raise click.UsageError(f"no run {run_id!r} in this log")
    return run_records(log, streams, after)


def _server_records(
    client: OperatorClient, run_id: str | None, after: int, record_of: RecordOf
) -> Iterator[Record]:
    params = {"limit": str(PAGE)}
    if run_id is not None:
        params["run"] = run_id
    while True:
        status, body = client.call("GET", "/api/v1/events", params={**params, "after": str(after)})
        if status == 404 and run_id is not None:
            raise click.UsageError(f"no run {run_id!r} on the server at {client.url}")
        if status != 200:
            raise click.ClickException(f"{client.url}/api/v1/events: {status} {body.get('error', body)}")
        for i, obj in enumerate(body["records"]):
            yield record_of(orjson.dumps(obj), i + 1)
        if not body["records"]:
            return
        after = int(body["last_seq"])


def _export(
    records: Iterator[Record],
    run_id: str | None,
    sender: OtlpSender | None,
    output: str | None,
    line_of: LineOf,
) -> dict[str, Any]:
    if sender is not None:
        try:
            spans = [s for s in trace_spans(records) if run_id is None or s.run_id == run_id]
            ok = sender.send(spans)
        finally:
            sender.close()
        if not ok:
            raise click.ClickException(f"the collector at {sender.endpoint} did not take the spans")
        traces = len({s.trace_id for s in spans})
        return {"spans": len(spans), "traces": traces, "endpoint": sender.endpoint}
    count, first, last = 0, None, None
    with contextlib.ExitStack() as stack:
        try:
            sink = stack.enter_context(written(output)) if output is not None else sys.stdout.buffer
        except OSError as e:
            raise UsageFailure(f"cannot write {output}: {e.strerror or e}") from e
        for record in records:
            sink.write(line_of(record))
            count += 1
            first = first or record.seq
            last = record.seq
        sink.flush()
    return {"records": {"count": count, "first_seq": first, "last_seq": last, "file": output}}


def _summarise(summary: dict[str, Any], output: str | None, as_json: bool) -> None:
    if "spans" in summary:
        if as_json:
            emit_json(summary)
        else:
            console.print(
                f"sent {summary['spans']} span(s) in {summary['traces']} trace(s) to {summary['endpoint']}"
            )
        return
    if output is None:
        return
    if as_json:
        emit_json(summary)
        return
    r = summary["records"]
    span = f" (seq {r['first_seq']} to {r['last_seq']})" if r["count"] else ""
    console.print(f"exported {r['count']} record(s){span} to {shown(output)}")
