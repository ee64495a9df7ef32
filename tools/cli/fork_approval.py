"""`flightlog fork … --at-approval ID`: a fork that takes the other (or a given) decision there.

On a database file the decision is recorded as the operating-system user (`local:<user>`, with
`os-user:<user>` as its identity), never as a name typed in; through `--server URL` it is the
operator's whose token is in FLIGHTLOG_OPERATOR_TOKEN. An agent run's fork may be re-driven at
once: the recording serves up to the approval, the fork's decision is taken, and past a changed
one the agent program of `--command` goes on live (handed the origin's prompt, and where it
resumes). A broker run's fork is a new run: its token is printed once, for its agent, which goes
on by itself (a LangGraph graph from the checkpoint recorded before the approval).
"""

from __future__ import annotations

import getpass
from typing import Any
from urllib.parse import quote

import click

from actors import (
    ActorsError,
    ApprovalFork,
    ForkError,
    System,
    approval_to_change,
    fork_at_approval,
)
from actors.broker import ORIGIN_LOCAL
from eventlog import EventLog
from projections import Views

from .._output import UsageFailure, console, err_console, shown
from . import ids
from .remote import OperatorClient, error_of


def who_on_this_machine() -> tuple[str, str]:
    """(decided by, identity) of a decision taken on a database file: the operating-system user."""
    try:
        user = getpass.getuser()
    except (OSError, KeyError):  # no user name known to this machine
        return "local", ""
    return f"local:{user}", f"os-user:{user}"


def fork_on_db(
    log: EventLog,
    run_given: str,
    approval_given: str,
    decision: str | None,
    reason: str,
    *,
    then_redrive: bool,
    live: bool,
) -> ApprovalFork:
    """Record a fork of a run on this log at one of its approvals (usage errors for what cannot be).

    `then_redrive` and `live` (a --command given) say what follows, so that a fork that could
    not be re-driven as asked is refused before anything is recorded.
    """
    decided_by, identity = who_on_this_machine()
    with System.open(log, scheduler=False) as system:
        run_id = ids.run_id(Views(log), run_given)
        approval_id = ids.approval_id(system.views, approval_given)
        try:
            if then_redrive:
                _check_redrive(system, run_id, approval_id, decision, live)
            return fork_at_approval(
                system, run_id, approval_id, decision, decided_by=decided_by, identity=identity,
                actor=decided_by, origin=ORIGIN_LOCAL, reason=reason,
            )  # fmt: skip
        except ForkError as e:
            raise UsageFailure(str(e)) from e
        except ActorsError as e:
            raise click.ClickException(str(e)) from e


def _check_redrive(system: System, run_id: str, approval_id: str, decision: str | None, live: bool) -> None:
    if system.views.agent_run(run_id) is None:
        raise UsageFailure(
            "--redrive: a broker run's fork is not re-driven; its own agent goes on, started on the new run "
            "with the token printed"
        )
    row, decision = approval_to_change(system, run_id, approval_id, decision)
    if decision != row.status and not live:
        raise UsageFailure(
            f"--redrive: past the changed decision ({decision}; the recording holds {row.status}) a live "
            "agent goes on: give it with --command"
        )


def fork_on_server(
    url: str, run_id: str, approval_id: str, decision: str | None, reason: str, then_redrive: bool
) -> dict[str, Any]:
    """POST the fork to a running server; its refusals are usage errors (one line, exit 2)."""
    client = OperatorClient(url)
    body: dict[str, Any] = {"at_approval": approval_id, "reason": reason, "redrive": then_redrive}
    if decision is not None:
        body["decision"] = decision
    status, answer = client.call("POST", f"/api/v1/runs/{quote(run_id, safe='')}/fork", body=body)
    if status != 201:
        raise UsageFailure(f"the server refused the fork ({status}): {error_of(answer)}")
    return dict(answer)


def print_fork(out: dict[str, Any]) -> None:
    """A fork at an approval in words, and a broker fork's token alone on stdout (shown only now)."""
    f = out["fork"]
    into = f"into run [bold]{shown(f['run_id'])}[/] ({shown(f['stream'])}, {f['copied']} event(s) copied)"
    where = f"at approval {shown(f['approval_id'])} (it ended {shown(f['recorded'])})"
    if f["kind"] == "broker":
        err_console.print(
            f"forked run {shown(f['origin_run_id'])} {where} {into}: its request {shown(f['request_id'])} is "
            f"decided: {shown(f['decision'])} by {shown(f['decided_by'])}. Its token below is shown only now "
            "(start the run's agent on it, resuming from before the approval):",
            soft_wrap=True,
            highlight=False,
        )
        click.echo(out["token"])
        return
    console.print(
        f"forked run {shown(f['origin_run_id'])} {where} {into}: its re-drive decides "
        f"{shown(f['decision'])} as {shown(f['decided_by'])}"
    )
