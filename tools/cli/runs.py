"""`flightlog runs`: list the runs (`runs DB`, as before), and create, revoke or re-key a run.

On a database file the change is an event appended by whoever can write the file (recorded
as `local:<user>`, origin `local`); with `--server URL` the operator API makes it, for the
token in FLIGHTLOG_OPERATOR_TOKEN (an admin's; an enroller's may create). A run's token is
printed once, alone on stdout — it is the product — and is kept nowhere but as its digest.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

import click

from actors import BrokerError, RunAlreadyRegisteredError, RunNotFoundError, System
from actors.broker import ORIGIN_LOCAL, registration_error
from eventlog import EventLogError

from .._output import UsageFailure, clean, emit_json, err_console, open_db, shown
from .remote import OperatorClient, error_of
from .travel import runs_cmd

MAX_REASON = 500


def register(cli: click.Group) -> None:
    cli.add_command(runs)


class _Runs(click.Group):
    """A group that lists (its `list` command) unless its first argument names a command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or (args[0] not in self.commands and args[0] not in ctx.help_option_names):
            args = ["list", *args]  # `flightlog runs DB ...`, as before there were commands
        return super().parse_args(ctx, args)


@click.group(cls=_Runs)
def runs() -> None:
    """List the runs (`flightlog runs DB`, see `runs list`), or create, revoke or re-key one.

    An operator (or an enrolment credential) creates a run and hands its agent the token; the
    agent registers with it. Revoking stops the token at once on every route; re-keying gives
    the run a new one. Each is recorded with who did it.

    \b
    Example:
      flightlog runs flightlog.db
      flightlog runs create flightlog.db deployer
      FLIGHTLOG_OPERATOR_TOKEN=... flightlog runs revoke --server http://127.0.0.1:8080 deployer
    """


runs.add_command(runs_cmd, "list")


def _target(fn: Callable[..., Any]) -> Callable[..., Any]:
    fn = click.option("--json", "as_json", is_flag=True, help="Print the answer as JSON.")(fn)
    fn = click.option(
        "--server", metavar="URL", help="A running server (the token in FLIGHTLOG_OPERATOR_TOKEN)."
    )(fn)
    fn = click.option("--db", "db_option", metavar="DB", help="The database file (or give it first).")(fn)
    return click.argument("args", nargs=-1, metavar="[DB] RUN_ID")(fn)


def _split(args: tuple[str, ...], db_option: str | None, server: str | None) -> tuple[str | None, str]:
    """(the database, or None with --server; the run id) from `[DB] RUN_ID`."""
    rest = list(args)
    db = db_option
    if len(rest) == 2 and db is None and server is None:
        db = rest.pop(0)
    if len(rest) != 1:
        raise click.UsageError("give [DB] RUN_ID (or --server URL RUN_ID)")
    if (db is None) == (server is None):
        raise click.UsageError("give a database (DB or --db) or --server URL, not both")
    return db, rest[0]


def _local_actor() -> str:
    """Who runs the command, as far as this machine knows: `local:<os user>`."""
    try:
        return f"local:{getpass.getuser()}"
    except (OSError, KeyError):
        return "local"


def _on_db(db: str, run_id: str, change: Callable[[System], Any]) -> Any:
    log = open_db(db, existing_log=True)
    try:
        with System.open(log, scheduler=False) as system:
            try:
                return change(system)
            except RunNotFoundError:
                raise UsageFailure(f"no run {run_id!r} in this log") from None
            except RunAlreadyRegisteredError as e:
                raise click.ClickException(f"run {run_id!r}: {e}") from e
            except (BrokerError, EventLogError) as e:
                raise click.ClickException(str(e)) from e
    finally:
        log.close()


def _on_server(server: str, path: str, run_id: str, body: Any = None) -> dict[str, Any]:
    client = OperatorClient(server)
    status, answer = client.call("POST", path, body=body)
    if status == 404:
        raise UsageFailure(f"no run {run_id!r} on the server at {client.url}")
    if status in (400, 403):
        raise UsageFailure(f"the server refused: {error_of(answer)}")
    if status == 409:
        raise click.ClickException(f"run {run_id!r}: {error_of(answer)}")
    if status not in (200, 201):
        raise click.ClickException(f"{error_of(answer)} ({status})")
    return dict(answer)


def _path(run_id: str, action: str) -> str:
    return f"/api/v1/runs/{quote(run_id, safe='')}/{action}"


def _print_token(out: dict[str, Any], what: str, as_json: bool) -> None:
    if as_json:
        emit_json(out)
        return
    err_console.print(
        f"{what} run {shown(out['run_id'])}; its token below is shown only now "
        "(give it to the run's agent, which registers with it):",
        soft_wrap=True,
        highlight=False,
    )
    click.echo(out["token"])


@runs.command("create")
@_target
def create_cmd(args: tuple[str, ...], db_option: str | None, server: str | None, as_json: bool) -> None:
    """Create run RUN_ID; its token is printed once (stdout) for its agent, never stored.

    The agent then registers at /register with this token: on a server that takes enrolled
    runs only (the default), nothing else can register RUN_ID.

    \b
    Example:
      flightlog runs create flightlog.db deployer
      FLIGHTLOG_OPERATOR_TOKEN=... flightlog runs create --server http://127.0.0.1:8080 deployer --json
    """
    db, run_id = _split(args, db_option, server)
    if db is None:
        assert server is not None
        out = _on_server(server, "/api/v1/runs", run_id, {"run_id": run_id})
    else:
        error = registration_error(run_id)
        if error is not None:
            raise click.BadParameter(str(error), param_hint="RUN_ID")
        by = _local_actor()

        def create(system: System) -> str:
            return system.broker.create_run(run_id, origin=ORIGIN_LOCAL, by=by)

        out = {"run_id": run_id, "token": _on_db(db, run_id, create)}
    _print_token(out, "created", as_json)


@runs.command("revoke")
@_target
@click.option("--reason", default="", help="Why, for the audit trail (at most 500 characters).")
def revoke_cmd(
    args: tuple[str, ...], db_option: str | None, server: str | None, as_json: bool, reason: str
) -> None:
    """Revoke RUN_ID's token: every route refuses it at once, until `runs rekey`.

    \b
    Example:
      flightlog runs revoke flightlog.db deployer --reason "token leaked in a CI log"
      FLIGHTLOG_OPERATOR_TOKEN=... flightlog runs revoke --server http://127.0.0.1:8080 deployer
    """
    db, run_id = _split(args, db_option, server)
    reason = reason.strip()
    if len(reason) > MAX_REASON or not reason.isprintable():
        raise click.BadParameter(f"printable text of at most {MAX_REASON} characters", param_hint="--reason")
    if db is None:
        assert server is not None
        out = _on_server(server, _path(run_id, "revoke"), run_id, {"reason": reason})
    else:
        by = _local_actor()

        def revoke(system: System) -> None:
            system.broker.revoke_run(run_id, by=by, by_credential="", reason=reason)

        _on_db(db, run_id, revoke)
        out = {"run_id": run_id, "revoked": True}
    if as_json:
        emit_json(out)
    else:
        click.echo(f"revoked the token of run {clean(run_id)}: re-key it (flightlog runs rekey) to revive it")


@runs.command("rekey")
@_target
def rekey_cmd(args: tuple[str, ...], db_option: str | None, server: str | None, as_json: bool) -> None:
    """Give RUN_ID a new token, printed once (stdout); the old one stops working at once.

    \b
    Example:
      flightlog runs rekey flightlog.db deployer
      FLIGHTLOG_OPERATOR_TOKEN=... flightlog runs rekey --server http://127.0.0.1:8080 deployer
    """
    db, run_id = _split(args, db_option, server)
    if db is None:
        assert server is not None
        out = _on_server(server, _path(run_id, "rekey"), run_id)
    else:
        by = _local_actor()

        def rekey(system: System) -> str:
            return system.broker.rekey_run(run_id, by=by, by_credential="")

        out = {"run_id": run_id, "token": _on_db(db, run_id, rekey)}
    _print_token(out, "re-keyed", as_json)
