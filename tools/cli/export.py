"""`flightlog export` and `flightlog import`: a log as JSON lines and back, the chain kept exactly;
and every view as plain tables in a SQLite file (`export --views`).

One line per stored record, with every field as `flightlog events --json` prints it: seq,
stream, version, type, schema, data, meta, event_id, recorded_at (ISO 8601 with
microseconds, UTC), prev_hash and hash. Importing writes the same seq, versions, ids, times
and hashes, so the imported chain is the same chain and verifies to the same head.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import IO, Any, NoReturn

import click
import orjson

from eventlog import (
    GENESIS_HASH,
    EventLog,
    EventLogError,
    Head,
    ImportRefusedError,
    NotALogError,
    Record,
    SystemClock,
    open_log,
    to_micros,
)
from projections import Views

from .._output import (
    EXIT_FOUND,
    StorageFailure,
    UsageFailure,
    console,
    emit_json,
    err_console,
    open_db,
    shown,
)
from .export_runs import export_part
from .log import record_json
from .outputs import refuse_log_file, replaced, written
from .remote import server_option
from .replay import progress_bar
from .views_db import ViewsDatabaseError, view_tables, write_tables

FIELDS = ("seq", "stream", "version", "type", "schema", "data", "meta", "event_id", "recorded_at",
          "prev_hash", "hash")  # fmt: skip
_INTS = ("seq", "version", "schema")
_STRINGS = ("stream", "type", "event_id", "prev_hash", "hash")


def register(cli: click.Group) -> None:
    cli.add_command(export_cmd)
    cli.add_command(import_cmd)


class LineError(ValueError):
    """Raised when a line of an export is not a stored record; carries its line number."""

    def __init__(self, lineno: int, reason: str) -> None:
        super().__init__(f"line {lineno}: {reason}")
        self.lineno = lineno


def record_line(record: Record) -> bytes:
    """One export line (with its newline)."""
    return orjson.dumps(record_json(record)) + b"\n"


def record_from_line(line: bytes, lineno: int) -> Record:
    """The record an export line describes, exactly as it was stored."""
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as e:
        raise LineError(lineno, f"not JSON ({e})") from None
    if not isinstance(obj, dict):
        raise LineError(lineno, "not a JSON object")
    missing = [f for f in FIELDS if f not in obj]
    if missing:
        raise LineError(lineno, f"missing {', '.join(missing)}")
    for name in _INTS:
        if type(obj[name]) is not int:
            raise LineError(lineno, f"{name} must be an integer")
    for name in _STRINGS:
        if not isinstance(obj[name], str):
            raise LineError(lineno, f"{name} must be a string")
    recorded = obj["recorded_at"]
    try:
        micros = recorded if type(recorded) is int else to_micros(datetime.fromisoformat(recorded))
    except (TypeError, ValueError):
        raise LineError(lineno, "recorded_at must be an ISO time with an offset (or microseconds)") from None
    meta = orjson.dumps(obj["meta"], option=orjson.OPT_SORT_KEYS)
    return Record(obj["seq"], obj["stream"], obj["version"], obj["type"], obj["schema"], obj["data"], meta,
                  obj["event_id"], micros, obj["prev_hash"], obj["hash"])  # fmt: skip


def read_records(lines: IO[bytes]) -> Iterator[Record]:
    for lineno, line in enumerate(lines, 1):
        if line.strip():
            yield record_from_line(line, lineno)


def _same_file(a: str, b: str) -> bool:
    return os.path.realpath(a) == os.path.realpath(b)


# -- export ------------------------------------------------------------------------------------


@click.command("export")
@click.argument("db", required=False)
@server_option
@click.option(
    "--run",
    "run_id",
    help="Only this run's streams: run-<id>, its controller's, its approvals' (whole, as stored).",
)
@click.option(
    "--otlp",
    metavar="URL",
    help="Send the runs (or --run's) to this OpenTelemetry collector (OTLP/HTTP) as traces, not lines.",
)
@click.option("--stream", "-s", help="Only this stream's records (for reading; they cannot be imported).")
@click.option("--after", type=click.IntRange(0), default=0, show_default=True, help="Start after this seq.")
@click.option("--output", "-o", type=click.Path(dir_okay=False), help="Write the lines here, not to stdout.")
@click.option(
    "--views",
    "views_out",
    type=click.Path(dir_okay=False),
    help="Write every view as plain tables to this SQLite file (then lines only with -o).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the summary as JSON (with -o or --views).")
def export_cmd(
    db: str | None,
    server: str | None,
    run_id: str | None,
    otlp: str | None,
    stream: str | None,
    after: int,
    output: str | None,
    views_out: str | None,
    as_json: bool,
) -> None:
    """Write DB's records as JSON lines, one stored record per line, every field kept.

    `flightlog import` reads them back into an empty log (or one that ends at --after's seq)
    as the same chain. With --views, every view is also written as plain tables (one per view,
    plus `_meta`: the seq shown, the chain's verdict, when) that Datasette or any SQL tool can
    open; exit 1 if the chain does not verify.

    \b
    Example:
      flightlog export flightlog.db > run.jsonl
      flightlog export flightlog.db --after 1200 -o tail.jsonl
      flightlog export flightlog.db --views views.db && datasette views.db
      flightlog export flightlog.db --run deployer -o deployer.jsonl
      flightlog export --server http://127.0.0.1:8080 -o all.jsonl
      flightlog export flightlog.db --otlp http://127.0.0.1:4318
    """
    if server is not None or run_id is not None or otlp is not None:
        if stream is not None or views_out is not None:
            raise click.UsageError("--stream and --views go with DB alone, not --run, --server or --otlp")
        export_part(db, server, run_id, otlp, after, output, as_json, (record_line, record_from_line))
        return
    if db is None:
        raise click.UsageError("give a database (DB) or --server URL")
    refuse_log_file(output, db, "--output")
    refuse_log_file(views_out, db, "--views")
    log = open_db(db, readonly=True)
    summary: dict[str, Any] = {}
    try:
        head = log.head().seq
        if after > head:
            raise click.BadParameter(f"seq {after} is past the log's head (seq {head})", param_hint="--after")
        if stream is not None and log.stream_version(stream) == 0:
            raise click.UsageError(f"no stream {stream!r} in this log")
        if output is not None or views_out is None:
            summary["records"] = _export_lines(log, stream, after, head, output)
        if views_out is not None:
            summary["views"] = _export_views(log, views_out)
    finally:
        log.close()
    verdict = summary.get("views", {}).get("chain", {"ok": True})
    if as_json and (output is not None or views_out is not None):
        emit_json(summary)
    elif output is not None or views_out is not None:
        _print_summary(summary, output, views_out)
    if not verdict["ok"]:
        raise SystemExit(EXIT_FOUND)


def _export_lines(
    log: EventLog, stream: str | None, after: int, head: int, output: str | None
) -> dict[str, Any]:
    records = (r for r in log.read(stream) if r.seq > after) if stream else log.read_all(after_seq=after)
    count, first, last = 0, None, None
    with contextlib.ExitStack() as stack:
        try:
            sink = stack.enter_context(written(output)) if output is not None else sys.stdout.buffer
        except OSError as e:
            raise UsageFailure(f"cannot write {output}: {e.strerror or e}") from e
        with progress_bar("exporting", head - after, False) as advance:
            for record in records:
                sink.write(record_line(record))
                count += 1
                first = first or record.seq
                last = record.seq
                if count % 10_000 == 0:
                    advance(record.seq - after, head - after)
        sink.flush()
    return {"count": count, "first_seq": first, "last_seq": last, "file": output}


def _export_views(log: EventLog, out: str) -> dict[str, Any]:
    head = log.head().seq
    with progress_bar("verifying", head, False) as advance:
        result = log.verify(progress=lambda n: advance(n, head))
    chain = {"ok": result.ok, "checked": result.checked, "first_bad_seq": result.first_bad_seq,
             "reason": result.reason}  # fmt: skip
    try:
        seq, tables = view_tables(Views(log, clock=SystemClock()))
    except (EventLogError, TypeError, ValueError, KeyError) as e:
        # A tampered record may not even fold: say so, with the chain's verdict.
        raise click.ClickException(f"the views could not be built: {type(e).__name__}: {e} ({chain})") from e
    at = next(log.read_all(after_seq=seq - 1, to_seq=seq), None) if seq else None
    meta = {
        "seq": seq,
        "hash": at.hash if at is not None else GENESIS_HASH,
        "chain_verified": result.ok,
        "chain_checked": result.checked,
        "chain_first_bad_seq": result.first_bad_seq,
        "chain_reason": result.reason,
        "exported_at": SystemClock().now().isoformat(),
        "source": log.url,
    }
    try:
        with replaced(out, copy=True) as temp:
            names = write_tables(temp, tables, meta, shown_as=out)
    except ViewsDatabaseError as e:
        raise click.BadParameter(str(e), param_hint="--views") from e
    except OSError as e:
        raise UsageFailure(f"cannot write {out}: {e.strerror or e}") from e
    return {"file": out, "seq": seq, "tables": {n: len(tables.get(n, [meta])) for n in names}, "chain": chain}


def _print_summary(summary: dict[str, Any], output: str | None, views_out: str | None) -> None:
    if "records" in summary and output is not None:
        r = summary["records"]
        span = f" (seq {r['first_seq']} to {r['last_seq']})" if r["count"] else ""
        console.print(f"exported {r['count']} record(s){span} to {shown(output)}")
    if "views" in summary and views_out is not None:
        v = summary["views"]
        tables = ", ".join(f"{name} ({rows})" for name, rows in v["tables"].items())
        console.print(f"wrote the views at seq {v['seq']} to {shown(views_out)}: {tables}", soft_wrap=True)
        chain = v["chain"]
        if chain["ok"]:
            console.print(f"[green]ok[/]: chain verified over {chain['checked']} events")
        else:
            console.print(f"[red]BROKEN[/] at seq {chain['first_bad_seq']}: {shown(chain['reason'])}")


# -- import ------------------------------------------------------------------------------------


@click.command("import")
@click.argument("db")
@click.argument("source", default="-", metavar="[FILE|-]")
@click.option(
    "--batch", type=click.IntRange(1), default=1000, show_default=True, help="Records per transaction."
)
@click.option("--json", "as_json", is_flag=True, help="Print the outcome (or the refusal) as JSON.")
def import_cmd(db: str, source: str, batch: int, as_json: bool) -> None:
    """Append the records of an export (FILE, or stdin) to DB exactly as they were stored.

    Seq, versions, event ids, times and hashes are kept: the imported chain is the same chain.
    DB (created if missing) must be empty or end where the records start. Every record is
    checked first (its link to the one before, its hash, its stream's version, its time, and
    that it fits the event catalogue) and nothing is written if one is wrong; then they are
    written --batch at a time.

    \b
    Exit codes: 0 imported, 1 refused (the message names the seq or line), 2 usage error.
    Example:
      flightlog export flightlog.db > run.jsonl
      flightlog import copy.db run.jsonl
      flightlog export flightlog.db | flightlog import postgresql://localhost/flightlog -
    """
    if source != "-" and not os.path.isfile(source):
        raise click.UsageError(f"no file at {source!r}")
    if source != "-" and not db.startswith(("postgresql://", "postgres://")) and _same_file(source, db):
        raise click.UsageError("FILE is the database itself")
    # A refused import into a file it had to create leaves no empty database behind.
    created = (
        not db.startswith(("postgresql://", "postgres://")) and db != ":memory:" and not os.path.exists(db)
    )
    with _input(source) as (lines, total):
        try:
            log = open_log(db)
        except NotALogError as e:  # another application's database, refused unchanged
            raise StorageFailure(str(e)) from e
        except EventLogError as e:
            raise click.UsageError(f"cannot open {db!r}: {e}") from e
        imported = False
        try:
            start = log.head().seq
            with progress_bar("checking", total, as_json) as advance:
                log.import_records(read_records(lines), batch=batch, dry_run=True,
                                   progress=lambda n: advance(n, total))  # fmt: skip
            lines.seek(0)
            with progress_bar("importing", total, as_json) as advance:
                head = log.import_records(
                    read_records(lines), batch=batch, progress=lambda n: advance(n, total)
                )
            imported = True
        except ImportRefusedError as e:
            _refused(as_json, str(e), seq=e.seq, imported=e.imported, head=e.head)
        except LineError as e:
            _refused(as_json, str(e), line=e.lineno, imported=0, head=log.head().seq)
        except EventLogError as e:
            raise click.ClickException(str(e)) from e
        finally:
            empty = not imported and log.head().seq == 0
            log.close()
            if created and empty:
                for leftover in (db, f"{db}-wal", f"{db}-shm"):
                    with contextlib.suppress(FileNotFoundError):
                        os.remove(leftover)
    _imported(as_json, head.seq - start, start, head)


@contextmanager
def _input(source: str) -> Iterator[tuple[IO[bytes], int]]:
    """The records' lines as a seekable binary file (stdin is spooled), and how many there are."""
    with tempfile.TemporaryFile() if source == "-" else open(source, "rb") as file:
        if source == "-":
            for chunk in iter(lambda: sys.stdin.buffer.read(1 << 20), b""):
                file.write(chunk)
            file.seek(0)
        total = sum(1 for _ in file)
        file.seek(0)
        yield file, total


def _imported(as_json: bool, count: int, start: int, head: Head) -> None:
    if as_json:
        emit_json({"ok": True, "imported": count, "first_seq": start + 1 if count else None,
                   "head": {"seq": head.seq, "hash": head.hash}})  # fmt: skip
    elif count:
        console.print(
            f"imported {count} record(s), seq {start + 1} to {head.seq}; every link and hash checked. "
            f"Head: {head.seq} {head.hash}",
            soft_wrap=True,
        )
    else:
        console.print("nothing to import")


def _refused(as_json: bool, message: str, **where: Any) -> NoReturn:
    if as_json:
        emit_json({"ok": False, "error": "refused", "message": message, **where})
    else:
        err_console.print(f"[red]refused[/]: {shown(message)}", soft_wrap=True)
    raise SystemExit(EXIT_FOUND)
