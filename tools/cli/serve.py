"""`flightlog serve`: the HTTP server (broker wire protocol + operator API) over one database."""

from __future__ import annotations

import logging
import signal
import socket
import time
from collections.abc import Callable
from types import FrameType
from typing import TYPE_CHECKING, Any

import click

from actors import FOLLOW_POLL, FOLLOW_POLL_WORKERS, OPERATOR_DECIDES, System
from eventlog import EventLog, EventLogError, open_log

from .._output import UsageFailure, err_console, progress
from ..feeds import running_feeds
from .limits import quota_options, quotas_given, refusal_hold_given
from .log_files import check_log_files
from .serve_heap import MALLOC_ARENAS as MALLOC_ARENAS  # re-exported, as the two below
from .serve_heap import limit_malloc_arenas, settle_heap
from .token_file import TOKEN_ENV as TOKEN_ENV  # re-exported: the commands that reach a server read it here
from .token_file import announce, new_operator_token_digest, operator_token_digest
from .workers import supervise, worker_count

if TYPE_CHECKING:
    from .._integrity import Integrity

EXIT_TAMPERED = 3  # serve refused a log whose chain does not verify or that holds records off the
# event catalogue (see --allow-tampered)
LISTEN_BACKLOG = 2048  # uvicorn's own default
PROGRESS_FROM = 50_000  # logs shorter than this verify too fast to need a progress bar


def register(cli: click.Group) -> None:
    cli.add_command(serve_cmd)


class _QueryFreeAccessLog(logging.Filter):
    """Drops the query string from uvicorn's access log: GET credentials travel there."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], args[2].split("?", 1)[0], args[3], args[4])
        return True


def _announce(sock: socket.socket) -> None:
    """The lines that say the server accepts connections (tests and scripts wait for the first)."""
    bound = sock.getsockname()
    shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
    url = f"http://{shown}:{bound[1]}"
    click.echo(f"flightlog: listening on {url}")
    click.echo(f"flightlog: console at {url}/ui/ (log in with the operator token)")


def _serve(
    app: Any,
    sock: socket.socket,
    access_log: bool,
    log_level: str,
    timeouts: tuple[float, float],
    on_started: Callable[[], object],
) -> None:
    """Run uvicorn until it is told to stop; `on_started()` once it accepts connections."""
    import uvicorn  # here, not at the top: every other command starts without the server stack

    from ..http import server_config

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and self.servers:
                on_started()

    read_timeout, hold = timeouts
    config = server_config(
        app, sock, access_log=access_log, log_level=log_level, read_timeout=read_timeout, refusal_hold=hold
    )
    logging.getLogger("uvicorn.access").addFilter(_QueryFreeAccessLog())
    _log_storage_incidents()
    settle_heap()
    Server(config).run(sockets=[sock])


def _serve_workers(
    count: int, db: str, sock: socket.socket, run: Callable[[EventLog, int, Callable[[], object]], None]
) -> None:
    """`--workers N`: N processes, each with its own opening of DB, serving on `sock`."""
    sock.listen(LISTEN_BACKLOG)  # before the workers: connections wait in the queue, none refused

    def work(index: int, ready: Callable[[], object]) -> None:
        try:
            log = open_log(db)
        except EventLogError as e:
            raise click.ClickException(str(e)) from e
        try:
            run(log, index, ready)
        finally:
            log.close()

    def started() -> None:
        _announce(sock)
        click.echo(f"flightlog: {count} workers", err=True)

    supervise(count, work, started)


def _log_storage_incidents() -> None:
    """Storage incidents (a full disk, a read-only file; and when they clear) and security incidents
    (an address blocked for guessing operator tokens; and when the block ends) go to stderr, one
    line each."""
    for name in ("flightlog.storage", "flightlog.security"):
        incidents = logging.getLogger(name)
        if not incidents.handlers:
            handler = logging.StreamHandler()
            handler.setFormatter(logging.Formatter("%(message)s"))
            incidents.addHandler(handler)
            incidents.setLevel(logging.WARNING)
            incidents.propagate = False


def _open_verified(db: str, allow_tampered: bool) -> tuple[EventLog, Integrity]:
    """Open DB and verify it (progress on stderr for long logs): a broken chain or records off
    the event catalogue exit with EXIT_TAMPERED unless `allow_tampered`; snapshots that fail
    are dropped, to be stored anew."""
    from .._integrity import check_log, drop_untrusted

    try:
        log = open_log(db)
    except EventLogError as e:
        raise click.ClickException(str(e)) from e
    try:
        total = log.head().seq
        long = total >= PROGRESS_FROM
        started = time.monotonic()
        if long:  # a line for logs that are not a terminal; the bar below is for those that are
            click.echo(f"flightlog: verifying {total} events and the view snapshots before serving", err=True)
        with progress(disable=not long or not err_console.is_terminal) as bar:
            task = bar.add_task("verifying the chain", total=total)
            integrity = check_log(
                log,
                chain_progress=lambda n: bar.update(task, completed=n),
                catalogue_progress=lambda n: bar.update(
                    task, description="checking the records", completed=n
                ),
                snapshot_progress=lambda n, of: bar.update(
                    task, description="re-deriving view snapshots", completed=n, total=of
                ),
            )
        tamper = integrity.tamper()
        if long:
            what = "" if integrity.snapshots is None else f"; {integrity.snapshots.summary()}"
            click.echo(f"flightlog: verified in {time.monotonic() - started:.1f} s{what}", err=True)
        if integrity.refused and not allow_tampered:
            err_console.print(
                f"flightlog: refusing to serve {db}: {tamper} (--allow-tampered serves it with a banner)",
                soft_wrap=True,
                markup=False,
                highlight=False,
            )
            raise SystemExit(EXIT_TAMPERED)
        if integrity.snapshots is not None:
            drop_untrusted(log, integrity.snapshots)
        if tamper:
            click.echo(f"flightlog: TAMPERED: {tamper}", err=True)
    except EventLogError as e:
        log.close()
        raise click.ClickException(str(e)) from e
    except BaseException:
        log.close()
        raise
    return log, integrity


@click.command("serve")
@click.option("--db", required=True, help="The database: a path (created if missing) or postgresql://….")
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    help="Where the operator token is kept without FLIGHTLOG_OPERATOR_TOKEN (default: DB.operator-token; "
    "for a PostgreSQL URL, flightlog-operator-token here): written 0600 with a new token, reused on restart.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="0: any free port."
)
@click.option(
    "--approval-timeout", default=300.0, show_default=True, type=click.FloatRange(min=0, min_open=True)
)
@click.option(
    "--ask-timeout",
    default=600.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds an ask between runs waits for its reply (then /wait_reply answers 504).",
)
@click.option(
    "--idle-timeout",
    default=60.0,
    show_default=True,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds an unused run or approval keeps its actor (a thread); it refolds when next used.",
)
@click.option(
    "--queue-limit",
    type=click.IntRange(1),
    help="Undelivered messages from other runs a run may hold; one more gets 429 (default: 1000). "
    "Operator control and approval notices have their own lane: never refused.",
)
@click.option(
    "--operator-decides",
    type=click.Choice(OPERATOR_DECIDES),
    default="high",
    show_default=True,
    help="Which permission requests only an operator decides: every high-risk one, or all of them. "
    "A run's own answer to one is recorded as a refused attempt.",
)
@click.option(
    "--registration",
    type=click.Choice(["enrolled", "open"]),
    default="enrolled",
    show_default=True,
    help="Who creates runs. enrolled: only operators and enrolment credentials (POST /api/v1/runs, "
    "`flightlog runs create`), whose token the agent then registers with; /register of an unknown "
    "run is refused, so no stranger can take a run id first. open: agents also register new ids "
    "themselves, as the seed's broker lets them (each recorded with the client's address).",
)
@click.option(
    "--read-timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=10.0,
    show_default=True,
    help="Seconds a client has to send a whole request (head and body); then it is dropped.",
)
@click.option(
    "--access-log/--no-access-log", default=True, show_default=True, help="Log each request (no query)."
)
@click.option(
    "--allow-tampered",
    is_flag=True,
    help="Serve a log whose chain does not verify or that holds records off the event catalogue "
    "(every view leaves those out), with a tamper banner on every answer.",
)
@click.option(
    "--session-idle",
    type=click.FloatRange(min=1, min_open=False),
    default=30 * 60.0,
    show_default=True,
    help="Seconds a console session may go unused before it ends.",
)
@click.option(
    "--session-lifetime",
    type=click.FloatRange(min=1, min_open=False),
    default=12 * 3600.0,
    show_default=True,
    help="Seconds after login a console session ends, however busy.",
)
@click.option(
    "--otlp",
    metavar="URL",
    help="Stream each run as a trace to this OpenTelemetry collector (OTLP/HTTP; needs flightlog[otel]).",
)
@click.option(
    "--notify",
    metavar="URL",
    multiple=True,
    help="POST each approval requested, decided, expired or withdrawn to this webhook (repeatable); "
    "signed with FLIGHTLOG_NOTIFY_SECRET or a key file beside DB.",
)
@click.option(
    "--workers",
    default="1",
    show_default=True,
    metavar="N|auto",
    help="Server processes on the one database and port (auto: one per core this process may use). "
    "Each runs the whole server; the log is what they share, so every answer is the same whichever "
    "worker gives it. Per-process bounds (--events-per-second, the failed-login throttle) apply per worker.",
)
@click.option("--public-url", metavar="URL", help="This server's URL in notifications' console links.")
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
@quota_options
def serve_cmd(
    db: str,
    token_file: str | None,
    host: str,
    port: int,
    approval_timeout: float,
    ask_timeout: float,
    idle_timeout: float,
    queue_limit: int | None,
    operator_decides: str,
    registration: str,
    read_timeout: float,
    access_log: bool,
    allow_tampered: bool,
    session_idle: float,
    session_lifetime: float,
    otlp: str | None,
    notify: tuple[str, ...],
    public_url: str | None,
    log_level: str,
    workers: str,
) -> None:
    """Serve the broker's wire protocol and the operator API over DB until SIGINT or SIGTERM.

    The operator token comes from the FLIGHTLOG_OPERATOR_TOKEN environment variable (128 bits
    or more: python -c 'import secrets; print(secrets.token_hex(16))'). Without it, serve
    writes a new token to a file only you can read (--token-file) and prints the file's path
    (on a terminal, the token too, once); a restart reuses the token in that file, so the
    bootstrap token stays the same until the file is removed. A token file that others can
    read, or another user's, is refused. The server keeps only the token's SHA-256 digest.
    Agents register runs at /register; operators use /api/v1/ with `Authorization: Bearer
    <token>`, and the web console at /ui/ (printed at startup) logs in with the same token. By
    default an operator creates each run first (`flightlog runs create`) and its agent
    registers with the token it was given (see --registration).

    A log file (or its -wal or -shm) that group or others can write is refused (exit 8), one
    they can read gets a warning; a SQLite file that is another application's database is
    refused unchanged (exit 8).

    Before it serves, it verifies the log: a broken hash chain, or records that do not fit
    the event catalogue (a crafted import, a newer flightlog's), stop it with exit code 3
    (one line naming the first bad seq) unless --allow-tampered, and view snapshots that fail
    verification are deleted and stored anew, never shown. Either way the finding is printed
    and carried by every answer (the Flightlog-Tamper header) and the console's banner.

    Limits: bodies are at most 1 MiB; each run's fields, write rate, open permission requests
    and asks, and its share of another run's queue are bounded by the options below. Going over
    one answers 413 (too big) or 429 (too many, too fast: with Retry-After when waiting helps)
    and records nothing.

    \b
    Example:
      FLIGHTLOG_OPERATOR_TOKEN=... flightlog serve --db flightlog.db --port 8080
      curl http://127.0.0.1:8080/health
    """
    from ..http import PortInUseError, create_app, listen

    count = worker_count(workers, db)
    limit_malloc_arenas()
    readable = check_log_files(db)  # refuses, before anything is written, a log others can write
    digest = operator_token_digest(db, token_file)
    try:
        sock = listen(host, port)
    except PortInUseError as e:
        raise UsageFailure(f"{e}: choose another --port, or --port 0 for any free one") from e
    except OSError as e:
        raise UsageFailure(f"cannot listen on {host}:{port}: {e.strerror or e}") from e
    stop: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # uvicorn handles the signals while it serves and raises them again once it has shut
        # down: they land here, so the System below is always closed.
        stop.append(signum)

    quotas, timeouts = quotas_given(), (read_timeout, refusal_hold_given())

    def run(
        log: EventLog,
        integrity: Integrity,
        digest: str,
        worker: int | None,
        on_started: Callable[[], object],
        follow_poll: float = FOLLOW_POLL,
    ) -> None:
        """Serve on `log` until stopped: the System, the app, uvicorn (and the feeds, unless
        this is a worker other than the first)."""
        feeds = not worker
        system = System.open(
            log,
            approval_timeout=approval_timeout,
            ask_timeout=ask_timeout,
            idle_timeout=idle_timeout,
            follow_poll=follow_poll,
        )
        if queue_limit is not None:
            system.broker.queue_limit = queue_limit
        system.broker.set_quotas(quotas)
        system.broker.operator_decides = operator_decides
        try:
            if stop:
                return
            app = create_app(
                system,
                operator_token_sha256=digest,
                integrity=integrity,
                session_idle=session_idle,
                session_lifetime=session_lifetime,
                registration=registration,
                worker=worker,
            )
            with running_feeds(
                log,
                db,
                sock,
                otlp=otlp if feeds else None,
                notify=notify if feeds else (),
                public_url=public_url,
            ):
                _serve(app, sock, access_log, log_level, timeouts, on_started)
        finally:
            system.close()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        log, integrity = _open_verified(db, allow_tampered)
        try:
            if readable is not None:  # once the log is served: a refusal stays one line
                announce(readable)
            digest = digest or new_operator_token_digest(db, token_file)
            if count == 1:
                run(log, integrity, digest, None, lambda: _announce(sock))
        finally:
            log.close()
        if count > 1 and not stop:
            _serve_workers(
                count,
                db,
                sock,
                lambda log, index, ready: run(log, integrity, digest, index, ready, FOLLOW_POLL_WORKERS),
            )
        sock.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("flightlog: stopped", err=True)
