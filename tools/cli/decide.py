"""`flightlog approve` and `flightlog reject`: a decision on a database file, or through a server.

On a database file a decision is an append with an expected version, so it works beside a
running System in another process: that System's follower wakes its waiter when it sees it.
It is recorded as `--as NAME` with the operating-system user as its identity, so one user
counts once towards a quorum whatever name it gives. With `--server URL` the operator API
decides, as the operator whose token is in FLIGHTLOG_OPERATOR_TOKEN (the server names who
decided; `--as` may only repeat that name); the output and exit codes are the same.
"""

from __future__ import annotations

import getpass
from datetime import datetime
from typing import Any, NoReturn
from urllib.parse import quote

import click

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
from eventlog import EventLogError
from projections import ApprovalRow
from projections.approvals import RECORDING

from .._output import EXIT_STORAGE, EXIT_USAGE, console, emit_json, err_console, open_db, shown
from . import ids
from .formats import SHORT_DIGEST, when
from .remote import OperatorClient, error_of, one_target, server_option

# Exit codes of `approve` and `reject` (0, 1 and 2 as everywhere in the CLI).
EXIT_UNKNOWN = 3  # no approval with that id
EXIT_DECIDED = 4  # it already has its outcome: this attempt is refused (and recorded)
EXIT_EXPIRED = 5  # its deadline passed before the decision
EXIT_DUPLICATE_VOTE = 6  # this actor, or this credential, already approved a quorum approval
EXIT_RECORDING = 7  # the requester is still recording it: try again shortly

DECISION_EXITS = f"""\b
Exit codes:
  0  decided (or, for a quorum approval, the vote was recorded)
  1  another failure
  {EXIT_USAGE}  usage error (no database at DB, no server at --server URL, a bad option,
     a token the server refuses, or an operator it does not let decide as asked)
  {EXIT_UNKNOWN}  no approval with that id
  {EXIT_DECIDED}  already decided: this attempt is refused and kept in the audit trail
  {EXIT_EXPIRED}  the approval expired before the decision
  {EXIT_DUPLICATE_VOTE}  this operator already approved this quorum approval (on DB: NAME, or
     the same OS user under any name; through a server: the token's operator)
  {EXIT_RECORDING}  the request is still being recorded: try again in a moment
  {EXIT_STORAGE}  the database cannot be used (not a flightlog log, damaged, full, read-only)
"""


def _identity() -> str:
    """Who ran the command, as far as this machine knows: the operating-system user."""
    try:
        return f"os-user:{getpass.getuser()}"
    except (OSError, KeyError):
        return ""


def _decide(
    db: str | None,
    approval_id: str | None,
    server: str | None,
    decision: str,
    actor: str | None,
    as_json: bool,
) -> None:
    (approval_id,) = one_target(db, server, approval_id)
    assert approval_id is not None
    if actor is not None:
        actor = actor.strip()
        if not actor:
            raise click.UsageError("--as needs a name: who is deciding")
    if server is not None:
        _decide_on_server(OperatorClient(server), approval_id, decision, actor, as_json)
        return
    if actor is None:
        raise click.UsageError("--as NAME is required on a database file: who is deciding")
    assert db is not None
    identity = _identity()
    log = open_db(db, existing_log=True)
    try:
        with System.open(log, scheduler=False) as system:
            approval_id = ids.approval_id(system.views, approval_id)
            try:
                resolution = system.approvals.resolve(approval_id, decision, actor, identity=identity)
            except QuorumPendingError as e:
                _vote_recorded(e.id, e.votes, e.needed, actor, as_json)
                return
            except ApprovalExpiredError as e:
                _refuse(EXIT_EXPIRED, "expired", _expired_message(e.resolution, actor, decision), as_json)
            except ApprovalNotPendingError:
                _not_pending(system.views.approval(approval_id), approval_id, actor, decision, as_json)
            except DuplicateVoteError:
                row = system.views.approval(approval_id)
                if row is not None and actor in row.votes:
                    message = _duplicate_message(actor, approval_id)
                else:
                    # Another name, but the same credential: on a file, the OS user.
                    message = (
                        f"{identity or 'this OS user'} has already approved {approval_id} under another "
                        f"name: a quorum needs distinct operators, each with their own credential (on "
                        f"a database file, the OS user); the next vote is another person's"
                    )
                _refuse(EXIT_DUPLICATE_VOTE, "duplicate_vote", message, as_json)
            except ApprovalRecordingError:
                message = f"approval {approval_id} is still being recorded by its requester; try again"
                _refuse(EXIT_RECORDING, "recording", message, as_json)
            except (ActorsError, EventLogError) as e:
                raise click.ClickException(str(e)) from e
    finally:
        log.close()
    a = resolution.approval
    outcome = {
        "id": a.id,
        "run_id": a.run_id,
        "decision": resolution.decision,
        "actor": resolution.actor,
        "identity": resolution.identity,
        "at": resolution.at,
        "payload_sha256": a.payload_sha256,
    }
    _decided(outcome, a.kind, a.title, as_json)


def _duplicate_message(actor: str, approval_id: str) -> str:
    return f"{actor!r} has already approved {approval_id}: a quorum needs distinct approvers"


def _decide_on_server(
    client: OperatorClient, approval_id: str, decision: str, actor: str | None, as_json: bool
) -> None:
    """The same decision through the operator API, with the same output and exit codes.

    The server records the decision as the operator whose token authenticated it; a name
    given with `--as` is sent only to be checked against that (the server refuses another).
    """
    path = f"/api/v1/approvals/{quote(approval_id, safe='')}/{decision}"
    status, body = client.call("POST", path, body={} if actor is None else {"actor": actor})

    def who() -> str:
        """The deciding operator's name: `--as`, or the server's answer to whose the token is."""
        nonlocal actor
        if actor is None:
            actor = str(client.get("/api/v1/me")["name"])
        return actor

    if status == 200:
        outcome = {
            "id": body["approval_id"],
            "run_id": body["run_id"],
            "decision": body["decision"],
            "actor": body["actor"],
            "identity": body["identity"],
            "at": datetime.fromisoformat(body["at"]),
            "payload_sha256": body["payload_sha256"],
        }
        _decided(outcome, body["kind"], body["title"], as_json)
    elif status == 202:
        _vote_recorded(approval_id, body["votes"], body["needed"], who(), as_json)
    elif status == 404:
        _refuse(EXIT_UNKNOWN, "unknown", f"no approval with id {approval_id!r}", as_json)
    elif status == 409:
        # The answer names the conflict in words; the approval's row says which one it is.
        row = client.approval(approval_id)
        if row is not None and row.status == "pending" and who() in row.votes:
            _refuse(EXIT_DUPLICATE_VOTE, "duplicate_vote", _duplicate_message(who(), approval_id), as_json)
        if row is not None and row.status == RECORDING:
            message = f"approval {approval_id} is still being recorded by its requester; try again"
            _refuse(EXIT_RECORDING, "recording", message, as_json)
        if row is None or row.terminal:
            _not_pending(row, approval_id, who(), decision, as_json)
        raise click.ClickException(error_of(body))
    elif status == 400:
        raise click.UsageError(error_of(body))
    elif status == 403:
        # Another name than the token's operator, or a role that may not decide.
        raise click.UsageError(f"the server refused: {error_of(body)}")
    else:
        raise click.ClickException(f"{client.url}{path}: {status} {error_of(body)}")


def _decided(outcome: dict[str, Any], kind: str, title: str, as_json: bool) -> None:
    if as_json:
        emit_json({"ok": True, "status": "decided", **outcome, "at": outcome["at"].isoformat()})
        return
    decision = outcome["decision"]
    verb = {"approve": "[green]approved[/]", "reject": "[red]rejected[/]"}.get(decision, decision)
    run = f" (run {shown(outcome['run_id'])})" if outcome["run_id"] else ""
    console.print(
        f"{verb} {outcome['id']}{run}: {shown(kind)} {shown(title)!r} by {shown(outcome['actor'])} "
        f"at {when(outcome['at'])}; digest {outcome['payload_sha256'][:SHORT_DIGEST]}",
        soft_wrap=True,
    )


def _vote_recorded(approval_id: str, votes: int, needed: int, actor: str, as_json: bool) -> None:
    if as_json:
        emit_json(
            {
                "ok": True,
                "status": "vote_recorded",
                "id": approval_id,
                "actor": actor,
                "votes": votes,
                "needed": needed,
            }
        )
        return
    more = needed - votes
    console.print(
        f"vote recorded: {votes} of {needed} approvals recorded for {approval_id}; "
        f"{more} more distinct approver{'s' if more != 1 else ''} needed",
        soft_wrap=True,
    )


def _expired_message(resolution: ApprovalResolution, actor: str, decision: str) -> str:
    return (
        f"approval {resolution.approval.id} expired at {when(resolution.approval.expires_at)}, "
        f"before {actor!r} could {decision} it; the expiry stands and this decision was refused"
    )


def _not_pending(
    row: ApprovalRow | None, approval_id: str, actor: str, decision: str, as_json: bool
) -> NoReturn:
    if row is None:
        _refuse(EXIT_UNKNOWN, "unknown", f"no approval with id {approval_id!r}", as_json)
    if row.status == "expired":
        message = (
            f"approval {row.id} expired at {when(row.decided_at)} ({row.actor}), "
            f"before {actor!r} could {decision} it; this decision was refused"
        )
        _refuse(EXIT_EXPIRED, "expired", message, as_json)
    if row.status == "discarded":
        message = f"approval {row.id} was discarded (its request was never published); nothing to decide"
    else:
        message = (
            f"approval {row.id} was already decided: {row.status} by {row.actor!r} at "
            f"{when(row.decided_at)}; this {decision} was refused and kept in the audit trail"
        )
    _refuse(EXIT_DECIDED, "already_decided", message, as_json)


def _refuse(code: int, error: str, message: str, as_json: bool) -> NoReturn:
    if as_json:
        emit_json({"ok": False, "error": error, "message": message})
    else:
        err_console.print(f"[red]error[/]: {shown(message)}", soft_wrap=True)
    raise SystemExit(code)


_ACT_OPTIONS = [
    click.argument("db", required=False),
    click.argument("approval_id", metavar="ID", required=False),
    server_option,
    click.option(
        "--as",
        "actor",
        metavar="NAME",
        help=(
            "Who decides (kept in the audit trail): required on DB; with --server the token's "
            "operator decides, and NAME, if given, must be theirs."
        ),
    ),
    click.option("--json", "as_json", is_flag=True, help="Print the outcome (or the error) as JSON."),
]


def _act_options(fn: Any) -> Any:
    for option in reversed(_ACT_OPTIONS):
        fn = option(fn)
    return fn


@click.command("approve", epilog=DECISION_EXITS)
@_act_options
def approve_cmd(
    db: str | None, approval_id: str | None, server: str | None, actor: str | None, as_json: bool
) -> None:
    """Approve the pending approval ID: in DB as NAME, or through --server as your operator.

    A running System that waits on this approval (in this or another process) wakes up with
    the outcome. A quorum approval needs approvals from several distinct operators, each with
    their own credential: each one before the last is recorded as a vote. On DB the decision
    is recorded as NAME with your OS user as its credential, so a second vote by the same OS
    user is refused whatever NAME it gives; through a server, it is recorded as the operator
    whose token is in $FLIGHTLOG_OPERATOR_TOKEN.

    \b
    Example:
      flightlog approve flightlog.db 3f1c0b2e-... --as alice
      flightlog approve --server http://127.0.0.1:8080 3f1c0b2e-...
    """
    _decide(db, approval_id, server, "approve", actor, as_json)


@click.command("reject", epilog=DECISION_EXITS)
@_act_options
def reject_cmd(
    db: str | None, approval_id: str | None, server: str | None, actor: str | None, as_json: bool
) -> None:
    """Reject the pending approval ID: in DB as NAME, or through --server as your operator.

    A running System that waits on this approval (in this or another process) wakes up with
    the outcome. On DB the decision is recorded as NAME with your OS user as its credential;
    through a server, as the operator whose token is in $FLIGHTLOG_OPERATOR_TOKEN.

    \b
    Example:
      flightlog reject flightlog.db 3f1c0b2e-... --as alice
      flightlog reject --server http://127.0.0.1:8080 3f1c0b2e-...
    """
    _decide(db, approval_id, server, "reject", actor, as_json)
