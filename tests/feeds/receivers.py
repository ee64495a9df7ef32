"""Receivers on loopback for the feeds' tests: an OTLP/HTTP collector and a webhook endpoint.

Each collects what it is sent and wakes waiters through a Condition, so tests wait on what
arrived (with a timeout), never on time passing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

WAIT = 30.0  # seconds a test waits for what it expects before failing


class Receiver:
    """A small HTTP server on 127.0.0.1 that hands each POST to `take(headers, body) -> status`."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.cond:
                    status, reply = receiver.take(dict(self.headers), body)
                    receiver.cond.notify_all()
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self._thread.start()

    def take(self, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        raise NotImplementedError

    def wait_for(self, done: Callable[[], bool], what: str) -> None:
        with self.cond:
            assert self.cond.wait_for(done, WAIT), f"timed out waiting for {what}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class Collector(Receiver):
    """An OTLP/HTTP traces endpoint decoding the protobufs with opentelemetry-proto."""

    def __init__(self) -> None:
        self.spans: list[Any] = []  # opentelemetry.proto.trace.v1.trace_pb2.Span
        self.resources: list[Any] = []
        super().__init__()

    def take(self, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
            ExportTraceServiceRequest,
            ExportTraceServiceResponse,
        )

        request = ExportTraceServiceRequest()
        request.ParseFromString(body)
        for resource_spans in request.resource_spans:
            self.resources.append(resource_spans.resource)
            for scope_spans in resource_spans.scope_spans:
                self.spans.extend(scope_spans.spans)
        return 200, ExportTraceServiceResponse().SerializeToString()


class Webhook(Receiver):
    """A webhook endpoint: keeps each delivery; `fail` answers the next N with 503."""

    def __init__(self) -> None:
        self.deliveries: list[tuple[dict[str, str], bytes]] = []
        self.fail = 0
        super().__init__()

    def take(self, headers: dict[str, str], body: bytes) -> tuple[int, bytes]:
        if self.fail:
            self.fail -= 1
            return 503, b"busy"
        self.deliveries.append(({k.lower(): v for k, v in headers.items()}, body))
        return 200, b"ok"
