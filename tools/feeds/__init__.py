"""Outward feeds: OpenTelemetry traces and signed approval webhooks, each a follower of the log."""

# Layering: tools.feeds imports eventlog and projections (and, lazily, the optional
# OpenTelemetry SDK); it imports no other tools subpackage, and tools.cli uses it.

from .notices import SECRET_ENV, notice, notify_key, sign, verify_signature
from .otel import OtelFeed
from .otlp import INSTALL, OtelMissing, OtlpSender, traces_endpoint
from .running import running_feeds, server_url
from .webhooks import WebhookFeed

__all__ = [
    "INSTALL",
    "SECRET_ENV",
    "OtelFeed",
    "OtelMissing",
    "OtlpSender",
    "WebhookFeed",
    "notice",
    "notify_key",
    "running_feeds",
    "server_url",
    "sign",
    "traces_endpoint",
    "verify_signature",
]
