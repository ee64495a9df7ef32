"""CLI commands that rebuild views: replay (and store snapshots), replay-check (compare with the record)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import click
from rich.table import Table

from eventlog import EventLogError, SnapshotsUnsupported, snapshot_store
from projections import (
    Mismatch,
    ReplayReport,
    View,
    ViewRunner,
    Views,
    compare_expected,
    default_views,
    replay_check,
    state_digest,
    text_diff,
)

from .._output import EXIT_FOUND, console, emit_json, open_db, progress, shown
from .golden import GoldenError, read_expected, rendered_timelines, write_expected

PROGRESS_FROM = 20_000  # logs shorter than this rebuild too fast to need a progress bar


@contextmanager
def progress_bar(label: str, total: int, quiet: bool) -> Iterator[Callable[[int, int], None]]:
    """A rich progress bar on stderr; yields `advance(done, total)`."""
    with progress(label, disable=quiet or total < PROGRESS_FROM) as bar:
        task = bar.add_task(label, total=total)
        yield lambda done, of: bar.update(task, completed=done, total=of)


def chosen_views(names: tuple[str, ...]) -> list[View]:
    everything = default_views()
    if not names:
        return everything
    known = {v.name: v for v in everything}
    unknown = [n for n in names if n not in known]
    if unknown:
        message = f"no view {', '.join(unknown)}; views: {', '.join(known)}"
        raise click.BadParameter(message, param_hint="--view")
    return [known[n] for n in dict.fromkeys(names)]


def register(cli: click.Group) -> None:
    cli.add_command(replay_cmd)
    cli.add_command(replay_check_cmd)


@click.command("replay")
@click.argument("db")
@click.option("--view", "names", multiple=True, help="Only this view (repeatable); default: every view.")
@click.option("--no-store", is_flag=True, help="Rebuild only: keep the stored snapshots as they are.")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
def replay_cmd(db: str, names: tuple[str, ...], no_store: bool, as_json: bool) -> None:
    """Rebuild views from seq 0 with this code; store fresh snapshots (with their digests).

    Snapshots of the rebuilt views are replaced: later opens start from them, and later
    `replay-check` runs compare with what this code made of the log.

    \b
    Example:
      flightlog replay flightlog.db
      flightlog replay flightlog.db --view timeline --json
    """
    views = chosen_views(names)
    log = open_db(db, readonly=no_store, existing_log=True)
    try:
        store = None
        if not no_store:
            try:
                store = snapshot_store(log)
                for view in views:
                    store.delete(view.name)
            except (SnapshotsUnsupported, EventLogError):
                store = None
        runner = ViewRunner(log, views, snapshots=store)
        head = log.head().seq
        start = time.perf_counter()
        with progress_bar("replaying", head, as_json) as advance:
            while runner.checkpoint < head:
                before = runner.checkpoint
                runner.feed(log.read_all(after_seq=before, to_seq=min(head, before + 20_000)))
                advance(runner.checkpoint, head)
                if runner.checkpoint == before:
                    break
        stored = runner.write_snapshots() if store is not None else 0
        runner.flush()
        seconds = time.perf_counter() - start
        rows: dict[str, dict[str, Any]] = {}
        for view in views:
            state = runner.read_state(view.name, view.copy)
            rows[view.name] = {
                "version": view.version,
                "digest": state_digest(view, state),
                "items": len(state) if hasattr(state, "__len__") else None,
            }
    finally:
        log.close()
    if as_json:
        rate = round(head / seconds) if seconds else None
        emit_json({"head": head, "seconds": round(seconds, 3), "events_per_s": rate, "views": rows,
                   "snapshots_stored": stored})  # fmt: skip
        return
    table = Table(title=f"replayed {head:,} events in {seconds:.2f} s")
    for column in ("view", "version", "items", "digest"):
        table.add_column(column, justify="right" if column in ("version", "items") else "left")
    for name, row in rows.items():
        items = "—" if row["items"] is None else f"{row['items']:,}"
        table.add_row(name, str(row["version"]), items, row["digest"][:16])
    console.print(table)
    if store is None and not no_store:
        console.print("[yellow]snapshots are not stored for this backend[/]")
    elif stored:
        console.print(f"stored {stored} snapshot(s) at seq {head}, besides those written on the way")


@click.command("replay-check")
@click.argument("db")
@click.option(
    "--golden",
    type=click.Path(file_okay=False),
    help="Compare with the expected dumps in this folder (views/*.json) instead of stored digests.",
)
@click.option("--update-golden", is_flag=True, help="Write this code's dumps into --golden, then stop.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
def replay_check_cmd(db: str, golden: str | None, update_golden: bool, as_json: bool) -> None:
    """Rebuild every view with this code and compare: exit 1 with a diff on any difference.

    Without --golden, each view is compared with every digest stored with its snapshots (of
    the view's current version), that is, with what the code of that day made of the log.

    \b
    Exit codes: 0 no difference (a warning if nothing was comparable), 1 a difference,
    2 usage error (no database, a bad --golden folder).
    Example:
      flightlog replay-check flightlog.db
      flightlog replay-check golden.db --golden tests/golden/basic
    """
    if update_golden and golden is None:
        raise click.UsageError("--update-golden needs --golden DIR")
    log = open_db(db, readonly=True)
    try:
        head = log.head().seq
        if update_golden:
            assert golden is not None
            written = write_expected(golden, Views(log, snapshots=None))
            console.print(f"wrote {len(written)} file(s) under {shown(golden)}")
            return
        with progress_bar("rebuilding", head, as_json) as advance:
            if golden is not None:
                try:
                    expected, timelines = read_expected(golden)
                except GoldenError as e:
                    raise click.BadParameter(str(e), param_hint="--golden") from e
                report = compare_expected(log, default_views(), expected, progress=advance)
                if timelines is not None:
                    report = _check_timelines(report, timelines, Views(log, snapshots=None))
            else:
                report = replay_check(log, default_views(), progress=advance)
    finally:
        log.close()
    _print_report(report, golden, as_json)
    if not report.ok:
        raise SystemExit(EXIT_FOUND)


def _check_timelines(report: ReplayReport, expected: dict[str, object], views: Views) -> ReplayReport:
    actual = rendered_timelines(views)
    report.compared["timelines"] = 1
    if actual != expected:
        report.mismatches.append(Mismatch("timelines", report.head, "", "", text_diff(expected, actual)))
    return report


def _print_report(report: ReplayReport, golden: str | None, as_json: bool) -> None:
    if as_json:
        emit_json(report.to_dict())
        return
    against = f"golden dumps in {golden}" if golden else "stored snapshot digests"
    table = Table(title=f"replay check at seq {report.head:,}, against {shown(against)}")
    for column in ("view", "compared", "result", "digest now"):
        table.add_column(column, justify="right" if column == "compared" else "left")
    bad = {m.view for m in report.mismatches}
    for name, count in report.compared.items():
        result = "[green]same[/]" if count else "[dim]nothing to compare[/]"
        result = "[red]DIFFERS[/]" if name in bad else result
        table.add_row(name, str(count), result, report.digests.get(name, "")[:16])
    console.print(table)
    for note in report.skipped:
        console.print(f"[dim]skipped: {shown(note)}[/]")
    for m in report.mismatches:
        digests = f"expected {m.expected[:16]}, got {m.actual[:16]}"
        console.print(f"\n[red]{m.view} differs at seq {m.seq}[/] ({digests})")
        console.print(shown(m.diff), soft_wrap=True, highlight=False)
    if report.ok and report.total == 0:
        hint = "no stored snapshots (run `flightlog replay DB` first)"
        console.print(f"[yellow]nothing was compared: {hint}[/]")
    elif report.ok:
        console.print(f"[green]ok[/]: {report.total} comparison(s), no difference")
