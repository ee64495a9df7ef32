"""CLI commands that write forks: `fork` records one (and may re-drive it), `redrive` re-drives one."""

from __future__ import annotations

import getpass
import shlex
import shutil
import subprocess
from collections.abc import Callable
from typing import Any, TypeVar

import click

from actors import ActorsError, Approval, CommandHarness, Harness, System
from eventlog import EventLog
from projections import Views

from .._forks import ForkError, Redriven, fork_run, redrive
from .._output import EXIT_FOUND, UsageFailure, console, emit_json, err_console, open_db, shown
from . import ids
from .fork_approval import fork_on_db, fork_on_server, print_fork
from .remote import one_target, server_option
from .travel import AT_HELP, parse_at

F = TypeVar("F", bound=Callable[..., Any])


def register(cli: click.Group) -> None:
    cli.add_command(fork_cmd)
    cli.add_command(redrive_cmd)


def redrive_options(fn: F) -> F:
    """The options that say how a fork is re-driven."""
    options = [
        click.option(
            "--command",
            default=None,
            metavar="CMD",
            help="Re-drive with this agent program (a live CommandHarness, with its side effects) "
            "instead of serving the origin's recorded results.",
        ),
        click.option(
            "--prompt",
            default=None,
            help="With --command: the prompt the program is handed for the fork's run (default: the "
            "origin's); for a fork whose run had ended, its next run.",
        ),
        click.option(
            "--apply-recorded",
            is_flag=True,
            help="Decide the fork's approvals as the origin's were decided (every recorded vote, in "
            "order, by '<voter> (recorded)'), instead of waiting for someone to approve or reject them.",
        ),
        click.option(
            "--approval-timeout",
            default=300.0,
            show_default=True,
            type=click.FloatRange(min=0, min_open=True),
            help="Seconds an approval of the fork waits before it expires.",
        ),
    ]
    for option in reversed(options):
        fn = option(fn)
    return fn


@click.command("fork")
@click.argument("db", required=False)
@click.argument("run_id", required=False)
@server_option
@click.option("--at", "at_text", default=None, help=f"Copy the run's history up to this moment. {AT_HELP}")
@click.option(
    "--at-approval",
    "approval",
    default=None,
    metavar="ID",
    help="Fork at this decided approval of the run (an id or a unique prefix), which the fork decides "
    "otherwise (see --decision). Works with --server too.",
)
@click.option(
    "--decision",
    type=click.Choice(["approve", "reject"]),
    default=None,
    help="With --at-approval: the decision the fork takes there (default: the other one than recorded).",
)
@click.option(
    "--actor", default=None, help="Who forks (and re-drives), kept in the log (default: cli:<current user>)."
)
@click.option("--reason", default="", help="Why, for the record.")
@click.option("--redrive", "then_redrive", is_flag=True, help="Re-drive the fork at once (see `redrive`).")
@redrive_options
@click.option("--json", "as_json", is_flag=True, help="Print the new run (and its re-drive) as JSON.")
def fork_cmd(
    db: str | None,
    run_id: str | None,
    server: str | None,
    at_text: str | None,
    approval: str | None,
    decision: str | None,
    actor: str | None,
    reason: str,
    then_redrive: bool,
    command: str | None,
    prompt: str | None,
    apply_recorded: bool,
    approval_timeout: float,
    as_json: bool,
) -> None:
    """Fork an agent run: a new run whose history is the origin's up to a moment.

    The new stream `controller-fork-<id>` starts with a ForkedFrom event (origin, position,
    actor, reason) and copies of the origin run's events up to that seq. The origin is
    never modified. With --redrive the fork is then re-driven to its end, as `redrive` does.

    With --at-approval ID the fork starts just before that approval was asked and takes the
    other decision there (or --decision's; the recorded one is allowed too), recorded as who
    asks for the fork: the OS user on DB, the token's operator through --server (so --actor
    does not apply). An agent run's fork re-driven with --command serves the recording up to
    the approval, takes the fork's decision, then goes on with the program, live (handed the
    origin's prompt and where to resume). A broker run's fork is a new run whose request is
    decided at once: its token is printed (stdout), once, for its agent. Refusals (an approval
    not of the run, still pending, an expired one without --decision) exit 2.

    \b
    Example:
      flightlog fork flightlog.db 7f3a… --at 1200 --reason "retry with the fixed tool"
      flightlog fork flightlog.db 7f3a… --at 1200 --redrive --apply-recorded --json
      flightlog fork flightlog.db 7f3a… --at-approval 4e75… --redrive --command "python agent.py"
      FLIGHTLOG_OPERATOR_TOKEN=... flightlog fork --server http://127.0.0.1:8080 build-17 --at-approval 4e75…
    """
    (run_id,) = one_target(db, server, run_id)
    assert run_id is not None
    if (at_text is None) == (approval is None):
        raise click.UsageError("give one of --at (a moment) and --at-approval (an approval)")
    if decision is not None and approval is None:
        raise click.UsageError("--decision needs --at-approval")
    if not then_redrive and (command is not None or prompt is not None or apply_recorded):
        raise click.UsageError("--command, --prompt and --apply-recorded need --redrive")
    if approval is not None:
        _fork_at_approval(
            db, server, run_id, approval, decision, actor, reason, then_redrive, command, prompt,
            apply_recorded, approval_timeout, as_json,
        )  # fmt: skip
        return
    if server is not None or db is None:
        raise click.UsageError(
            "--server forks at an approval (--at-approval); a fork at a moment is made on DB"
        )
    assert at_text is not None
    harness = _harness(command, prompt, apply_recorded) if then_redrive else None
    who = _who(actor)
    log = open_db(db, existing_log=True)
    try:
        seq = parse_at(log, at_text)
        run_id = ids.run_id(Views(log), run_id)
        try:
            fork = fork_run(log, run_id, seq, actor=who, reason=reason)
        except ForkError as e:
            raise click.UsageError(str(e)) from e
        done = None
        if then_redrive:
            try:
                done = _redrive(db, log, fork.run_id, harness, prompt, apply_recorded, approval_timeout, who)
            except click.ClickException as e:
                # The fork is recorded: name it, so that it can be re-driven once the cause is fixed.
                e.message = (
                    f"forked run {run_id} into run {fork.run_id}, but re-driving it failed "
                    f"(`flightlog redrive DB {fork.run_id}` tries again): {e.message}"
                )
                raise
    finally:
        log.close()
    if as_json:
        emit_json({**fork.to_dict(), "redrive": done.to_dict() if done else None})
        return
    console.print(
        f"forked run {run_id} at seq {fork.at_seq:,} into run [bold]{fork.run_id}[/] "
        f"({fork.stream}, {fork.copied} event(s) copied)"
    )
    if done is not None:
        _print_redriven(done)


def _fork_at_approval(
    db: str | None,
    server: str | None,
    run_id: str,
    approval: str,
    decision: str | None,
    actor: str | None,
    reason: str,
    then_redrive: bool,
    command: str | None,
    prompt: str | None,
    apply_recorded: bool,
    approval_timeout: float,
    as_json: bool,
) -> None:
    if actor is not None:
        raise click.UsageError(
            "--actor: a fork at an approval is recorded as who takes its decision (the OS user on DB, the "
            "token's operator through --server), never as a name given"
        )
    if prompt is not None:
        raise click.UsageError("--prompt: a fork at an approval resumes the origin's turn, with its prompt")
    if server is not None:
        if command is not None or apply_recorded:
            raise click.UsageError("--command and --apply-recorded re-drive beside DB, not through --server")
        answer = fork_on_server(server, run_id, approval, decision, reason, then_redrive)
        if as_json:
            emit_json(answer)
        else:
            print_fork(answer)
        return
    assert db is not None
    harness = _harness(command, None, apply_recorded) if then_redrive else None
    log = open_db(db, existing_log=True)
    try:
        fork = fork_on_db(
            log, run_id, approval, decision, reason, then_redrive=then_redrive, live=harness is not None
        )
        out: dict[str, Any] = {"fork": fork.to_dict(), "redrive": None}
        if fork.token:
            out["token"] = fork.token
        if then_redrive:
            try:
                done = _redrive(
                    db, log, fork.run_id, harness, None, apply_recorded, approval_timeout, fork.decided_by
                )
            except click.ClickException as e:
                e.message = (
                    f"forked run {run_id} into run {fork.run_id}, but re-driving it failed "
                    f"(`flightlog redrive DB {fork.run_id}` tries again): {e.message}"
                )
                raise
            out["redrive"] = done.to_dict()
    finally:
        log.close()
    if as_json:
        emit_json(out)
        return
    print_fork(out)
    if then_redrive:
        _print_redriven(Redriven(**out["redrive"]))


@click.command("redrive")
@click.argument("db")
@click.argument("fork_run_id")
@click.option("--actor", default=None, help="Who re-drives, kept in the log (default: cli:<current user>).")
@redrive_options
@click.option("--json", "as_json", is_flag=True, help="Print how the re-drive ended as JSON.")
def redrive_cmd(
    db: str,
    fork_run_id: str,
    actor: str | None,
    command: str | None,
    prompt: str | None,
    apply_recorded: bool,
    approval_timeout: float,
    as_json: bool,
) -> None:
    """Re-drive a fork from its fork point until its run has ended (once per fork).

    The copied run resumes as it was at the fork point: a running run is handed to the
    harness to play the rest of its turn, an aborting one finishes its abort, an ended one
    stays ended. By default the harness serves the origin's recorded results: nothing is
    executed (a reconcile goes through the gate again and is served the origin's recorded
    result), and permission requests wait in the approval gate for a decision (`flightlog
    approve`/`reject` beside it, --apply-recorded, or the timeout); a decision or dispatch
    other than the origin's ends the run failed, since nothing was recorded for it. A
    recording that runs out before the run ended (the origin was aborted there) aborts the
    fork's run.

    \b
    Example:
      flightlog redrive flightlog.db 5b1c…
      flightlog redrive flightlog.db 5b1c… --apply-recorded --json
      flightlog redrive flightlog.db 5b1c… --command "python agent.py" --prompt "try again"
    """
    harness = _harness(command, prompt, apply_recorded)
    who = _who(actor)
    log = open_db(db, existing_log=True)
    try:
        fork_run_id = ids.run_id(Views(log), fork_run_id)
        done = _redrive(db, log, fork_run_id, harness, prompt, apply_recorded, approval_timeout, who)
    finally:
        log.close()
    if as_json:
        emit_json(done.to_dict())
    else:
        _print_redriven(done)
    if not done.recorded and done.status == "failed":
        reason = shown(done.reason)
        err_console.print(f"[red]error[/]: the re-driven run {shown(done.run_id)} failed: {reason}")
        raise SystemExit(EXIT_FOUND)


def _who(actor: str | None) -> str:
    """Who forks or re-drives: `--actor`, or the current user (`cli:<user>`)."""
    if actor:
        return actor
    try:
        return f"cli:{getpass.getuser()}"
    except (OSError, KeyError):  # no user name known to this machine
        return "cli"


def _harness(command: str | None, prompt: str | None, apply_recorded: bool) -> Harness | None:
    """The live harness --command names (None: serve the recording); usage errors for bad options."""
    if prompt is not None and not prompt.strip():
        raise click.BadParameter("an empty prompt", param_hint="--prompt")
    if command is None:
        if prompt is not None:
            raise click.UsageError("--prompt needs --command: the recording answers only the origin's prompt")
        return None
    if apply_recorded:
        raise click.UsageError("--apply-recorded applies to a re-drive from the recording, not --command")
    try:
        argv = shlex.split(command)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--command") from e
    if not argv:
        raise click.BadParameter("an empty command", param_hint="--command")
    _check_program(argv)
    return CommandHarness(argv)


CHECK_TIMEOUT = 5.0  # seconds the program gets to end on an empty stdin before it is taken as running


def _check_program(argv: list[str]) -> None:
    """Start the program once on an empty stdin, before the fork's one re-drive is claimed.

    A JSON-lines agent reads its stdin to the end and exits 0; one that cannot start (no such
    program, no such script) exits otherwise, and its stderr is shown. One still running after
    CHECK_TIMEOUT is stopped and taken as able to start.
    """
    if shutil.which(argv[0]) is None:
        raise UsageFailure(f"--command: cannot run {argv[0]!r}: no such program on PATH")
    try:
        proc = subprocess.run(
            argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, errors="replace", timeout=CHECK_TIMEOUT,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return
    except OSError as e:
        raise UsageFailure(f"--command: cannot run {argv[0]!r}: {e}") from e
    if proc.returncode != 0:
        stderr = proc.stderr.strip()[-2000:]
        raise UsageFailure(
            f"--command: {shlex.join(argv)!r} exited with code {proc.returncode} on an empty input, "
            f"so the fork was not re-driven" + (f"; its stderr:\n{stderr}" if stderr else "")
        )


def _redrive(
    db: str,
    log: EventLog,
    fork_run_id: str,
    harness: Harness | None,
    prompt: str | None,
    apply_recorded: bool,
    approval_timeout: float,
    actor: str,
) -> Redriven:
    def announce(approval: Approval) -> None:
        err_console.print(
            f"approval [bold]{approval.id}[/] waits: {shown(approval.title)} — "
            f"flightlog approve {shown(db)} {approval.id} --as NAME (or reject)"
        )

    with System.open(log, approval_timeout=approval_timeout) as system:
        try:
            return redrive(
                system,
                fork_run_id,
                harness,
                prompt=prompt,
                apply_recorded=apply_recorded,
                actor=actor,
                on_pending=announce,
            )
        except ActorsError as e:
            if isinstance(e, ValueError):  # a fork that is unknown, not a fork, re-driven; a bad prompt
                raise click.UsageError(str(e)) from e
            raise click.ClickException(str(e)) from e


def _print_redriven(r: Redriven) -> None:
    source = "the recording" if r.recorded else "a live harness"
    served = f", {r.served} recorded event(s) served" if r.recorded else ""
    reason = f" ({shown(r.reason)})" if r.reason else ""
    console.print(f"re-drove run [bold]{r.run_id}[/] with {source}: [bold]{r.status}[/]{reason}{served}")
    if r.decisions:
        console.print(f"permission requests ended: {', '.join(r.decisions)}")
    if r.dispatches:
        console.print(f"recorded reconcile dispatches ended: {', '.join(r.dispatches)}")
    if r.ran_out:
        console.print("the recording ran out before the run ended (the origin was aborted there): aborted")
    if r.broke:
        console.print(f"the recording could not be served on ({shown(r.broke)}): aborted")
