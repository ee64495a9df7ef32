"""CLI commands on the approval gate: approvals, approve, reject, audit.

They work on a database file directly, even one that a running System in another process
uses: a decision is an append with an expected version, and the other System's follower
wakes its waiter when it sees it.
"""

from __future__ import annotations

import getpass
from datetime import UTC, datetime
from typing import Any, NoReturn

import click
from rich.markup import escape
from rich.table import Table

from actors import (
    ActorsError,
    ApprovalExpiredError,
    ApprovalNotPendingError,
    ApprovalRecordingError,
    ApprovalResolution,
    DuplicateVoteError,
    QuorumPendingError,
    System,
)
from eventlog import EventLog, EventLogError, SystemClock, VerifyResult
from projections import ApprovalRow, Views

from ._output import EXIT_FOUND, EXIT_USAGE, console, emit_json, err_console, open_db

# Exit codes of `approve` and `reject` (0, 1 and 2 as everywhere in the CLI).
EXIT_UNKNOWN = 3  # no approval with that id
EXIT_DECIDED = 4  # it already has its outcome: this attempt is refused (and recorded)
EXIT_EXPIRED = 5  # its deadline passed before the decision
EXIT_DUPLICATE_VOTE = 6  # this actor already approved a quorum approval
EXIT_RECORDING = 7  # the requester is still recording it: try again shortly

DECISION_EXITS = f"""\b
Exit codes:
  0  decided (or, for a quorum approval, the vote was recorded)
  1  another failure (the database could not be written, ...)
  {EXIT_USAGE}  usage error (no database at DB, a bad option)
  {EXIT_UNKNOWN}  no approval with that id
  {EXIT_DECIDED}  already decided: this attempt is refused and kept in the audit trail
  {EXIT_EXPIRED}  the approval expired before the decision
  {EXIT_DUPLICATE_VOTE}  NAME already approved this quorum approval
  {EXIT_RECORDING}  the request is still being recorded: try again in a moment
"""

SHORT_DIGEST = 12


def register(cli: click.Group) -> None:
    cli.add_command(approvals_cmd)
    cli.add_command(approve_cmd)
    cli.add_command(reject_cmd)
    cli.add_command(audit_cmd)


# -- formatting ------------------------------------------------------------------------------


def _when(at: datetime | None) -> str:
    if at is None:
        return "—"
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")


def _duration(seconds: float) -> str:
    """`1h 02m`, `4m 07s`, `12s`; `expired` once the time is up."""
    if seconds <= 0:
        return "expired"
    s = int(seconds)
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{max(s, 1)}s"


def _latency(ms: float | None) -> str:
    if ms is None:
        return "—"
    return f"{ms:.0f} ms" if ms < 1000 else f"{ms / 1000:.1f} s"


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
@click.argument("db")
@click.option("--all", "show_all", is_flag=True, help="The whole history, decided ones included.")
@click.option("--json", "as_json", is_flag=True, help="Print the approvals as a JSON list.")
def approvals_cmd(db: str, show_all: bool, as_json: bool) -> None:
    """List the approvals awaiting a decision in DB, oldest request first.

    Approvals past their deadline are left out (they expire as soon as a System or a
    decision touches the database). `--all` lists every approval ever requested, with its
    outcome, who caused it, the latency and how many decisions were refused.

    \b
    Example:
      flightlog approvals flightlog.db
      flightlog approvals flightlog.db --all --json
    """
    log, views = _open_views(db)
    try:
        now = views.clock.now()
        rows = views.approval_history() if show_all else views.pending_approvals()
    finally:
        log.close()
    if as_json:
        emit_json([_row_json(r, None if show_all else now) for r in rows])
        return
    if not rows:
        console.print("no approvals recorded" if show_all else "no pending approvals")
        return
    table = Table(title="approval history" if show_all else "pending approvals")
    table.add_column("id", no_wrap=True)
    table.add_column("run")
    table.add_column("kind")
    table.add_column("title")
    table.add_column("risk")
    if show_all:
        for name in ("requested", "outcome", "actor", "identity", "latency", "refused"):
            table.add_column(name, justify="right" if name in ("latency", "refused") else "left")
    else:
        for name in ("digest", "requested", "expires in"):
            table.add_column(name, justify="right" if name == "expires in" else "left")
        quorum = any(r.quorum > 1 for r in rows)
        if quorum:
            table.add_column("votes", justify="right")
    for r in rows:
        cells = [r.id, r.run_id or "—", r.kind, escape(r.title), _risk(r.risk)]
        if show_all:
            cells += [
                _when(r.requested_at),
                _outcome(r),
                escape(r.actor) or "—",
                escape(r.identity) or "—",
                _latency(r.latency_ms),
                str(len(r.refused)),
            ]
        else:
            left = (r.expires_at - now).total_seconds()
            cells += [r.payload_sha256[:SHORT_DIGEST], _when(r.requested_at), _duration(left)]
            if quorum:
                cells.append(f"{len(r.votes)}/{r.quorum}" if r.quorum > 1 else "")
        table.add_row(*cells)
    console.print(table)


def _risk(risk: str) -> str:
    colour = {"low": "green", "medium": "yellow", "high": "red"}.get(risk)
    return f"[{colour}]{risk}[/]" if colour else escape(risk)


# -- approve / reject ------------------------------------------------------------------------


def _identity() -> str:
    """Who ran the command, as far as this machine knows: the operating-system user."""
    try:
        return f"os-user:{getpass.getuser()}"
    except (OSError, KeyError):
        return ""


def _decide(db: str, approval_id: str, decision: str, actor: str, as_json: bool) -> None:
    actor = actor.strip()
    if not actor:
        raise click.UsageError("--as needs a name: who is deciding")
    log = open_db(db)
    try:
        with System.open(log, scheduler=False) as system:
            try:
                resolution = system.approvals.resolve(approval_id, decision, actor, identity=_identity())
            except QuorumPendingError as e:
                _vote_recorded(e, actor, as_json)
                return
            except ApprovalExpiredError as e:
                _refuse(EXIT_EXPIRED, "expired", _expired_message(e.resolution, actor, decision), as_json)
            except ApprovalNotPendingError:
                _not_pending(system.views.approval(approval_id), approval_id, actor, decision, as_json)
            except DuplicateVoteError:
                message = f"{actor!r} has already approved {approval_id}: a quorum needs distinct approvers"
                _refuse(EXIT_DUPLICATE_VOTE, "duplicate_vote", message, as_json)
            except ApprovalRecordingError:
                message = f"approval {approval_id} is still being recorded by its requester; try again"
                _refuse(EXIT_RECORDING, "recording", message, as_json)
            except (ActorsError, EventLogError) as e:
                raise click.ClickException(str(e)) from e
    finally:
        log.close()
    _decided(resolution, as_json)


def _decided(resolution: ApprovalResolution, as_json: bool) -> None:
    a = resolution.approval
    if as_json:
        emit_json(
            {
                "ok": True,
                "status": "decided",
                "id": a.id,
                "run_id": a.run_id,
                "decision": resolution.decision,
                "actor": resolution.actor,
                "identity": resolution.identity,
                "at": resolution.at.isoformat(),
                "payload_sha256": a.payload_sha256,
            }
        )
        return
    verb = {"approve": "[green]approved[/]", "reject": "[red]rejected[/]"}.get(
        resolution.decision, resolution.decision
    )
    run = f" (run {escape(a.run_id)})" if a.run_id else ""
    console.print(
        f"{verb} {a.id}{run}: {escape(a.kind)} {escape(a.title)!r} "
        f"by {escape(resolution.actor)} at {_when(resolution.at)}; digest {a.payload_sha256[:SHORT_DIGEST]}",
        soft_wrap=True,
    )


def _vote_recorded(e: QuorumPendingError, actor: str, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "ok": True,
                "status": "vote_recorded",
                "id": e.id,
                "actor": actor,
                "votes": e.votes,
                "needed": e.needed,
            }
        )
        return
    more = e.needed - e.votes
    console.print(
        f"vote recorded: {e.votes} of {e.needed} approvals recorded for {e.id}; "
        f"{more} more distinct approver{'s' if more != 1 else ''} needed",
        soft_wrap=True,
    )


def _expired_message(resolution: ApprovalResolution, actor: str, decision: str) -> str:
    return (
        f"approval {resolution.approval.id} expired at {_when(resolution.approval.expires_at)}, "
        f"before {actor!r} could {decision} it; the expiry stands and this decision was refused"
    )


def _not_pending(
    row: ApprovalRow | None, approval_id: str, actor: str, decision: str, as_json: bool
) -> NoReturn:
    if row is None:
        _refuse(EXIT_UNKNOWN, "unknown", f"no approval with id {approval_id!r}", as_json)
    if row.status == "expired":
        message = (
            f"approval {row.id} expired at {_when(row.decided_at)} ({row.actor}), "
            f"before {actor!r} could {decision} it; this decision was refused"
        )
        _refuse(EXIT_EXPIRED, "expired", message, as_json)
    if row.status == "discarded":
        message = f"approval {row.id} was discarded (its request was never published); nothing to decide"
    else:
        message = (
            f"approval {row.id} was already decided: {row.status} by {row.actor!r} at "
            f"{_when(row.decided_at)}; this {decision} was refused and kept in the audit trail"
        )
    _refuse(EXIT_DECIDED, "already_decided", message, as_json)


def _refuse(code: int, error: str, message: str, as_json: bool) -> NoReturn:
    if as_json:
        emit_json({"ok": False, "error": error, "message": message})
    else:
        err_console.print(f"[red]error[/]: {escape(message)}", soft_wrap=True)
    raise SystemExit(code)


_ACT_OPTIONS = [
    click.argument("db"),
    click.argument("approval_id", metavar="ID"),
    click.option(
        "--as", "actor", required=True, metavar="NAME", help="Who decides (kept in the audit trail)."
    ),
    click.option("--json", "as_json", is_flag=True, help="Print the outcome (or the error) as JSON."),
]


def _act_options(fn: Any) -> Any:
    for option in reversed(_ACT_OPTIONS):
        fn = option(fn)
    return fn


@click.command("approve", epilog=DECISION_EXITS)
@_act_options
def approve_cmd(db: str, approval_id: str, actor: str, as_json: bool) -> None:
    """Approve the pending approval ID in DB, as NAME.

    A running System that waits on this approval (in this or another process) wakes up with
    the outcome. A quorum approval needs approvals from several distinct names: each one
    before the last is recorded as a vote.

    \b
    Example:
      flightlog approve flightlog.db 3f1c0b2e-... --as alice
    """
    _decide(db, approval_id, "approve", actor, as_json)


@click.command("reject", epilog=DECISION_EXITS)
@_act_options
def reject_cmd(db: str, approval_id: str, actor: str, as_json: bool) -> None:
    """Reject the pending approval ID in DB, as NAME.

    A running System that waits on this approval (in this or another process) wakes up with
    the outcome.

    \b
    Example:
      flightlog reject flightlog.db 3f1c0b2e-... --as alice
    """
    _decide(db, approval_id, "reject", actor, as_json)


# -- audit -----------------------------------------------------------------------------------


@click.command("audit")
@click.argument("db")
@click.option("--run", "run_id", metavar="RUN", help="Only the approvals of this run.")
@click.option("--json", "as_json", is_flag=True, help="Print the history and the check as JSON.")
def audit_cmd(db: str, run_id: str | None, as_json: bool) -> None:
    """The approval audit trail of DB, and whether the hash chain under it is intact.

    For every approval: the request (run, kind, title, risk, payload digest), its outcome,
    who caused it and with which identity, when, the latency, and the decisions that were
    refused. Then the chain is verified; exit 1 if it is broken.

    \b
    Example:
      flightlog audit flightlog.db
      flightlog audit flightlog.db --run 42 --json
    """
    log, views = _open_views(db)
    unreadable = ""
    try:
        result = log.verify()
        try:
            rows = views.approval_history()
        except (EventLogError, TypeError, ValueError, KeyError) as e:
            # A tampered record may not even decode: the chain check below still says where.
            rows, unreadable = [], f"the approval history could not be read: {type(e).__name__}: {e}"
    except EventLogError as e:
        raise click.ClickException(str(e)) from e
    finally:
        log.close()
    if run_id is not None:
        rows = [r for r in rows if r.run_id == run_id]
    if as_json:
        out = {"approvals": [_row_json(r) for r in rows], "verify": _verify_json(result)}
        if unreadable:
            out["error"] = unreadable
        emit_json(out)
    else:
        if unreadable:
            err_console.print(f"[red]error[/]: {escape(unreadable)}", soft_wrap=True)
        else:
            _audit_table(rows, run_id)
        console.print(_verify_line(result), soft_wrap=True)
    if unreadable or not result.ok:
        raise SystemExit(EXIT_FOUND)


def _audit_table(rows: list[ApprovalRow], run_id: str | None) -> None:
    if not rows:
        console.print(f"no approvals recorded for run {run_id}" if run_id else "no approvals recorded")
        return
    table = Table(title=f"approval audit: run {run_id}" if run_id else "approval audit")
    for name in ("id", "run", "kind", "title", "risk", "digest", "requested", "requested by", "outcome"):
        table.add_column(name, no_wrap=name == "id")
    for name in ("actor", "identity", "decided", "latency", "refused"):
        table.add_column(name, justify="right" if name in ("latency", "refused") else "left")
    for r in rows:
        table.add_row(
            r.id,
            escape(r.run_id) or "—",
            escape(r.kind),
            escape(r.title),
            _risk(r.risk),
            r.payload_sha256[:SHORT_DIGEST],
            _when(r.requested_at),
            escape(r.requested_by) or "—",
            _outcome(r),
            escape(r.actor) or "—",
            escape(r.identity) or "—",
            _when(r.decided_at),
            _latency(r.latency_ms),
            str(len(r.refused)),
        )
    console.print(table)
    for r in rows:
        for a in r.refused:
            who = f"{a.actor} ({a.identity})" if a.identity else a.actor
            console.print(
                f"  refused at seq {a.seq}: {escape(who)}'s {a.decision} of {r.id} at {_when(a.at)}: "
                f"{escape(a.reason)}",
                soft_wrap=True,
            )


def _verify_json(result: VerifyResult) -> dict[str, Any]:
    return {
        "ok": result.ok,
        "checked": result.checked,
        "first_bad_seq": result.first_bad_seq,
        "reason": result.reason,
        "head_seq": None if result.head is None else result.head.seq,
    }


def _verify_line(result: VerifyResult) -> str:
    if result.ok:
        upto = result.head.seq if result.head is not None else result.checked
        return f"[green]ok[/]: chain verified up to seq {upto}"
    return (
        f"[red]BROKEN[/]: the chain breaks at seq {result.first_bad_seq}: {escape(result.reason)} "
        f"({result.checked} events verified before it)"
    )
