"""`flightlog operators`: enrol, list, re-role and revoke named operators, on a database or a server.

On a database file the change is an event appended by whoever can write the file (recorded as
`local:<user>`); with `--server URL` the operator API makes it, for an admin's token taken from
FLIGHTLOG_OPERATOR_TOKEN. A new operator's token is printed once, alone on stdout, and is kept
nowhere but its digest.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import Any, TypeVar
from urllib.parse import quote

import click

from actors import OperatorError, System
from actors.operators import ROLES, Credential
from eventlog import EventLogError

from .._output import console, emit_json, err_console, open_db
from .remote import OperatorClient, error_of

F = TypeVar("F", bound=Callable[..., Any])


def register(cli: click.Group) -> None:
    cli.add_command(operators)


def _target(fn: F) -> F:
    fn = click.option(
        "--server", metavar="URL", help="A running server (admin token in FLIGHTLOG_OPERATOR_TOKEN)."
    )(fn)
    return click.option("--db", "db_option", metavar="DB", help="The database file (or give it first).")(fn)


def _split(
    args: tuple[str, ...], db_option: str | None, server: str | None, wanted: int
) -> tuple[str | None, list[str]]:
    """(database or None for --server, the command's own arguments) from `[DB] ARG...`."""
    rest = list(args)
    db = db_option
    if len(rest) == wanted + 1 and db is None and server is None:
        db = rest.pop(0)
    if len(rest) != wanted:
        raise click.UsageError("wrong number of arguments (see --help)")
    if (db is None) == (server is None):
        raise click.UsageError("give a database (DB or --db) or --server URL, not both")
    return db, rest


def _local_actor() -> str:
    try:
        return f"local:{getpass.getuser()}"
    except (OSError, KeyError):
        return "local"


def _on_db(db: str, change: Callable[[System], Any]) -> Any:
    log = open_db(db, existing_log=True)
    try:
        with System.open(log, scheduler=False) as system:
            try:
                return change(system)
            except OperatorError as e:
                raise click.ClickException(str(e)) from e
            except EventLogError as e:
                raise click.ClickException(str(e)) from e
    finally:
        log.close()


def _on_server(server: str, method: str, path: str, body: Any = None) -> dict[str, Any]:
    status, answer = OperatorClient(server).call(method, path, body=body)
    if status == 403:
        raise click.UsageError(f"the server refused: {error_of(answer)}")
    if status not in (200, 201):
        raise click.ClickException(f"{error_of(answer)} ({status})")
    return dict(answer)


@click.group()
def operators() -> None:
    """Named operators and their roles: viewer reads; approver also decides; admin also manages
    operators, runs and control; enroller only creates runs (for orchestrators).

    \b
    Example:
      flightlog operators add flightlog.db alice --role approver
      flightlog operators list --server http://127.0.0.1:8080
    """


@operators.command("add")
@click.argument("args", nargs=-1, metavar="[DB] NAME")
@click.option("--role", type=click.Choice(ROLES), default="approver", show_default=True)
@_target
@click.option("--json", "as_json", is_flag=True, help="Print the credential and its token as JSON.")
def add_cmd(
    args: tuple[str, ...], role: str, db_option: str | None, server: str | None, as_json: bool
) -> None:
    """Enrol NAME with a new credential; its token is printed once (stdout), never stored.

    \b
    Example:
      flightlog operators add flightlog.db alice --role approver
      FLIGHTLOG_OPERATOR_TOKEN=... flightlog operators add --server http://127.0.0.1:8080 bob
    """
    db, (name,) = _split(args, db_option, server, 1)
    if db is not None:
        credential, token = _on_db(db, lambda s: s.operators.enrol(name, role, by=_local_actor()))
        out = {**credential.to_dict(), "token": token}
    else:
        assert server is not None
        out = _on_server(server, "POST", "/api/v1/operators", {"name": name, "role": role})
    if as_json:
        emit_json(out)
        return
    err_console.print(
        f"enrolled {out['name']} as {out['role']} (credential {out['credential_id']}); "
        "the token below is shown only now:",
        soft_wrap=True,
        markup=False,
        highlight=False,
    )
    click.echo(out["token"])


@operators.command("list")
@click.argument("args", nargs=-1, metavar="[DB]")
@_target
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def list_cmd(args: tuple[str, ...], db_option: str | None, server: str | None, as_json: bool) -> None:
    """Every operator's latest credential: role, whether active, who enrolled or revoked it.

    \b
    Example:
      flightlog operators list flightlog.db
    """
    db, _ = _split(args, db_option, server, 0)
    if db is not None:
        rows = [c.to_dict() for c in _on_db(db, lambda s: s.operators.list())]
    else:
        assert server is not None
        rows = _on_server(server, "GET", "/api/v1/operators")["operators"]
    if as_json:
        emit_json({"operators": rows})
        return
    if not rows:
        console.print("no operators enrolled (the bootstrap token, if set, is the only admin)")
        return
    for r in rows:
        state = "active" if r["active"] else f"revoked {r['revoked_at']} by {r['revoked_by']}"
        click.echo(
            "\t".join(
                [
                    r["name"],
                    r["role"],
                    r["credential_id"],
                    state,
                    f"enrolled {r['enrolled_at']} by {r['enrolled_by']}",
                ]
            )
        )


@operators.command("revoke")
@click.argument("args", nargs=-1, metavar="[DB] NAME")
@click.option("--reason", default="", help="Why, for the audit trail.")
@_target
@click.option("--json", "as_json", is_flag=True, help="Print the revoked credential as JSON.")
def revoke_cmd(
    args: tuple[str, ...], reason: str, db_option: str | None, server: str | None, as_json: bool
) -> None:
    """End NAME's credential at once: its console sessions and API access stop.

    \b
    Example:
      flightlog operators revoke flightlog.db alice --reason "left the team"
    """
    db, (name,) = _split(args, db_option, server, 1)
    if db is not None:
        credential: Credential = _on_db(
            db, lambda s: s.operators.revoke(name, by=_local_actor(), reason=reason)
        )
        body = credential.to_dict()
    else:
        assert server is not None
        body = _on_server(
            server, "POST", f"/api/v1/operators/{quote(name, safe='')}/revoke", {"reason": reason}
        )
    if as_json:
        emit_json(body)
        return
    click.echo(f"revoked {name} (credential {body['credential_id']})")


@operators.command("role")
@click.argument("args", nargs=-1, metavar="[DB] NAME ROLE")
@_target
@click.option("--json", "as_json", is_flag=True, help="Print the credential as JSON.")
def role_cmd(args: tuple[str, ...], db_option: str | None, server: str | None, as_json: bool) -> None:
    """Give NAME's credential another ROLE (viewer, approver, admin or enroller).

    \b
    Example:
      flightlog operators role flightlog.db alice admin
    """
    db, (name, role) = _split(args, db_option, server, 2)
    if role not in ROLES:
        raise click.BadParameter(f"{role!r} is not one of {', '.join(ROLES)}", param_hint="ROLE")
    if db is not None:
        body = _on_db(db, lambda s: s.operators.set_role(name, role, by=_local_actor())).to_dict()
    else:
        assert server is not None
        body = _on_server(server, "POST", f"/api/v1/operators/{quote(name, safe='')}/role", {"role": role})
    if as_json:
        emit_json(body)
        return
    click.echo(f"{name} is now {role}")
