"""The feeds a server runs beside it: one OpenTelemetry feed and one webhook feed per URL."""

from __future__ import annotations

import socket
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import click

from eventlog import EventLog

from .notices import notify_key
from .otel import OtelFeed
from .otlp import OtelMissing, OtlpSender
from .webhooks import WebhookFeed


def server_url(sock: socket.socket) -> str:
    """The URL a listening socket serves at (for the console's deep links)."""
    host, port = sock.getsockname()[:2]
    host = "127.0.0.1" if host in ("0.0.0.0", "") else f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}"


@contextmanager
def running_feeds(
    log: EventLog,
    db: str,
    sock: socket.socket,
    *,
    otlp: str | None = None,
    notify: Sequence[str] = (),
    public_url: str | None = None,
) -> Iterator[list[OtelFeed | WebhookFeed]]:
    """Start the feeds asked for, and stop them (each sends what it holds, briefly) at the end."""
    feeds: list[OtelFeed | WebhookFeed] = []
    with ExitStack() as stack:
        if otlp is not None:
            try:
                sender = OtlpSender(otlp)
            except OtelMissing as e:
                raise click.UsageError(str(e)) from None
            except ValueError as e:
                raise click.BadParameter(str(e), param_hint="--otlp") from None
            feed = OtelFeed(log, sender).start()
            stack.callback(feed.close)
            feeds.append(feed)
            click.echo(f"flightlog: sending traces to {sender.endpoint}", err=True)
        if notify:
            key = notify_key(db, announce=_announce_key)
            base = public_url or server_url(sock)
            for url in notify:
                hook = WebhookFeed(log, url, key, base).start()
                stack.callback(hook.close)
                feeds.append(hook)
            click.echo(f"flightlog: approval notifications to {len(notify)} URL(s)", err=True)
        yield feeds


def _announce_key(path: str) -> None:
    click.echo(f"flightlog: approval notifications are signed with the key in {path}", err=True)
