"""CLI commands on the raw log: events, verify, anchor."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import click
import orjson

from eventlog import EventLog, EventLogError, Head, Record, StreamNameError

from .._integrity import Integrity, check_log
from .._output import (
    EXIT_FOUND,
    UsageFailure,
    clean,
    console,
    emit_json,
    err_console,
    open_db,
    parse_anchor,
    progress,
    shown,
)
from .._records import record_json as record_json  # re-exported: export writes the same lines
from .formats import readable_data
from .remote import OperatorClient, one_target, server_option

FOLLOW_WAIT = 25  # seconds a long poll of --server --follow waits for a record


def register(cli: click.Group) -> None:
    cli.add_command(events_cmd)
    cli.add_command(verify_cmd)
    cli.add_command(anchor_cmd)


@click.command("events")
@click.argument("db", required=False)
@server_option
@click.option("--stream", "-s", help="Only this stream (e.g. run-42).")
@click.option("--after", type=int, default=0, show_default=True, help="Start after this seq.")
@click.option("--follow", "-f", is_flag=True, help="Keep printing new events as they are committed.")
@click.option("--json", "as_json", is_flag=True, help="One JSON object per line.")
def events_cmd(
    db: str | None, server: str | None, stream: str | None, after: int, follow: bool, as_json: bool
) -> None:
    """Print the events in DB (or on a server), oldest first.

    With --server, the records come through the operator API (a viewer's token is enough),
    long-polled with --follow: one request per batch, printed as they are committed.

    \b
    Example:
      flightlog events flightlog.db --stream run-42
      flightlog events flightlog.db --follow --json
      flightlog events --server http://127.0.0.1:8080 --follow --json
    """
    one_target(db, server)
    if server is not None:
        try:
            for obj in remote_records(OperatorClient(server), after, follow):
                if stream is None or obj["stream"] == stream:
                    _print_record(obj, as_json)
        except KeyboardInterrupt:
            pass
        return
    assert db is not None
    log = open_db(db, readonly=True)
    records: Iterator[Record]
    try:
        if stream is not None:
            _check_stream(log, stream)
        if stream is not None and not follow:
            records = (r for r in log.read(stream) if r.seq > after)
        elif follow:
            records = log.follow(after_seq=after, stop=threading.Event())
        else:
            records = log.read_all(after_seq=after)
        for r in records:
            if stream is not None and r.stream != stream:
                continue
            _print_record(record_json(r), as_json)
    except KeyboardInterrupt:
        pass
    finally:
        log.close()


def _print_record(obj: dict[str, Any], as_json: bool) -> None:
    """One record: a JSON line (as stored); for people its data whole, a payload sent as JSON
    text shown as JSON; piped, tab-separated (seq, time, stream@version, type, data)."""
    if as_json:
        click.echo(orjson.dumps(obj).decode())
        return
    data = orjson.dumps(readable_data(obj["data"])).decode()
    stamp = datetime.fromisoformat(str(obj["recorded_at"])).isoformat(timespec="milliseconds")
    if not console.is_terminal:
        fields = [str(obj["seq"]), stamp, f"{obj['stream']}@{obj['version']}", str(obj["type"]), data]
        click.echo("\t".join(clean(f) for f in fields))
        return
    console.print(
        f"[dim]{obj['seq']:>8}[/] {stamp} [cyan]{shown(str(obj['stream']))}[/]@{obj['version']} "
        f"[bold]{shown(str(obj['type']))}[/] {shown(data)}",
        soft_wrap=True,
    )


def remote_records(client: OperatorClient, after: int, follow: bool) -> Iterator[dict[str, Any]]:
    """The server's records after `after` in seq order (as export lines); with `follow`, forever."""
    while True:
        params = {"after": str(after), "wait": str(FOLLOW_WAIT if follow else 0)}
        body = client.get("/api/v1/events", params)
        yield from body["records"]
        if body["records"]:
            after = int(body["last_seq"])
        elif not follow:
            return


STREAM_CATEGORIES = ("run", "controller", "approval", "session")


def _check_stream(log: EventLog, stream: str) -> None:
    """A usage error for a name that is no stream (`deployer`), naming the streams it may mean."""
    try:
        next(iter(log.read(stream)), None)  # the name is checked as the read starts
    except StreamNameError:
        meant = [f"{c}-{stream}" for c in STREAM_CATEGORIES if log.stream_version(f"{c}-{stream}") > 0]
        hint = f"did you mean --stream {' or '.join(meant)}?" if meant else (
            "a broker run's events are in run-<id>, a controller's in controller-<id>, "
            "an approval's in approval-<id>"
        )  # fmt: skip
        raise UsageFailure(f"{stream!r} is not a stream name (streams are <category>-<id>): {hint}") from None


@click.command("verify")
@click.argument("db", required=False)
@server_option
@click.option("--anchor", "anchor_file", type=click.File("r"), help="An anchor saved by `flightlog anchor`.")
@click.option(
    "--chain-only",
    is_flag=True,
    help="Walk the chain only; check neither the records nor the view snapshots.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def verify_cmd(
    db: str | None,
    server: str | None,
    anchor_file: click.utils.LazyFile | None,
    chain_only: bool,
    as_json: bool,
) -> None:
    """Walk the hash chain of DB, check its records and its view snapshots; exit 1 if any fails.

    The chain is walked record by record and the first bad seq named. Every record is checked
    against the event catalogue: a record a crafted import or a hand edit put there (with the
    chain recomputed), or that a newer flightlog wrote, is named with why (the first few);
    every view leaves such records out. Then every stored view snapshot is checked: on its
    chain position and against its digest; on a keyed log by its MAC, on an unkeyed log by
    re-deriving it from the log (one fold of every view, about what `flightlog replay` costs;
    --chain-only skips both checks). With --server, the server's chain is walked now and its
    records and snapshots are as it checked them when it started.

    \b
    Example:
      flightlog anchor flightlog.db > anchor.txt     # keep this somewhere else
      flightlog verify flightlog.db --anchor anchor.txt
      flightlog verify --server http://127.0.0.1:8080 --anchor anchor.txt
    """
    one_target(db, server)
    anchor = parse_anchor(anchor_file.read()) if anchor_file is not None else None
    if server is not None:
        found = OperatorClient(server).integrity(anchor)
    else:
        assert db is not None
        found = _verify_db(db, anchor, as_json, not chain_only)
    result = found.chain
    if as_json:
        out = found.to_dict()
        out["anchor"] = None if anchor is None else {"seq": anchor.seq, "hash": anchor.hash}
        emit_json(out)
    elif result.ok:
        what = f" and matches the anchor at seq {anchor.seq}" if anchor else ""
        console.print(f"[green]ok[/]: chain verified over {result.checked} events{what}")
    else:
        console.print(
            f"[red]BROKEN[/] at seq {result.first_bad_seq}: {result.reason} "
            f"({result.checked} events verified before it)"
        )
    if not as_json and found.catalogue is not None:
        fits = found.catalogue
        line = shown(fits.summary())
        console.print(
            f"[green]ok[/]: {line}" if fits.ok else f"[red]OFF CATALOGUE[/]: {line}", soft_wrap=True
        )
    if not as_json and found.snapshots is not None:
        check = found.snapshots
        line = shown(check.summary())
        console.print(f"[green]ok[/]: {line}" if check.ok else f"[red]FORGED[/]: {line}", soft_wrap=True)
    if not found.ok:
        raise SystemExit(EXIT_FOUND)


def _verify_db(db: str, anchor: Head | None, quiet: bool, snapshots: bool) -> Integrity:
    log = open_db(db, readonly=True)
    try:
        total = log.head().seq
        with progress(disable=quiet or total < 50_000) as bar:
            task = bar.add_task("verifying the chain", total=total)
            chain = lambda n: bar.update(task, completed=n)  # noqa: E731
            check = lambda n, of: bar.update(task, description="re-deriving snapshots", completed=n, total=of)  # noqa: E731
            fits = lambda n: bar.update(task, description="checking the records", completed=n)  # noqa: E731
            return check_log(
                log,
                anchor,
                snapshots=snapshots,
                catalogue=snapshots,
                chain_progress=chain,
                snapshot_progress=check,
                catalogue_progress=fits,
            )
    except EventLogError as e:
        raise click.ClickException(str(e)) from e
    finally:
        log.close()


@click.command("anchor")
@click.argument("db")
@click.option("--json", "as_json", is_flag=True, help='Print {"seq", "hash"} instead of \'SEQ HASH\'.')
def anchor_cmd(db: str, as_json: bool) -> None:
    """Print the log's head as `SEQ HASH`: keep it outside the database to catch truncation.

    The whole chain is walked first: a log that is damaged or does not verify gets no anchor
    (exit 1 when the chain is broken, 8 when the file cannot be read).

    \b
    Example:
      flightlog anchor flightlog.db > anchor.txt
    """
    result = _verify_db(db, None, as_json, snapshots=False).chain
    if not result.ok or result.head is None:
        err_console.print(
            f"[red]BROKEN[/] at seq {result.first_bad_seq}: {result.reason}: no anchor for a broken chain"
        )
        raise SystemExit(EXIT_FOUND)
    head = result.head
    if as_json:
        emit_json({"seq": head.seq, "hash": head.hash})
    else:
        click.echo(f"{head.seq} {head.hash}")
