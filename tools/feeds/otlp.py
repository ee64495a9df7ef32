"""Spans to an OpenTelemetry collector: OTLP over HTTP (protobuf), with the SDK's exporter.

The SDK is an optional extra (`pip install 'flightlog[otel]'`); this module imports without
it and says so in one line (OtelMissing) when asked to send.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

from eventlog import to_micros
from projections.traces import Span

INSTALL = "OpenTelemetry export needs the otel extra: pip install 'flightlog[otel]'"
TRACES_PATH = "/v1/traces"
SERVICE = "flightlog"


class OtelMissing(RuntimeError):
    """Raised when OpenTelemetry export is asked for without the SDK installed."""

    def __init__(self) -> None:
        super().__init__(INSTALL)


def traces_endpoint(url: str) -> str:
    """The OTLP/HTTP traces endpoint for `url`: a bare collector address gets `/v1/traces`."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise ValueError(f"{url!r} is not an http(s) URL")
    return url if parts.path not in ("", "/") else url.rstrip("/") + TRACES_PATH


def _nanos(at: datetime) -> int:
    return to_micros(at) * 1000


class OtlpSender:
    """Sends spans to one collector; `send` is blocking (the SDK exporter retries within `timeout`)."""

    def __init__(self, url: str, *, timeout: float = 10.0) -> None:
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
            from opentelemetry.sdk.resources import Resource
        except ImportError:
            raise OtelMissing() from None
        self.endpoint = traces_endpoint(url)
        self._exporter = OTLPSpanExporter(endpoint=self.endpoint, timeout=timeout)
        self._resource = Resource.create({"service.name": SERVICE})

    def readable(self, span: Span) -> Any:
        """The SDK's ReadableSpan for `span`, with the span's own (log-derived) ids."""
        from opentelemetry.sdk.trace import Event, ReadableSpan
        from opentelemetry.sdk.util.instrumentation import InstrumentationScope
        from opentelemetry.trace import SpanContext, Status, StatusCode, TraceFlags

        trace = int(span.trace_id, 16)
        flags = TraceFlags(TraceFlags.SAMPLED)
        context = SpanContext(trace, int(span.span_id, 16), is_remote=False, trace_flags=flags)
        parent = SpanContext(trace, int(span.parent_id, 16), False, flags) if span.parent_id else None
        code = {"ok": StatusCode.OK, "error": StatusCode.ERROR}.get(span.status, StatusCode.UNSET)
        events = [Event(e.name, dict(e.attributes), _nanos(e.at)) for e in span.events]
        return ReadableSpan(
            span.name,
            context=context,
            parent=parent,
            resource=self._resource,
            attributes=dict(span.attributes),
            events=events,
            status=Status(code, span.message or None) if code == StatusCode.ERROR else Status(code),
            start_time=_nanos(span.start),
            end_time=_nanos(span.end),
            instrumentation_scope=InstrumentationScope("flightlog"),
        )

    def send(self, spans: Sequence[Span]) -> bool:
        """Export `spans` in one request; whether the collector took them."""
        if not spans:
            return True
        from opentelemetry.sdk.trace.export import SpanExportResult

        result = self._exporter.export([self.readable(s) for s in spans])
        return bool(result == SpanExportResult.SUCCESS)

    def close(self) -> None:
        self._exporter.shutdown()  # type: ignore[no-untyped-call]
