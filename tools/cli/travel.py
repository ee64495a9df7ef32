"""CLI commands that travel in time: runs, timeline, travel, diff. They only read.

A moment (`--at`, `--from`, `--to`) is a seq, or an ISO time (a time without an offset is
UTC) that names the last seq recorded at or before it.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from eventlog import EventLog
from projections import Diff, RunRow, TimelineEntry, Views

from .._output import EXIT_FOUND, console, emit_json, open_db, shown
from . import ids, replay
from .formats import Column, print_table, readable_text, say_unreadable, wide_option
from .remote import OperatorClient, one_target, server_option

AT_HELP = "A seq, or an ISO time such as 2026-01-01T10:42:07Z."
DIFF_VIEWS = ["timeline", "runs", "finish_status", "approval_history", "pending_approvals", "agent_runs"]


def register(cli: click.Group) -> None:
    # `runs_cmd` is `flightlog runs list` (and `flightlog runs DB`): see tools/cli/runs.py.
    cli.add_command(timeline_cmd)
    cli.add_command(travel_cmd)
    cli.add_command(diff_cmd)
    replay.register(cli)


def parse_at(log: EventLog, text: str, option: str = "--at") -> int:
    """The seq that a command-line moment names; a usage error if it names none."""
    head = log.head().seq
    text = text.strip()
    if text.lstrip("-").isdigit():
        seq = int(text)
        if seq < 0 or seq > head:
            raise click.BadParameter(f"seq {seq} is outside the log (seqs 0 to {head})", param_hint=option)
        return seq
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        raise click.BadParameter(
            f"{text!r} is neither a seq nor an ISO time. {AT_HELP}", param_hint=option
        ) from None
    return log.seq_at(when if when.tzinfo else when.replace(tzinfo=UTC))


def _when(at: datetime | None) -> str:
    return "—" if at is None else at.astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _moment(views: Views, seq: int) -> str:
    return _moment_at(seq, views.moment(seq) if seq else None)


def _moment_at(seq: int, when: datetime | str | None) -> str:
    at = datetime.fromisoformat(when) if isinstance(when, str) else when
    return f"seq {seq:,} ({_when(at)})" if seq else "seq 0 (before the first event)"


TIMELINE_COLUMNS = [
    Column("at", key=True), Column("kind"), Column("who", key=True), Column("text", key=True, wraps=True),
    Column("status", key=True),
]  # fmt: skip


def _print_timeline(title: str, entries: list[TimelineEntry]) -> None:
    """A timeline as a table that fits the terminal, or tab-separated lines, whole, when piped."""
    cells = [
        [_when(e.at), shown(e.kind), shown(e.name or e.role), shown(readable_text(e.text or e.detail)),
         shown(e.status)]
        for e in entries
    ]  # fmt: skip
    print_table(title, TIMELINE_COLUMNS, cells)


def _entries_json(entries: list[TimelineEntry]) -> list[dict[str, Any]]:
    return [e.to_dict() for e in entries]


def _dict(row: Any) -> dict[str, Any] | None:
    return None if row is None else dict(row.to_dict())


def _known_run(views: Views, run_id: str, head: int) -> None:
    if views.agent_run(run_id, at=head) is None and views.run(run_id, at=head) is None:
        raise click.UsageError(f"no run {run_id!r} in this log")


# -- runs ----------------------------------------------------------------------------------------


@click.command("runs")
@click.argument("db", required=False)
@server_option
@click.option("--at", "at_text", help=f"As of this moment. {AT_HELP}")
@wide_option
@click.option("--json", "as_json", is_flag=True, help="Print the runs as JSON.")
def runs_cmd(db: str | None, server: str | None, at_text: str | None, wide: bool, as_json: bool) -> None:
    """List the broker's runs and the operator's agent runs, now or as of a past moment.

    Each broker run says who created it (an operator, an enrolment credential, the run itself
    from an address, or a command on the database) and whether its token is revoked.

    \b
    Example:
      flightlog runs flightlog.db
      flightlog runs list flightlog.db --at 2026-01-01T10:42:07Z --json
      flightlog runs --server http://127.0.0.1:8080 --at 1200
    """
    one_target(db, server)
    if server is not None:
        broker, finish, agent, seq, when = OperatorClient(server).runs(at_text)
        moment = _moment_at(seq, when)
    else:
        assert db is not None
        log = open_db(db, readonly=True)
        try:
            views = Views(log)
            seq = parse_at(log, at_text) if at_text is not None else log.head().seq
            broker = views.runs(at=seq)
            finish = {r.run_id: views.finish_status(r.run_id, at=seq) for r in broker} if broker else {}
            agent = views.agent_runs(at=seq)
            moment = _moment(views, seq)
            say_unreadable(views.unreadable)
        finally:
            log.close()
    if as_json:
        emit_json(
            {
                "seq": seq,
                "runs": [
                    {**r.to_dict(), "finish": f.to_dict() if (f := finish.get(r.run_id)) else None}
                    for r in broker
                ],
                "agent_runs": [r.to_dict() for r in agent],
            }
        )
        return
    broker_cells = []
    for r in broker:
        f = finish.get(r.run_id)
        broker_cells.append([
            shown(r.run_id), shown(r.last_state), str(r.reports), str(r.finishes), _when(r.last_seen),
            shown(f.summary if f else ""), _when(r.registered_at), str(r.queue_depth), shown(_creator(r)),
            "revoked" if r.revoked else "",
        ])  # fmt: skip
    print_table(f"broker runs at {moment}", BROKER_COLUMNS, broker_cells, wide=wide)
    agent_cells = [
        [shown(a.run_id), shown(a.status), shown(a.title),
         shown(f"{a.forked_from} @{a.fork_seq}") if a.forked_from else "", _when(a.started_at),
         shown(a.stream)]
        for a in agent
    ]  # fmt: skip
    print_table(f"agent runs at {moment}", AGENT_COLUMNS, agent_cells, wide=wide)


BROKER_COLUMNS = [
    Column("run", key=True, short=True), Column("last state", key=True), Column("reports", "right"),
    Column("finishes", "right"), Column("last seen"), Column("summary", wraps=True), Column("registered"),
    Column("queue", "right"), Column("created by"), Column("token"),
]  # fmt: skip


def _creator(row: RunRow) -> str:
    """Who created a broker run: `operator alice (c1d2…)`, `self 127.0.0.1`; "" in older logs."""
    who = f"{row.created_by} ({row.created_by_credential})" if row.created_by_credential else row.created_by
    return f"{row.origin} {who}".strip()


AGENT_COLUMNS = [
    Column("run", key=True, short=True), Column("status", key=True), Column("title", key=True, wraps=True),
    Column("forked from", key=True, short=True), Column("started"), Column("stream"),
]  # fmt: skip


# -- timeline ------------------------------------------------------------------------------------


@click.command("timeline")
@click.argument("db", required=False)
@click.argument("run_id", metavar="RUN_ID", required=False)
@server_option
@click.option("--at", "at_text", help=f"As of this moment. {AT_HELP}")
@click.option("--each", is_flag=True, help="The run after each of its events, instead of one timeline.")
@click.option("--json", "as_json", is_flag=True, help="Print the timeline as JSON.")
def timeline_cmd(
    db: str | None, run_id: str | None, server: str | None, at_text: str | None, each: bool, as_json: bool
) -> None:
    """Print a run's timeline, now or as of a past moment (folded from its own stream).

    An agent run's timeline is its conversation; a broker run's is its reports, permission
    requests and decisions, control messages, replies and finishes.

    \b
    Example:
      flightlog timeline flightlog.db 7f3a…
      flightlog timeline flightlog.db 7f3a… --at 1200
      flightlog timeline flightlog.db 7f3a… --each --json
      flightlog timeline --server http://127.0.0.1:8080 7f3a… --at 1200
    """
    (run_id,) = one_target(db, server, run_id)
    assert run_id is not None
    if server is not None:
        entries, moments, seq, when = OperatorClient(server).timeline(run_id, at_text, each)
        moment = _moment_at(seq, when)
    else:
        assert db is not None
        log = open_db(db, readonly=True)
        try:
            views = Views(log)
            head = log.head().seq
            run_id = ids.run_id(views, run_id)
            _known_run(views, run_id, head)
            if each:
                moments = views.timeline_at_each_event(run_id)
            else:
                seq = parse_at(log, at_text) if at_text is not None else head
                entries = views.timeline(run_id, at=seq)
                moment = _moment(views, seq)
            say_unreadable(views.unreadable)
        finally:
            log.close()
    if each:
        if as_json:
            emit_json({"run_id": run_id, "moments": [m.to_dict() for m in moments]})
            return
        columns = [Column("seq", "right", key=True), Column("at", key=True), Column("event", key=True),
                   Column("status", key=True), Column("entries", "right"),
                   Column("last entry", wraps=True)]  # fmt: skip
        cells = [
            [str(m.seq), _when(m.at), shown(m.type), shown(m.status), str(len(m.entries)),
             shown(readable_text(m.entries[-1].text or m.entries[-1].detail) if m.entries else "")]
            for m in moments
        ]  # fmt: skip
        print_table(f"run {shown(run_id)} after each of its events", columns, cells)
        return
    if as_json:
        emit_json({"run_id": run_id, "seq": seq, "entries": _entries_json(entries)})
        return
    _print_timeline(f"run {shown(run_id)} at {moment}", entries)


# -- travel --------------------------------------------------------------------------------------


@click.command("travel")
@click.argument("db")
@click.argument("run_id")
@click.option("--at", "at_text", required=True, help=f"The moment to travel to. {AT_HELP}")
@click.option("--json", "as_json", is_flag=True, help="Print the run as it was, as JSON.")
def travel_cmd(db: str, run_id: str, at_text: str, as_json: bool) -> None:
    """Show a run exactly as it was at a past moment: status, timeline, pending approvals.

    Read-only: the log is folded up to that moment, nothing is executed.

    \b
    Example:
      flightlog travel flightlog.db 7f3a… --at 1200
      flightlog travel flightlog.db 7f3a… --at 2026-01-01T10:42:07Z --json
    """
    log = open_db(db, readonly=True)
    try:
        views = Views(log)
        head = log.head().seq
        run_id = ids.run_id(views, run_id)
        _known_run(views, run_id, head)
        seq = parse_at(log, at_text)
        agent = views.agent_run(run_id, at=seq)
        broker = views.run(run_id, at=seq)
        finish = views.finish_status(run_id, at=seq)
        entries = views.timeline(run_id, at=seq)
        pending = [a for a in views.open_approvals(at=seq) if a.run_id == run_id]
        moment = _moment(views, seq)
    finally:
        log.close()
    if as_json:
        emit_json(
            {
                "run_id": run_id,
                "seq": seq,
                "agent_run": agent.to_dict() if agent else None,
                "run": broker.to_dict() if broker else None,
                "finish": finish.to_dict() if finish else None,
                "open_approvals": [a.to_dict() for a in pending],
                "timeline": _entries_json(entries),
            }
        )
        return
    console.print(f"[bold]run {shown(run_id)}[/] at {moment}", soft_wrap=True)
    if agent is None and broker is None:
        console.print("[yellow]the run did not exist yet at that moment[/]", soft_wrap=True)
        return
    if agent is not None:
        origin = f", forked from {agent.forked_from} @{agent.fork_seq}" if agent.forked_from else ""
        line = f"agent run: [bold]{agent.status or 'started'}[/] — {shown(agent.title)}{origin}"
        console.print(line, soft_wrap=True)
    if broker is not None:
        console.print(
            f"broker run: last state {shown(broker.last_state) or '—'}, {broker.reports} report(s), "
            f"{broker.finishes} finish(es), last seen {_when(broker.last_seen)}",
            soft_wrap=True,
        )
    for a in pending:
        line = f"open approval [bold]{shown(a.id)}[/]: {shown(a.title)} ({shown(a.status)})"
        console.print(line, soft_wrap=True)
    _print_timeline("timeline", entries)


# -- diff ----------------------------------------------------------------------------------------


@click.command("diff")
@click.argument("db")
@click.argument("run_id")
@click.option("--from", "a_text", required=True, help=f"The earlier moment. {AT_HELP}")
@click.option("--to", "b_text", required=True, help=f"The later moment. {AT_HELP}")
@click.option(
    "--view",
    default="timeline",
    show_default=True,
    type=click.Choice(
        ["timeline", "runs", "finish_status", "approval_history", "pending_approvals", "agent_runs"]
    ),
    help="What to compare (all but timeline are narrowed to RUN_ID).",
)
@click.option("--json", "as_json", is_flag=True, help="Print the diff as JSON.")
def diff_cmd(db: str, run_id: str, a_text: str, b_text: str, view: str, as_json: bool) -> None:
    """What changed in a run between two moments: added, removed and changed items.

    Timeline entries (of an agent run or a broker run) are matched by the seq of the event
    that created them. Exit status 1 when something changed, 0 when nothing did (like diff(1)).

    \b
    Example:
      flightlog diff flightlog.db 7f3a… --from 1200 --to 1450
      flightlog diff flightlog.db 7f3a… --from 1200 --to 1450 --view approval_history
    """
    log = open_db(db, readonly=True)
    try:
        views = Views(log)
        run_id = ids.run_id(views, run_id)
        _known_run(views, run_id, log.head().seq)
        a = parse_at(log, a_text, "--from")
        b = parse_at(log, b_text, "--to")
        if view == "timeline":
            diff = views.diff("timeline", run_id, a=a, b=b)
        else:
            result = views.diff(view, a=a, b=b)
            diff = _narrow(result, run_id)
    finally:
        log.close()
    if as_json:
        emit_json(diff.to_dict())
    else:
        _print_diff(diff, run_id)
    if not diff.empty:
        raise SystemExit(EXIT_FOUND)


def _narrow(diff: Diff, run_id: str) -> Diff:
    def mine(item: dict[str, Any]) -> bool:
        return item.get("run_id") == run_id

    added = [i for i in diff.added if mine(i)]
    removed = [i for i in diff.removed if mine(i)]
    return Diff(diff.view, diff.a, diff.b, added, removed, [c for c in diff.changed if mine(c.after)])


def _print_diff(diff: Diff, run_id: str) -> None:
    head = f"[bold]{diff.view}[/] of run {shown(run_id)}: seq {diff.a:,} → seq {diff.b:,}"
    console.print(head, soft_wrap=True)
    if diff.empty:
        console.print("no change", soft_wrap=True)
        return
    for item in diff.added:
        console.print(f"[green]+ {shown(_label(item))}[/]", soft_wrap=True)
    for item in diff.removed:
        console.print(f"[red]- {shown(_label(item))}[/]", soft_wrap=True)
    for change in diff.changed:
        fields = ", ".join(f"{f}: {shown(str(change.before.get(f)))} → {shown(str(change.after.get(f)))}"
                           for f in change.fields)  # fmt: skip
        key = f"seq {change.key}" if diff.view == "timeline" else change.key
        console.print(f"[yellow]~ {shown(key)}[/] {fields}", soft_wrap=True)


def _label(item: dict[str, Any]) -> str:
    key = f"seq {item['seq']}" if "seq" in item else item.get("id") or item.get("run_id") or ""
    text = item.get("text") or item.get("detail") or item.get("title") or item.get("status") or ""
    return f"{key} {item.get('kind', '')} {readable_text(str(text))}".strip()
