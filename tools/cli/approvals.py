"""CLI commands on the approval gate: approvals and audit (approve and reject are in _cli_decide).

They work on a database file directly, even one that a running System in another process
uses, or (`--server URL`) through a running server's operator API.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from eventlog import EventLog, EventLogError, SystemClock
from projections import ApprovalRow, Views

from .._integrity import Integrity, check_log
from .._output import EXIT_FOUND, console, emit_json, err_console, open_db, shown
from .decide import approve_cmd, reject_cmd
from .formats import SHORT_DIGEST, Column, duration, latency, print_table, say_unreadable, when, wide_option
from .remote import OperatorClient, one_target, server_option


def register(cli: click.Group) -> None:
    cli.add_command(approvals_cmd)
    cli.add_command(approve_cmd)
    cli.add_command(reject_cmd)
    cli.add_command(audit_cmd)


def _outcome(row: ApprovalRow) -> str:
    colours = {"approve": "green", "reject": "red", "expired": "yellow", "discarded": "dim"}
    colour = colours.get(row.status)
    text = row.status
    if row.status == "pending" and row.quorum > 1:
        text = f"pending {len(row.votes)}/{row.quorum}"
    return f"[{colour}]{text}[/]" if colour else text


def _row_json(row: ApprovalRow, now: datetime | None = None) -> dict[str, Any]:
    out = row.to_dict()
    out["refused_count"] = len(row.refused)
    if now is not None:
        out["expires_in_s"] = round((row.expires_at - now).total_seconds(), 3)
    return out


def _open_views(db: str) -> tuple[EventLog, Views]:
    log = open_db(db, readonly=True)
    return log, Views(log, clock=SystemClock())


# -- approvals -------------------------------------------------------------------------------


@click.command("approvals")
@click.argument("db", required=False)
@server_option
@click.option("--all", "show_all", is_flag=True, help="The whole history, decided ones included.")
@wide_option
@click.option("--json", "as_json", is_flag=True, help="Print the approvals as a JSON list.")
def approvals_cmd(db: str | None, server: str | None, show_all: bool, wide: bool, as_json: bool) -> None:
    """List the approvals awaiting a decision in DB, oldest request first.

    Approvals past their deadline are left out (they expire as soon as a System or a
    decision touches the database). `--all` lists every approval ever requested, with its
    outcome, who caused it, the latency and how many decisions were refused.

    \b
    Example:
      flightlog approvals flightlog.db
      flightlog approvals flightlog.db --all --json
      flightlog approvals --server http://127.0.0.1:8080     # token from $FLIGHTLOG_OPERATOR_TOKEN
    """
    one_target(db, server)
    if server is not None:
        now = SystemClock().now()
        client = OperatorClient(server)
        rows = client.approval_history() if show_all else client.pending()
    else:
        assert db is not None
        log, views = _open_views(db)
        try:
            now = views.clock.now()
            rows = views.approval_history() if show_all else views.pending_approvals()
            say_unreadable(views.unreadable)
        finally:
            log.close()
    if as_json:
        emit_json([_row_json(r, None if show_all else now) for r in rows])
        return
    if not rows:
        console.print("no approvals recorded" if show_all else "no pending approvals")
        return
    columns = [Column("id", key=True, short=True), Column("run", key=True, short=True), Column("kind"),
               Column("title", key=True, wraps=True), Column("risk")]  # fmt: skip
    quorum = any(r.quorum > 1 for r in rows)
    if show_all:
        columns += [Column("outcome", key=True), Column("actor", key=True), Column("requested"),
                    Column("identity"), Column("latency", "right"), Column("refused", "right")]  # fmt: skip
    else:
        columns += [Column("expires in", "right", key=True), Column("digest"), Column("requested")]
        if quorum:
            columns.append(Column("votes", "right"))
    cells = []
    for r in rows:
        row = [shown(r.id), shown(r.run_id) or "—", shown(r.kind), shown(r.title), _risk(r.risk)]
        if show_all:
            row += [_outcome(r), _deciders(r), when(r.requested_at), shown(r.identity) or "—",
                    latency(r.latency_ms), str(len(r.refused))]  # fmt: skip
        else:
            left = (r.expires_at - now).total_seconds()
            row += [duration(left), r.payload_sha256[:SHORT_DIGEST], when(r.requested_at)]
            if quorum:
                row.append(f"{len(r.votes)}/{r.quorum}" if r.quorum > 1 else "")
        cells.append(row)
    print_table("approval history" if show_all else "pending approvals", columns, cells, wide=wide)


def _deciders(r: ApprovalRow) -> str:
    """Everyone who decided: each voter of a quorum approval in order, then whoever ended it."""
    names = list(r.votes)
    if r.actor and r.actor not in names:
        names.append(r.actor)
    return ", ".join(shown(n) for n in names) or "—"


def _risk(risk: str) -> str:
    colour = {"low": "green", "medium": "yellow", "high": "red"}.get(risk)
    return f"[{colour}]{risk}[/]" if colour else shown(risk)


# -- audit -----------------------------------------------------------------------------------


@click.command("audit")
@click.argument("db", required=False)
@server_option
@click.option("--run", "run_id", metavar="RUN", help="Only the approvals of this run.")
@wide_option
@click.option("--json", "as_json", is_flag=True, help="Print the history and the check as JSON.")
def audit_cmd(db: str | None, server: str | None, run_id: str | None, wide: bool, as_json: bool) -> None:
    """The approval audit trail of DB, and whether the hash chain under it is intact.

    For every approval: the request (run, kind, title, risk, payload digest), its outcome,
    who caused it and with which identity, when, the latency, and the decisions that were
    refused. Then the chain is verified and every record checked against the event catalogue;
    exit 1 if the chain is broken or a record does not fit.

    \b
    Example:
      flightlog audit flightlog.db
      flightlog audit flightlog.db --run 42 --json
      flightlog audit --server http://127.0.0.1:8080
    """
    one_target(db, server)
    if server is not None:
        rows, found, unreadable = _audit_on_server(OperatorClient(server))
    else:
        assert db is not None
        rows, found, unreadable = _audit_db(db)
    if run_id is not None:
        rows = [r for r in rows if r.run_id == run_id]
    if as_json:
        out = {"approvals": [_row_json(r) for r in rows], "verify": _verify_json(found)}
        if unreadable:
            out["error"] = unreadable
        emit_json(out)
    else:
        if unreadable:
            err_console.print(f"[red]error[/]: {shown(unreadable)}", soft_wrap=True)
        else:
            _audit_table(rows, run_id, wide)
        console.print(_verify_line(found), soft_wrap=True)
    if unreadable or not found.ok:
        raise SystemExit(EXIT_FOUND)


def _audit_db(db: str) -> tuple[list[ApprovalRow], Integrity, str]:
    log, views = _open_views(db)
    unreadable = ""
    try:
        found = check_log(log)
        if found.snapshots is not None:  # what failed is not read: the audit shows the log's truth
            views.runner.rejected.update({(b.view, b.version, b.seq): b.reason for b in found.snapshots.bad})
        try:
            rows = views.approval_history()
            say_unreadable(views.unreadable)
        except (EventLogError, TypeError, ValueError, KeyError) as e:
            # A tampered record may not even decode: the chain check below still says where.
            rows, unreadable = [], f"the approval history could not be read: {type(e).__name__}: {e}"
    except EventLogError as e:
        raise click.ClickException(str(e)) from e
    finally:
        log.close()
    return rows, found, unreadable


def _audit_on_server(client: OperatorClient) -> tuple[list[ApprovalRow], Integrity, str]:
    result = client.integrity()
    try:
        return client.approval_history(), result, ""
    except click.ClickException as e:
        return [], result, f"the approval history could not be read: {e.message}"


def _audit_table(rows: list[ApprovalRow], run_id: str | None, wide: bool) -> None:
    if not rows:
        console.print(f"no approvals recorded for run {run_id}" if run_id else "no approvals recorded")
        return
    columns = [
        Column("id", key=True, short=True),
        Column("run", key=True, short=True),
        Column("title", key=True, wraps=True),
        Column("outcome", key=True),
        Column("actor", key=True),  # who decided: the audit's point, kept at any width
        Column("decided"),
        Column("kind"),
        Column("risk"),
        Column("digest"),
        Column("requested"),
        Column("requested by"),
        Column("identity"),
        Column("latency", "right"),
        Column("refused", "right"),
    ]
    cells = [
        [
            shown(r.id),
            shown(r.run_id) or "—",
            shown(r.title),
            _outcome(r),
            _deciders(r),
            when(r.decided_at),
            shown(r.kind),
            _risk(r.risk),
            r.payload_sha256[:SHORT_DIGEST],
            when(r.requested_at),
            shown(r.requested_by) or "—",
            shown(r.identity) or "—",
            latency(r.latency_ms),
            str(len(r.refused)),
        ]
        for r in rows
    ]
    print_table(f"approval audit: run {run_id}" if run_id else "approval audit", columns, cells, wide=wide)
    for r in rows:
        for a in r.refused:
            who = f"{a.actor} ({a.identity})" if a.identity else a.actor
            # A run's own answer to a request that needs an operator is not an operator's decision.
            kind = "agent-reported answer refused" if a.agent_reported else "refused"
            console.print(
                f"  {kind} at seq {a.seq}: {shown(who)}'s {shown(a.decision)} of {shown(r.id)} "
                f"at {when(a.at)}: {shown(a.reason)}",
                soft_wrap=True,
            )


def _verify_json(found: Integrity) -> dict[str, Any]:
    """`verify --json`'s fields, with the head's seq alone (as `audit --json` always had it)."""
    out = found.to_dict()
    del out["chain_ok"]
    head = out.pop("head")
    snapshots = out.pop("snapshots")
    return {**out, "head_seq": None if head is None else head["seq"], "snapshots": snapshots}


def _verify_line(found: Integrity) -> str:
    result = found.chain
    if result.ok and found.catalogue is not None and not found.catalogue.ok:
        return f"[red]OFF CATALOGUE[/]: {shown(found.tamper())}"
    if result.ok and not found.ok:
        return f"[red]FORGED[/]: {shown(found.tamper())}"
    if result.ok:
        upto = result.head.seq if result.head is not None else result.checked
        return f"[green]ok[/]: chain verified up to seq {upto}"
    return (
        f"[red]BROKEN[/]: the chain breaks at seq {result.first_bad_seq}: {shown(result.reason)} "
        f"({result.checked} events verified before it)"
    )
