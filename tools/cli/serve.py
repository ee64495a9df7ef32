"""`flightlog serve`: the HTTP server (broker wire protocol + operator API) over one database."""

from __future__ import annotations

import hashlib
import logging
import os
import signal
import socket
from types import FrameType
from typing import Any

import click

from actors import System, make_token

TOKEN_ENV = "FLIGHTLOG_OPERATOR_TOKEN"
MIN_TOKEN_LENGTH = 16
MAX_TOKEN_LENGTH = 512
GRACEFUL_SHUTDOWN = 5.0  # seconds in-flight requests get on SIGINT/SIGTERM, as the seed's Stop


def register(cli: click.Group) -> None:
    cli.add_command(serve_cmd)


class _QueryFreeAccessLog(logging.Filter):
    """Drops the query string from uvicorn's access log: GET credentials travel there."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) == 5 and isinstance(args[2], str):
            record.args = (args[0], args[1], args[2].split("?", 1)[0], args[3], args[4])
        return True


def _serve(app: Any, host: str, port: int, access_log: bool, log_level: str) -> None:
    """Run uvicorn until it is told to stop; print the bound address once it accepts connections."""
    import uvicorn  # here, not at the top: every other command starts without the server stack

    class Server(uvicorn.Server):
        async def startup(self, sockets: list[socket.socket] | None = None) -> None:
            await super().startup(sockets)
            if self.started and self.servers:
                bound = self.servers[0].sockets[0].getsockname()
                shown = f"[{bound[0]}]" if ":" in bound[0] else bound[0]
                click.echo(f"flightlog: listening on http://{shown}:{bound[1]}")

    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        access_log=access_log,
        proxy_headers=False,
        server_header=False,
        lifespan="off",
        timeout_graceful_shutdown=int(GRACEFUL_SHUTDOWN),
    )
    logging.getLogger("uvicorn.access").addFilter(_QueryFreeAccessLog())
    Server(config).run()


def _operator_token_digest() -> str:
    """SHA-256 of the operator token from the environment, or of a fresh one shown once on stderr."""
    token = os.environ.get(TOKEN_ENV, "")
    if token:
        printable = all("!" <= c <= "~" for c in token)
        if not printable or not MIN_TOKEN_LENGTH <= len(token) <= MAX_TOKEN_LENGTH:
            raise click.UsageError(
                f"{TOKEN_ENV} must be {MIN_TOKEN_LENGTH} to {MAX_TOKEN_LENGTH} printable ASCII "
                "characters without spaces"
            )
        return hashlib.sha256(token.encode("ascii")).hexdigest()
    token = make_token()
    click.echo(f"operator token (shown once; set {TOKEN_ENV} to choose it): {token}", err=True)
    return hashlib.sha256(token.encode("ascii")).hexdigest()


@click.command("serve")
@click.option("--db", required=True, help="The database: a path (created if missing) or postgresql://….")
@click.option("--host", default="127.0.0.1", show_default=True, help="Interface to listen on.")
@click.option(
    "--port", default=8080, show_default=True, type=click.IntRange(0, 65535), help="0: any free port."
)
@click.option(
    "--approval-timeout", default=300.0, show_default=True, type=click.FloatRange(min=0, min_open=True)
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
    help="Undelivered control messages a run may hold; a push past it gets 429 (default: 1000).",
)
@click.option(
    "--access-log/--no-access-log", default=True, show_default=True, help="Log each request (no query)."
)
@click.option(
    "--log-level",
    default="info",
    show_default=True,
    type=click.Choice(["critical", "error", "warning", "info", "debug"]),
)
def serve_cmd(
    db: str,
    host: str,
    port: int,
    approval_timeout: float,
    idle_timeout: float,
    queue_limit: int | None,
    access_log: bool,
    log_level: str,
) -> None:
    """Serve the broker's wire protocol and the operator API over DB until SIGINT or SIGTERM.

    The operator token comes from the FLIGHTLOG_OPERATOR_TOKEN environment variable, or is
    generated and printed once on stderr; the server keeps only its SHA-256 digest. Agents
    register runs at /register; operators use /api/v1/ with `Authorization: Bearer <token>`.

    \b
    Example:
      FLIGHTLOG_OPERATOR_TOKEN=... flightlog serve --db flightlog.db --port 8080
      curl http://127.0.0.1:8080/health
    """
    from ..http import create_app

    digest = _operator_token_digest()
    stop: list[int] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # uvicorn handles the signals while it serves and raises them again once it has shut
        # down: they land here, so the System below is always closed.
        stop.append(signum)

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        system = System.open(db, approval_timeout=approval_timeout, idle_timeout=idle_timeout)
        if queue_limit is not None:
            system.broker.queue_limit = queue_limit
        try:
            if not stop:
                _serve(create_app(system, operator_token_sha256=digest), host, port, access_log, log_level)
        finally:
            system.close()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    click.echo("flightlog: stopped", err=True)
